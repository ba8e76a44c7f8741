// The payloads of control protocol messages (Messages.swift): the greeting,
// `status`, app, client, stream, prompt and launcher infos. Codable with the
// camelCase keys the wire uses; unknown values are left out. Decisions, capture
// kinds, identification methods and strengths are the domain's own enums
// (Consent/Model.swift), written as their raw values.
import Consent

/// The daemon's greeting, sent as the first line on every connection and as the reply to `hello`.
public struct ServerHello: Codable, Sendable, Equatable {
    /// Protocol version the daemon speaks.
    public var version: Int
    /// Always "earmuff".
    public var daemon: String
    /// The daemon's release, e.g. "0.1.0".
    public var daemonVersion: String
    /// The daemon's process id.
    public var pid: Int32

    public init(version: Int = ControlProtocolVersion.current, daemon: String = "earmuff", daemonVersion: String, pid: Int32) {
        self.version = version
        self.daemon = daemon
        self.daemonVersion = daemonVersion
        self.pid = pid
    }
}

/// What the daemon says about itself in `status`.
/// How the relay's audio threads (one per loop) are scheduled, read from the kernel.
public struct AudioThreadsInfo: Codable, Sendable, Equatable {
    /// realtime, high-priority or normal: the least any of the threads has now.
    public var scheduling: String
    /// SCHED_RR, SCHED_FIFO or SCHED_OTHER.
    public var policy: String
    /// The real-time priority (real-time only).
    public var priority: Int32?
    /// The nice level (when not real-time).
    public var nice: Int32?
    /// What granted it: RealtimeKit, sched_setscheduler or setpriority.
    public var via: String?
    public var threads: Int
    /// Why not better: what refused, or that the threads were put back
    /// (a loop ran too long without sleeping).
    public var note: String?

    public init(
        scheduling: String, policy: String, priority: Int32? = nil, nice: Int32? = nil, via: String? = nil,
        threads: Int, note: String? = nil
    ) {
        self.scheduling = scheduling
        self.policy = policy
        self.priority = priority
        self.nice = nice
        self.via = via
        self.threads = threads
        self.note = note
    }
}

public struct DaemonInfo: Codable, Sendable, Equatable {
    public var pid: Int32
    /// The daemon's release.
    public var version: String
    /// The client socket apps connect to.
    public var listenPath: String
    /// The control socket.
    public var controlPath: String
    /// The permission store file.
    public var storePath: String
    /// Seconds since the daemon started.
    public var uptimeSeconds: Double
    /// Whether `listenPath` is the session's own socket, `$XDG_RUNTIME_DIR/pulse/native`
    /// (after `earmuff setup`): apps reach Earmuff without being pointed at it.
    public var sessionSocket: Bool?
    /// Whether the listening socket came from the service manager (socket activation).
    public var socketActivated: Bool?
    /// How a prompt would reach someone now, as far as the daemon knows it.
    public var promptChannels: PromptChannelsInfo?
    /// How the relay's audio threads are scheduled now.
    public var audioThreads: AudioThreadsInfo?

    public init(
        pid: Int32, version: String, listenPath: String, controlPath: String, storePath: String, uptimeSeconds: Double,
        sessionSocket: Bool? = nil, socketActivated: Bool? = nil, promptChannels: PromptChannelsInfo? = nil,
        audioThreads: AudioThreadsInfo? = nil
    ) {
        self.audioThreads = audioThreads
        self.pid = pid
        self.version = version
        self.listenPath = listenPath
        self.controlPath = controlPath
        self.storePath = storePath
        self.uptimeSeconds = uptimeSeconds
        self.sessionSocket = sessionSocket
        self.socketActivated = socketActivated
        self.promptChannels = promptChannels
    }
}

/// The daemon's side of prompting: the configured order, and what it knows is there.
public struct PromptChannelsInfo: Codable, Sendable, Equatable {
    /// `prompt-via`, in order: portal, notification, command, agent.
    public var via: [String]
    /// Whether a `prompt-command` is configured (and `command` is in `via`).
    public var command: Bool
    /// Prompt agents connected now.
    public var agents: Int

    public init(via: [String], command: Bool, agents: Int) {
        self.via = via
        self.command = command
        self.agents = agents
    }
}

/// The real sound server behind the proxy.
public struct UpstreamInfo: Codable, Sendable, Equatable {
    /// The server string, e.g. "unix:/run/user/1000/pulse/native".
    public var server: String
    /// True when the last connection attempt succeeded.
    public var reachable: Bool

    public init(server: String, reachable: Bool) {
        self.server = server
        self.reachable = reachable
    }
}

