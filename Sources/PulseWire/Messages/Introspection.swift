// Introspection: what Earmuff asks the server on its own connection to learn
// what each source is (GET_SOURCE_INFO / _LIST, GET_SERVER_INFO, SUBSCRIBE and
// its events). Records are laid out as protocol-native.c `source_fill_tagstruct`
// writes them; that connection negotiates protocol version 13 (both servers gate
// later fields on the client's version). Source records are read at any version,
// as the relay reads them for its clients (to leave Earmuff's own nodes out).

/// The protocol version of Earmuff's own introspection connection; the highest whose
/// `SourceOutputInfo` records are read.
public let introspectionVersion: UInt32 = 13

/// One record of a GET_*_INFO reply (a list reply holds any number, one after another).
public protocol IntrospectionRecord: Equatable, Sendable {
    /// Reads one record, leaving the reader after it.
    static func read(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> Self
    /// Writes one record as a server of `version` does.
    func write(into writer: inout TagStructWriter, version: UInt32)
}

/// REPLY to GET_*_INFO (one record) or GET_*_INFO_LIST (any number): records until the packet ends.
public struct InfoReply<Record: IntrospectionRecord>: PacketMessage {
    /// REPLY.
    public static var command: Command { .reply }
    public var records: [Record]

    public init(records: [Record]) { self.records = records }

    /// Reads records until the packet ends.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> InfoReply {
        var records: [Record] = []
        while !reader.isAtEnd { records.append(try Record.read(from: &reader, version: version)) }
        return InfoReply(records: records)
    }

    /// Writes the records one after another.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        for r in records { r.write(into: &writer, version: version) }
    }
}

/// Source records, as GET_SOURCE_INFO and GET_SOURCE_INFO_LIST return them.
public typealias SourceInfoReply = InfoReply<SourceInfo>

extension InfoReply {
    /// The reply `packet` (header included, its records from `recordsAt` on, of a server of
    /// `version`) without the records `leaveOut` picks, byte for byte otherwise, and how many
    /// records it keeps; nil when it picks none.
    public static func leaving(
        out leaveOut: (Record) -> Bool, of packet: [UInt8], recordsAt start: Int,
        version: UInt32
    ) throws(WireError) -> (packet: [UInt8], kept: Int)? {
        var r = TagStructReader(packet, from: start)
        var kept: [Range<Int>] = []
        var left = false
        while !r.isAtEnd {
            let from = r.position
            let record = try Record.read(from: &r, version: version)
            if leaveOut(record) { left = true } else { kept.append(from..<r.position) }
        }
        guard left else { return nil }
        var out = Array(packet[..<start])
        for range in kept { out += packet[range] }
        return (out, kept.count)
    }
}
/// Source-output records, as GET_SOURCE_OUTPUT_INFO and its _LIST return them.
public typealias SourceOutputInfoReply = InfoReply<SourceOutputInfo>

/// One source record (GET_SOURCE_INFO reply, or one entry of the _LIST reply), fields up to v13.
public struct SourceInfo: IntrospectionRecord {
    public var index: UInt32
    public var name: String?
    public var description: String?
    public var sampleSpec = SampleSpec(format: .s16le, channels: 2, rate: 44100)
    public var channelMap = ChannelMap()
    public var ownerModule: UInt32 = invalidIndex
    public var volume = CVolume()
    public var muted = false
    /// The sink this source monitors, or `invalidIndex` for a source of its own (a microphone).
    public var monitorOfSink: UInt32 = invalidIndex
    public var monitorOfSinkName: String?
    public var latencyUsec: UInt64 = 0
    public var driver: String?
    public var flags: UInt32 = 0
    /// v13.
    public var proplist = Proplist()
    /// v13: requested latency.
    public var configuredLatencyUsec: UInt64 = 0
    /// v15.
    public var baseVolume: UInt32 = 0x10000
    public var state: UInt32 = 0
    public var volumeSteps: UInt32 = 0x10001
    public var card: UInt32 = invalidIndex
    /// v16: its ports (v24: with availability; v34: with availability group and type) and the active one.
    public var ports: [DevicePort] = []
    public var activePort: String?
    /// v22.
    public var formats: [FormatInfo] = []

