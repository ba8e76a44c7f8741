// The source catalog: Earmuff's own connection to the real server, to learn
// what every source is (microphone or monitor) and which is the default.
//
// A handler on an event loop of its own ("catalog") owns the connection:
// LinuxSystem's non-blocking socket calls, PulseWire's frame parser, and the pure
// conversation in CatalogConversation.swift, which says what to ask and what
// each answer changes. AUTH carries our credentials, which both servers accept
// from their own uid. The table keeps the source outputs that are the capture
// sides of filters (those a module owns, or in a `node.link-group`): what a
// virtual source carries depends on where they record from (SourceFeeds.swift).
// pipewire-pulse (0.3.65) sends neither RECORD_STREAM_MOVED nor a change event
// for every move made by another client, so in front of any server but
// PulseAudio itself, while record streams are live (`watching`), the catalog
// also asks for every source output each `pollInterval` (a loop timer): a move
// that the server announces nowhere is noticed within that time. The table
// (`SourceTable`, pure) is published behind a lock that relay loops take when
// a record stream starts or moves (never per frame); after every change
// `onChange` runs on the catalog loop, so streams waiting for an unknown source
// are decided as soon as it is known. When the connection fails the table is
// emptied (streams on unknown sources stay silent) and the catalog reconnects
// after a growing delay (loop timers), at once when a client connects or a
// record stream starts.
import LinuxSystem
import Consent
import Glibc
import PulseWire
import Runtime
import Synchronization

/// Where the consent service learns what each source is: the source catalog, or a fixed table
/// (tests of the relay without a server to ask).
protocol SourceDirectory: AnyObject, Sendable {
    /// What is known now.
    var snapshot: SourceTable { get }
    /// A client connected or a record stream started (the catalog reconnects if it lost the
    /// server, and watches source outputs while streams are live).
    func wake()
}

/// A table that never changes.
final class FixedSources: SourceDirectory {
    let snapshot: SourceTable
    init(_ table: SourceTable) { snapshot = table }
    func wake() {}
}

final class SourceCatalog: SourceDirectory, Sendable {
    /// How often source outputs are asked for while streams are live.
    static let pollInterval = 0.1
    private let loop: EventLoop
    private let published: CatalogTable
    private let connection: CatalogConnection

    /// `onChange` runs on the catalog loop after the table changed; `onSourceOutput` there with a
    /// source output's index, the source it records from, and when (monotonic seconds) that was
    /// asked; `watching` says whether record streams are live (then source outputs are polled).
    init(
        upstream: UpstreamAddress, onChange: @escaping @Sendable () -> Void,
        onSourceOutput: @escaping @Sendable (UInt32, UInt32, Double) -> Void,
        watching: @escaping @Sendable () -> Bool
    ) throws(SystemError) {
        loop = try EventLoop(name: "catalog")
        published = CatalogTable()
        connection = CatalogConnection(
            loop: loop, upstream: upstream, published: published,
            callbacks: .init(
                onChange: onChange, onSourceOutput: onSourceOutput,
                watching: watching))
    }

    /// A client connected or a record stream started: reconnect now if disconnected, and
    /// poll source outputs while streams are live.
    func wake() { connection.notify() }

    /// What is known now (a copy).
    var snapshot: SourceTable { published.table.withLock { $0 } }

    /// Whether the first source list has arrived on the current connection.
    var isReady: Bool { published.ready.withLock { $0 } }

    func start() {
        loop.start()
        loop.post { [connection] in connection.connect() }
    }

    /// Waits (at start-up) until the first source list arrived and named a source, or `timeout`
    /// seconds passed. (pipewire-pulse may answer a new client's first list before it has
    /// learned its own objects, and announce them as new right after.)
    func waitUntilReady(timeout: Double) {
        let deadline = monotonicNow() + timeout
        while !(isReady && !snapshot.sources.isEmpty) && monotonicNow() < deadline { usleep(5_000) }
    }

    /// Closes the connection and stops the loop.
    func stop() {
        loop.post { [connection] in connection.shutDown() }
        loop.stopAndJoin()
    }
}

/// What the catalog loop publishes for other threads.
private final class CatalogTable: Sendable {
    let table = Locked(SourceTable())
    let ready = Locked(false)
}