/// The PipeWire gate: whether it decides native PipeWire clients (`pipewire-0`), and if not, why.
public struct PipeWireInfo: Codable, Sendable, Equatable {
    /// The PipeWire socket it connects to.
    public var socket: String
    public var gating: Bool
    /// Native clients whose capture it decides (the server's own, the session manager's and Earmuff's are not).
    public var clients: Int
    /// Why it is not gating (no socket, the connection failed or closed).
    public var reason: String?
    /// How often the gate lost its connection while gating since the daemon started (absent: never).
    public var cuts: Int?
    /// The last of those: why, and when (seconds since 1970).
    public var lastCut: String?
    public var lastCutAt: Double?

    public init(
        socket: String, gating: Bool, clients: Int = 0, reason: String? = nil,
        cuts: Int? = nil, lastCut: String? = nil, lastCutAt: Double? = nil
    ) {
        self.socket = socket
        self.gating = gating
        self.clients = clients
        self.reason = reason
        self.cuts = cuts
        self.lastCut = lastCut
        self.lastCutAt = lastCutAt
    }
}

/// One connected audio client.
public struct ClientInfo: Codable, Sendable, Equatable {
    /// The daemon's id for this connection.
    public var id: UInt64
    /// The app key, e.g. "exe:/usr/bin/parecord".
    public var appKey: String
    /// What the client calls itself (application.name); never decides a permission.
    public var displayName: String?
    public var pid: Int32?
    /// How the app key was derived: flatpak, snap, systemd-scope, launcher, script, exe (an
    /// `IdentificationMethod`), or "unknown" for a client whose identity is gone.
    public var identifiedBy: String
    /// The executable, when known.
    public var executable: String?
    /// What the key resists: "sandbox" (strong against the app's own sandbox only: any
    /// unsandboxed program of the user can build the same), or "weak" (any program of the user).
    public var strength: IdentityStrength?
    /// Why the identity is weaker than its method suggests, when it is.
    public var caveat: String?
    /// The app's name from the system (its desktop entry), as a prompt shows it.
    public var systemName: String?
    /// The command the client was started as, when it is a link to `executable` under another
    /// name (`pw-record` for /usr/bin/pw-cat).
    public var commandName: String?

    public init(
        id: UInt64, appKey: String, displayName: String? = nil, pid: Int32? = nil, identifiedBy: String,
        executable: String? = nil, strength: IdentityStrength? = nil, caveat: String? = nil,
        systemName: String? = nil, commandName: String? = nil
    ) {
        self.systemName = systemName
        self.commandName = commandName
        self.id = id
        self.appKey = appKey
        self.displayName = displayName
        self.pid = pid
        self.identifiedBy = identifiedBy
        self.executable = executable
        self.strength = strength
        self.caveat = caveat
    }
}

/// One capture (record) stream.
public struct StreamInfo: Codable, Sendable, Equatable {
    /// The id of the client (`ClientInfo.id`) that owns the stream.
    public var client: UInt64
    /// The stream's channel index on the client's connection.
    public var stream: UInt32
    public var appKey: String
    /// The source recorded from, e.g. "alsa_input.pci-0000_00_1f.3.analog-stereo".
    public var source: String
    /// The sample spec as text, e.g. "s16le 2ch 44100Hz".
    public var sampleSpec: String
    /// Whether the app currently gets real samples or silence.
    public var audio: AudioDelivery
    /// Record bytes passed through unchanged.
    public var bytesReal: UInt64
    /// Record bytes replaced by silence.
    public var bytesSilenced: UInt64
    /// What the source captures: microphone, system-audio or app-audio; absent while not known (then silenced).
    public var kind: Capability?

    public init(
        client: UInt64, stream: UInt32, appKey: String, source: String, sampleSpec: String,
        audio: AudioDelivery, bytesReal: UInt64 = 0, bytesSilenced: UInt64 = 0, kind: Capability? = nil
    ) {
        self.kind = kind
        self.client = client
        self.stream = stream
        self.appKey = appKey
        self.source = source
        self.sampleSpec = sampleSpec
        self.audio = audio
        self.bytesReal = bytesReal
        self.bytesSilenced = bytesSilenced
    }
}

