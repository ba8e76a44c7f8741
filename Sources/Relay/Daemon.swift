// The daemon: listening sockets, the I/O loops, and the session table.
//
// Threads: N event loops (`RelayOptions.loops`, default one per core). The
// first also owns the listening sockets. Each accepted session is pinned to
// one loop, round robin: its client socket and its upstream socket live on
// that loop, so a request, a reply or a chunk of audio never changes threads.
// Each session has two ByteRings, one per direction, between its halves; see
// docs/ARCHITECTURE.md. Consent decisions reach the audio path only through
// each RecordStream's atomic access flag.
import Basics
import Glibc
import LinuxSystem
import PulseWire
import Ring
import Runtime
import StreamState
import Synchronization

/// Tunables of the relay.
public struct RelayOptions: Sendable {
    /// Bytes of each ring (rounded to a power of two).
    public var ringCapacity = 128 * 1024
    /// Number of event loops (threads) sessions are spread over.
    public var loops = RelayOptions.onlineCPUs
    /// Seconds a loop lets record audio gather after a wake-up that moved only a
    /// little of it, so several streams share one wake-up (0: every memblock wakes it).
    public var coalesceWindow = RelayOptions.defaultCoalesceWindow
    /// 2 ms: a tenth of a typical 20 ms fragment, a fifth of the wake-ups at 200 streams.
    public static let defaultCoalesceWindow = 0.002
    /// The most `coalesceWindow` may be (it adds that much to record latency).
    public static let maximumCoalesceWindow = 0.010
    /// Clients relayed at once, and per app (the configuration's max-clients, max-clients-per-app).
    public var maxClients = RelayDefaults.maxClients
    public var maxClientsPerApp = RelayDefaults.maxClientsPerApp
    /// Slots of `maxClients` kept for apps with fewer than `RelayOptions.smallAppClients`
    /// clients (the configuration's reserved-clients).
    public var reservedClients = RelayDefaults.reservedClients
    /// An app with this many clients connected is a large one: it does not get reserved slots.
    public static let smallAppClients = 4
    /// Seconds a client has to send AUTH and SET_CLIENT_NAME (the configuration's handshake-timeout).
    public var handshakeTimeout = RelayDefaults.handshakeTimeout
    /// The largest packet a client may send (bytes), and what clients' large packets may
    /// hold together (the configuration's max-packet-kib, packet-buffer-mib).
    public var maxClientPacket = RelayDefaults.maxPacketKiB * 1024
    public var clientPacketBudget = RelayDefaults.packetBufferMiB * 1024 * 1024
    public init() {}

    /// Processors online now (at least 1).
    public static var onlineCPUs: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
}

/// One row of the session table, for status.
struct SessionEntry {
    let conversation: Conversation
    var state: SessionState { conversation.state }
    weak var upstream: Half?
}

/// A refused client's socket, kept open until the client has sent its first request (or
/// closed): closed at once, libpulse's AUTH would fail with EPIPE before it read the
/// refusal. At most `maximumLingering` wait; the oldest is closed first.
final class RefusedConnection: LoopHandler {
    static let maximumLingering = 64
    var socket: FileDescriptor
    var token: UInt64 = 0
    unowned let daemon: Daemon

    init(socket: consuming FileDescriptor, daemon: Daemon) {
        self.socket = socket
        self.daemon = daemon
    }

    func handleEvents(_ events: UInt32) { daemon.finishRefusal(self) }
}

/// A listening socket and the launcher app id its clients get (nil for the main socket).
final class Listener: LoopHandler, @unchecked Sendable {
    // @unchecked Sendable: created on any thread, then touched only on the accept loop.
    var socket: FileDescriptor
    let path: String
    let launcherAppID: String?
    let launcherPurpose: String?
    unowned let daemon: Daemon
    var token: UInt64 = 0
    /// Whether stopping removes the socket file: not for a socket the service
    /// manager passed, which must keep its inode across restarts.
    var removeOnStop = true