    /// A port of a device, as a source record lists it.
    public struct DevicePort: Equatable, Sendable {
        public var name: String?
        public var description: String?
        public var priority: UInt32 = 0
        public var available: UInt32 = 0
        public var availabilityGroup: String?
        public var type: UInt32 = 0

        public init(name: String?, description: String? = nil) {
            self.name = name
            self.description = description
        }
    }

    /// A record with defaults everywhere but index, name and the sink it monitors.
    public init(index: UInt32, name: String?, monitorOfSink: UInt32 = invalidIndex, monitorOfSinkName: String? = nil) {
        self.index = index
        self.name = name
        self.monitorOfSink = monitorOfSink
        self.monitorOfSinkName = monitorOfSinkName
    }

    /// Whether this is the monitor source of a sink (it carries what that sink plays).
    public var isMonitor: Bool { monitorOfSink != invalidIndex }

    /// Reads one record of a server of `version` (any: every field up to 35 is read).
    public static func read(from r: inout TagStructReader, version: UInt32) throws(WireError) -> SourceInfo {
        var s = SourceInfo(index: try r.readU32(), name: try r.readString())
        s.description = try r.readString()
        s.sampleSpec = try r.readSampleSpec()
        s.channelMap = try r.readChannelMap()
        s.ownerModule = try r.readU32()
        s.volume = try r.readCVolume()
        s.muted = try r.readBool()
        s.monitorOfSink = try r.readU32()
        s.monitorOfSinkName = try r.readString()
        s.latencyUsec = try r.readUsec()
        s.driver = try r.readString()
        s.flags = try r.readU32()
        if version >= 13 {
            s.proplist = try r.readProplist()
            s.configuredLatencyUsec = try r.readUsec()
        }
        if version >= 15 {
            s.baseVolume = try r.readVolume()
            s.state = try r.readU32()
            s.volumeSteps = try r.readU32()
            s.card = try r.readU32()
        }
        if version >= 16 {
            // A count beyond what the packet holds ends at its end (unexpectedEnd).
            for _ in 0..<(try r.readU32()) {
                var p = DevicePort(name: try r.readString(), description: try r.readString())
                p.priority = try r.readU32()
                if version >= 24 { p.available = try r.readU32() }
                if version >= 34 {
                    p.availabilityGroup = try r.readString()
                    p.type = try r.readU32()
                }
                s.ports.append(p)
            }
            s.activePort = try r.readString()
        }
        if version >= 22 {
            let count = try r.readU8()
            for _ in 0..<count { s.formats.append(try r.readFormatInfo()) }
        }
        return s
    }

    /// Writes one record as a server of `version` does.
    public func write(into w: inout TagStructWriter, version: UInt32) {
        w.writeU32(index)
        w.writeString(name)
        w.writeString(description)
        w.writeSampleSpec(sampleSpec)
        w.writeChannelMap(channelMap)
        w.writeU32(ownerModule)
        w.writeCVolume(volume)
        w.writeBool(muted)
        w.writeU32(monitorOfSink)
        w.writeString(monitorOfSinkName)
        w.writeUsec(latencyUsec)
        w.writeString(driver)
        w.writeU32(flags)
        if version >= 13 {
            w.writeProplist(proplist)
            w.writeUsec(configuredLatencyUsec)
        }
        if version >= 15 {
            w.writeVolume(baseVolume)
            w.writeU32(state)
            w.writeU32(volumeSteps)
            w.writeU32(card)
        }
        if version >= 16 {
            w.writeU32(UInt32(ports.count))
            for p in ports {
                w.writeString(p.name)
                w.writeString(p.description)
                w.writeU32(p.priority)
                if version >= 24 { w.writeU32(p.available) }
                if version >= 34 {
                    w.writeString(p.availabilityGroup)
                    w.writeU32(p.type)
                }
            }
            w.writeString(activePort)
        }
        if version >= 22 {
            w.writeU8(UInt8(clamping: formats.count))
            for f in formats { w.writeFormatInfo(f) }
        }
    }
}