/// A pending permission prompt, as shown to the user.
public struct PromptInfo: Codable, Sendable, Equatable {
    /// The prompt id to answer with `answer-prompt`.
    public var id: UInt64
    public var appKey: String
    public var displayName: String?
    /// How the app key was derived.
    public var identifiedBy: IdentificationMethod
    /// The pid of the client whose stream raised the prompt.
    public var pid: Int32?
    /// The purpose string the app declared.
    public var purpose: String?
    /// The source the app wants to record from.
    public var source: String?
    public var executable: String?
    /// Seconds since 1970 when the prompt was raised.
    public var raisedAt: Double?
    /// The app's name from the system (its desktop entry), not from the app.
    public var systemName: String?
    /// The icon of that desktop entry (a theme name or an absolute path).
    public var icon: String?
    /// The command the app was started as, when it is a link to `executable` under another
    /// name (`parecord` for /usr/bin/pacat).
    public var commandName: String?
    /// True while access to this kind is off for every app (the master switch): an answer
    /// counts only once it is on again.
    public var accessOff: Bool?
    /// What the key resists: "sandbox" or "weak" (as in `ClientInfo`).
    public var strength: IdentityStrength?
    /// Why the identity is weaker than its method suggests, when it is.
    public var caveat: String?
    /// What the app wants to capture (microphone, system-audio, app-audio); the answer covers that kind only.
    public var kind: Capability?

    public init(
        id: UInt64, appKey: String, displayName: String? = nil, identifiedBy: IdentificationMethod, pid: Int32? = nil,
        purpose: String? = nil, source: String? = nil, executable: String? = nil, raisedAt: Double? = nil,
        systemName: String? = nil, icon: String? = nil, strength: IdentityStrength? = nil, caveat: String? = nil,
        kind: Capability? = nil, commandName: String? = nil, accessOff: Bool? = nil
    ) {
        self.accessOff = accessOff
        self.kind = kind
        self.commandName = commandName
        self.id = id
        self.appKey = appKey
        self.displayName = displayName
        self.identifiedBy = identifiedBy
        self.pid = pid
        self.purpose = purpose
        self.source = source
        self.executable = executable
        self.raisedAt = raisedAt
        self.systemName = systemName
        self.icon = icon
        self.strength = strength
        self.caveat = caveat
    }
}

/// How a prompt was resolved.
public struct PromptResolution: Codable, Sendable, Equatable {
    /// The prompt's id.
    public var prompt: UInt64
    public var appKey: String
    public var outcome: PromptOutcome
    /// Who resolved it: "agent", "portal", "notification", "prompt-command", "timeout", "cli", ...
    public var by: String?
    /// Seconds since 1970 when it was resolved.
    public var resolvedAt: Double?

    public init(prompt: UInt64, appKey: String, outcome: PromptOutcome, by: String? = nil, resolvedAt: Double? = nil) {
        self.prompt = prompt
        self.appKey = appKey
        self.outcome = outcome
        self.by = by
        self.resolvedAt = resolvedAt
    }
}

/// Everything `status` reports.
public struct StatusPayload: Codable, Sendable, Equatable {
    public var daemon: DaemonInfo
    public var upstream: UpstreamInfo
    public var clients: [ClientInfo]
    /// Live capture streams.
    public var streams: [StreamInfo]
    /// Pending prompts.
    public var prompts: [PromptInfo]
    /// Decisions that end by themselves (this session, until a time), by app key.
    public var temporary: [AppInfo]?
    /// Captures of undetermined apps that wait (silenced) for a prompt, over the prompt caps.
    public var waiting: [WaitingCaptureInfo]?
    /// The master switch of each capture kind.
    public var access: [AccessInfo]?
    /// The gate for native PipeWire clients (absent: a daemon without one).
    public var pipewire: PipeWireInfo?

    public init(
        daemon: DaemonInfo, upstream: UpstreamInfo, clients: [ClientInfo] = [], streams: [StreamInfo] = [],
        prompts: [PromptInfo] = [], temporary: [AppInfo]? = nil, waiting: [WaitingCaptureInfo]? = nil,
        access: [AccessInfo]? = nil, pipewire: PipeWireInfo? = nil
    ) {
        self.access = access
        self.pipewire = pipewire
        self.daemon = daemon
        self.upstream = upstream
        self.clients = clients
        self.streams = streams
        self.prompts = prompts
        self.temporary = temporary
        self.waiting = waiting
    }
}

/// A capture that waits for a prompt: as many prompts are pending as max-pending-prompts
/// (or max-pending-prompts-per-uid) allows. It records silence meanwhile.
public struct WaitingCaptureInfo: Codable, Sendable, Equatable {
    public var appKey: String
    public var kind: Capability
    public var displayName: String?
    public var uid: UInt32
    public var source: String
    /// When it started waiting (seconds since 1970).
    public var since: Double
    /// What its name is shown from, as for a client: its executable, the command it was started
    /// as (a link to the executable) and its desktop entry's name.
    public var executable: String?
    public var commandName: String?
    public var systemName: String?

