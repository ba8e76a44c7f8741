/// The requests that steer one record stream by its channel, and the replies Earmuff gives
/// itself for a stream it holds (protocol doc §6.3, §6.4).

extension Command {
    /// Client requests whose first field is a record channel.
    public static let recordChannelRequests: Set<Command> = [
        .deleteRecordStream, .setRecordStreamName, .getRecordLatency, .corkRecordStream, .flushRecordStream,
        .setRecordStreamBufferAttr, .updateRecordStreamSampleRate, .updateRecordStreamProplist,
        .removeRecordStreamProplist,
    ]
    /// Server events whose first field is a record channel.
    public static let recordChannelEvents: Set<Command> = [
        .recordStreamKilled, .recordStreamSuspended, .recordStreamMoved, .recordStreamEvent, .recordBufferAttrChanged,
    ]
    /// Client requests whose first field is a source-output index.
    public static let sourceOutputRequests: Set<Command> = [
        .getSourceOutputInfo, .killSourceOutput, .moveSourceOutput, .setSourceOutputVolume, .setSourceOutputMute,
    ]
}

/// REPLY to GET_RECORD_LATENCY (57).
public struct RecordLatencyReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    /// Latency of the monitored sink, in µs (0 for a source that monitors nothing).
    public var monitorUsec: UInt64 = 0
    /// Latency of the source, in µs.
    public var sourceUsec: UInt64 = 0
    /// Whether the source runs and the stream is not corked.
    public var running = false
    /// The client's time from the request.
    public var requestTime = Timeval(seconds: 0, microseconds: 0)
    /// The server's time of the reply.
    public var replyTime = Timeval(seconds: 0, microseconds: 0)
    /// Bytes written into the stream's queue so far.
    public var writeIndex: Int64 = 0
    /// Bytes sent to the client so far.
    public var readIndex: Int64 = 0

    /// A reply with defaults everywhere.
    public init() {}

    /// Reads every field.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> RecordLatencyReply {
        var r = RecordLatencyReply()
        r.monitorUsec = try reader.readUsec()
        r.sourceUsec = try reader.readUsec()
        r.running = try reader.readBool()
        r.requestTime = try reader.readTimeval()
        r.replyTime = try reader.readTimeval()
        r.writeIndex = try reader.readS64()
        r.readIndex = try reader.readS64()
        try reader.expectEnd()
        return r
    }

    /// Writes every field.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeUsec(monitorUsec)
        writer.writeUsec(sourceUsec)
        writer.writeBool(running)
        writer.writeTimeval(requestTime)
        writer.writeTimeval(replyTime)
        writer.writeS64(writeIndex)
        writer.writeS64(readIndex)
    }
}

/// SET_RECORD_STREAM_BUFFER_ATTR (73) request.
public struct SetRecordBufferAttr: PacketMessage {
    /// SET_RECORD_STREAM_BUFFER_ATTR.
    public static let command = Command.setRecordStreamBufferAttr
    public var channel: UInt32 = 0
    public var maxLength: UInt32 = .max
    public var fragSize: UInt32 = .max
    /// v13.
    public var adjustLatency = false
    /// v14.
    public var earlyRequests = false

    /// A request with defaults everywhere.
    public init() {}

    /// Reads the fields present at `version`.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> SetRecordBufferAttr {
        var r = SetRecordBufferAttr()
        r.channel = try reader.readU32()
        r.maxLength = try reader.readU32()
        r.fragSize = try reader.readU32()
        if version >= 13 { r.adjustLatency = try reader.readBool() }
        if version >= 14 { r.earlyRequests = try reader.readBool() }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeU32(maxLength)
        writer.writeU32(fragSize)
        if version >= 13 { writer.writeBool(adjustLatency) }
        if version >= 14 { writer.writeBool(earlyRequests) }
    }
}

/// REPLY to SET_RECORD_STREAM_BUFFER_ATTR: the attributes in force.
public struct RecordBufferAttrReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    public var maxLength: UInt32
    public var fragSize: UInt32
    /// v13: configured source latency in µs.
    public var sourceLatencyUsec: UInt64 = 0

    /// Builds the reply.
    public init(maxLength: UInt32, fragSize: UInt32) {
        self.maxLength = maxLength
        self.fragSize = fragSize
    }

    /// Reads the fields present at `version`.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> RecordBufferAttrReply {
        var r = RecordBufferAttrReply(maxLength: try reader.readU32(), fragSize: try reader.readU32())
        if version >= 13 { r.sourceLatencyUsec = try reader.readUsec() }
        try reader.expectEnd()
        return r
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(maxLength)
        writer.writeU32(fragSize)
        if version >= 13 { writer.writeUsec(sourceLatencyUsec) }
    }
}

/// CORK_RECORD_STREAM (58) request.
public struct CorkRecordStream: PacketMessage {
    /// CORK_RECORD_STREAM.
    public static let command = Command.corkRecordStream
    public var channel: UInt32
    public var corked: Bool

    /// Builds the request.
    public init(channel: UInt32, corked: Bool) {
        self.channel = channel
        self.corked = corked
    }

    /// Reads channel and state.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> CorkRecordStream {
        let channel = try reader.readU32()
        let corked = try reader.readBool()
        try reader.expectEnd()
        return CorkRecordStream(channel: channel, corked: corked)
    }

    /// Writes channel and state.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(channel)
        writer.writeBool(corked)
    }
}

extension Proplist {
    /// Applies an UPDATE_*_PROPLIST: mode 0 (set) replaces every entry, 1 (merge) adds only keys
    /// not present, 2 (replace) sets every given key.
    public mutating func update(mode: UInt32, with other: Proplist) {
        switch mode {
        case 0:
            self = other
        case 1:
            for e in other.entries where value(forKey: e.key) == nil { set(e.key, value: e.value) }
        default:
            for e in other.entries { set(e.key, value: e.value) }
        }
    }
}

extension Timeval {
    /// The time `seconds` after the epoch.
    public init(wallClock seconds: Double) {
        let whole = seconds.rounded(.down)
        self.init(
            seconds: UInt32(truncatingIfNeeded: Int64(whole)),
            microseconds: UInt32(min(999_999, max(0, (seconds - whole) * 1_000_000))))
    }
}