    init(socket: consuming FileDescriptor, path: String, launcherAppID: String?, launcherPurpose: String?, daemon: Daemon) {
        self.socket = socket
        self.path = path
        self.launcherAppID = launcherAppID
        self.launcherPurpose = launcherPurpose
        self.daemon = daemon
    }

    func handleEvents(_ events: UInt32) {
        while true {
            do throws(Errno) {
                daemon.accept(try socket.accept(), via: self)
            } catch {
                if error != .wouldBlock { Log.warn("accept on \(path): \(error)") }
                return
            }
        }
    }
}

/// The relay daemon.
public final class Daemon: @unchecked Sendable {
    // @unchecked Sendable: `listeners` and `nextLoop` are touched only on the accept loop (and
    // in start/stop before/after the loops run); the session table and ids are
    // behind a lock or atomic.
    public let upstream: UpstreamAddress
    public let listenPath: String
    /// The listening socket passed by the service manager (socket activation),
    /// used instead of binding `listenPath`.
    public let activatedListener: Int32?
    let options: RelayOptions
    let observer: SessionObserver
    /// The loops sessions run on; the first also accepts.
    let loops: [EventLoop]
    /// Each loop's audio tuning (how it waits, the buffers its sessions share).
    let tunings: [AudioTuning]
    /// Each loop's sessions that have not finished their handshake (touched on that loop only).
    private let handshakes: [HandshakeDeadlines]
    /// The loop that owns the listening sockets.
    var acceptLoop: EventLoop { loops[0] }
    /// Round-robin position for the next session (accept loop only).
    private var nextLoop = 0
    private var listeners: [String: Listener] = [:]
    /// Refused clients waiting to be closed (accept loop only).
    private var refused: [RefusedConnection] = []
    private let sessions = Locked<[UInt64: SessionEntry]>([:])
    private let nextSessionID = Atomic<UInt64>(1)
    private let nextStreamID = Atomic<UInt64>(1)
    let identify: @Sendable (Int32, UInt32, UInt32, String?) -> ClientIdentity
    /// What the packets being received from all clients may hold together.
    let packetBudget: PacketBudget
    public let startedAt = wallClockNow()

    public init(
        listenPath: String, activatedListener: Int32? = nil, upstream: UpstreamAddress, options: RelayOptions,
        observer: SessionObserver,
        identify: @escaping @Sendable (Int32, UInt32, UInt32, String?) -> ClientIdentity
    ) throws(SystemError) {
        self.listenPath = listenPath
        self.activatedListener = activatedListener
        self.upstream = upstream
        self.options = options
        self.observer = observer
        self.identify = identify
        packetBudget = PacketBudget(limit: options.clientPacketBudget)
        var loops: [EventLoop] = []
        var tunings: [AudioTuning] = []
        for i in 0..<max(1, options.loops) {
            let tuning = try AudioTuning(name: "loop-\(i)", coalesceWindow: options.coalesceWindow)
            loops.append(try EventLoop(name: tuning.name, waiting: tuning))
            tunings.append(tuning)
        }
        self.loops = loops
        self.tunings = tunings
        handshakes = loops.map(HandshakeDeadlines.init)
    }

    /// Opens the main listening socket (or takes the passed one) and starts the loops.
    public func start() throws(SystemError) {
        ProcessLimits.raiseOpenFiles()
        signal(SIGPIPE, SIG_IGN)
        let l: Listener
        if let fd = activatedListener {
            l = Listener(socket: FileDescriptor(taking: fd), path: listenPath, launcherAppID: nil, launcherPurpose: nil, daemon: self)
            l.removeOnStop = false
        } else {
            try makeParentDirectory(of: listenPath)
            l = try openListener(path: listenPath, launcherAppID: nil, launcherPurpose: nil)
        }
        l.token = try acceptLoop.register(l.socket.rawValue, events: PollEvents.input, handler: l)
        listeners[listenPath] = l
        for loop in loops { loop.start() }
    }