/// The connection to the server, on the catalog loop.
@safe
private final class CatalogConnection: LoopHandler, Wakeable, @unchecked Sendable {
    // @unchecked Sendable: `queued` is atomic and the rest is immutable or checked with
    // `loop.assertInLoop()`; other threads only call `notify`.
    struct Callbacks {
        var onChange: @Sendable () -> Void
        var onSourceOutput: @Sendable (UInt32, UInt32, Double) -> Void
        var watching: @Sendable () -> Bool
    }

    static let firstDelay = 0.05
    static let longestDelay = 2.0

    private let loop: EventLoop
    private let upstream: UpstreamAddress
    private let published: CatalogTable
    private let callbacks: Callbacks
    private let queued = Atomic<Bool>(false)

    private var socket = FileDescriptor.none
    private var token: UInt64 = 0
    private var conversation = CatalogConversation()
    private var parser = FrameParser()
    /// What one read takes from the server's socket.
    private let input = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private var output: [UInt8] = []
    private var written = 0
    private var credentialsSent = false
    private var watchingOutput = false
    /// Counts connection attempts, so that timers of an earlier one do nothing.
    private var attempt = 0
    /// The wait before the next reconnection.
    private var delay = firstDelay
    private var stopped = false
    /// When to ask for the source outputs next, and whether a timer is set for it.
    private var nextPoll = 0.0
    private var pollTimerSet = false
    /// What the log last said about each source fed through others (see `explainFeeds`).
    private var explained: [UInt32: String] = [:]

    init(loop: EventLoop, upstream: UpstreamAddress, published: CatalogTable, callbacks: Callbacks) {
        self.loop = loop
        self.upstream = upstream
        self.published = published
        self.callbacks = callbacks
    }

    deinit { unsafe input.deallocate() }

    // MARK: any thread

    func notify() {
        if !queued.exchange(true, ordering: .acquiringAndReleasing) { loop.wake(self) }
    }

    // MARK: the catalog loop

    func serviceWake() {
        loop.assertInLoop()
        queued.store(false, ordering: .releasing)
        guard !stopped else { return }
        if !socket.isOpen {
            // The server may be back: a stream stays silent until its source is known.
            delay = Self.firstDelay
            connect()
        } else {
            pollIfWatching()
        }
    }

    func connect() {
        loop.assertInLoop()
        guard !stopped, !socket.isOpen else { return }
        attempt &+= 1
        do {
            socket = try FileDescriptor.unixSocket()
        } catch {
            return failed(SourceCatalogError("cannot create a socket: \(error)"))
        }
        do {
            try socket.connect(to: upstream.path)
        } catch {
            return failed(SourceCatalogError("cannot connect: \(error)"))
        }
        do {
            token = try loop.register(socket.rawValue, events: PollEvents.input | PollEvents.peerHangUp, handler: self)
        } catch {
            return failed(SourceCatalogError("cannot watch the socket: \(error)"))
        }
        nextPoll = monotonicNow()
        run(conversation.opening(now: nextPoll))
    }

    func shutDown() {
        loop.assertInLoop()
        stopped = true
        disconnect()
    }

    func handleEvents(_ events: UInt32) {
        loop.assertInLoop()
        guard socket.isOpen else { return }
        if events & PollEvents.output != 0 { flush() }
        if socket.isOpen, events & (PollEvents.input | PollEvents.hangUp | PollEvents.error | PollEvents.peerHangUp) != 0 { read() }
    }

    private func read() {
        var closedFDs: Int32 = 0
        var sender: Int32 = 0
        do {
            let n = try unsafe socket.receiveClosingDescriptors(into: input, closedCount: &closedFDs, senderPID: &sender)
            guard n > 0 else { return failed(SourceCatalogError("the server closed the connection")) }
            unsafe parser.append(UnsafeRawBufferPointer(rebasing: input[0..<n]))
        } catch {
            if error.isNotReady { return }
            if error.isPeerClosed { return failed(SourceCatalogError("the server closed the connection")) }
            return failed(SourceCatalogError("read: \(error)"))
        }
        do {
            while let frame = try parser.next() {
                run(try conversation.handle(frame, now: monotonicNow()))
                guard socket.isOpen else { return }
            }
        } catch let e as SourceCatalogError {
            return failed(e)
        } catch {
            return failed(SourceCatalogError("unreadable frame from the server (\(error))"))
        }
        pollIfWatching()
    }

