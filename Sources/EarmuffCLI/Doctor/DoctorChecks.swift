// `earmuff doctor`'s checks, as a pure function of what was observed
// (DoctorFacts, gathered by DoctorCommand): one result per check, each
// saying what is wrong and the command that fixes it.
import ControlProtocol

/// What `earmuff doctor` saw of the session.
struct DoctorFacts: Equatable {
    /// `$XDG_RUNTIME_DIR`, when it is set to an absolute path.
    var runtimeDirectory: String?
    /// The control socket asked.
    var controlPath: String
    /// The daemon's status; nil when it did not answer.
    var status: StatusPayload?
    /// Why the daemon did not answer.
    var daemonError: String?
    /// The server `earmuff setup` set the session up for (its socket drop-in is there), nil when it did not.
    var setUpFor: SessionServer?
    /// The unit directory setup's earmuff.socket is in (packaged or the user's), when there is one.
    var socketUnit: String?
    /// Whether `$XDG_RUNTIME_DIR/pulse/native` exists.
    var sessionSocketExists: Bool
    /// Whether a connection to the upstream server's socket (the daemon's, else `pulse/upstream`) succeeded.
    var upstreamAnswers: Bool
    /// The upstream server asked: the daemon's, else setup's `pulse/upstream`.
    var upstreamServer: String?
    /// The desktop's prompt channels.
    var desktop: DesktopChannelsFacts
    /// `$XDG_RUNTIME_DIR/pipewire-0` when this user can connect to it.
    var pipewireSocket: String?
    /// Sound devices under /dev/snd this user can open for capture.
    var captureDevices: [String]
    /// Stale or foreign units and drop-ins.
    var unitProblems: [UnitProblem]
    /// The permission store and what `PRAGMA quick_check` said ("ok"), or why it could not be checked.
    var storePath: String
    var storeCheck: StoreCheck

    struct UnitProblem: Equatable {
        let problem: String
        let fix: String
    }

    enum StoreCheck: Equatable {
        case ok
        case missing
        case damaged(String)
        case unreadable(String)
    }
}

/// The desktop's side (Service's DesktopChannels, kept as plain values).
struct DesktopChannelsFacts: Equatable {
    var busError: String?
    var portalBackend: String?
    var notificationActions: Bool
}

/// One check's result.
struct DoctorCheck: Equatable, Encodable {
    enum Outcome: String, Encodable {
        case ok, warn, fail
    }

    /// A short name, stable for scripts: daemon, session, upstream, prompts, pipewire, devices, units, store.
    let name: String
    let outcome: Outcome
    /// What was found.
    let message: String
    /// What to do about it; nil when nothing is to be done.
    let fix: String?
}

enum DoctorChecks {
    /// Every check, in the order printed.
    static func run(_ f: DoctorFacts) -> [DoctorCheck] {
        [daemon(f), session(f), upstream(f), prompts(f), pipewire(f), devices(f), units(f), store(f)]
    }

    /// 0 when no check failed (warnings do not fail), else 1.
    static func exitStatus(_ checks: [DoctorCheck]) -> Int32 {
        checks.contains { $0.outcome == .fail } ? 1 : 0
    }

    static func daemon(_ f: DoctorFacts) -> DoctorCheck {
        if let s = f.status {
            return DoctorCheck(name: "daemon", outcome: .ok, message: "earmuff \(s.daemon.version) answers on \(f.controlPath) (pid \(s.daemon.pid))", fix: nil)
        }
        let why = f.daemonError ?? "no daemon answers on \(f.controlPath)"
        if f.setUpFor != nil {
            return DoctorCheck(
                name: "daemon", outcome: .fail, message: why,
                fix:
                    "systemd starts it with the first app; start it now with 'systemctl --user start earmuff.socket earmuff.service', and see why it stopped with 'journalctl --user -u earmuff.service'"
            )
        }
        return DoctorCheck(
            name: "daemon", outcome: .fail, message: why,
            fix: "run 'earmuff setup' (systemd then starts Earmuff with the first app), or start it by hand with 'earmuff serve'")
    }

