// Earmuff's permission extension (docs/permission-api.md): EXTENSION requests
// addressed by name to `module-earmuff`, which Earmuff answers itself on the
// app's own connection and never forwards. An app asks about its own
// permission for one capture kind, asks for it (the reply waits for the
// person), or subscribes to changes, which come as EXTENSION events with tag
// 0, as PulseAudio's restore modules send theirs.
//
//   request  EXTENSION tag, u32 PA_INVALID_INDEX, string "module-earmuff", u32 subcommand, arguments
//   TEST      (0)  —                          → REPLY u32 version
//   GET       (1)  string kind                → REPLY status
//   REQUEST   (2)  string kind, string purpose (may be null) → REPLY status, once settled
//   SUBSCRIBE (3)  bool enable                → REPLY (empty)
//   EVENT     (4)  server → client, tag 0: u32 PA_INVALID_INDEX, string "module-earmuff", u32 4,
//                  string kind, string state
//   status = string state, string app key, string identified-by, string strength
//
// Pure: the daemon (Service) and the app library (EarmuffKit) both use these.

/// Names and numbers of the permission extension.
public enum PermissionExtension {
    /// The module name requests are addressed to.
    public static let moduleName = "module-earmuff"
    /// What TEST answers: the version of this wire.
    public static let version: UInt32 = 1
    /// The longest purpose string a request may carry, in bytes.
    public static let maximumPurposeBytes = 4096
    /// The capture kinds, as the wire names them.
    public static let kinds = ["microphone", "system-audio", "app-audio"]
    /// The states, as the wire names them.
    public static let states = ["undetermined", "granted", "denied"]

    /// The subcommands.
    public enum Subcommand: UInt32, Sendable {
        case test = 0
        case get = 1
        case request = 2
        case subscribe = 3
        case event = 4
    }

    /// Reads the module index and name that follow an EXTENSION packet's tag.
    public static func addressee(_ reader: inout TagStructReader) throws(WireError) -> (index: UInt32, name: String?) {
        let index = try reader.readU32()
        return (index, try reader.readString())
    }

    /// Writes an EXTENSION packet's header and addressee (command, tag, invalid index, module name).
    static func header(tag: UInt32, into w: inout TagStructWriter) {
        PacketHeader(command: .extension, tag: tag).encode(into: &w)
        w.writeU32(invalidIndex)
        w.writeString(moduleName)
    }
}

/// What an app asks the permission extension (the fields after the module name).
public enum PermissionCall: Equatable, Sendable {
    /// Whether the extension is there, and its version.
    case test
    /// The caller's state for a kind.
    case get(kind: String)
    /// Ask for a kind, with an optional purpose; answered when settled.
    case request(kind: String, purpose: String?)
    /// Turn change events for the caller's own state on or off.
    case subscribe(Bool)
    /// A subcommand this version does not know (answered NOTSUPPORTED).
    case unknown(UInt32)

    /// Reads the subcommand and its arguments, and requires the packet to end there.
    public static func decode(from reader: inout TagStructReader) throws(WireError) -> PermissionCall {
        let sub = try reader.readU32()
        let call: PermissionCall
        switch PermissionExtension.Subcommand(rawValue: sub) {
        case .test: call = .test
        case .get: call = .get(kind: try reader.readNonNullString())
        case .request:
            let kind = try reader.readNonNullString()
            call = .request(kind: kind, purpose: try reader.readString())
        case .subscribe: call = .subscribe(try reader.readBool())
        case .event, nil: return .unknown(sub) // arguments unknown: not read
        }
        try reader.expectEnd()
        return call
    }

    /// The whole EXTENSION packet payload for this call.
    public func packet(tag: UInt32) -> [UInt8] {
        var w = TagStructWriter(reservingCapacity: 96)
        PermissionExtension.header(tag: tag, into: &w)
        switch self {
        case .test:
            w.writeU32(PermissionExtension.Subcommand.test.rawValue)
        case let .get(kind):
            w.writeU32(PermissionExtension.Subcommand.get.rawValue)
            w.writeString(kind)
        case let .request(kind, purpose):
            w.writeU32(PermissionExtension.Subcommand.request.rawValue)
            w.writeString(kind)
            w.writeString(purpose)
        case let .subscribe(on):
            w.writeU32(PermissionExtension.Subcommand.subscribe.rawValue)
            w.writeBool(on)
        case let .unknown(sub):
            w.writeU32(sub)
        }
        return w.bytes
    }
}

/// The caller's permission for one kind, and who Earmuff takes it for (the reply to GET and REQUEST).
public struct PermissionStatus: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    /// undetermined, granted or denied.
    public var state: String
    /// The app key Earmuff identified the connection as, e.g. `flatpak:org.example.App`.
    public var appKey: String
    /// How: flatpak, snap, launcher, systemd-scope, script, exe, sandboxed, uninspectable.
    public var identifiedBy: String
    /// strong or weak.
    public var strength: String

    public init(state: String, appKey: String, identifiedBy: String, strength: String) {
        self.state = state
        self.appKey = appKey
        self.identifiedBy = identifiedBy
        self.strength = strength
    }

    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> PermissionStatus {
        let s = PermissionStatus(
            state: try reader.readNonNullString(), appKey: try reader.readNonNullString(),
            identifiedBy: try reader.readNonNullString(), strength: try reader.readNonNullString())
        try reader.expectEnd()
        return s
    }

    public func encode(into writer: inout TagStructWriter, version: UInt32) {
        writer.writeString(state)
        writer.writeString(appKey)
        writer.writeString(identifiedBy)
        writer.writeString(strength)
    }
}

/// The reply to TEST: the extension's version.
public struct PermissionTestReply: PacketMessage {
    /// REPLY.
    public static let command = Command.reply
    public var version: UInt32

    public init(version: UInt32 = PermissionExtension.version) { self.version = version }

    public static func decode(from reader: inout TagStructReader, version: UInt32) throws(WireError) -> PermissionTestReply {
        let v = try reader.readU32()
        try reader.expectEnd()
        return PermissionTestReply(version: v)
    }

    public func encode(into writer: inout TagStructWriter, version: UInt32) { writer.writeU32(self.version) }
}

/// The caller's state for a kind changed (sent to subscribed connections, tag 0).
public struct PermissionEvent: Equatable, Sendable {
    public var kind: String
    public var state: String

    public init(kind: String, state: String) {
        self.kind = kind
        self.state = state
    }

    /// The tag events carry, as PulseAudio's restore modules send theirs.
    public static let tag: UInt32 = 0

    /// The whole EXTENSION packet payload.
    public var packet: [UInt8] {
        var w = TagStructWriter(reservingCapacity: 96)
        PermissionExtension.header(tag: Self.tag, into: &w)
        w.writeU32(PermissionExtension.Subcommand.event.rawValue)
        w.writeString(kind)
        w.writeString(state)
        return w.bytes
    }

    /// The event in a server-sent EXTENSION packet payload; nil when it is another module's
    /// (or another subcommand); throws when it is ours and malformed.
    public static func decode(_ payload: [UInt8]) throws(WireError) -> PermissionEvent? {
        var r = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &r)
        guard header.command == Command.extension.rawValue else { return nil }
        let (_, name) = try PermissionExtension.addressee(&r)
        guard name == PermissionExtension.moduleName,
            try r.readU32() == PermissionExtension.Subcommand.event.rawValue
        else { return nil }
        let e = PermissionEvent(kind: try r.readNonNullString(), state: try r.readNonNullString())
        try r.expectEnd()
        return e
    }
}
