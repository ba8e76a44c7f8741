// The "session" line of `earmuff status`: whether Earmuff is the session's
// sound socket ($XDG_RUNTIME_DIR/pulse/native, after `earmuff setup`) and
// where the real server is.
import ControlProtocol
import EarmuffClient
import Foundation
import Glibc

enum SessionTakeover {
    /// Whether the daemon of `status` listens on the session's default socket
    /// (as it says, or, from an older daemon, as this environment says).
    static func isTakenOver(_ status: StatusPayload, environment: [String: String]) -> Bool {
        if let said = status.daemon.sessionSocket { return said }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return false }
        return status.daemon.listenPath == "\(runtime)/\(SetupPlan.sessionSocket)"
    }

    static func describe(_ status: StatusPayload, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if isTakenOver(status, environment: environment) {
            let held = status.daemon.socketActivated == true ? ", held by systemd (earmuff.socket)" : ""
            return
                "session: taken over: apps using the default socket (\(status.daemon.listenPath)\(held)), Flatpaks and snaps included, go through Earmuff; the real server is at \(status.upstream.server)"
        }
        return
            "session: not taken over: only apps pointed at \(status.daemon.listenPath) (PULSE_SERVER, earmuff run) go through Earmuff; the others reach the real server directly; 'earmuff setup' makes Earmuff the session's socket"
    }

    /// The earmuff.socket unit `earmuff setup` uses (its own, or the packaged one once
    /// setup moved the server's socket), else nil.
    static func installedSocketUnit(environment: [String: String]) -> String? {
        guard let (_, config) = SetupPlan.directories(environment: environment) else { return nil }
        let unit = "\(config)/systemd/user/earmuff.socket"
        if let text = try? String(contentsOfFile: unit, encoding: .utf8), text.hasPrefix(SetupPlan.marker) { return unit }
        let packaged = "\(SetupPlan.packagedUnitDirectory)/earmuff.socket"
        guard unsafe access(packaged, R_OK) == 0, setUpServer(configHome: config) != nil else { return nil }
        return packaged
    }

    /// The server whose socket `earmuff setup` moved (its drop-in is there), else nil.
    static func setUpServer(configHome: String) -> SessionServer? {
        let c = SetupContext(configHome: configHome, home: "", binary: "")
        return SessionServer.allCases.first { server in
            (try? String(contentsOfFile: SetupPlan.socketDropIn(c, server), encoding: .utf8))?.hasPrefix(SetupPlan.marker + "\n") == true
        }
    }

    /// The session socket (`$XDG_RUNTIME_DIR/pulse/native`) when setup made
    /// it Earmuff's; `earmuff run` points apps there then.
    static func sessionSocket(environment: [String: String]) -> String? {
        guard installedSocketUnit(environment: environment) != nil,
            let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/")
        else { return nil }
        return "\(runtime)/\(SetupPlan.sessionSocket)"
    }

    /// How to start the daemon, for a message that finds it not running. After `earmuff setup`
    /// (`setUp`: its earmuff.socket is in place) the session starts it: systemd, when an app
    /// connects to the session's socket; 'earmuff serve' by hand would be wrong advice there.
    static func startHint(setUp: Bool) -> String {
        guard setUp else { return ControlClient.serveHint }
        return "the session starts it when an app connects to $XDG_RUNTIME_DIR/\(SetupPlan.sessionSocket) (earmuff.socket, from earmuff setup): "
            + "'systemctl --user start earmuff.socket' if that is stopped, 'systemctl --user start earmuff.service' to start it now"
    }

    /// `startHint` for the session of `environment`.
    static func startHint(environment: [String: String]) -> String {
        startHint(setUp: installedSocketUnit(environment: environment) != nil)
    }

    /// When the daemon cannot be reached but `earmuff setup` installed the
    /// socket unit: systemd starts Earmuff with the first app, so say so.
    static func idleHint(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        guard let unit = installedSocketUnit(environment: environment) else { return nil }
        return
            "session: set up by earmuff setup (\(unit)); systemd starts Earmuff when the first app connects to $XDG_RUNTIME_DIR/\(SetupPlan.sessionSocket) (check: systemctl --user status earmuff.socket earmuff.service)"
    }
}