    private func openListener(path: String, launcherAppID: String?, launcherPurpose: String?) throws(SystemError) -> Listener {
        let socket: FileDescriptor
        do throws(Errno) {
            socket = try .unixSocket()
        } catch {
            throw SystemError("socket", error)
        }
        do throws(Errno) {
            try socket.listen(at: path, backlog: 128)
        } catch {
            throw SystemError("listen on \(path)", error)
        }
        // Apps of the same user connect; the directory (0700) keeps others out.
        unsafe chmod(path, 0o600)
        return Listener(socket: socket, path: path, launcherAppID: launcherAppID, launcherPurpose: launcherPurpose, daemon: self)
    }

    /// Opens an extra listening socket whose clients are tagged with `appID`
    /// (`earmuff run --app-id`). Safe from any thread; returns once it listens.
    public func addLauncherSocket(path: String, appID: String, purpose: String?) throws(SystemError) {
        try makeParentDirectory(of: path)
        let l = try openListener(path: path, launcherAppID: appID, launcherPurpose: purpose)
        acceptLoop.post { [self] in
            if let old = listeners[path] {
                acceptLoop.remove(old.socket.rawValue, token: old.token)
                old.socket.close()
            }
            do {
                l.token = try acceptLoop.register(l.socket.rawValue, events: PollEvents.input, handler: l)
                listeners[path] = l
            } catch {
                Log.error("cannot watch launcher socket \(path): \(error)")
                l.socket.close()
            }
        }
    }

    /// Stops accepting on a launcher socket and removes it. Safe from any thread.
    public func removeLauncherSocket(path: String) {
        acceptLoop.post { [self] in
            guard let l = listeners.removeValue(forKey: path) else { return }
            acceptLoop.remove(l.socket.rawValue, token: l.token)
            l.socket.close()
            unsafe unlink(path)
        }
    }

    /// The loops' kernel thread ids, once each loop runs (waits for that
    /// after `start`, a few milliseconds at most).
    public func loopThreadIDs() -> [pid_t] {
        loops.map { loop in
            while loop.kernelThreadID.load(ordering: .acquiring) == 0 { sched_yield() }
            return loop.kernelThreadID.load(ordering: .acquiring)
        }
    }

    /// Stops accepting, closes every session and joins the loops.
    public func stop() {
        acceptLoop.post { [self] in
            for l in listeners.values {
                acceptLoop.remove(l.socket.rawValue, token: l.token)
                l.socket.close()
                if l.removeOnStop { unsafe unlink(l.path) }
            }
            listeners.removeAll()
        }
        let all = sessions.withLock { Array($0.values) }
        for e in all { e.upstream?.notify(.terminate) }
        for loop in loops { loop.stopAndJoin() }
    }

    /// Asks a session to close (e.g. a consent decision). Safe from any thread.
    public func disconnect(sessionID: UInt64, reason: String) {
        guard let e = sessions.withLock({ $0[sessionID] }) else { return }
        e.state.noteCloseReason(reason)
        e.upstream?.notify(.terminate)
    }

    /// Queues a packet Earmuff sends a client itself (a permission reply or event), inserted
    /// into the server→client stream at the next frame boundary. Safe from any thread.
    public func inject(sessionID: UInt64, packet: [UInt8]) {
        guard let e = sessions.withLock({ $0[sessionID] }) else { return }
        e.state.queueInjection(packet)
        e.upstream?.notify(.inject)
    }

    // MARK: accept loop

    /// The limit a new client of `app` would go over, or nil. Every client counts, with or
    /// without its handshake: each holds one of the server's slots. The last `reservedClients`
    /// slots go only to apps with fewer than `smallAppClients` clients, so apps holding many
    /// (idle) connections cannot lock out one that starts now. When every slot is taken, a
    /// client of such a small app takes the place of the client that holds nothing and has
    /// been silent the longest, at least `handshakeTimeout` (`makeRoom`): idle connections
    /// under any number of made-up names cannot lock it out either.
    private func limitReached(for app: AppKey, pid: Int32) -> String? {
        let (total, ofApp) = sessions.withLock { s in (s.count, s.values.count { $0.state.identity.appKey == app }) }
        if total >= options.maxClients {
            if ofApp < RelayOptions.smallAppClients && makeRoom(for: app, pid: pid) { return nil }
            return "max-clients (\(options.maxClients)) clients are connected"
        }
        if ofApp >= options.maxClientsPerApp { return "max-clients-per-app (\(options.maxClientsPerApp)) clients of this app are connected" }
        if ofApp >= RelayOptions.smallAppClients && options.maxClients - total <= options.reservedClients {
            return "it has \(ofApp) clients connected and the last \(options.reservedClients) of max-clients "
                + "(\(options.maxClients)) are kept for apps with fewer than \(RelayOptions.smallAppClients) (reserved-clients)"
        }
        return nil
    }

