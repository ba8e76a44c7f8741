// Consent model: who an app is, what it may do, and why.
//
// Identity is fixed when a client connects, from what the kernel and the
// sandbox say (SO_PEERCRED, Flatpak/snap/systemd metadata, a launcher socket,
// /proc/PID/exe). What the client claims about itself (application.name,
// application.process.binary) is only a display name and never decides a
// permission. Everything in this module is pure: no I/O, no clocks read
// except the ones passed in. The identity and capture kinds themselves are
// in Basics (the relay shares them), re-exported here.
@_exported import Basics

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

    public init(
        appKey: AppKey, capability: Capability = .microphone, state: PermissionState,
        reason: DecisionReason, purpose: String? = nil, decidedAt: Double? = nil,
        lastUsedAt: Double? = nil, lifespan: Lifespan = .always
    ) {
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
    /// The command it was last started as, when that is a link to its executable (pw-record for
    /// /usr/bin/pw-cat): what it is shown by (`AppNameResolver.shownName`).
    public var commandName: String?

    public init(
        appKey: AppKey, displayName: String?, executable: String?, method: IdentificationMethod,
        firstSeenAt: Double, lastSeenAt: Double, commandName: String? = nil
    ) {
        self.commandName = commandName
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

    public init(
        appKey: AppKey, kind: String = "microphone", source: String, startedAt: Double, endedAt: Double? = nil,
        bytesReal: UInt64 = 0, bytesSilenced: UInt64 = 0, decision: String? = nil, bytesPerSecond: UInt32 = 0
    ) {
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