    static func session(_ f: DoctorFacts) -> DoctorCheck {
        let native = f.runtimeDirectory.map { "\($0)/\(SetupPlan.sessionSocket)" } ?? "$XDG_RUNTIME_DIR/\(SetupPlan.sessionSocket)"
        guard let server = f.setUpFor else {
            if let s = f.status, s.daemon.sessionSocket == true {
                return DoctorCheck(
                    name: "session", outcome: .warn,
                    message: "Earmuff listens on \(native), but not through 'earmuff setup': the real server was moved by hand",
                    fix: "run 'earmuff setup' so that systemd holds the socket and the server stays behind Earmuff after a restart")
            }
            return DoctorCheck(
                name: "session", outcome: .fail,
                message: "not taken over: apps using the session's socket (\(native)), Flatpaks and snaps included, reach the real server directly"
                    + (f.status.map { "; only apps pointed at \($0.daemon.listenPath) go through Earmuff" } ?? ""),
                fix: "run 'earmuff setup' (see 'earmuff setup --dry-run' first)")
        }
        guard f.socketUnit != nil else {
            return DoctorCheck(
                name: "session", outcome: .fail,
                message:
                    "\(server.displayName)'s socket is moved to \(SetupPlan.upstreamSocket), but no earmuff.socket unit is installed (was the earmuff package removed?), so nothing listens on \(native): apps find no sound server",
                fix: "'earmuff setup --undo' gives the session back to \(server.displayName); or install earmuff again and run 'earmuff setup'")
        }
        if let s = f.status {
            guard s.daemon.sessionSocket == true else {
                return DoctorCheck(
                    name: "session", outcome: .fail,
                    message: "the session is set up for \(server.displayName), but the daemon answering listens on \(s.daemon.listenPath), not \(native)",
                    fix: "stop that daemon and let systemd start Earmuff: 'systemctl --user restart earmuff.socket'")
            }
            return DoctorCheck(
                name: "session", outcome: .ok,
                message: "taken over: \(native) is Earmuff's" + (s.daemon.socketActivated == true ? " (held by systemd, earmuff.socket)" : "")
                    + ", \(server.displayName) is behind it at \(s.upstream.server)", fix: nil)
        }
        guard f.sessionSocketExists else {
            return DoctorCheck(
                name: "session", outcome: .fail, message: "set up for \(server.displayName), but nothing listens on \(native): apps find no sound server",
                fix: "systemctl --user enable --now earmuff.socket")
        }
        return DoctorCheck(
            name: "session", outcome: .warn,
            message: "set up for \(server.displayName); \(native) is there, Earmuff is not running yet (systemd starts it with the first app)", fix: nil)
    }

    static func upstream(_ f: DoctorFacts) -> DoctorCheck {
        guard let server = f.upstreamServer else {
            return DoctorCheck(
                name: "upstream", outcome: .warn, message: "no upstream server to ask: no daemon answers and the session is not set up", fix: nil)
        }
        if f.upstreamAnswers {
            return DoctorCheck(name: "upstream", outcome: .ok, message: "the real server answers at \(server)", fix: nil)
        }
        let unit = f.setUpFor.map { "systemctl --user restart \($0.socketUnit)" } ?? "systemctl --user start pipewire-pulse.socket (or pulseaudio.socket)"
        return DoctorCheck(
            name: "upstream", outcome: .fail, message: "the real server does not answer at \(server): apps get no sound through Earmuff",
            fix: "start it: \(unit); its log: journalctl --user -u \(f.setUpFor?.serviceUnit ?? "pipewire-pulse.service")")
    }

    /// The channel a prompt raised now would be shown on, as the daemon tries them (prompt-via order).
    static func promptChannel(_ info: PromptChannelsInfo, desktop: DesktopChannelsFacts) -> String? {
        for channel in info.via {
            switch channel {
            case "portal":
                if let backend = desktop.portalBackend { return "portal (\(backend))" }
            case "notification":
                if desktop.notificationActions { return "notification" }
            case "command" where info.command:
                return info.agents == 0 ? "command (prompt-command)" : "agent (\(info.agents) connected; prompt-command is not run while one is)"
            case "agent":
                if info.agents > 0 { return "agent (\(info.agents) connected)" }
            default:
                continue
            }
        }
        return nil
    }

    static func prompts(_ f: DoctorFacts) -> DoctorCheck {
        guard let info = f.status?.daemon.promptChannels else {
            return DoctorCheck(name: "prompts", outcome: .warn, message: "cannot tell which prompt channel exists: no daemon answers", fix: nil)
        }
        if let channel = promptChannel(info, desktop: f.desktop) {
            let agents = info.agents > 0 && !channel.hasPrefix("agent") ? "; \(info.agents) agent(s) get every prompt too" : ""
            return DoctorCheck(
                name: "prompts", outcome: .ok, message: "a prompt would be shown on \(channel)\(agents) (prompt-via = \(info.via.joined(separator: " ")))",
                fix: nil)
        }
        var missing: [String] = []
        for channel in info.via {
            switch channel {
            case "portal":
                missing.append(
                    f.desktop.busError != nil
                        ? "portal: no session bus" : "portal: no Access portal backend (xdg-desktop-portal-gnome, -kde or -gtk) on the session bus")
            case "notification":
                missing.append(f.desktop.busError != nil ? "notification: no session bus" : "notification: no notification server with actions")
            case "command": missing.append("command: no prompt-command set")
            case "agent": missing.append("agent: none connected")
            default: missing.append("\(channel): unknown")
            }
        }
        return DoctorCheck(
            name: "prompts", outcome: .fail,
            message: "no prompt channel: undetermined apps record silence and nobody is asked (\(missing.joined(separator: "; ")))",
            fix:
                "run 'earmuff agent' in a terminal, set prompt-command in ~/.config/earmuff/earmuff.conf, or run a desktop portal or notification server; prompt-via = \(info.via.joined(separator: " "))"
        )
    }

