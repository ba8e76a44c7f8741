/// Special tag values.
public enum PacketTag {
    /// Tag of server-initiated events (`u32 -1`), also used by REGISTER_MEMFD_SHMID.
    public static let none: UInt32 = 0xFFFF_FFFF
}

/// Tag of server-initiated events (same as `PacketTag.none`).
public let packetInvalidTag: UInt32 = PacketTag.none

/// The leading `'L'` command and `'L'` tag of every packet payload.
public struct PacketHeader: Equatable, Sendable {
    /// Raw opcode (may be one this module does not know).
    public var command: UInt32
    /// Request tag, or `PacketTag.none` for events.
    public var tag: UInt32

    /// Size of the encoded header: two tagged u32.
    public static let encodedSize = 10

    /// Builds a header.
    public init(command: UInt32, tag: UInt32) {
        self.command = command
        self.tag = tag
    }

    /// Builds a header for a known command.
    public init(command: Command, tag: UInt32) {
        self.init(command: command.rawValue, tag: tag)
    }

    /// The opcode, if known.
    public var knownCommand: Command? { Command(rawValue: command) }

    /// Reads the header at the start of `payload`.
    public static func decode(_ payload: [UInt8]) throws(WireError) -> PacketHeader {
        var reader = TagStructReader(payload)
        return try decode(from: &reader)
    }

    /// Reads the header from `reader`, leaving it at the first argument.
    public static func decode(from reader: inout TagStructReader) throws(WireError) -> PacketHeader {
        let command = try reader.readU32()
        let tag = try reader.readU32()
        return PacketHeader(command: command, tag: tag)
    }

    /// Writes `'L'` command `'L'` tag.
    public func encode(into writer: inout TagStructWriter) {
        writer.writeU32(command)
        writer.writeU32(tag)
    }
}

/// Error codes carried by ERROR packets (`pa_error_code_t`).
public enum ErrorCode: UInt32, Sendable, CaseIterable {
    case ok = 0
    case access = 1
    case command = 2
    case invalid = 3
    case exist = 4
    case noEntity = 5
    case connectionRefused = 6
    case `protocol` = 7
    case timeout = 8
    case authKey = 9
    case `internal` = 10
    case connectionTerminated = 11
    case killed = 12
    case invalidServer = 13
    case moduleInitFailed = 14
    case badState = 15
    case noData = 16
    case version = 17
    case tooLarge = 18
    case notSupported = 19
    case unknown = 20
    case noExtension = 21
    case obsolete = 22
    case notImplemented = 23
    case forked = 24
    case io = 25
    case busy = 26
}

/// A typed packet body: the fields after command and tag.
public protocol PacketMessage: Equatable, Sendable {
    /// The command this body follows (`.reply` for replies).
    static var command: Command { get }
    /// Reads the fields after command and tag for protocol `version` and requires the packet to end there.
    static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> Self
    /// Writes the fields after command and tag for protocol `version`.
    func encode(into writer: inout TagStructWriter, version: UInt32)
}

extension PacketMessage {
    /// A whole packet payload: command, tag, then the fields.
    public func packet(tag: UInt32, version: UInt32) -> [UInt8] {
        var writer = TagStructWriter(reservingCapacity: 64)
        PacketHeader(command: Self.command, tag: tag).encode(into: &writer)
        encode(into: &writer, version: version)
        return writer.bytes
    }

    /// Decodes a whole packet payload, checking the command; returns its tag and body.
    public static func decodePacket(_ payload: [UInt8], version: UInt32) throws(WireError) -> (tag: UInt32, message: Self) {
        var reader = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &reader)
        guard header.command == command.rawValue else {
            throw .unexpectedCommand(expected: command.rawValue, found: header.command)
        }
        return (header.tag, try decode(from: &reader, version: version))
    }
}

/// Protocol version words of AUTH (number in the low 16 bits, transport flags above).
public enum ProtocolVersion {
    /// The sender can do / did enable SHM (meaningful from version 13).
    public static let shmFlag: UInt32 = 0x8000_0000
    /// The sender supports memfd (meaningful from version 31).
    public static let memfdFlag: UInt32 = 0x4000_0000
    /// The version-number bits.
    public static let numberMask: UInt32 = 0x0000_FFFF
    /// Flags share the word only from this version on.
    public static let firstVersionWithFlags: UInt32 = 13

    /// The version number of a word: masked to 16 bits only when it is >= 13, as PulseAudio does.
    public static func number(of word: UInt32) -> UInt32 {
        word & numberMask >= firstVersionWithFlags ? word & numberMask : word
    }

    /// Clears all flag bits (0xFFFF0000) when `word & 0xFFFF >= 13`; older words are returned unchanged.
    public static func stripTransportFlags(_ word: UInt32) -> UInt32 {
        number(of: word)
    }

    /// The layout version both sides use: the smaller of the two numbers.
    public static func effective(client: UInt32, server: UInt32) -> UInt32 {
        min(number(of: client), number(of: server))
    }
}
