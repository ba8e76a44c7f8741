/// AUTH (8) request: the client's version word and its 256-byte cookie.
public struct AuthRequest: PacketMessage {
    /// AUTH.
    public static let command = Command.auth
    /// Version number plus SHM/memfd flags (see `ProtocolVersion`).
    public var versionWord: UInt32
    /// Exactly `Limits.cookieLength` bytes.
    public var cookie: [UInt8]

    /// Builds a request; the cookie defaults to zeros, as libpulse sends without one.
    public init(versionWord: UInt32, cookie: [UInt8] = Array(repeating: 0, count: Limits.cookieLength)) {
        self.versionWord = versionWord
        self.cookie = cookie
    }

    /// Reads version word and cookie; any cookie length but 256 is rejected (as PulseAudio does).
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> AuthRequest {
        let word = try reader.readU32()
        let cookie = try reader.readCookie()
        try reader.expectEnd()
        return AuthRequest(versionWord: word, cookie: cookie)
    }

    /// Writes version word and cookie.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(versionWord)
        writer.writeArbitrary(cookie)
    }
}

/// REPLY to AUTH: the server's version word.
public struct AuthReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    /// Version number plus SHM/memfd flags.
    public var versionWord: UInt32

    /// Builds a reply.
    public init(versionWord: UInt32) { self.versionWord = versionWord }

    /// Reads the version word.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> AuthReply {
        let word = try reader.readU32()
        try reader.expectEnd()
        return AuthReply(versionWord: word)
    }

    /// Writes the version word.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(versionWord)
    }
}

/// SET_CLIENT_NAME (9): a name string before v13, a proplist from v13 on.
///
/// Both are held as a proplist; before v13 the name is `application.name`
/// (which is where PulseAudio puts it) and a NULL name is an empty proplist.
public struct SetClientName: PacketMessage {
    /// SET_CLIENT_NAME.
    public static let command = Command.setClientName
    /// Client properties (self-reported; never trust them for identity).
    public var proplist: Proplist

    /// Builds a request.
    public init(proplist: Proplist) { self.proplist = proplist }

    /// `application.name` from the proplist.
    public var name: String? { proplist[Proplist.Key.applicationName] }

    /// Reads the name (v < 13) or the proplist.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> SetClientName {
        var proplist = Proplist()
        if version >= 13 {
            proplist = try reader.readProplist()
        } else if let name = try reader.readString() {
            proplist.set(Proplist.Key.applicationName, string: name)
        }
        try reader.expectEnd()
        return SetClientName(proplist: proplist)
    }

    /// Writes the name (v < 13) or the proplist.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        if version >= 13 {
            writer.writeProplist(proplist)
        } else {
            writer.writeString(name)
        }
    }
}

/// REPLY to SET_CLIENT_NAME: the client index from v13 on, empty before.
public struct SetClientNameReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    /// The client's index (nil before v13).
    public var clientIndex: UInt32?

    /// Builds a reply.
    public init(clientIndex: UInt32?) { self.clientIndex = clientIndex }

    /// Reads the client index for v >= 13.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> SetClientNameReply {
        let index = version >= 13 ? try reader.readU32() : nil
        try reader.expectEnd()
        return SetClientNameReply(clientIndex: index)
    }

    /// Writes the client index for v >= 13 (`invalidIndex` if nil).
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        if version >= 13 { writer.writeU32(clientIndex ?? invalidIndex) }
    }
}

/// A REPLY whose body the caller reads itself.
public struct Reply: Equatable, Sendable {
    /// Tag of the request answered.
    public var tag: UInt32

    /// Builds a reply header.
    public init(tag: UInt32) { self.tag = tag }

    /// Checks that `payload` is a REPLY; returns it and a reader at its first command-specific field.
    public static func decode(_ payload: [UInt8]) throws(WireError) -> (reply: Reply, reader: TagStructReader) {
        var reader = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &reader)
        guard header.command == Command.reply.rawValue else {
            throw .unexpectedCommand(expected: Command.reply.rawValue, found: header.command)
        }
        return (Reply(tag: header.tag), reader)
    }

    /// The payload of an empty REPLY (an acknowledgement).
    public var packet: [UInt8] {
        var writer = TagStructWriter(reservingCapacity: PacketHeader.encodedSize)
        PacketHeader(command: .reply, tag: tag).encode(into: &writer)
        return writer.bytes
    }
}

/// ERROR (0): the request with this tag failed.
public struct ErrorReply: PacketMessage {
    /// ERROR.
    public static let command = Command.error
    /// Raw error code (see `ErrorCode`).
    public var code: UInt32

    /// Builds an error from a raw code.
    public init(code: UInt32) { self.code = code }

    /// Builds an error from a known code.
    public init(code: ErrorCode) { self.code = code.rawValue }

    /// The code, if known.
    public var errorCode: ErrorCode? { ErrorCode(rawValue: code) }

    /// Reads the code.
    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> ErrorReply {
        let code = try reader.readU32()
        try reader.expectEnd()
        return ErrorReply(code: code)
    }

    /// Writes the code.
    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeU32(code)
    }
}
