// The control socket server.
//
// The server runs on its own `EventLoop` (the relay's loop type, on a thread of
// its own, so a slow handler never holds up audio), which watches the listening
// socket and every control connection. Bytes in → `LineFramer` → `ControlCodec`
// → the daemon's `ControlHandler` → a response line out. Other threads hand
// messages in with `send`/`broadcast`: they are encoded on the caller's thread
// and posted to the loop, which owns every socket.
//
// Trust: only peers whose SO_PEERCRED uid is the daemon's own (or root) are
// served; the socket is mode 0600 in a 0700 directory. A peer is never trusted
// to read: each connection's unsent output is bounded, and a connection whose
// backlog passes the bound is dropped, so a stalled subscriber never blocks
// the daemon. Garbage or an oversized line gets an error reply, then the
// connection is closed; a half-written line simply waits for the rest.
import Consent
import ConsentStore
import ControlProtocol
import Glibc
import LinuxSystem
import Runtime

/// Serves the control protocol on a Unix socket from its own thread.
///
/// `@unchecked Sendable`: the loop-only state (`connections`, the descriptors)
/// belongs to the control loop once `start()` ran (its entry points check so
/// with `loop.assertInLoop()`; `init` and `start` set it up before the loop
/// runs); everything other threads reach is in `shared`, behind its lock.
public final class ControlServer: @unchecked Sendable {
    /// The control socket's path.
    public let path: String
    private weak var handler: (any ControlHandler)?
    let options: ControlServerOptions
    let log: @Sendable (LogLevel, String) -> Void
    private let allowedUIDs: Set<UInt32>

    private var listenSocket: FileDescriptor
    let loop: EventLoop
    private var listenToken: UInt64 = 0

    private enum Target {
        case connection(UInt64)
        case subscribers
        case disconnect(UInt64)
    }

    private struct Shared {
        var stopping = false
        var started = false
        var subscribers: Set<UInt64> = []
        var open: Set<UInt64> = []
    }

    private let shared = Locked(Shared())

    private func withShared<R>(_ body: (inout Shared) -> R) -> R {
        shared.withLock(body)
    }

    /// Calls `action` with the events of one descriptor on the loop.
    private final class Watcher: LoopHandler {
        let action: (UInt32) -> Void
        init(_ action: @escaping (UInt32) -> Void) { self.action = action }
        func handleEvents(_ events: UInt32) { action(events) }
    }

    // Loop-only state.
    final class Connection {
        let id: UInt64
        /// Its socket, closed when it is dropped (or when the connection goes, if it never was).
        private(set) var socket: FileDescriptor
        var fd: Int32 { socket.rawValue }
        /// The peer's credentials (subscribers are counted per uid).
        var peer = ControlPeer(pid: 0, uid: 0, gid: 0)
        /// Whether the peer runs one of Earmuff's own programs, once asked (`isOwn`).
        var own: Bool?
        /// When (monotonic seconds) its last bytes arrived, or it connected.
        var lastActivity = monotonicNow()
        /// Subscribed to events or became an agent: it may stay idle (see ControlServer+Limits.swift).
        var longLived = false
        var token: UInt64 = 0
        var framer: LineFramer
        var out: [UInt8] = []
        var outStart = 0
        var subscriber = false
        var readClosed = false
        var closeAfterFlush = false
        var watchingWrite = false

        init(id: UInt64, socket: consuming FileDescriptor, limit: Int) {
            self.id = id
            self.socket = socket
            framer = LineFramer(limit: limit)
        }

        func close() { socket.close() }

        var pending: Int { out.count - outStart }
    }

    var connections: [UInt64: Connection] = [:]
    /// The idle sweep's timer on the loop, while one is set.
    var sweep: EventLoop.TimerID?
    /// Refusals and evictions: lines any local process can cause, so rate-limited.
    let limitLog = RateLimitedLog()
    private var nextID: UInt64 = 16
    private var readBuffer = [UInt8](repeating: 0, count: 65536)