    /// Closes the client that finished its handshake, holds nothing (`holdsNothing`) and has sent
    /// nothing for the longest, at least `handshakeTimeout`, to make room for a client of `app`;
    /// false when there is none.
    private func makeRoom(for app: AppKey, pid: Int32) -> Bool {
        let now = Conversation.monotonicMilliseconds()
        let idleEnough = UInt64(options.handshakeTimeout * 1000)
        let idlest = sessions.withLock { s in
            s.values.map(\.conversation).filter {
                $0.handshakeDone.load(ordering: .relaxed) && $0.state.reasonClosed == nil && $0.holdsNothing
                    && now &- $0.lastPacketAt.load(ordering: .relaxed) >= idleEnough
            }.min { ($0.lastPacketAt.load(ordering: .relaxed), $0.state.id) < ($1.lastPacketAt.load(ordering: .relaxed), $1.state.id) }
        }
        guard let conversation = idlest else { return false }
        let victim = conversation.state
        let silent = (now &- conversation.lastPacketAt.load(ordering: .relaxed)) / 100
        refusalLog.record(
            .warn,
            "closed session \(victim.id) (\(victim.identity.appKey)), which holds no stream and was silent "
                + "for \(silent / 10).\(silent % 10) s, to make room for \(app) pid \(pid): max-clients "
                + "(\(options.maxClients)) clients are connected")
        disconnect(
            sessionID: victim.id,
            reason: "it held no stream and was silent the longest when every client slot was "
                + "taken: room was made for a new client")
        return true
    }

    /// Refusals, and handshake timeouts: lines any client can cause, so rate-limited (each kind apart).
    private let refusalLog = RateLimitedLog()
    private let handshakeLog = RateLimitedLog()

    /// Answers the AUTH that libpulse sends first (tag 0) with "Connection refused", and
    /// closes once the client has sent something or hung up (see RefusedConnection).
    private func refuseConnection(_ socket: consuming FileDescriptor) {
        let payload = ErrorReply(code: .connectionRefused).packet(tag: 0, version: Limits.protocolVersion)
        let frame = FrameDescriptor(length: UInt32(payload.count), channel: FrameDescriptor.controlChannel).bytes + payload
        _ = unsafe frame.withUnsafeBytes { try? unsafe socket.write($0) }
        socket.shutdownWriting()
        let r = RefusedConnection(socket: socket, daemon: self)
        do {
            r.token = try acceptLoop.register(r.socket.rawValue, events: PollEvents.input | PollEvents.peerHangUp, handler: r)
        } catch {
            return // `r`, and with it the socket, goes away here
        }
        refused.append(r)
        if refused.count > RefusedConnection.maximumLingering { finishRefusal(refused[0]) }
    }

    /// Closes a refused client's socket (on the accept loop).
    fileprivate func finishRefusal(_ r: RefusedConnection) {
        guard let i = refused.firstIndex(where: { $0 === r }) else { return }
        refused.remove(at: i)
        acceptLoop.remove(r.socket.rawValue, token: r.token)
        r.socket.close()
    }

