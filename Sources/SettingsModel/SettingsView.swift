// What the settings window shows, made from the control payloads: the one place
// that reads `AppInfo`, `StreamInfo`, `PromptInfo` and `UsageInfo` fields for
// the window, and the one place that turns a click into a control request. The
// GTK code only lays out what this returns.
import Consent
import ControlProtocol
import Wording

/// A capture kind as the window names it.
/// A page of the window: one capture kind, as the daemon names it.
public typealias SettingsKind = Capability

extension Capability {
    /// The wire name (absent means microphone); nil for a kind this window does not know.
    public init?(_ wire: String?) {
        guard let k = Capability(rawValue: wire ?? "microphone") else { return nil }
        self = k
    }

    /// The kind a payload names (absent means microphone).
    public init(_ kind: Capability?) { self = kind ?? .microphone }

    /// The page's title.
    public var title: String {
        switch self {
        case .microphone: "Microphone"
        case .systemAudio: "System audio"
        case .appAudio: "Other apps' audio"
        }
    }

    /// The master switch's label.
    public var accessTitle: String { "\(title) access" }

    /// What the kind is, in a sentence for the page.
    public var explanation: String {
        switch self {
        case .microphone: "Apps that asked to record from the microphone."
        case .systemAudio: "Apps that asked to record everything your computer plays."
        case .appAudio: "Apps that asked to record what another app plays."
        }
    }

    /// "the microphone", for the window's short sentences.
    public var shortPhrase: String {
        switch self {
        case .microphone: "the microphone"
        case .systemAudio: "system audio"
        case .appAudio: "other apps' audio"
        }
    }
}

/// An app's decision, as its row offers it.
public enum Choice: String, Sendable, CaseIterable, Equatable {
    case allow, deny, ask

    public var label: String {
        switch self {
        case .allow: "Allow"
        case .deny: "Deny"
        case .ask: "Ask"
        }
    }
}

/// How long a choice lasts, as the CLI's `--for`/`--session` offer it.
public enum ChoiceLifespan: Sendable, Equatable, CaseIterable {
    case always, session, hour

    public var label: String {
        switch self {
        case .always: "Always"
        case .session: "Until I log out"
        case .hour: "For an hour"
        }
    }

    var requested: RequestedLifespan? {
        switch self {
        case .always: nil
        case .session: .session
        case .hour: .timed(seconds: 3600)
        }
    }
}

/// Whether an app records now, and what it gets.
public enum LiveMark: Sendable, Equatable {
    /// Recording, real sound.
    case real
    /// Recording, but it gets silence.
    case silenced

    public var label: String {
        switch self {
        case .real: "Recording now"
        case .silenced: "Recording silence now"
        }
    }
}

/// One app on a kind page.
public struct AppRowView: Sendable, Equatable {
    /// The app key (what requests name).
    public var key: String
    public var kind: SettingsKind
    /// The app's name.
    public var title: String
    /// Purpose and last recording, one line each.
    public var subtitle: String
    /// The icon of the app's desktop entry (a theme name or an absolute path), else `fallbackIcon`.
    public var icon: String
    /// A theme icon for the kind of app, shown when the theme has no `icon`.
    public var fallbackIcon: String
    public var choice: Choice
    /// A temporary decision's end, e.g. "Allowed until you log out".
    public var lifespanNote: String?
    public var live: LiveMark?
    /// Identity details, shown one click away: label and value.
    public var details: [(String, String)]

    public static func == (a: AppRowView, b: AppRowView) -> Bool {
        a.key == b.key && a.kind == b.kind && a.title == b.title && a.subtitle == b.subtitle && a.icon == b.icon
            && a.fallbackIcon == b.fallbackIcon
            && a.choice == b.choice && a.lifespanNote == b.lifespanNote && a.live == b.live
            && a.details.map { $0.0 + "\u{0}" + $0.1 } == b.details.map { $0.0 + "\u{0}" + $0.1 }
    }
}