/// One source-output record (GET_SOURCE_OUTPUT_INFO reply), the fields up to v13.
public struct SourceOutputInfo: IntrospectionRecord {
    public var index: UInt32
    /// media.name.
    public var name: String?
    public var ownerModule: UInt32 = invalidIndex
    public var client: UInt32 = invalidIndex
    /// The source it records from now, or `invalidIndex` (pipewire-pulse, while it is not linked to one).
    public var source: UInt32
    public var sampleSpec = SampleSpec(format: .s16le, channels: 2, rate: 44100)
    public var channelMap = ChannelMap()
    public var bufferUsec: UInt64 = 0
    public var sourceUsec: UInt64 = 0
    public var resampleMethod: String?
    public var driver: String?
    /// v13.
    public var proplist = Proplist()
    /// v19.
    public var corked = false
    /// v22: its volume, mute, whether it has a volume and whether it can be set, and its format.
    public var volume = CVolume()
    public var muted = false
    public var hasVolume = false
    public var volumeWritable = false
    public var format = FormatInfo(encoding: .pcm)

    public init(index: UInt32, source: UInt32) {
        self.index = index
        self.source = source
    }

    /// Reads one record, of a server of any version.
    public static func read(from r: inout TagStructReader, version: UInt32) throws(WireError) -> SourceOutputInfo {
        let index = try r.readU32()
        let name = try r.readString()
        let module = try r.readU32()
        let client = try r.readU32()
        var o = SourceOutputInfo(index: index, source: try r.readU32())
        o.name = name
        o.ownerModule = module
        o.client = client
        o.sampleSpec = try r.readSampleSpec()
        o.channelMap = try r.readChannelMap()
        o.bufferUsec = try r.readUsec()
        o.sourceUsec = try r.readUsec()
        o.resampleMethod = try r.readString()
        o.driver = try r.readString()
        if version >= 13 { o.proplist = try r.readProplist() }
        if version >= 19 { o.corked = try r.readBool() }
        if version >= 22 {
            o.volume = try r.readCVolume()
            o.muted = try r.readBool()
            o.hasVolume = try r.readBool()
            o.volumeWritable = try r.readBool()
            o.format = try r.readFormatInfo()
        }
        return o
    }

    /// Writes one record as a server of `version` does.
    public func write(into w: inout TagStructWriter, version: UInt32) {
        w.writeU32(index)
        w.writeString(name)
        w.writeU32(ownerModule)
        w.writeU32(client)
        w.writeU32(source)
        w.writeSampleSpec(sampleSpec)
        w.writeChannelMap(channelMap)
        w.writeUsec(bufferUsec)
        w.writeUsec(sourceUsec)
        w.writeString(resampleMethod)
        w.writeString(driver)
        if version >= 13 { w.writeProplist(proplist) }
        if version >= 19 { w.writeBool(corked) }
        if version >= 22 {
            w.writeCVolume(volume)
            w.writeBool(muted)
            w.writeBool(hasVolume)
            w.writeBool(volumeWritable)
            w.writeFormatInfo(format)
        }
    }
}

/// GET_SOURCE_INFO (23): one source, by index or by name (exactly one of them).
public struct GetSourceInfo: PacketMessage {
    /// GET_SOURCE_INFO.
    public static let command = Command.getSourceInfo
    public var index: UInt32
    public var name: String?

    public init(index: UInt32 = invalidIndex, name: String? = nil) {
        self.index = index
        self.name = name
    }

    /// Reads index and name.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> GetSourceInfo {
        let m = GetSourceInfo(index: try reader.readU32(), name: try reader.readString())
        try reader.expectEnd()
        return m
    }

    /// Writes index and name.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(index)
        writer.writeString(name)
    }
}

/// GET_SOURCE_OUTPUT_INFO (31): one source output, by index.
public struct GetSourceOutputInfo: PacketMessage {
    /// GET_SOURCE_OUTPUT_INFO.
    public static let command = Command.getSourceOutputInfo
    public var index: UInt32

    public init(index: UInt32) { self.index = index }

    /// Reads the index.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> GetSourceOutputInfo {
        GetSourceOutputInfo(index: try readChannelOnly(&reader))
    }

    /// Writes the index.
    public func encode(into writer: inout TagStructWriter, version: UInt32) { writer.writeU32(index) }
}

/// A request without fields (GET_SOURCE_INFO_LIST, GET_SERVER_INFO).
public struct EmptyRequest: Equatable, Sendable {
    public let command: Command
    public init(_ command: Command) { self.command = command }

