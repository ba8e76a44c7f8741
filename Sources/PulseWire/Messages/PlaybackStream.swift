/// CREATE_PLAYBACK_STREAM (3) request, the fields of protocol doc §6.5.
public struct CreatePlaybackStreamRequest: PacketMessage {
    /// CREATE_PLAYBACK_STREAM.
    public static let command = Command.createPlaybackStream

    /// Stream name (v < 13 only, where it must not be NULL).
    public var name: String? = nil
    /// Requested sample spec.
    public var sampleSpec = SampleSpec(format: .invalid, channels: 0, rate: 0)
    /// Requested channel map.
    public var channelMap = ChannelMap()
    /// Sink index, or `invalidIndex`.
    public var sinkIndex: UInt32 = invalidIndex
    /// Sink name, or nil.
    public var sinkName: String? = nil
    /// Buffer maxlength.
    public var maxLength: UInt32 = .max
    /// Start corked.
    public var corked = false
    /// Target buffer length.
    public var tLength: UInt32 = .max
    /// Pre-buffering.
    public var prebuf: UInt32 = .max
    /// Minimum request.
    public var minReq: UInt32 = .max
    /// Sync group id.
    public var syncID: UInt32 = 0
    /// Initial volume.
    public var volume = CVolume()
    /// v12 flag.
    public var noRemap = false
    /// v12 flag.
    public var noRemix = false
    /// v12 flag.
    public var fixFormat = false
    /// v12 flag.
    public var fixRate = false
    /// v12 flag.
    public var fixChannels = false
    /// v12 flag.
    public var dontMove = false
    /// v12 flag.
    public var variableRate = false
    /// v13 flag.
    public var muted = false
    /// v13 flag.
    public var adjustLatency = false
    /// v13: stream properties.
    public var proplist = Proplist()
    /// v14 flag.
    public var volumeSet = false
    /// v14 flag.
    public var earlyRequests = false
    /// v15 flag.
    public var mutedSet = false
    /// v15 flag.
    public var dontInhibitAutoSuspend = false
    /// v15 flag.
    public var failOnSuspend = false
    /// v17 flag.
    public var relativeVolume = false
    /// v18 flag.
    public var passthrough = false
    /// v21: accepted formats (at most 255).
    public var formats: [FormatInfo] = []

    /// A request with defaults everywhere.
    public init() {}

    /// Reads the fields present at `version` and requires the packet to end after them.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> CreatePlaybackStreamRequest {
        var r = CreatePlaybackStreamRequest()
        if version < 13 { r.name = try reader.readNonNullString() }
        r.sampleSpec = try reader.readSampleSpec()
        r.channelMap = try reader.readChannelMap()
        r.sinkIndex = try reader.readU32()
        r.sinkName = try reader.readString()
        r.maxLength = try reader.readU32()
        r.corked = try reader.readBool()
        r.tLength = try reader.readU32()
        r.prebuf = try reader.readU32()
        r.minReq = try reader.readU32()
        r.syncID = try reader.readU32()
        r.volume = try reader.readCVolume()
        if version >= 12 {
            r.noRemap = try reader.readBool()
            r.noRemix = try reader.readBool()
            r.fixFormat = try reader.readBool()
            r.fixRate = try reader.readBool()
            r.fixChannels = try reader.readBool()
            r.dontMove = try reader.readBool()
            r.variableRate = try reader.readBool()
        }
        if version >= 13 {
            r.muted = try reader.readBool()
            r.adjustLatency = try reader.readBool()
            r.proplist = try reader.readProplist()
        }
        if version >= 14 {
            r.volumeSet = try reader.readBool()
            r.earlyRequests = try reader.readBool()
        }
        if version >= 15 {
            r.mutedSet = try reader.readBool()
            r.dontInhibitAutoSuspend = try reader.readBool()
            r.failOnSuspend = try reader.readBool()
        }
        if version >= 17 { r.relativeVolume = try reader.readBool() }
        if version >= 18 { r.passthrough = try reader.readBool() }
        if version >= 21 {
            let count = try reader.readU8()
            for _ in 0..<count { r.formats.append(try reader.readFormatInfo()) }
        }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        if version < 13 { writer.writeString(name) }
        writer.writeSampleSpec(sampleSpec)
        writer.writeChannelMap(channelMap)
        writer.writeU32(sinkIndex)
        writer.writeString(sinkName)
        writer.writeU32(maxLength)
        writer.writeBool(corked)
        writer.writeU32(tLength)
        writer.writeU32(prebuf)
        writer.writeU32(minReq)
        writer.writeU32(syncID)
        writer.writeCVolume(volume)
        if version >= 12 {
            for flag in [noRemap, noRemix, fixFormat, fixRate, fixChannels, dontMove, variableRate] {
                writer.writeBool(flag)
            }
        }
        if version >= 13 {
            writer.writeBool(muted)
            writer.writeBool(adjustLatency)
            writer.writeProplist(proplist)
        }
        if version >= 14 {
            writer.writeBool(volumeSet)
            writer.writeBool(earlyRequests)
        }
        if version >= 15 {
            writer.writeBool(mutedSet)
            writer.writeBool(dontInhibitAutoSuspend)
            writer.writeBool(failOnSuspend)
        }
        if version >= 17 { writer.writeBool(relativeVolume) }
        if version >= 18 { writer.writeBool(passthrough) }
        if version >= 21 {
            precondition(formats.count <= Int(UInt8.max), "at most 255 formats")
            writer.writeU8(UInt8(formats.count))
            for format in formats { writer.writeFormatInfo(format) }
        }
    }
}

