// The window's connection to the daemon: one subscribed control connection whose
// events are read on the GTK loop (a watch on its descriptor), requests on the
// same connection, and reconnection every half second while the daemon is away
// (every 5 s while something else answers at the path).
// Prompts are answered on a short connection of their own that becomes an agent
// only for that answer, so an open window never takes prompts away from the
// prompt command.
import CAdwaita
import ControlProtocol
import EarmuffClient
import Foundation
import Glibc
import SettingsModel

@MainActor
final class DaemonLink {
    let path: String
    private(set) var state = SettingsState()
    /// Called after every change of `state`.
    var changed: () -> Void = {}
    private var client: ControlClient?
    private var watch: guint = 0
    private var retrying = false

    init(path: String) { self.path = path }

    /// `--control PATH`, else `$XDG_RUNTIME_DIR/earmuff/control` (as the earmuff command finds it).
    static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/run/user/\(getuid())"
        return "\(runtime)/earmuff/control"
    }

    /// Connects now, and keeps trying every 500 ms until it works.
    func start() {
        if !connect() { retry() }
    }

    /// Tries again in 500 ms while nothing listens (that fails at once), in 5 s when something
    /// there did not answer as the daemon does (that waits for its greeting, on the GTK loop).
    private func retry() {
        guard !retrying else { return }
        retrying = true
        let wait: UInt32 = if case .refused = state.reachability { 5000 } else { 500 }
        every(ms: wait) { [weak self] in
            guard let self else { return false }
            self.retrying = false
            if !self.connect() { self.retry() }
            return false
        }
    }

    private func connect() -> Bool {
        do throws(ControlClientError) {
            let c = try ControlClient(path: path, timeoutMs: 1000)
            _ = try c.request(.subscribe, timeoutMs: 5000)
            client = c
            try reload([.apps, .usage], status: true)
            let data = Unmanaged.passUnretained(self).toOpaque()
            watch = g_unix_fd_add(c.fd, GIOCondition(rawValue: G_IO_IN.rawValue | G_IO_HUP.rawValue | G_IO_ERR.rawValue), { _, _, data in
                let bits = UInt(bitPattern: data)
                return MainActor.assumeIsolated {
                    Unmanaged<DaemonLink>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue().readable()
                }
            }, data)
            drain()
            return true
        } catch {
            client?.close()
            client = nil
            state.lost(Self.reachability(error, path: path))
            changed()
            return false
        }
    }

    static func reachability(_ e: ControlClientError, path: String) -> Reachability {
        switch e.kind {
        case .unreachable where e.errno?.rawValue == ENOENT || e.errno?.rawValue == ECONNREFUSED: .notRunning(path: path)
        case .closed: .notRunning(path: path)
        default: .refused(message: e.message)
        }
    }

    /// The descriptor is readable: events, or the daemon went away.
    private func readable() -> gboolean {
        if drain() { return 1 }
        watch = 0
        return 0
    }

    /// Takes in every message already received; false when the connection is gone.
    @discardableResult
    private func drain() -> Bool {
        guard let c = client else { return false }
        var stale = SettingsState.Stale()
        do throws(ControlClientError) {
            while let m = try c.receive(timeoutMs: 0) {
                if case .event(let e) = m { stale.formUnion(state.apply(e)) }
            }
            if !stale.isEmpty { try reload(stale, status: stale.contains(.streams)) }
            changed()
            return true
        } catch {
            drop(error)
            return false
        }
    }

    private func reload(_ stale: SettingsState.Stale, status: Bool) throws(ControlClientError) {
        guard let c = client else { return }
        if status, case .status(let s) = try c.request(.status, timeoutMs: 5000) { state.load(status: s) }
        if stale.contains(.apps), case .apps(let a) = try c.request(.apps, timeoutMs: 5000) { state.apps = a }
        if stale.contains(.usage), case .usage(let u) = try c.request(.log(app: nil, since: nil, limit: 200), timeoutMs: 5000) {
            state.usage = u
        }
    }

    private func drop(_ error: ControlClientError) {
        if watch != 0 { g_source_remove(watch) }
        watch = 0
        client?.close()
        client = nil
        state.lost(Self.reachability(error, path: path))
        changed()
        retry()
    }

    /// Carries out a click; a refusal is shown, a lost connection starts reconnecting.
    func perform(_ intent: SettingsIntent) {
        guard let c = client else { return }
        do throws(ControlClientError) {
            if case .answer = intent {
                let agent = try ControlClient(path: path, timeoutMs: 3000)
                defer { agent.close() }
                _ = try agent.request(.becomeAgent, timeoutMs: 5000)
                _ = try agent.request(intent.request, timeoutMs: 5000)
            } else {
                _ = try c.request(intent.request, timeoutMs: 5000)
            }
            state.lastError = nil
            drain()
        } catch where error.kind == .daemon {
            state.lastError = error.message
            drain()
        } catch {
            drop(error)
        }
    }
}