    /// Creates the socket (parent directory mode 0700, socket mode 0600) and listens.
    /// Refuses to replace a socket another live process is listening on.
    public init(
        path: String, handler: any ControlHandler, options: ControlServerOptions = ControlServerOptions(),
        log: @escaping @Sendable (LogLevel, String) -> Void = ControlServer.logToDaemonLog
    ) throws(ControlServerError) {
        self.path = path
        self.handler = handler
        self.options = options
        self.log = log
        self.allowedUIDs = options.allowedUIDs ?? [geteuid(), 0]

        try Self.prepareDirectory(for: path)
        try Self.refuseLiveSocket(at: path)

        let socket: FileDescriptor
        do throws(Errno) {
            socket = try .unixSocket()
        } catch {
            throw Self.failure("cannot create a socket", path, code: error)
        }
        do throws(Errno) {
            try socket.listen(at: path, backlog: 64)
        } catch {
            throw Self.failure("cannot listen on the control socket", path, code: error)
        }
        guard unsafe chmod(path, 0o600) == 0 else {
            let e = Self.failure("cannot set mode 0600 on the control socket", path)
            unsafe unlink(path)
            throw e
        }
        do {
            loop = try EventLoop(name: "control")
        } catch {
            unsafe unlink(path)
            throw Self.failure("cannot set up epoll for the control socket", path, code: error.errno)
        }
        listenSocket = socket
    }

    deinit {
        let started = withShared { $0.started }
        if !started {
            listenSocket.close()
            unsafe unlink(path)
        }
    }

    /// Logs "control: message" with the daemon's logger.
    public static let logToDaemonLog: @Sendable (LogLevel, String) -> Void = { level, message in
        Log.record(level, "control: \(message)")
    }

    /// Starts the control loop's thread. Call once.
    public func start() {
        let first = withShared { s -> Bool in
            if s.started || s.stopping { return false }
            s.started = true
            return true
        }
        guard first else { return }
        do {
            listenToken = try loop.register(listenSocket.rawValue, events: PollEvents.input, handler: Watcher { [self] _ in acceptAll() })
        } catch {
            log(.error, "cannot watch the control socket at \(path) (\(error)); the control socket is not served")
            return
        }
        log(.info, "control socket listening at \(path)")
        loop.start()
    }

    /// Stops the thread, closes every connection and removes the socket. Do not call from a handler.
    /// (The loop's handlers keep the server alive until then.)
    public func stop() {
        let wasRunning = withShared { s -> Bool in
            let running = s.started && !s.stopping
            s.stopping = true
            return running
        }
        guard wasRunning else { return }
        loop.post { [self] in shutdownAll() }
        loop.stopAndJoin()
    }

    /// Queues a message for one connection. Thread-safe; dropped if the connection is gone.
    public func send(_ message: ServerMessage, to connection: ControlConnectionID) {
        enqueue(.connection(connection.rawValue), ControlCodec.encodeLine(message))
    }

    /// Queues an event for every subscribed connection. Thread-safe.
    public func broadcast(_ event: ControlEvent) {
        guard subscriberCount > 0 else { return }
        enqueue(.subscribers, ControlCodec.encodeLine(ServerMessage.event(event)))
    }

    /// Closes a connection after its queued output is written. Thread-safe.
    public func disconnect(_ connection: ControlConnectionID) {
        enqueue(.disconnect(connection.rawValue), [])
    }

    /// Connections that subscribed to events.
    public var subscriberCount: Int { withShared { $0.subscribers.count } }

    /// Open connections.
    public var connectionCount: Int { withShared { $0.open.count } }

    /// The kernel id of the server's loop thread (0 before it runs): what /proc knows it by.
    public var loopThreadID: Int32 { loop.kernelThreadID.load(ordering: .acquiring) }

    /// Hands `bytes` for `target` to the loop, in order with every other message.
    private func enqueue(_ target: Target, _ bytes: [UInt8]) {
        guard !withShared({ $0.stopping }) else { return }
        loop.post { [self] in deliver(target, bytes) }
    }

    // MARK: - Loop

    /// Delivers one queued message (on the loop), unless the server is stopping.
    private func deliver(_ target: Target, _ bytes: [UInt8]) {
        loop.assertInLoop()
        guard !withShared({ $0.stopping }) else { return }
        switch target {
        case .connection(let id):
            if let c = connections[id] { write(bytes, to: c) }
        case .subscribers:
            for c in Array(connections.values) where c.subscriber { write(bytes, to: c) }
        case .disconnect(let id):
            if let c = connections[id] {
                c.closeAfterFlush = true
                finishIfFlushed(c)
            }
        }
    }

