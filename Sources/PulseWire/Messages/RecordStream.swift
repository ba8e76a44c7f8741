/// CREATE_RECORD_STREAM (5) request, every field of protocol doc §6.1.
///
/// Fields beyond the version passed to `decode`/`encode` keep their defaults
/// and are not written.
public struct CreateRecordStreamRequest: PacketMessage {
    /// CREATE_RECORD_STREAM.
    public static let command = Command.createRecordStream

    /// Stream name (v < 13 only, where it must not be NULL).
    public var name: String? = nil
    /// Requested sample spec (may be invalid when `formats` is not empty).
    public var sampleSpec = SampleSpec(format: .invalid, channels: 0, rate: 0)
    /// Requested channel map.
    public var channelMap = ChannelMap()
    /// Source index, or `invalidIndex`.
    public var sourceIndex: UInt32 = invalidIndex
    /// Source name, or nil.
    public var sourceName: String? = nil
    /// Buffer maxlength (`u32 -1` = default).
    public var maxLength: UInt32 = .max
    /// Start corked.
    public var corked = false
    /// Fragment size (`u32 -1` = default).
    public var fragSize: UInt32 = .max
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
    /// v13: level-meter stream.
    public var peakDetect = false
    /// v13 flag.
    public var adjustLatency = false
    /// v13: stream properties.
    public var proplist = Proplist()
    /// v13: sink input to monitor, or `invalidIndex`.
    public var directOnInput: UInt32 = invalidIndex
    /// v14 flag.
    public var earlyRequests = false
    /// v15 flag.
    public var dontInhibitAutoSuspend = false
    /// v15 flag.
    public var failOnSuspend = false
    /// v22: accepted formats (at most 255).
    public var formats: [FormatInfo] = []
    /// v22: initial volume.
    public var volume = CVolume()
    /// v22 flag.
    public var muted = false
    /// v22 flag.
    public var volumeSet = false
    /// v22 flag.
    public var mutedSet = false
    /// v22 flag.
    public var relativeVolume = false
    /// v22 flag.
    public var passthrough = false

    /// A request with defaults everywhere.
    public init() {}

    /// Reads the fields present at `version` and requires the packet to end after them.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> CreateRecordStreamRequest {
        var r = CreateRecordStreamRequest()
        if version < 13 { r.name = try reader.readNonNullString() }
        r.sampleSpec = try reader.readSampleSpec()
        r.channelMap = try reader.readChannelMap()
        r.sourceIndex = try reader.readU32()
        r.sourceName = try reader.readString()
        r.maxLength = try reader.readU32()
        r.corked = try reader.readBool()
        r.fragSize = try reader.readU32()
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
            r.peakDetect = try reader.readBool()
            r.adjustLatency = try reader.readBool()
            r.proplist = try reader.readProplist()
            r.directOnInput = try reader.readU32()
        }
        if version >= 14 { r.earlyRequests = try reader.readBool() }
        if version >= 15 {
            r.dontInhibitAutoSuspend = try reader.readBool()
            r.failOnSuspend = try reader.readBool()
        }
        if version >= 22 {
            let count = try reader.readU8()
            for _ in 0..<count { r.formats.append(try reader.readFormatInfo()) }
            r.volume = try reader.readCVolume()
            r.muted = try reader.readBool()
            r.volumeSet = try reader.readBool()
            r.mutedSet = try reader.readBool()
            r.relativeVolume = try reader.readBool()
            r.passthrough = try reader.readBool()
        }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        if version < 13 { writer.writeString(name) }
        writer.writeSampleSpec(sampleSpec)
        writer.writeChannelMap(channelMap)
        writer.writeU32(sourceIndex)
        writer.writeString(sourceName)
        writer.writeU32(maxLength)
        writer.writeBool(corked)
        writer.writeU32(fragSize)
        if version >= 12 {
            for flag in [noRemap, noRemix, fixFormat, fixRate, fixChannels, dontMove, variableRate] {
                writer.writeBool(flag)
            }
        }
        if version >= 13 {
            writer.writeBool(peakDetect)
            writer.writeBool(adjustLatency)
            writer.writeProplist(proplist)
            writer.writeU32(directOnInput)
        }
        if version >= 14 { writer.writeBool(earlyRequests) }
        if version >= 15 {
            writer.writeBool(dontInhibitAutoSuspend)
            writer.writeBool(failOnSuspend)
        }
        if version >= 22 {
            precondition(formats.count <= Int(UInt8.max), "at most 255 formats")
            writer.writeU8(UInt8(formats.count))
            for format in formats { writer.writeFormatInfo(format) }
            writer.writeCVolume(volume)
            for flag in [muted, volumeSet, mutedSet, relativeVolume, passthrough] {
                writer.writeBool(flag)
            }
        }
    }
}

