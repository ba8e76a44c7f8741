// Consent model: who an app is, what it may do, and why.
//
// Identity is fixed when a client connects, from what the kernel and the
// sandbox say (SO_PEERCRED, Flatpak/snap/systemd metadata, a launcher socket,
// /proc/PID/exe). What the client claims about itself (application.name,
// application.process.binary) is only a display name and never decides a
// permission. Everything in this module is pure: no I/O, no clocks read
// except the ones passed in.

/// What a record stream captures; each kind is decided separately, per app.
public enum Capability: String, Sendable, Codable, CaseIterable, Comparable {
    /// A source that is not the monitor of a sink: a microphone, a line-in, a virtual source.
    case microphone
    /// The monitor source of a sink: everything that sink plays.
    case systemAudio = "system-audio"
    /// One other app's stream (`direct_on_input`, a sink input's own output).
    case appAudio = "app-audio"

    /// How prompts and messages name it: "the microphone", "system audio", "another app's audio".
    public var phrase: String {
        switch self {
        case .microphone: "the microphone"
        case .systemAudio: "system audio (everything the speakers play)"
        case .appAudio: "another app's audio"
        }
    }

    public static func < (a: Capability, b: Capability) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! // both are cases of allCases
    }
}

/// The three states of Apple's record permission.
public enum PermissionState: String, Sendable, Codable, CaseIterable {
    case undetermined
    case granted
    case denied
}

/// Why a decision is what it is.
public enum DecisionReason: String, Sendable, Codable, CaseIterable {
    case user
    case userOnce = "user-once"
    case adminPolicy = "admin-policy"
    case missingPurpose = "missing-purpose"
    case promptTimeout = "prompt-timeout"
    case promptCommand = "prompt-command"
    case reset
    /// A grant unused for `auto-reset-days` went back to undetermined.
    case autoReset = "auto-reset"
    /// The desktop's microphone switch (xdg permission store: Flatseal, GNOME Settings).
    case desktop
    case none
}

/// How long a decision lasts.
///
/// Decisions lie in layers: a lasting ("always") decision per app, possibly a
/// temporary one over it (this session, or until a time), and per connected
/// client possibly a "once" answer over both. The newest layer is in force;
/// when a temporary decision ends (its client disconnects, the daemon stops,
/// its time passes) the lasting decision under it is in force again, which is
/// undetermined for an app never decided for good. A new decision clears the
/// layers above its own.
public enum Lifespan: Sendable, Equatable, Hashable, Codable, CustomStringConvertible {
    /// Until the client disconnects (the app's clients connected when it was made).
    case once
    /// Until the daemon stops (the user logs out); never stored.
    case session
    /// Until this time (seconds since 1970); stored, and dropped once it has passed.
    case until(Double)
    /// Until changed; stored.
    case always

    /// Which of the four it is, without the time.
    public var kind: LifespanKind {
        switch self {
        case .once: .once
        case .session: .session
        case .until: .timed
        case .always: .always
        }
    }

    /// `once`, `session`, `timed` or `always`, as the store and the control protocol write it.
    public var name: String { kind.rawValue }

    /// When it ends by itself, if at a known time.
    public var expiresAt: Double? {
        if case let .until(t) = self { return t }
        return nil
    }

    public var description: String {
        if case let .until(t) = self { return "until \(t)" }
        return name
    }
}

/// A `Lifespan` without its time, as the control protocol names it.
public enum LifespanKind: String, Sendable, Codable, CaseIterable {
    case once
    case session
    case timed
    case always
}

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
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
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

    public init(pid: Int32, uid: UInt32, gid: UInt32, appKey: AppKey, method: IdentificationMethod,
                executable: String? = nil, script: String? = nil, strength: IdentityStrength? = nil,
                caveat: String? = nil, startTime: UInt64? = nil) {
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

/// A stored decision for one app and capability.
public struct Decision: Sendable, Equatable, Codable {
    public var appKey: AppKey
    public var capability: Capability
    public var state: PermissionState
    public var reason: DecisionReason
    /// The purpose string the app declared, if any.
    public var purpose: String?
    /// Seconds since 1970 when the decision was made.
    public var decidedAt: Double?
    /// Seconds since 1970 when the app last captured.
    public var lastUsedAt: Double?
    /// How long it lasts: `always` for the lasting decision, else a temporary one over it.
    public var lifespan: Lifespan

    public init(appKey: AppKey, capability: Capability = .microphone, state: PermissionState,
                reason: DecisionReason, purpose: String? = nil, decidedAt: Double? = nil,
                lastUsedAt: Double? = nil, lifespan: Lifespan = .always) {
        self.appKey = appKey
        self.capability = capability
        self.state = state
        self.reason = reason
        self.purpose = purpose
        self.decidedAt = decidedAt
        self.lastUsedAt = lastUsedAt
        self.lifespan = lifespan
    }
}

/// What the store knows of an app besides its decision.
public struct AppRecord: Sendable, Equatable, Codable {
    public var appKey: AppKey
    public var displayName: String?
    public var executable: String?
    public var method: IdentificationMethod
    public var firstSeenAt: Double
    public var lastSeenAt: Double

    public init(appKey: AppKey, displayName: String?, executable: String?, method: IdentificationMethod,
                firstSeenAt: Double, lastSeenAt: Double) {
        self.appKey = appKey
        self.displayName = displayName
        self.executable = executable
        self.method = method
        self.firstSeenAt = firstSeenAt
        self.lastSeenAt = lastSeenAt
    }
}

/// One capture session for the usage log.
public struct UsageRecord: Sendable, Equatable, Codable {
    public var appKey: AppKey
    /// What was captured: a `Capability` raw value, or `unknown` while the source was not known.
    public var kind: String
    public var source: String
    public var startedAt: Double
    public var endedAt: Double?
    public var bytesReal: UInt64
    public var bytesSilenced: UInt64
    /// The decision in force: at the start (`granted (user)`), and `→ …` when it changed by the end.
    public var decision: String?
    /// Bytes per second of the stream's sample format, to turn byte counts into seconds (0: unknown).
    public var bytesPerSecond: UInt32

    public init(appKey: AppKey, kind: String = "microphone", source: String, startedAt: Double, endedAt: Double? = nil,
                bytesReal: UInt64 = 0, bytesSilenced: UInt64 = 0, decision: String? = nil, bytesPerSecond: UInt32 = 0) {
        self.appKey = appKey
        self.kind = kind
        self.source = source
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.bytesReal = bytesReal
        self.bytesSilenced = bytesSilenced
        self.decision = decision
        self.bytesPerSecond = bytesPerSecond
    }

    /// Seconds of real audio (nil when the sample format's rate is unknown).
    public var realSeconds: Double? { seconds(bytesReal) }
    /// Seconds of silence given instead.
    public var silencedSeconds: Double? { seconds(bytesSilenced) }

    private func seconds(_ bytes: UInt64) -> Double? {
        bytesPerSecond == 0 ? nil : Double(bytes) / Double(bytesPerSecond)
    }
}

/// The domain's names, as the store, the control protocol and every message write them.
public protocol WireNamed: RawRepresentable<String>, CustomStringConvertible {}

extension WireNamed {
    public var description: String { rawValue }
}

extension Capability: WireNamed {}
extension PermissionState: WireNamed {}
extension DecisionReason: WireNamed {}
extension LifespanKind: WireNamed {}
extension IdentificationMethod: WireNamed {}
extension IdentityStrength: WireNamed {}
extension PromptAnswer: WireNamed {}