/// REPLY to CREATE_PLAYBACK_STREAM, the fields of protocol doc §6.5.
public struct CreatePlaybackStreamReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply

    /// Output channel (shared with upload streams) of C→S memblocks.
    public var channel: UInt32 = invalidIndex
    /// Global sink-input index.
    public var sinkInputIndex: UInt32 = invalidIndex
    /// Bytes the server wants first.
    public var requestedBytes: UInt32 = 0
    /// v9: actual maxlength.
    public var maxLength: UInt32 = 0
    /// v9: actual tlength.
    public var tLength: UInt32 = 0
    /// v9: actual prebuf.
    public var prebuf: UInt32 = 0
    /// v9: actual minreq.
    public var minReq: UInt32 = 0
    /// v12: actual sample spec.
    public var sampleSpec = SampleSpec(format: .invalid, channels: 0, rate: 0)
    /// v12: actual channel map.
    public var channelMap = ChannelMap()
    /// v12: sink index.
    public var sinkIndex: UInt32 = invalidIndex
    /// v12: sink name.
    public var sinkName: String? = nil
    /// v12: whether the sink is suspended.
    public var suspended = false
    /// v13: configured sink latency in µs.
    public var sinkLatencyUsec: UInt64 = 0
    /// v21: negotiated format.
    public var format = FormatInfo(encoding: .pcm)

    /// A reply with defaults everywhere.
    public init() {}

    /// Reads the fields present at `version` and requires the packet to end after them.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> CreatePlaybackStreamReply {
        var r = CreatePlaybackStreamReply()
        r.channel = try reader.readU32()
        r.sinkInputIndex = try reader.readU32()
        r.requestedBytes = try reader.readU32()
        if version >= 9 {
            r.maxLength = try reader.readU32()
            r.tLength = try reader.readU32()
            r.prebuf = try reader.readU32()
            r.minReq = try reader.readU32()
        }
        if version >= 12 {
            r.sampleSpec = try reader.readSampleSpec()
            r.channelMap = try reader.readChannelMap()
            r.sinkIndex = try reader.readU32()
            r.sinkName = try reader.readString()
            r.suspended = try reader.readBool()
        }
        if version >= 13 { r.sinkLatencyUsec = try reader.readUsec() }
        if version >= 21 { r.format = try reader.readFormatInfo() }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeU32(sinkInputIndex)
        writer.writeU32(requestedBytes)
        if version >= 9 {
            writer.writeU32(maxLength)
            writer.writeU32(tLength)
            writer.writeU32(prebuf)
            writer.writeU32(minReq)
        }
        if version >= 12 {
            writer.writeSampleSpec(sampleSpec)
            writer.writeChannelMap(channelMap)
            writer.writeU32(sinkIndex)
            writer.writeString(sinkName)
            writer.writeBool(suspended)
        }
        if version >= 13 { writer.writeUsec(sinkLatencyUsec) }
        if version >= 21 { writer.writeFormatInfo(format) }
    }
}