/// One kind's page.
public struct KindPageView: Sendable, Equatable {
    public var kind: SettingsKind
    public var accessOn: Bool
    /// Said under the switch while it is off.
    public var accessNote: String?
    public var rows: [AppRowView]
    /// Said when there are no rows.
    public var empty: String
}

/// One capture session on the History page.
public struct HistoryRowView: Sendable, Equatable {
    public var title: String
    public var subtitle: String
}

/// A pending prompt, answerable in the window.
public struct PromptRowView: Sendable, Equatable {
    public var id: UInt64
    public var kind: SettingsKind
    public var title: String
    public var subtitle: String
}

/// Why the window cannot show the daemon's state, or what it should know first.
public struct Notice: Sendable, Equatable {
    public var title: String
    public var detail: String
}

/// A click, as the daemon is to hear it.
public enum SettingsIntent: Sendable, Equatable {
    case choose(key: String, kind: SettingsKind, Choice, ChoiceLifespan = .always)
    case setAccess(SettingsKind, on: Bool)
    case answer(prompt: UInt64, allow: Bool)

    /// The control request that carries it out.
    public var request: ControlRequest {
        switch self {
        case .choose(let key, let kind, .ask, _):
            .reset(app: key, kind: kind)
        case .choose(let key, let kind, let choice, let lifespan):
            .setDecision(
                app: key, state: choice == .allow ? .granted : .denied, reason: nil, kind: kind,
                lifespan: lifespan.requested)
        case .setAccess(let kind, let on):
            .setAccess(kind: kind, enabled: on)
        case .answer(let prompt, let allow):
            .answerPrompt(prompt: prompt, answer: allow ? .allow : .deny, lifespan: nil)
        }
    }
}

/// The window's content for a state, at a time (seconds since 1970).
public struct SettingsView: Sendable, Equatable {
    public var pages: [KindPageView]
    public var history: [HistoryRowView]
    public var prompts: [PromptRowView]
    /// Shown above everything while set: the daemon cannot be reached, or apps bypass it.
    public var notice: Notice?

    public init(_ state: SettingsState, now: Double) {
        notice = Self.notice(state)
        let names = Self.names(state)
        pages = SettingsKind.allCases.map { kind in
            let on = state.accessEnabled(kind)
            let rows = state.apps.filter { SettingsKind($0.kind) == kind }
                .map { Self.row($0, kind: kind, streams: state.streams, names: names, now: now) }
                .sorted { ($0.title.lowercased(), $0.key) < ($1.title.lowercased(), $1.key) }
            return KindPageView(
                kind: kind, accessOn: on,
                accessNote: on ? nil : "Every app records silence. Each app's choice is kept and applies again when this is on.",
                rows: rows,
                empty: "No app has asked to record \(kind.shortPhrase) yet.")
        }
        history = state.usage.map { Self.history($0, names: names, now: now) }
        prompts = state.prompts.map { p in
            PromptRowView(
                id: p.id, kind: SettingsKind(p.kind), title: PromptWording.title(p),
                subtitle: PromptWording.bodyLines(p).joined(separator: "\n"))
        }
    }

    static func notice(_ state: SettingsState) -> Notice? {
        switch state.reachability {
        case .connecting:
            return Notice(title: "Connecting to Earmuff…", detail: "")
        case .notRunning(let path):
            return Notice(
                title: "Earmuff is not running",
                detail:
                    "Nothing answers at \(path). Start it with “systemctl --user start earmuff.socket” (after “earmuff setup”), or “earmuff serve”. This window connects as soon as it runs."
            )
        case .refused(let message):
            return Notice(title: "Earmuff refused this window", detail: message)
        case .connected:
            if state.daemon?.sessionSocket == false {
                return Notice(
                    title: "Apps do not go through Earmuff yet",
                    detail:
                        "Earmuff listens at \(state.daemon?.listenPath ?? "its own socket"), but apps record from the sound server directly. “earmuff setup” makes Earmuff your session's sound socket and moves the server behind it; “earmuff setup --dry-run” shows every file it would write."
                )
            }
            return nil
        }
    }

