// The daemon: listening sockets, the two I/O loops, and the session table.
//
// Threads:
//   client loop   — accepts apps, owns every client socket (ClientHalf)
//   upstream loop — owns every server socket (UpstreamHalf)
// Each session has two ByteRings, one per direction, between them; see
// docs/ARCHITECTURE.md. Consent decisions reach the audio path only through
// each RecordStream's atomic access flag.
import CLinux
import Consent
import Glibc
import PulseWire
import Ring
import Synchronization

/// Tunables of the relay.
public struct RelayOptions: Sendable {
    /// Bytes of each ring (rounded to a power of two).
    public var ringCapacity = 128 * 1024
    public init() {}
}

/// One row of the session table, for status.
struct SessionEntry {
    let state: SessionState
    weak var upstream: UpstreamHalf?
}

/// A listening socket and the launcher app id its clients get (nil for the main socket).
final class Listener: LoopHandler, @unchecked Sendable {
    // @unchecked Sendable: created on any thread, then touched only on the client loop.
    let fd: Int32
    let path: String
    let launcherAppID: String?
    let launcherPurpose: String?
    unowned let daemon: Daemon
    var token: UInt64 = 0
    /// Whether stopping removes the socket file: not for a socket the service
    /// manager passed, which must keep its inode across restarts.
    var removeOnStop = true

    init(fd: Int32, path: String, launcherAppID: String?, launcherPurpose: String?, daemon: Daemon) {
        self.fd = fd
        self.path = path
        self.launcherAppID = launcherAppID
        self.launcherPurpose = launcherPurpose
        self.daemon = daemon
    }

    func handleEvents(_ events: UInt32) {
        while true {
            let c = earmuff_accept(fd)
            if c < 0 {
                let e = errno
                if e != EAGAIN && e != EWOULDBLOCK {
                    Log.warn("accept on \(path): \(String(cString: strerror(e)))")
                }
                return
            }
            daemon.accept(c, via: self)
        }
    }
}

/// The relay daemon.
public final class Daemon: @unchecked Sendable {
    // @unchecked Sendable: `listeners` is touched only on the client loop (and
    // in start/stop before/after the loops run); the session table and ids are
    // behind a lock or atomic.
    public let upstream: UpstreamAddress
    public let listenPath: String
    /// The listening socket passed by the service manager (socket activation),
    /// used instead of binding `listenPath`.
    let activatedListener: Int32?
    let options: RelayOptions
    let observer: SessionObserver
    let clientLoop: EventLoop
    let upstreamLoop: EventLoop
    private var listeners: [String: Listener] = [:]
    private let sessions = Locked<[UInt64: SessionEntry]>([:])
    private let nextSessionID = Atomic<UInt64>(1)
    private let nextStreamID = Atomic<UInt64>(1)
    let identify: @Sendable (Int32, UInt32, UInt32, String?) -> ClientIdentity
    public let startedAt = wallClockNow()

    init(listenPath: String, activatedListener: Int32? = nil, upstream: UpstreamAddress, options: RelayOptions,
         observer: SessionObserver,
         identify: @escaping @Sendable (Int32, UInt32, UInt32, String?) -> ClientIdentity) throws(SystemError) {
        self.listenPath = listenPath
        self.activatedListener = activatedListener
        self.upstream = upstream
        self.options = options
        self.observer = observer
        self.identify = identify
        clientLoop = try EventLoop(name: "client-loop")
        upstreamLoop = try EventLoop(name: "upstream-loop")
    }

    /// Opens the main listening socket (or takes the passed one) and starts both loops.
    func start() throws(SystemError) {
        _ = earmuff_raise_nofile()
        signal(SIGPIPE, SIG_IGN)
        let l: Listener
        if let fd = activatedListener {
            l = Listener(fd: fd, path: listenPath, launcherAppID: nil, launcherPurpose: nil, daemon: self)
            l.removeOnStop = false
        } else {
            try makeParentDirectory(of: listenPath, mode: 0o700)
            l = try openListener(path: listenPath, launcherAppID: nil, launcherPurpose: nil)
        }
        l.token = try clientLoop.register(l.fd, events: EARMUFF_EPOLLIN, handler: l)
        listeners[listenPath] = l
        clientLoop.start()
        upstreamLoop.start()
    }

