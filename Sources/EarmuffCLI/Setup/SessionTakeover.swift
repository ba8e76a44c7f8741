// The "session" line of `earmuff status`: whether Earmuff is the session's
// sound socket ($XDG_RUNTIME_DIR/pulse/native, after `earmuff setup`) and
// where the real server is.
import ControlProtocol
import Foundation

enum SessionTakeover {
    /// Whether the daemon of `status` listens on the session's default socket.
    static func isTakenOver(_ status: StatusPayload, environment: [String: String]) -> Bool {
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return false }
        return status.daemon.listenPath == "\(runtime)/\(SetupPlan.sessionSocket)"
    }

    static func describe(_ status: StatusPayload, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if isTakenOver(status, environment: environment) {
            return "session: taken over: apps using the default socket (\(status.daemon.listenPath)), Flatpaks and snaps included, go through Earmuff; the real server is at \(status.upstream.server)"
        }
        return "session: not taken over: only apps pointed at \(status.daemon.listenPath) (PULSE_SERVER, earmuff run) go through Earmuff; the others reach the real server directly; 'earmuff setup' makes Earmuff the session's socket"
    }
}