    private func acceptAll() {
        loop.assertInLoop()
        while true {
            let socket: FileDescriptor
            do throws(Errno) {
                socket = try listenSocket.accept()
            } catch {
                if error != .wouldBlock && error != .connectionAborted {
                    log(.warn, "control: accept failed (\(error))")
                }
                return
            }
            let cred: PeerCredentials
            do throws(Errno) {
                cred = try socket.peerCredentials()
            } catch {
                log(.warn, "control: refused a connection: SO_PEERCRED failed (\(error))")
                continue
            }
            guard allowedUIDs.contains(cred.uid) else {
                log(.warn, "control: refused pid \(cred.pid) uid \(cred.uid): only uid \(geteuid()) or root may use the control socket")
                continue
            }
            guard makeRoom(for: cred.pid) else { continue }
            let id = nextID
            nextID += 1
            let c = Connection(id: id, socket: socket, limit: options.maxLineBytes)
            c.peer = ControlPeer(pid: cred.pid, uid: cred.uid, gid: cred.gid)
            do {
                c.token = try loop.register(
                    c.fd, events: PollEvents.input,
                    handler: Watcher { [self] events in
                        service(id, events: events)
                    })
            } catch {
                log(.warn, "control: cannot watch a new connection (\(error))")
                c.close()
                continue
            }
            connections[id] = c
            scheduleIdleSweep()
            withShared { _ = $0.open.insert(id) }
            log(.debug, "control#\(id): connected, pid \(cred.pid) uid \(cred.uid)")
            handler?.connectionOpened(ControlConnectionID(rawValue: id), peer: c.peer)
            let hello = ServerHello(daemonVersion: options.daemonVersion, pid: getpid())
            write(ControlCodec.encodeLine(ServerMessage.response(id: nil, .hello(hello))), to: c)
        }
    }

    private func service(_ id: UInt64, events: UInt32) {
        loop.assertInLoop()
        guard let c = connections[id] else { return }
        if events & PollEvents.output != 0 {
            flush(c)
            guard connections[id] != nil else { return }
        }
        if events & (PollEvents.input | PollEvents.hangUp | PollEvents.error) != 0 && !c.readClosed {
            readFrom(c)
            guard connections[id] != nil else { return }
        }
        if events & (PollEvents.hangUp | PollEvents.error) != 0 {
            // The peer is gone in both directions: nothing more can be delivered.
            drop(c, reason: nil)
        }
    }

    private func readFrom(_ c: Connection) {
        // Bounded per wakeup so one busy peer cannot starve the others (epoll is level-triggered).
        for _ in 0..<8 {
            let n: Int
            do throws(Errno) {
                n = try c.socket.receive(into: &readBuffer, waiting: false)
            } catch {
                if error == .wouldBlock { return }
                drop(c, reason: error == .connectionReset ? nil : "read failed (\(error))")
                return
            }
            if n > 0 {
                c.lastActivity = monotonicNow()
                c.framer.append(readBuffer[0..<n])
                processLines(c)
                if connections[c.id] == nil || c.readClosed { return }
                continue
            }
            peerFinishedWriting(c)
            return
        }
    }

    /// EOF on read: a subscriber that half-closed keeps receiving events; others get
    /// their pending replies and are closed.
    private func peerFinishedWriting(_ c: Connection) {
        if c.framer.bufferedCount > 0 {
            log(.debug, "control#\(c.id): peer closed with a partial line of \(c.framer.bufferedCount) bytes")
        }
        stopReading(c)
        if !c.subscriber {
            c.closeAfterFlush = true
            finishIfFlushed(c)
        }
    }

    private func stopReading(_ c: Connection) {
        c.readClosed = true
        updateInterest(c)
    }

    private func processLines(_ c: Connection) {
        while connections[c.id] != nil && !c.readClosed {
            let line: [UInt8]
            do {
                guard let l = try c.framer.readLine() else { return }
                line = l
            } catch {
                reject(c, error)
                return
            }
            let message: ClientMessage
            do {
                message = try ControlCodec.decodeClientMessage(line)
            } catch {
                reject(c, error)
                continue
            }
            dispatch(message, on: c)
        }
    }

    private func reject(_ c: Connection, _ error: ControlProtocolError) {
        write(ControlCodec.encodeLine(ServerMessage.response(id: error.requestID, .error(error.reply))), to: c)
        if error.closesConnection {
            log(.info, "control#\(c.id): closing: \(error)")
            stopReading(c)
            c.closeAfterFlush = true
            finishIfFlushed(c)
        }
    }

