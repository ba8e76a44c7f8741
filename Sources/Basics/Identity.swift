// Who a client is, fixed when it connects: the words the relay, the consent engine and
// the control protocol share. Pure: no I/O.

/// How an app was identified, strongest first.
public enum IdentificationMethod: String, Sendable, Codable, CaseIterable {
    case flatpak
    case snap
    case systemdScope = "systemd-scope"
    case launcher
    case script
    case executable = "exe"
    /// In a mount namespace of its own without sandbox metadata that checks out.
    case sandboxed
    /// /proc could not be read (the process made itself non-dumpable): a key of its own, never real audio.
    case uninspectable
}

/// What an identity resists.
///
/// No identity holds against an unsandboxed process of the user's own uid: such
/// a process can build every one of them (its own `app-flatpak-ID-N.scope`, from a
/// cgroup directory or `systemd-run --user --scope`, and a `/.flatpak-info` bound
/// with bubblewrap; a snap's AppArmor profile, with `aa-exec`; an `earmuff run
/// --app-id` socket), and could open the real server's socket anyway, so on Linux
/// they are no security boundary. What differs is whether the app's own sandbox
/// can forge it.
public enum IdentityStrength: String, Sendable, Codable, CaseIterable {
    /// Strong against the sandboxed app only: what the app's sandbox (Flatpak metadata
    /// that the user's systemd confirms, a snap's AppArmor label, the launcher socket
    /// of an `earmuff run`) shows and the app inside cannot change; any unsandboxed
    /// process of the user can build the same.
    case sandbox
    /// What any process of the user can show: its executable, script or systemd scope,
    /// Flatpak metadata that no systemd scope confirms.
    case weak
}

/// An app key `kind:value`, e.g. `flatpak:org.mozilla.firefox` or `exe:/usr/bin/pacat`.
public struct AppKey: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    /// The kind prefix (`flatpak`, `snap`, `systemd`, `launcher`, `script`, `exe`).
    public let kind: String
    /// The value after the first colon.
    public let value: String

    public init(kind: String, value: String) {
        self.kind = kind
        self.value = value
    }

    /// Parses `kind:value`; nil when there is no colon, or kind or value is empty.
    public init?(parsing text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let kind = String(text[..<colon])
        let value = String(text[text.index(after: colon)...])
        guard !kind.isEmpty, !value.isEmpty,
            kind.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        else { return nil }
        self.init(kind: kind, value: value)
    }

    public var description: String { "\(kind):\(value)" }

    public static func < (a: AppKey, b: AppKey) -> Bool { a.description < b.description }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let key = AppKey(parsing: text) else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "not an app key: \(text)"))
        }
        self = key
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// The identity of one connected client, fixed at accept time.
public struct ClientIdentity: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The key permissions are stored under.
    public var appKey: AppKey
    /// How `appKey` was derived.
    public var method: IdentificationMethod
    /// The executable (`/proc/PID/exe`), when readable.
    public var executable: String?
    /// For interpreters, the script path from the command line.
    public var script: String?
    /// What `appKey` resists: the app's own sandbox, or nothing.
    public var strength: IdentityStrength
    /// Why the identity is weaker than its method suggests (code loaded from
    /// outside the program, sandbox metadata the system does not confirm), for logs and prompts.
    public var caveat: String?
    /// The process's start time (clock ticks after boot, /proc/PID/stat), to tell a recycled pid apart.
    public var startTime: UInt64?
    /// The cgroup the process runs in (under a desktop, the scope or service of the app it was
    /// started as, which an app's children share): prompts are shared out fairly among origins.
    public var origin: String?

    public init(
        pid: Int32, uid: UInt32, gid: UInt32, appKey: AppKey, method: IdentificationMethod,
        executable: String? = nil, script: String? = nil, strength: IdentityStrength? = nil,
        caveat: String? = nil, startTime: UInt64? = nil, origin: String? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.appKey = appKey
        self.method = method
        self.executable = executable
        self.script = script
        self.strength = strength ?? method.defaultStrength
        self.caveat = caveat
        self.startTime = startTime
        self.origin = origin
    }

    /// True when Earmuff could not see what the process is: it never gets real audio.
    public var isUninspectable: Bool { method == .uninspectable }
}

extension IdentificationMethod {
    /// The strength of an identity derived this way when nothing contradicts it.
    public var defaultStrength: IdentityStrength {
        switch self {
        case .flatpak, .snap, .launcher: .sandbox
        case .systemdScope, .script, .executable, .sandboxed, .uninspectable: .weak
        }
    }
}