    /// The whole packet: command and tag.
    public func packet(tag: UInt32) -> [UInt8] {
        var w = TagStructWriter(reservingCapacity: 16)
        w.writeU32(command.rawValue)
        w.writeU32(tag)
        return w.bytes
    }
}

/// REPLY to GET_SERVER_INFO.
public struct ServerInfo: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    public var packageName: String?
    public var packageVersion: String?
    public var userName: String?
    public var hostName: String?
    public var sampleSpec = SampleSpec(format: .s16le, channels: 2, rate: 44100)
    public var defaultSinkName: String?
    /// The source that streams naming no source record from; it may be a monitor.
    public var defaultSourceName: String?
    public var cookie: UInt32 = 0
    /// v15.
    public var channelMap = ChannelMap()

    public init(defaultSinkName: String? = nil, defaultSourceName: String? = nil) {
        self.defaultSinkName = defaultSinkName
        self.defaultSourceName = defaultSourceName
    }

    /// Reads the fields present at `version`.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> ServerInfo {
        var s = ServerInfo()
        s.packageName = try reader.readString()
        s.packageVersion = try reader.readString()
        s.userName = try reader.readString()
        s.hostName = try reader.readString()
        s.sampleSpec = try reader.readSampleSpec()
        s.defaultSinkName = try reader.readString()
        s.defaultSourceName = try reader.readString()
        s.cookie = try reader.readU32()
        if version >= 15 { s.channelMap = try reader.readChannelMap() }
        try reader.expectEnd()
        return s
    }

    /// Writes the fields present at `version`.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeString(packageName)
        writer.writeString(packageVersion)
        writer.writeString(userName)
        writer.writeString(hostName)
        writer.writeSampleSpec(sampleSpec)
        writer.writeString(defaultSinkName)
        writer.writeString(defaultSourceName)
        writer.writeU32(cookie)
        if version >= 15 { writer.writeChannelMap(channelMap) }
    }
}

/// What SUBSCRIBE asks for and SUBSCRIBE_EVENT reports about (facility bits, pulse/def.h).
public enum SubscriptionFacility: UInt32, Sendable, CaseIterable {
    case sink = 0
    case source = 1
    case sinkInput = 2
    case sourceOutput = 3
    case module = 4
    case client = 5
    case sampleCache = 6
    case server = 7
    case card = 9

    /// The SUBSCRIBE mask bit of this facility.
    public var maskBit: UInt32 { 1 << rawValue }
}

/// SUBSCRIBE (35): the facilities whose changes the server should report.
public struct Subscribe: PacketMessage {
    /// SUBSCRIBE.
    public static let command = Command.subscribe
    public var mask: UInt32

    public init(_ facilities: [SubscriptionFacility]) { mask = facilities.reduce(0) { $0 | $1.maskBit } }

    public init(mask: UInt32) { self.mask = mask }

    /// Reads the mask.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> Subscribe {
        let m = Subscribe(mask: try reader.readU32())
        try reader.expectEnd()
        return m
    }

    /// Writes the mask.
    public func encode(into writer: inout TagStructWriter, version: UInt32) { writer.writeU32(mask) }
}

/// SUBSCRIBE_EVENT (66): an object of a facility was created, changed or removed.
public struct SubscribeEvent: PacketMessage {
    /// SUBSCRIBE_EVENT.
    public static let command = Command.subscribeEvent

    public enum Operation: UInt32, Sendable {
        case new = 0x00
        case change = 0x10
        case remove = 0x20
    }

    /// The raw event word: facility in bits 0–3, operation in bits 4–5.
    public var event: UInt32
    public var index: UInt32

    public init(event: UInt32, index: UInt32) {
        self.event = event
        self.index = index
    }

    public init(_ facility: SubscriptionFacility, _ operation: Operation, index: UInt32) {
        self.init(event: facility.rawValue | operation.rawValue, index: index)
    }

    /// The facility, when it is one this build knows.
    public var facility: SubscriptionFacility? { SubscriptionFacility(rawValue: event & 0x0F) }
    /// The operation, when it is one this build knows.
    public var operation: Operation? { Operation(rawValue: event & 0x30) }

    /// Reads event word and index.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> SubscribeEvent {
        let m = SubscribeEvent(event: try reader.readU32(), index: try reader.readU32())
        try reader.expectEnd()
        return m
    }

    /// Writes event word and index.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(event)
        writer.writeU32(index)
    }
}
