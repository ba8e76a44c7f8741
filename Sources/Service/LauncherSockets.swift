// Launcher sockets: `earmuff run --app-id ID` gets a socket of its own whose
// clients are identified as `launcher:ID`.
//
// A launcher identity is strong only if the socket cannot be borrowed, so:
//   - only the `earmuff` executable itself (the daemon's own binary, checked
//     through /proc/PID/exe of the control peer) may register one, not any
//     program that speaks the control protocol;
//   - each run gets its own socket (`ID@PID`), owned by the registering
//     process, which then execs the command (same pid, same start time);
//   - a client is identified as the launcher only when it is the owner or
//     descends from it (pid and start time, so a recycled pid does not pass);
//     anyone else who connects is identified by what it is;
//   - the socket is removed the moment its owner exits (a pidfd watched on
//     an event loop of its own, "launchers"), so it does not outlive the command.
import Consent
import Glibc
import LinuxSystem
import Runtime

final class LauncherSockets: Sendable {
    private struct Run {
        let appID: String
        let owner: ProcessStamp
        let path: String
        let exit: OwnerExit
    }

    private let owners = Locked([String: Run]()) // by socket path
    private let directory: String
    /// Watches the owners' pidfds.
    private let loop: EventLoop

    init(directory: String) throws(SystemError) {
        self.directory = directory
        loop = try EventLoop(name: "launchers")
        loop.start()
    }

    deinit { loop.stopAndJoin() }

    enum RegistrationError: Error, CustomStringConvertible {
        case notEarmuff(pid: Int32, exe: String?)
        case gone(pid: Int32)
        case socket(String)

        var description: String {
            switch self {
            case let .notEarmuff(pid, exe):
                "only 'earmuff run' may ask for a launcher socket (pid \(pid) is \(exe ?? "unknown"))"
            case let .gone(pid):
                "the process that asked (pid \(pid)) is gone"
            case let .socket(text):
                text
            }
        }
    }

    /// Opens a launcher socket for `appID` owned by control peer `pid`; `open` makes the
    /// listening socket at the path, `close` removes it. Returns the socket path.
    func register(
        appID: String, peerPID pid: Int32,
        open: (String) throws -> Void, close: @escaping @Sendable (String) -> Void
    ) throws(RegistrationError) -> String {
        let mine = ProcessInspector.ownExecutable
        let theirs = readSymbolicLink("/proc/\(pid)/exe").map(IdentityClassifier.cleanExecutablePath)
        guard let mine, theirs == mine else { throw .notEarmuff(pid: pid, exe: theirs) }
        let pidfd: FileDescriptor
        do throws(Errno) {
            pidfd = try FileDescriptor.process(pid)
        } catch {
            throw .gone(pid: pid)
        }
        // Stamped after the pidfd exists, so the pidfd refers to the stamped process.
        guard let owner = Lineage.stamp(of: pid) else { throw .gone(pid: pid) }
        let path = "\(directory)/\(appID)@\(pid)"
        do {
            try open(path)
        } catch {
            throw .socket("cannot open a launcher socket at \(path): \(error)")
        }
        let exit = OwnerExit(pidfd: pidfd, loop: loop) { [weak self] in
            self?.ownerExited(path: path)
            close(path)
        }
        owners.withLock { $0[path] = Run(appID: appID, owner: owner, path: path, exit: exit) }
        loop.post { exit.watch() }
        Log.info("launcher socket \(path) for launcher:\(appID), owned by \(owner)")
        return path
    }

    /// True when a client `pid` that connected through a socket of `appID` belongs to one
    /// of that app id's live runs.
    func admits(_ pid: Int32, appID: String) -> Bool {
        let runs = owners.withLock { $0.values.filter { $0.appID == appID }.map(\.owner) }
        return runs.contains { Lineage.descends(pid, from: $0) }
    }

    /// Forgets every run (the daemon stops; the sockets are closed with the listeners).
    func removeAll() {
        let runs = owners.withLock { o -> [Run] in
            defer { o.removeAll() }
            return Array(o.values)
        }
        loop.post { for r in runs { r.exit.cancel() } }
    }

    private func ownerExited(path: String) {
        guard let run = owners.withLock({ $0.removeValue(forKey: path) }) else { return }
        Log.info("launcher socket \(path) removed: its owner \(run.owner) exited")
    }
}

/// A run's owner's pidfd on the launchers' loop: readable once the owner exits.
private final class OwnerExit: LoopHandler, @unchecked Sendable {
    // @unchecked Sendable: `token` and `pidfd` change only on `loop` (checked); other threads
    // only post `watch` and `cancel` to it.
    private let loop: EventLoop
    private var pidfd: FileDescriptor
    private var token: UInt64 = 0
    private let exited: @Sendable () -> Void

    init(pidfd: consuming FileDescriptor, loop: EventLoop, exited: @escaping @Sendable () -> Void) {
        self.pidfd = pidfd
        self.loop = loop
        self.exited = exited
    }

    func watch() {
        loop.assertInLoop()
        guard pidfd.isOpen else { return }
        do {
            token = try loop.register(pidfd.rawValue, events: PollEvents.input, handler: self)
        } catch {
            Log.error("launcher sockets: cannot watch an owner's exit (\(error)); its socket stays until Earmuff stops")
        }
    }

    func handleEvents(_ events: UInt32) {
        cancel()
        exited()
    }

    /// Stops watching and closes the pidfd.
    func cancel() {
        loop.assertInLoop()
        if token != 0 { loop.remove(pidfd.rawValue, token: token) }
        token = 0
        pidfd.close()
    }
}