    public init(
        appKey: String, kind: Capability, displayName: String?, uid: UInt32, source: String, since: Double,
        executable: String? = nil, commandName: String? = nil, systemName: String? = nil
    ) {
        self.executable = executable
        self.commandName = commandName
        self.systemName = systemName
        self.appKey = appKey
        self.kind = kind
        self.displayName = displayName
        self.uid = uid
        self.source = source
        self.since = since
    }
}

/// One known app and its decision for one capture kind.
public struct AppInfo: Codable, Sendable, Equatable {
    /// The app key, e.g. "flatpak:org.mozilla.firefox".
    public var key: String
    /// The capture kind the decision is about: microphone, system-audio or app-audio (absent: microphone).
    public var kind: Capability?
    public var displayName: String?
    /// undetermined, granted or denied.
    public var state: PermissionState
    /// Why: user, user-once, admin-policy, missing-purpose, prompt-timeout, ...
    public var reason: DecisionReason
    public var purpose: String?
    /// How the app was identified (flatpak, snap, systemd-scope, launcher, script, exe).
    public var identifiedBy: IdentificationMethod?
    /// What a key of that method resists at best: "sandbox" or "weak" (as in `ClientInfo`).
    public var strength: IdentityStrength?
    /// Seconds since 1970 when the decision was made.
    public var decidedAt: Double?
    /// Seconds since 1970 when the app last captured.
    public var lastUsed: Double?
    public var executable: String?
    /// How long `state` lasts: `always`, `session` (until the daemon stops), `timed`
    /// (until `expiresAt`) or `once` (until the app's clients disconnect).
    public var lifespan: LifespanKind?
    /// Seconds since 1970 when a `timed` decision ends.
    public var expiresAt: Double?
    /// The state in force when a temporary decision ends (the lasting decision under it).
    public var afterwards: PermissionState?
    /// The app's name from the system (its desktop entry), as a prompt shows it.
    public var systemName: String?
    /// The icon of that desktop entry (a theme name or an absolute path).
    public var icon: String?
    /// The command the app was last started as, when it is a link to `executable` under another
    /// name (`pw-record` for /usr/bin/pw-cat).
    public var commandName: String?

    public init(
        key: String, displayName: String? = nil, state: PermissionState, reason: DecisionReason, purpose: String? = nil,
        identifiedBy: IdentificationMethod? = nil, decidedAt: Double? = nil, lastUsed: Double? = nil,
        executable: String? = nil, kind: Capability? = nil, lifespan: LifespanKind? = nil, expiresAt: Double? = nil,
        afterwards: PermissionState? = nil, strength: IdentityStrength? = nil, systemName: String? = nil,
        icon: String? = nil, commandName: String? = nil
    ) {
        self.commandName = commandName
        self.systemName = systemName
        self.icon = icon
        self.kind = kind
        self.strength = strength
        self.key = key
        self.displayName = displayName
        self.state = state
        self.reason = reason
        self.purpose = purpose
        self.identifiedBy = identifiedBy
        self.decidedAt = decidedAt
        self.lastUsed = lastUsed
        self.executable = executable
        self.lifespan = lifespan
        self.expiresAt = expiresAt
        self.afterwards = afterwards
    }
}

/// The reply to `register-launcher`: where the launched app must connect.
public struct LauncherInfo: Codable, Sendable, Equatable {
    /// The app key its clients get, "launcher:<appId>".
    public var appKey: String
    /// The path of the per-app listening socket.
    public var socketPath: String

    public init(appKey: String, socketPath: String) {
        self.appKey = appKey
        self.socketPath = socketPath
    }
}

/// The master switch of one capture kind: on, or off for every app.
public struct AccessInfo: Codable, Sendable, Equatable {
    public var kind: Capability
    /// False: every stream of this kind is silent, whatever is granted.
    public var enabled: Bool

    public init(kind: Capability, enabled: Bool) {
        self.kind = kind
        self.enabled = enabled
    }
}

// The name each payload's app is shown by: the one rule of `AppNameResolver.shownName`, so that a
// prompt, `status`, `apps` and the settings window never name an app two ways.

/// A payload about an app that carries what its shown name is made from.
public protocol AppNamed {
    /// The app key (`kind:value`).
    var appKey: String { get }
    /// The name of the app's desktop entry.
    var systemName: String? { get }
    /// The command it was started as, when that is a link to `executable`.
    var commandName: String? { get }
    var executable: String? { get }
}

extension AppNamed {
    /// The name this app is shown by everywhere.
    public var shownName: String {
        AppNameResolver.shownName(appKey: appKey, systemName: systemName, commandName: commandName, executable: executable)
    }
}

extension ClientInfo: AppNamed {}
extension PromptInfo: AppNamed {}
extension WaitingCaptureInfo: AppNamed {}
extension AppInfo: AppNamed {
    public var appKey: String { key }
}