    fileprivate func accept(_ socket: consuming FileDescriptor, via listener: Listener) {
        let cred: PeerCredentials
        do throws(Errno) {
            cred = try socket.peerCredentials()
        } catch {
            Log.warn("rejected a client on \(listener.path): no peer credentials (\(error))")
            return
        }
        // Every read then says which process sent the bytes (the identity is the one that connected).
        try? socket.passCredentials()
        // The real server trusts Earmuff's uid: a peer of another uid would borrow it.
        guard cred.uid == geteuid() || cred.uid == 0 else {
            Log.warn("refused pid \(cred.pid) uid \(cred.uid) on \(listener.path): only uid \(geteuid()) or root may connect")
            return
        }
        let identity = identify(cred.pid, cred.uid, cred.gid, listener.launcherAppID)
        if let limit = limitReached(for: identity.appKey, pid: cred.pid) {
            refusalLog.record(.warn, "refused \(identity.appKey) pid \(cred.pid): \(limit); raise it in earmuff.conf if this app needs more")
            refuseConnection(socket)
            return
        }
        let id = nextSessionID.add(1, ordering: .relaxed).oldValue
        let state = SessionState(
            id: id, identity: identity, launcherAppID: listener.launcherAppID,
            connectedAt: wallClockNow())
        if let p = listener.launcherPurpose {
            state.properties.withLock { $0.launcherPurpose = p }
        }
        let up = ByteRing(capacity: options.ringCapacity)
        let down = ByteRing(capacity: options.ringCapacity)
        let loop = loops[nextLoop]
        let audio = tunings[nextLoop]
        let handshakes = self.handshakes[nextLoop]
        nextLoop = (nextLoop + 1) % loops.count
        let observer = self.observer
        let conversation = Conversation(state)
        let records = RecordChannels(
            conversation: conversation, observer: observer,
            newStreamID: { [self] in
                nextStreamID.add(1, ordering: .relaxed).oldValue
            }, post: { loop.post($0) })
        let replies = ServerToClientFilter(conversation: conversation, observer: observer, channels: records)
        let server = Half(.server(replies), loop: loop, audio: audio, conversation: conversation, produceInto: down, consumeFrom: up)
        let requests = ClientToServerFilter(
            conversation: conversation, observer: observer, channels: records, budget: packetBudget,
            handshakeFinished: { handshakes.finished() }
        ) { [weak server] tag, code in
            state.queueInjection(ErrorReply(code: code).packet(tag: tag, version: state.protocolVersion))
            server?.notify(.inject)
        }
        let client = Half(
            .client(requests), loop: loop, audio: audio, conversation: conversation, produceInto: up, consumeFrom: down,
            packetLimit: options.maxClientPacket)
        client.peer = server
        server.peer = client
        let outlet = SessionOutlet(state: state, client: client, server: server)
        records.outlet = outlet
        let fd = socket.rawValue
        client.socket = socket
        sessions.withLock { $0[id] = SessionEntry(conversation: conversation, upstream: server) }
        observer.sessionOpened(state)
        client.onClose = { [self] in
            sessions.withLock { _ = $0.removeValue(forKey: id) }
            observer.sessionClosed(state)
            let reason = state.reasonClosed ?? "closed"
            Log.info("session \(id) (\(identity.appKey), pid \(identity.pid)) ended: \(reason)")
        }
        Log.info(
            "session \(id): \(identity.appKey) pid \(identity.pid) uid \(identity.uid) identified by \(identity.method.rawValue) (\(identity.strength.rawValue))"
                + (identity.caveat.map { ": \($0)" } ?? ""))
        let path = upstream.path
        let timeout = options.handshakeTimeout
        let start = { @Sendable [handshakeLog] in
            do {
                client.token = try loop.register(fd, events: Half.socketEvents, handler: client)
            } catch {
                client.close(reason: "cannot watch the client socket: \(error)")
                return
            }
            server.connect(path: path)
            // A connection that never finishes its handshake would hold a server slot for ever.
            handshakes.add(
                deadline: monotonicNow() + timeout,
                done: { [weak client] in
                    guard let client, !client.closed else { return true }
                    return conversation.handshakeDone.load(ordering: .relaxed)
                },
                expire: { [weak client] in
                    let why = "did not send AUTH and SET_CLIENT_NAME within handshake-timeout (\(timeout) s)"
                    handshakeLog.record(.warn, "closed session \(id) (\(identity.appKey), pid \(identity.pid)): \(why)")
                    client?.close(reason: why)
                })
        }
        if loop === acceptLoop { start() } else { loop.post(start) }
    }
}