    private func openListener(path: String, launcherAppID: String?, launcherPurpose: String?) throws(SystemError) -> Listener {
        let fd = earmuff_unix_socket()
        guard fd >= 0 else { throw SystemError("socket") }
        guard earmuff_unix_listen(fd, path, 128) == 0 else {
            let e = SystemError("listen on \(path)")
            closeFD(fd)
            throw e
        }
        // Apps of the same user connect; the directory (0700) keeps others out.
        chmod(path, 0o600)
        return Listener(fd: fd, path: path, launcherAppID: launcherAppID, launcherPurpose: launcherPurpose, daemon: self)
    }

    /// Opens an extra listening socket whose clients are tagged with `appID`
    /// (`earmuff run --app-id`). Safe from any thread; returns once it listens.
    func addLauncherSocket(path: String, appID: String, purpose: String?) throws(SystemError) {
        try makeParentDirectory(of: path, mode: 0o700)
        let l = try openListener(path: path, launcherAppID: appID, launcherPurpose: purpose)
        clientLoop.post { [self] in
            if let old = listeners[path] {
                clientLoop.remove(old.fd, token: old.token)
                closeFD(old.fd)
            }
            do {
                l.token = try clientLoop.register(l.fd, events: EARMUFF_EPOLLIN, handler: l)
                listeners[path] = l
            } catch {
                Log.error("cannot watch launcher socket \(path): \(error)")
                closeFD(l.fd)
            }
        }
    }

    /// Stops accepting, closes every session and joins the loops.
    func stop() {
        clientLoop.post { [self] in
            for l in listeners.values {
                clientLoop.remove(l.fd, token: l.token)
                closeFD(l.fd)
                if l.removeOnStop { unlink(l.path) }
            }
            listeners.removeAll()
        }
        let all = sessions.withLock { Array($0.values) }
        for e in all { e.upstream?.notify(.terminate) }
        clientLoop.stopAndJoin()
        upstreamLoop.stopAndJoin()
    }

    /// Asks a session to close (e.g. a consent decision). Safe from any thread.
    func disconnect(sessionID: UInt64, reason: String) {
        guard let e = sessions.withLock({ $0[sessionID] }) else { return }
        e.state.noteCloseReason(reason)
        e.upstream?.notify(.terminate)
    }

    // MARK: client loop

    fileprivate func accept(_ fd: Int32, via listener: Listener) {
        var cred = earmuff_ucred()
        guard earmuff_peercred(fd, &cred) == 0 else {
            Log.warn("rejected a client on \(listener.path): no peer credentials")
            closeFD(fd)
            return
        }
        let id = nextSessionID.add(1, ordering: .relaxed).oldValue
        let identity = identify(cred.pid, cred.uid, cred.gid, listener.launcherAppID)
        let state = SessionState(id: id, identity: identity, launcherAppID: listener.launcherAppID,
                                 connectedAt: wallClockNow())
        if let p = listener.launcherPurpose {
            state.properties.withLock { $0.launcherPurpose = p }
        }
        let up = ByteRing(capacity: options.ringCapacity)
        let down = ByteRing(capacity: options.ringCapacity)
        let client = ClientHalf(loop: clientLoop, state: state, produceInto: up, consumeFrom: down)
        let server = UpstreamHalf(loop: upstreamLoop, state: state, produceInto: down, consumeFrom: up)
        client.peer = server
        server.peer = client
        let observer = self.observer
        client.filter = ClientToServerFilter(state: state, observer: observer) { [weak server] tag, code in
            state.queueInjection(ErrorReply(code: code).packet(tag: tag, version: state.protocolVersion))
            server?.notify(.inject)
        }
        server.filter = ServerToClientFilter(state: state, observer: observer) { [self] in
            nextStreamID.add(1, ordering: .relaxed).oldValue
        }
        client.fd = fd
        do {
            client.token = try clientLoop.register(fd, events: Half.socketEvents, handler: client)
        } catch {
            Log.error("cannot watch client socket: \(error)")
            closeFD(fd)
            return
        }
        sessions.withLock { $0[id] = SessionEntry(state: state, upstream: server) }
        observer.sessionOpened(state)
        client.onClose = { [self] in
            sessions.withLock { _ = $0.removeValue(forKey: id) }
            observer.sessionClosed(state)
            let reason = state.reasonClosed ?? "closed"
            Log.info("session \(id) (\(identity.appKey), pid \(identity.pid)) ended: \(reason)")
        }
        Log.info("session \(id): \(identity.appKey) pid \(identity.pid) uid \(identity.uid) identified by \(identity.method.rawValue)")
        let path = upstream.path
        upstreamLoop.post { server.connect(path: path) }
    }
}