    private func dispatch(_ message: ClientMessage, on c: Connection) {
        switch message.body {
        case .hello(let version, _):
            if ControlProtocolVersion.supported.contains(version) {
                let hello = ServerHello(daemonVersion: options.daemonVersion, pid: getpid())
                write(ControlCodec.encodeLine(ServerMessage.response(id: message.id, .hello(hello))), to: c)
            } else {
                let e = ControlError(
                    .version,
                    "this daemon speaks control protocol version \(ControlProtocolVersion.current), the client version \(version); use the earmuff client of the daemon's release (\(options.daemonVersion))"
                )
                write(ControlCodec.encodeLine(ServerMessage.response(id: message.id, .error(e))), to: c)
                stopReading(c)
                c.closeAfterFlush = true
                finishIfFlushed(c)
            }
        case .request(let request):
            let response: ControlResponse
            let staysOpen: Bool =
                switch request {
                case .subscribe, .becomeAgent: true
                default: false
                }
            if case .becomeAgent = request, !isOwn(c) {
                let e = ControlError(
                    .notEarmuff,
                    "only Earmuff's own programs ('earmuff agent', the settings window) may answer "
                        + "prompts; pid \(c.peer.pid) is not one of them")
                limitLog.record(.warn, "control#\(c.id): refused become-agent from pid \(c.peer.pid): not one of Earmuff's programs", to: log)
                write(ControlCodec.encodeLine(ServerMessage.response(id: message.id, .error(e))), to: c)
                return
            }
            if staysOpen && !c.longLived, let refusal = longLivedRefusal(c) {
                write(ControlCodec.encodeLine(ServerMessage.response(id: message.id, .error(refusal))), to: c)
                return
            }
            if let handler {
                response = handler.handle(request, from: ControlConnectionID(rawValue: c.id))
            } else {
                response = .error(ControlError(.internal, "the daemon is shutting down; start it again with 'earmuff serve'"))
            }
            guard connections[c.id] != nil else { return }
            if case .subscribe = request, !response.isError, !c.subscriber {
                c.subscriber = true
                withShared { _ = $0.subscribers.insert(c.id) }
            }
            if staysOpen && !response.isError {
                c.longLived = true
                cancelIdleSweepIfUnneeded()
            }
            write(ControlCodec.encodeLine(ServerMessage.response(id: message.id, response)), to: c)
        }
    }

    // MARK: - Output

    private func write(_ bytes: [UInt8], to c: Connection) {
        guard !bytes.isEmpty else { return }
        if c.pending + bytes.count > options.maxPendingOutputBytes {
            drop(c, reason: "not reading: more than \(options.maxPendingOutputBytes) bytes unsent")
            return
        }
        if c.outStart > 0 && c.outStart >= c.out.count / 2 {
            c.out.removeSubrange(0..<c.outStart)
            c.outStart = 0
        }
        c.out.append(contentsOf: bytes)
        if !c.watchingWrite { flush(c) }
    }

    private func flush(_ c: Connection) {
        while c.pending > 0 {
            do throws(Errno) {
                let out = c.out[c.outStart...]
                c.outStart += try c.socket.send(out, waiting: false)
            } catch {
                if error == .wouldBlock { break }
                drop(c, reason: error.isPeerClosed ? nil : "write failed (\(error))")
                return
            }
        }
        if c.pending == 0 {
            c.out.removeAll(keepingCapacity: c.out.capacity <= 65536)
            c.outStart = 0
        }
        let wantWrite = c.pending > 0
        if wantWrite != c.watchingWrite {
            c.watchingWrite = wantWrite
            updateInterest(c)
        }
        finishIfFlushed(c)
    }

    private func updateInterest(_ c: Connection) {
        var mask: UInt32 = 0
        if !c.readClosed { mask |= PollEvents.input }
        if c.watchingWrite { mask |= PollEvents.output }
        loop.modify(c.fd, token: c.token, events: mask)
    }

    private func finishIfFlushed(_ c: Connection) {
        if c.closeAfterFlush && c.pending == 0 && connections[c.id] != nil {
            drop(c, reason: nil)
        }
    }

    func drop(_ c: Connection, reason: String?) {
        guard connections.removeValue(forKey: c.id) != nil else { return }
        if let reason { log(.warn, "control#\(c.id): dropped: \(reason)") } else { log(.debug, "control#\(c.id): closed") }
        loop.remove(c.fd, token: c.token)
        c.close()
        withShared {
            $0.subscribers.remove(c.id)
            $0.open.remove(c.id)
        }
        handler?.connectionClosed(ControlConnectionID(rawValue: c.id))
        cancelIdleSweepIfUnneeded()
    }

    private func shutdownAll() {
        loop.assertInLoop()
        for c in Array(connections.values) { drop(c, reason: nil) }
        if listenToken != 0 { loop.remove(listenSocket.rawValue, token: listenToken) }
        listenSocket.close()
        unsafe unlink(path)
        log(.info, "control socket at \(path) closed")
    }
}