    /// Runs what the conversation asked for, after publishing the table it changed.
    private func run(_ actions: [CatalogConversation.Action]) {
        guard !actions.isEmpty else { return }
        let table = conversation.table
        published.table.withLock { $0 = table }
        var send = false
        for a in actions {
            switch a {
            case .send(let packet):
                Frame(packet: packet).append(to: &output)
                send = true
            case let .sourceOutput(index, source, askedAt):
                callbacks.onSourceOutput(index, source, askedAt)
            case let .listed(sources, monitors):
                published.ready.withLock { $0 = true }
                Log.info("source catalog: \(sources) sources, \(monitors) of them monitors")
            case .changed:
                explainFeeds(table)
                callbacks.onChange()
            }
        }
        if send { flush() }
    }

    /// While streams are live, asks where every source output records from, one list at a time.
    private func pollIfWatching() {
        guard socket.isOpen, !conversation.announcesMoves, callbacks.watching() else { return }
        let now = monotonicNow()
        if now >= nextPoll, !conversation.awaitsSourceOutputList {
            nextPoll = now + SourceCatalog.pollInterval
            run([conversation.askSourceOutputs(now: now)])
        }
        // A list still unanswered asks again when its reply comes.
        guard socket.isOpen, now < nextPoll, !pollTimerSet else { return }
        pollTimerSet = true
        let current = attempt
        loop.schedule(at: nextPoll) { [weak self] in
            guard let self, attempt == current else { return }
            pollTimerSet = false
            pollIfWatching()
        }
    }

    /// Writes what is queued, watching for room when the socket is full.
    private func flush() {
        while written < output.count {
            let result: Result<Int, Errno> = unsafe output.withUnsafeBytes { all in
                let rest = unsafe UnsafeRawBufferPointer(rebasing: all[written...])
                return Result { () throws(Errno) -> Int in
                    // The first bytes (AUTH) carry our credentials explicitly.
                    if credentialsSent { return try unsafe socket.send(rest, UnsafeRawBufferPointer(start: nil, count: 0)) }
                    return try unsafe socket.sendWithCredentials(rest)
                }
            }
            switch result {
            case .success(let n):
                written += n
                credentialsSent = true
            case .failure(let e) where e.isNotReady:
                if !watchingOutput {
                    watchingOutput = true
                    loop.modify(socket.rawValue, token: token, events: PollEvents.input | PollEvents.peerHangUp | PollEvents.output)
                }
                return
            case .failure(let e) where e.isPeerClosed:
                return failed(SourceCatalogError("the server closed the connection"))
            case .failure(let e):
                return failed(SourceCatalogError("write: \(e)"))
            }
        }
        output.removeAll(keepingCapacity: true)
        written = 0
        if watchingOutput {
            watchingOutput = false
            loop.modify(socket.rawValue, token: token, events: PollEvents.input | PollEvents.peerHangUp)
        }
    }

    /// The connection failed: empty the table, and try again after a growing delay.
    private func failed(_ error: SourceCatalogError) {
        Log.warn("source catalog: \(upstream): \(error); streams on sources not known yet stay silent")
        disconnect()
        guard !stopped else { return }
        let current = attempt
        let wait = delay
        delay = min(delay * 2, Self.longestDelay)
        loop.schedule(after: wait) { [weak self] in
            guard let self, attempt == current else { return }
            connect()
        }
    }

    private func disconnect() {
        if socket.isOpen, token != 0 { loop.remove(socket.rawValue, token: token) }
        socket.close()
        token = 0
        conversation = CatalogConversation()
        parser = FrameParser()
        output.removeAll()
        written = 0
        credentialsSent = false
        watchingOutput = false
        pollTimerSet = false
        published.ready.withLock { $0 = false }
        let wasKnown = published.table.withLock { t in
            defer { t = SourceTable() }
            return t != SourceTable()
        }
        if wasKnown { callbacks.onChange() }
    }

    /// Logs, once per change, the kind of each source fed through others and what feeds it
    /// (`remapped is system-audio: fed by out.monitor`).
    private func explainFeeds(_ t: SourceTable) {
        var now: [UInt32: String] = [:]
        for index in t.sources.keys.sorted() {
            guard let text = t.feedExplanation(of: index) else { continue }
            now[index] = text
            if explained[index] != text { Log.info("source catalog: \(text)") }
        }
        explained = now
    }
}