    /// The name of each app key, as prompts, `status` and `apps` show it (`shownName`, one rule
    /// for all): from a pending prompt (what the app runs as now), else from the app list.
    static func names(_ state: SettingsState) -> [String: String] {
        var names: [String: String] = [:]
        for a in state.apps { names[a.key] = a.shownName }
        for p in state.prompts { names[p.appKey] = p.shownName }
        return names
    }

    static func row(_ a: AppInfo, kind: SettingsKind, streams: [StreamInfo], names: [String: String], now: Double) -> AppRowView {
        let choice: Choice =
            switch a.state {
            case .granted: .allow
            case .denied: .deny
            default: .ask
            }
        let mine = streams.filter { $0.appKey == a.key && SettingsKind($0.kind) == kind }
        let live: LiveMark? = mine.isEmpty ? nil : (mine.contains { $0.audio == .real } ? .real : .silenced)
        var lines: [String] = []
        if let p = a.purpose, !p.isEmpty { lines.append("“\(p)”") }
        if live == nil { lines.append(a.lastUsed.map { "Last recorded \(TimeText.ago($0, now: now))" } ?? "Never recorded") }
        var note: String?
        switch a.lifespan {
        case .session: note = "\(choice == .allow ? "Allowed" : "Denied") until you log out"
        case .timed: note = a.expiresAt.map { "\(choice == .allow ? "Allowed" : "Denied") until \(TimeText.clock($0))" }
        case .once: note = "Only while it stays open"
        default: break
        }
        var details: [(String, String)] = [("Identified as", a.key)]
        details.append(("How", Self.method(a.identifiedBy)))
        if let s = a.strength { details.append(("How sure", Self.strength(s))) }
        if let e = a.executable { details.append(("Program", e)) }
        return AppRowView(
            key: a.key, kind: kind, title: names[a.key] ?? a.shownName,
            subtitle: lines.joined(separator: "\n"), icon: a.icon.flatMap { $0.isEmpty ? nil : $0 } ?? Self.icon(a),
            fallbackIcon: Self.icon(a), choice: choice,
            lifespanNote: note, live: live, details: details)
    }

    static func icon(_ a: AppInfo) -> String {
        if a.key.hasPrefix("flatpak:") { return String(a.key.dropFirst("flatpak:".count)) }
        if a.key.hasPrefix("snap:") { return "package-x-generic" }
        return a.identifiedBy == .script ? "text-x-script" : "application-x-executable"
    }

    static func method(_ identifiedBy: IdentificationMethod?) -> String {
        switch identifiedBy {
        case .flatpak: "A Flatpak app, by its app ID"
        case .snap: "A Snap, by its name"
        case .systemdScope: "By the desktop's launch record (systemd scope)"
        case .launcher: "Started with “earmuff run --app-id”"
        case .script: "A script, by its file"
        case .executable: "A program, by its file"
        case .sandboxed: "A sandboxed program whose sandbox does not say what it is"
        case .uninspectable: "A program Earmuff could not look at"
        case nil: "Not known"
        }
    }

    static func strength(_ s: IdentityStrength) -> String {
        switch s {
        case .sandbox: "The app's sandbox cannot pass for another app; your other programs could"
        case .weak: "Any program of yours could pass for it"
        }
    }

    static func history(_ u: UsageInfo, names: [String: String], now: Double) -> HistoryRowView {
        let kind = SettingsKind(u.kind) ?? .microphone
        let name = names[u.appKey] ?? AppNameResolver.shownName(appKey: u.appKey, systemName: nil, commandName: nil, executable: nil)
        let span = "\(TimeText.clock(u.startedAt)) – \(u.endedAt.map(TimeText.clock) ?? "now")"
        var parts = [span, u.source]
        let real = u.realSeconds ?? 0, silenced = u.silencedSeconds ?? 0
        if real > 0 { parts.append("\(TimeText.seconds(real)) real") }
        if silenced > 0 { parts.append("\(TimeText.seconds(silenced)) silenced") }
        return HistoryRowView(title: "\(name) · \(kind.title)", subtitle: parts.joined(separator: " · "))
    }
}
