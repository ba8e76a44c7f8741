// The control thread that the settings window and the status indicator share: it holds
// one subscribed control connection, reads its events as they come (it polls the socket
// and an eventfd that a click signals), sends each click's request on that connection, and
// reconnects every half second while the daemon is away (every 5 s while something else
// answers at the path). After each change it hands a copy of the state to its owner's
// loop, which only shows it; nothing on that loop waits for the daemon.
// Prompts are answered on a short connection of their own that becomes an agent only
// for that answer, so an open window never takes prompts away from the prompt command.
import ControlProtocol
import EarmuffClient
import Foundation
import Glibc
import LinuxSystem
import SettingsModel

/// The control thread: clicks are posted to it from the owner's loop; everything else it
/// has is its own.
public final class ControlThread: @unchecked Sendable {
    // @unchecked Sendable: `wake` is only signalled (an atomic write in the kernel) by other
    // threads; `intents` is under its lock; `Conversation` lives on the thread alone.
    private let wake: FileDescriptor
    private let intents = Locked<[SettingsIntent]>([])

    /// `publish` gets each new state, on the control thread. Without `usage` the usage log is
    /// never fetched (the indicator shows none of it).
    public init(path: String, usage: Bool = true, publish: @escaping @Sendable (SettingsState) -> Void) throws(Errno) {
        wake = try FileDescriptor.eventfd()
        let thread = Thread { [self] in
            ThisProcess.nameCurrentThread("control")
            Conversation(path: path, unwanted: usage ? [] : .usage, publish: publish).run(self)
        }
        thread.start()
    }

    /// `--control PATH`, else `$XDG_RUNTIME_DIR/earmuff/control` (as the earmuff command finds it).
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/run/user/\(getuid())"
        return "\(runtime)/earmuff/control"
    }

    /// From any thread: the request is sent after those posted before it.
    public func post(_ intent: SettingsIntent) {
        intents.withLock { $0.append(intent) }
        wake.signalEvent()
    }

    fileprivate var wakeFD: Int32 { wake.rawValue }

    fileprivate func take() -> [SettingsIntent] {
        wake.drainEvents()
        return intents.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
    }
}

/// What the control thread does: connect, read events, send requests, reconnect.
private final class Conversation {
    let path: String
    let publish: @Sendable (SettingsState) -> Void
    /// What is never fetched.
    let unwanted: SettingsState.Stale
    var state = SettingsState()
    var published: SettingsState?
    var client: ControlClient?
    /// When to try connecting again (monotonic seconds) while not connected.
    var retryAt = 0.0

    init(path: String, unwanted: SettingsState.Stale, publish: @escaping @Sendable (SettingsState) -> Void) {
        self.path = path
        self.unwanted = unwanted
        self.publish = publish
    }

    func run(_ thread: ControlThread) {
        while true {
            if client == nil, Self.now() >= retryAt, !connect() {
                retryAt = Self.now() + (state.reachability.isRefused ? 5 : 0.5)
            }
            for intent in thread.take() { perform(intent) }
            if client != nil { drain() }
            if state != published {
                published = state
                publish(state)
            }
            var fds = [pollfd(fd: thread.wakeFD, events: Int16(POLLIN), revents: 0)]
            if let c = client { fds.append(pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)) }
            let wait = client == nil ? Int32(max(0, (retryAt - Self.now()) * 1000).rounded(.up)) : -1
            _ = unsafe poll(&fds, nfds_t(fds.count), wait)
        }
    }

    static func now() -> Double {
        var t = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    func connect() -> Bool {
        do throws(ControlClientError) {
            let c = try ControlClient(path: path, timeoutMs: 1000)
            client = c
            _ = try c.request(.subscribe, timeoutMs: 5000)
            try reload([.apps, .usage], status: true)
            return true
        } catch {
            drop(error)
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

    /// Takes in every message already received, and fetches what they left stale. Events that
    /// come while a fetch waits for its reply are queued in the client, not in the socket (a
    /// poll would not see them), so they are taken in before it returns.
    func drain() {
        guard let c = client else { return }
        do throws(ControlClientError) {
            repeat {
                var stale = SettingsState.Stale()
                while let m = try c.receive(timeoutMs: 0) {
                    if case .event(let e) = m { stale.formUnion(state.apply(e)) }
                }
                if !stale.isEmpty { try reload(stale, status: stale.contains(.streams)) }
            } while c.hasQueuedMessages
        } catch {
            drop(error)
        }
    }

    func reload(_ stale: SettingsState.Stale, status: Bool) throws(ControlClientError) {
        guard let c = client else { return }
        let stale = stale.subtracting(unwanted)
        if status, case .status(let s) = try c.request(.status, timeoutMs: 5000) { state.load(status: s) }
        if stale.contains(.apps), case .apps(let a) = try c.request(.apps, timeoutMs: 5000) { state.apps = a }
        if stale.contains(.usage), case .usage(let u) = try c.request(.log(app: nil, since: nil, limit: 200), timeoutMs: 5000) {
            state.usage = u
        }
    }

    func drop(_ error: ControlClientError) {
        client?.close()
        client = nil
        state.lost(Self.reachability(error, path: path))
    }

    /// Carries out a click; a refusal is shown, a lost connection starts reconnecting. A
    /// daemon that is slow to answer holds up only this thread (for up to 30 s).
    func perform(_ intent: SettingsIntent) {
        guard let c = client else { return }
        do throws(ControlClientError) {
            if case .answer = intent {
                let agent = try ControlClient(path: path, timeoutMs: 3000)
                defer { agent.close() }
                _ = try agent.request(.becomeAgent, timeoutMs: 30000)
                _ = try agent.request(intent.request, timeoutMs: 30000)
            } else {
                _ = try c.request(intent.request, timeoutMs: 30000)
            }
            state.lastError = nil
        } catch  where error.kind == .daemon {
            state.lastError = error.message
        } catch {
            drop(error)
        }
    }
}

extension Reachability {
    var isRefused: Bool {
        if case .refused = self { true } else { false }
    }
}