/// REPLY to CREATE_RECORD_STREAM, every field of protocol doc §6.2.
public struct CreateRecordStreamReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply

    /// Record channel: S→C memblocks of this stream carry it.
    public var channel: UInt32 = invalidIndex
    /// Global source-output index.
    public var sourceOutputIndex: UInt32 = invalidIndex
    /// v9: actual maxlength.
    public var maxLength: UInt32 = 0
    /// v9: actual fragsize.
    public var fragSize: UInt32 = 0
    /// v12: the actual sample spec of the data.
    public var sampleSpec = SampleSpec(format: .invalid, channels: 0, rate: 0)
    /// v12: the actual channel map.
    public var channelMap = ChannelMap()
    /// v12: source index.
    public var sourceIndex: UInt32 = invalidIndex
    /// v12: source name.
    public var sourceName: String? = nil
    /// v12: whether the source is suspended.
    public var suspended = false
    /// v13: configured source latency in µs.
    public var sourceLatencyUsec: UInt64 = 0
    /// v22: negotiated format.
    public var format = FormatInfo(encoding: .pcm)

    /// A reply with defaults everywhere.
    public init() {}

    /// Reads the fields present at `version` and requires the packet to end after them.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> CreateRecordStreamReply {
        var r = CreateRecordStreamReply()
        r.channel = try reader.readU32()
        r.sourceOutputIndex = try reader.readU32()
        if version >= 9 {
            r.maxLength = try reader.readU32()
            r.fragSize = try reader.readU32()
        }
        if version >= 12 {
            r.sampleSpec = try reader.readSampleSpec()
            r.channelMap = try reader.readChannelMap()
            r.sourceIndex = try reader.readU32()
            r.sourceName = try reader.readString()
            r.suspended = try reader.readBool()
        }
        if version >= 13 { r.sourceLatencyUsec = try reader.readUsec() }
        if version >= 22 { r.format = try reader.readFormatInfo() }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeU32(sourceOutputIndex)
        if version >= 9 {
            writer.writeU32(maxLength)
            writer.writeU32(fragSize)
        }
        if version >= 12 {
            writer.writeSampleSpec(sampleSpec)
            writer.writeChannelMap(channelMap)
            writer.writeU32(sourceIndex)
            writer.writeString(sourceName)
            writer.writeBool(suspended)
        }
        if version >= 13 { writer.writeUsec(sourceLatencyUsec) }
        if version >= 22 { writer.writeFormatInfo(format) }
    }
}

/// DELETE_RECORD_STREAM (6): the client closes record channel `channel`.
public struct DeleteRecordStream: PacketMessage {
    /// DELETE_RECORD_STREAM.
    public static let command = Command.deleteRecordStream
    /// Record channel.
    public var channel: UInt32

    /// Builds the request.
    public init(channel: UInt32) { self.channel = channel }

    /// Reads the channel.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> DeleteRecordStream {
        DeleteRecordStream(channel: try readChannelOnly(&reader))
    }

    /// Writes the channel.
    public func encode(into writer: inout TagStructWriter, version: UInt32) { writer.writeU32(channel) }
}

/// RECORD_STREAM_KILLED (65): the server ended record channel `channel`.
public struct RecordStreamKilled: PacketMessage {
    /// RECORD_STREAM_KILLED.
    public static let command = Command.recordStreamKilled
    /// Record channel.
    public var channel: UInt32

    /// Builds the event.
    public init(channel: UInt32) { self.channel = channel }

    /// Reads the channel.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> RecordStreamKilled {
        RecordStreamKilled(channel: try readChannelOnly(&reader))
    }

    /// Writes the channel.
    public func encode(into writer: inout TagStructWriter, version: UInt32) { writer.writeU32(channel) }
}

/// RECORD_STREAM_SUSPENDED (77): the stream's source was suspended or resumed.
public struct RecordStreamSuspended: PacketMessage {
    /// RECORD_STREAM_SUSPENDED.
    public static let command = Command.recordStreamSuspended
    /// Record channel.
    public var channel: UInt32
    /// Whether the source is now suspended.
    public var suspended: Bool

    /// Builds the event.
    public init(channel: UInt32, suspended: Bool) {
        self.channel = channel
        self.suspended = suspended
    }

    /// Reads channel and state.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> RecordStreamSuspended {
        let channel = try reader.readU32()
        let suspended = try reader.readBool()
        try reader.expectEnd()
        return RecordStreamSuspended(channel: channel, suspended: suspended)
    }

    /// Writes channel and state.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeBool(suspended)
    }
}

/// RECORD_STREAM_MOVED (79): the stream now records from another source (its format is unchanged).
public struct RecordStreamMoved: PacketMessage {
    /// RECORD_STREAM_MOVED.
    public static let command = Command.recordStreamMoved
    /// Record channel.
    public var channel: UInt32
    /// New source index.
    public var sourceIndex: UInt32
    /// New source name.
    public var sourceName: String?
    /// Whether the new source is suspended.
    public var suspended: Bool
    /// v13: new maxlength.
    public var maxLength: UInt32
    /// v13: new fragsize.
    public var fragSize: UInt32
    /// v13: configured source latency in µs.
    public var sourceLatencyUsec: UInt64

    /// Builds the event.
    public init(
        channel: UInt32, sourceIndex: UInt32, sourceName: String?, suspended: Bool,
        maxLength: UInt32 = 0, fragSize: UInt32 = 0, sourceLatencyUsec: UInt64 = 0
    ) {
        self.channel = channel
        self.sourceIndex = sourceIndex
        self.sourceName = sourceName
        self.suspended = suspended
        self.maxLength = maxLength
        self.fragSize = fragSize
        self.sourceLatencyUsec = sourceLatencyUsec
    }

    /// Reads the fields present at `version`.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> RecordStreamMoved {
        var moved = RecordStreamMoved(
            channel: try reader.readU32(), sourceIndex: try reader.readU32(),
            sourceName: try reader.readString(), suspended: try reader.readBool())
        if version >= 13 {
            moved.maxLength = try reader.readU32()
            moved.fragSize = try reader.readU32()
            moved.sourceLatencyUsec = try reader.readUsec()
        }
        try reader.expectEnd()
        return moved
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeU32(sourceIndex)
        writer.writeString(sourceName)
        writer.writeBool(suspended)
        if version >= 13 {
            writer.writeU32(maxLength)
            writer.writeU32(fragSize)
            writer.writeUsec(sourceLatencyUsec)
        }
    }
}

/// Reads a lone u32 channel and requires the packet to end.
func readChannelOnly(_ reader: inout TagStructReader) throws(WireError) -> UInt32 {
    let channel = try reader.readU32()
    try reader.expectEnd()
    return channel
}
