// What the settings window knows of the daemon: the payloads of `status`,
// `apps` and `log`, kept up to date by the event stream, and whether the
// daemon can be reached at all. Pure: the window's I/O edge feeds it and asks
// `SettingsView` what to show.
import ControlProtocol

/// Whether the window can talk to the daemon, and if not, why.
public enum Reachability: Sendable, Equatable {
    /// Not tried yet.
    case connecting
    case connected
    /// Nothing listens at the control socket (the daemon is not running).
    case notRunning(path: String)
    /// The socket is there but the daemon turned the window away (another user's socket,
    /// too many connections, another protocol version).
    case refused(message: String)
}

/// The daemon's state as the window last heard it.
public struct SettingsState: Sendable, Equatable {
    public var reachability: Reachability = .connecting
    public var daemon: DaemonInfo?
    /// Every known app, one entry per app and capture kind.
    public var apps: [AppInfo] = []
    /// Live capture streams.
    public var streams: [StreamInfo] = []
    /// Pending prompts, oldest first.
    public var prompts: [PromptInfo] = []
    /// The master switch of each kind; a kind not listed is on.
    public var access: [AccessInfo] = []
    /// Capture sessions from the usage log, newest first.
    public var usage: [UsageInfo] = []
    /// The last request the daemon refused, to show once.
    public var lastError: String?

    public init() {}

    /// What an event changes at once; the caller fetches what it says is stale.
    public struct Stale: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// The app list (a new app, a decision, last recorded).
        public static let apps = Stale(rawValue: 1)
        /// The usage log (a capture ended).
        public static let usage = Stale(rawValue: 2)
        /// The live streams: a `stream-ended` may not name the stream as `stream-started` did
        /// (the daemon may have forgotten its channel), so `status` says which are left.
        public static let streams = Stale(rawValue: 4)
    }

    /// A fresh `status` reply.
    public mutating func load(status: StatusPayload) {
        reachability = .connected
        daemon = status.daemon
        streams = status.streams
        prompts = status.prompts
        access = status.access ?? []
    }

    /// Takes in one event; returns what else has become stale.
    public mutating func apply(_ event: ControlEvent) -> Stale {
        switch event {
        case .streamStarted(let s):
            streams.removeAll { $0.client == s.client && $0.stream == s.stream }
            streams.append(s)
            // An app decided before it ever ran is known by its key alone: its first stream
            // tells the daemon what it runs as (its command name), which names it.
            return apps.contains { $0.key == s.appKey && ($0.lastUsed != nil || $0.commandName != nil) } ? [] : .apps
        case .streamChanged(let s):
            if let i = streams.firstIndex(where: { $0.client == s.client && $0.stream == s.stream }) {
                streams[i] = s
            } else {
                streams.append(s)
            }
            return []
        case .streamEnded(let s):
            let before = streams.count
            streams.removeAll { $0.client == s.client && $0.stream == s.stream }
            return streams.count < before ? [.apps, .usage] : [.apps, .usage, .streams]
        case .promptRaised(let p):
            prompts.removeAll { $0.id == p.id }
            prompts.append(p)
            return apps.contains { $0.key == p.appKey } ? [] : .apps
        case .promptResolved(let r):
            prompts.removeAll { $0.id == r.prompt }
            return .apps
        case .decisionChanged(let a):
            if let i = apps.firstIndex(where: { $0.key == a.key && SettingsKind($0.kind) == SettingsKind(a.kind) }) {
                apps[i] = Self.decided(apps[i], a)
                return []
            }
            return .apps
        case .accessChanged(let a):
            access.removeAll { $0.kind == a.kind }
            access.append(a)
            return []
        case .clientDisconnected(let c):
            streams.removeAll { $0.client == c.id }
            return []
        case .clientConnected:
            return []
        }
    }

    /// `old` with the decision of `new` (a `decision-changed` event, which says nothing of what
    /// is known about the app: its names, icon, identification and use).
    static func decided(_ old: AppInfo, _ new: AppInfo) -> AppInfo {
        var a = new
        a.displayName = new.displayName ?? old.displayName
        a.systemName = new.systemName ?? old.systemName
        a.commandName = new.commandName ?? old.commandName
        a.icon = new.icon ?? old.icon
        a.identifiedBy = new.identifiedBy ?? old.identifiedBy
        a.strength = new.strength ?? old.strength
        a.executable = new.executable ?? old.executable
        a.purpose = new.purpose ?? old.purpose
        a.lastUsed = new.lastUsed ?? old.lastUsed
        return a
    }

    /// Whether `kind` is switched on (absent from `access`: on).
    public func accessEnabled(_ kind: SettingsKind) -> Bool {
        access.first { SettingsKind($0.kind) == kind }?.enabled ?? true
    }

    /// The connection was lost or could not be made: nothing shown is current any more.
    public mutating func lost(_ why: Reachability) {
        self = SettingsState()
        reachability = why
    }
}