    static let bypassAnswer = "apps you do not trust: run them with 'earmuff run --sandbox' or as Flatpaks (README, Threat model)"

    static func pipewire(_ f: DoctorFacts) -> DoctorCheck {
        guard let socket = f.pipewireSocket else {
            return DoctorCheck(name: "pipewire", outcome: .ok, message: "no pipewire-0 socket this user can open", fix: nil)
        }
        if let gate = f.status?.pipewire, gate.gating, gate.socket == socket {
            let gated =
                "\(socket) is gated by the daemon: native PipeWire clients get the same decisions (\(gate.clients) client\(gate.clients == 1 ? "" : "s") now)"
            // Cut while it ran and back: said, not warned of, since a restart of PipeWire cuts it too.
            let cut =
                ClientFormat.cutText(gate).map { "; its connection was \($0) (if PipeWire did not restart then, see journalctl --user -u earmuff.service)" }
                ?? ""
            return DoctorCheck(name: "pipewire", outcome: .ok, message: gated + cut, fix: nil)
        }
        let why = f.status?.pipewire.map { "; the daemon does not gate it: \($0.reason ?? "not connected")" } ?? ""
        return DoctorCheck(
            name: "pipewire", outcome: .warn,
            message:
                "\(socket) is open to this user: native PipeWire clients (pw-record, apps using PipeWire directly) record without passing through Earmuff\(why)",
            fix: bypassAnswer)
    }

    static func devices(_ f: DoctorFacts) -> DoctorCheck {
        guard !f.captureDevices.isEmpty else {
            return DoctorCheck(name: "devices", outcome: .ok, message: "no /dev/snd capture device this user can open", fix: nil)
        }
        return DoctorCheck(
            name: "devices", outcome: .warn,
            message:
                "this user can open \(f.captureDevices.joined(separator: ", ")): an app can record from the hardware directly (seat access or the audio group)",
            fix: bypassAnswer)
    }

    /// The problem of an earmuff.service (`service`) whose program (`binary`) is gone while
    /// setup has the session's socket: nothing starts behind it, so apps get no sound.
    static func missingProgram(service: String, binary: String, server: SessionServer?) -> DoctorFacts.UnitProblem {
        DoctorFacts.UnitProblem(
            problem: "\(service) runs \(binary), which is not there any more: nothing answers behind the session's sound socket",
            fix:
                "'earmuff setup --undo' gives the session back to \(server?.displayName ?? "its sound server"); or install earmuff again and run 'earmuff setup' with it"
        )
    }

    static func units(_ f: DoctorFacts) -> DoctorCheck {
        guard !f.unitProblems.isEmpty else {
            return DoctorCheck(name: "units", outcome: .ok, message: "no stale or foreign earmuff units or drop-ins", fix: nil)
        }
        return DoctorCheck(
            name: "units", outcome: .fail, message: f.unitProblems.map(\.problem).joined(separator: "; "),
            fix: f.unitProblems.map(\.fix).joined(separator: "; "))
    }

    static func store(_ f: DoctorFacts) -> DoctorCheck {
        switch f.storeCheck {
        case .ok:
            return DoctorCheck(name: "store", outcome: .ok, message: "the permission store \(f.storePath) passes PRAGMA quick_check", fix: nil)
        case .missing:
            return DoctorCheck(name: "store", outcome: .ok, message: "no permission store yet at \(f.storePath) (the daemon creates it)", fix: nil)
        case .damaged(let what):
            return DoctorCheck(
                name: "store", outcome: .fail, message: "the permission store \(f.storePath) is damaged: \(what)",
                fix:
                    "stop Earmuff (systemctl --user stop earmuff.service), move the file aside (mv '\(f.storePath)' '\(f.storePath).damaged') and start it again: decisions are asked for anew"
            )
        case .unreadable(let why):
            return DoctorCheck(
                name: "store", outcome: .fail, message: "cannot check the permission store \(f.storePath): \(why)",
                fix: "check its owner and mode (it should be yours, 0600)")
        }
    }
}
