// The source catalog: Earmuff's own connection to the real server, to learn
// what every source is (microphone or monitor) and which is the default.
//
// One thread owns the connection: AUTH (protocol 13, no shared memory, our
// credentials, which both servers accept from their own uid), SET_CLIENT_NAME,
// SUBSCRIBE to sources, source outputs and the server, GET_SERVER_INFO,
// GET_SOURCE_OUTPUT_INFO_LIST and GET_SOURCE_INFO_LIST; then each
// SUBSCRIBE_EVENT about a source asks for that source again (or forgets it), a
// server change asks for the default source again, and a new or changed source
// output is asked where it records from (`onSourceOutput`). The table keeps the
// source outputs that are the capture sides of filters (those a module owns, or
// in a `node.link-group`): what a virtual source carries depends on where they
// record from (SourceFeeds.swift). pipewire-pulse (0.3.65) sends neither RECORD_STREAM_MOVED
// nor a change event for every move made by another client, so in front of any
// server but PulseAudio itself (its package name, from GET_SERVER_INFO), while
// record streams are live (`watching`), the catalog also asks for every source
// output each `pollInterval`: a move that the server announces nowhere is
// noticed within that time. The table (`SourceTable`, pure) sits behind a lock that loop
// threads take when a record stream starts or moves (never per frame); after
// every change `onChange` runs on this thread, so streams waiting for an
// unknown source are decided as soon as it is known. When the connection
// fails the table is emptied (streams on unknown sources stay silent) and the
// thread reconnects with a growing delay, at once when a client connects or a
// record stream starts.
import CLinux
import Consent
import Glibc
import LinuxSystem
import PulseWire

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

final class SourceCatalog: SourceDirectory, @unchecked Sendable {
    // @unchecked Sendable: `table` is behind a lock; the rest is touched only on the
    // catalog thread, except `stopFD` (an eventfd, written by `stop`) and `thread`
    // (set by `start`, joined by `stop`, both on the daemon's thread).
    private let upstream: UpstreamAddress
    private let table = Locked(SourceTable())
    private let ready = Locked(false)
    /// Called on the catalog thread after the table changed.
    private let onChange: @Sendable () -> Void
    /// Called on the catalog thread with a source output's index, the source it records from, and
    /// when (monotonic seconds) that was asked.
    private let onSourceOutput: @Sendable (UInt32, UInt32, Double) -> Void
    /// Whether record streams are live (then source outputs are polled).
    private let watching: @Sendable () -> Bool
    /// Written by `wake` (a stream started), so polling starts at once.
    private let wakeFD: Int32
    /// How often source outputs are asked for while streams are live.
    static let pollInterval = 0.1
    private let stopFD: Int32
    private var thread: pthread_t?

    init(upstream: UpstreamAddress, onChange: @escaping @Sendable () -> Void,
         onSourceOutput: @escaping @Sendable (UInt32, UInt32, Double) -> Void,
         watching: @escaping @Sendable () -> Bool) {
        self.upstream = upstream
        self.onChange = onChange
        self.onSourceOutput = onSourceOutput
        self.watching = watching
        stopFD = earmuff_eventfd()
        wakeFD = earmuff_eventfd()
    }

    deinit {
        if stopFD >= 0 { _ = Glibc.close(stopFD) }
        if wakeFD >= 0 { _ = Glibc.close(wakeFD) }
    }

    /// A client connected or a record stream started: reconnect now if disconnected, and
    /// poll source outputs while streams are live.
    func wake() { _ = earmuff_eventfd_signal(wakeFD) }

    /// What is known now (a copy).
    var snapshot: SourceTable { table.withLock { $0 } }

    /// Whether the first source list has arrived on the current connection.
    var isReady: Bool { ready.withLock { $0 } }

    func start() {
        guard thread == nil else { return }
        thread = startThread { [self] in run() }
    }

    /// Waits (at start-up) until the first source list arrived and named a source, or `timeout`
    /// seconds passed. (pipewire-pulse may answer a new client's first list before it has
    /// learned its own objects, and announce them as new right after.)
    func waitUntilReady(timeout: Double) {
        let deadline = monotonicNow() + timeout
        while !(isReady && !snapshot.sources.isEmpty) && monotonicNow() < deadline { usleep(5_000) }
    }

    func stop() {
        guard let t = thread else { return }
        _ = earmuff_eventfd_signal(stopFD)
        pthread_join(t, nil)
        thread = nil
    }

    // MARK: the thread

    private var stopping: Bool {
        var p = pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0
    }

    private func run() {
        var delay = 0.05
        while !stopping {
            let fd = earmuff_unix_socket()
            if fd >= 0 {
                do {
                    try session(fd)
                    delay = 0.05
                } catch {
                    Log.warn("source catalog: \(upstream): \(error); streams on sources not known yet stay silent")
                }
                _ = Glibc.close(fd)
                ready.withLock { $0 = false }
                if table.withLock({ t in
                    defer { t = SourceTable() }
                    return t != SourceTable()
                }) { onChange() }
            }
            // Wait before reconnecting, unless told to stop; a client that connects or a stream
            // that starts (so the server may be back) ends the wait, since streams stay silent
            // until their source is known.
            var fds = [pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, Int32(delay * 1000))
            if fds[0].revents != 0 { break }
            if fds[1].revents != 0 {
                _ = earmuff_eventfd_drain(wakeFD)
                delay = 0.05
            } else {
                delay = min(delay * 2, 2)
            }
        }
    }

    private enum Pending: Equatable {
        case auth, setName, subscribe, serverInfo, sourceList, sourceInfo
        /// Asked at this monotonic time.
        case sourceOutputInfo(Double), sourceOutputList(Double)
    }

    private struct CatalogError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// One connection, until it fails or `stop` is called.
    private func session(_ fd: Int32) throws {
        if earmuff_unix_connect(fd, upstream.path) != 0 && errno != EINPROGRESS && errno != EAGAIN {
            throw CatalogError("cannot connect: \(String(cString: strerror(errno)))")
        }
        var writer = PacketWriter(fd: fd)
        var pending: [UInt32: Pending] = [:]
        var nextTag: UInt32 = 0
        func send(_ payload: (UInt32) -> [UInt8], _ what: Pending) throws {
            let tag = nextTag
            nextTag &+= 1
            pending[tag] = what
            try writer.send(payload(tag))
        }
        let version = introspectionVersion
        try send({ AuthRequest(versionWord: version).packet(tag: $0, version: 0) }, .auth)
        var props = Proplist()
        props.set("application.name", string: "Earmuff source catalog")
        props.set("application.id", string: "org.earmuff.SourceCatalog")
        try send({ SetClientName(proplist: props).packet(tag: $0, version: version) }, .setName)
        try send({ Subscribe([.source, .sourceOutput, .server]).packet(tag: $0, version: version) }, .subscribe)
        try send({ EmptyRequest(.getServerInfo).packet(tag: $0) }, .serverInfo)
        // Source outputs first: the capture sides of filters are known by the time the sources are.
        try send({ EmptyRequest(.getSourceOutputInfoList).packet(tag: $0) }, .sourceOutputList(monotonicNow()))
        try send({ EmptyRequest(.getSourceInfoList).packet(tag: $0) }, .sourceList)
        // What the log last said about each source fed through others (see `explainFeeds`).
        var explained: [UInt32: String] = [:]

        var parser = FrameParser()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var nextPoll = monotonicNow()
        // PulseAudio announces every move (RECORD_STREAM_MOVED, a source-output change event);
        // any other server, or one not identified yet, is polled.
        var announcesMoves = false
        while true {
            // While streams are live, ask where every source output records from, one list at a time.
            var timeout: Int32 = -1
            if watching(), !announcesMoves {
                let now = monotonicNow()
                if now >= nextPoll, !pending.values.contains(where: { if case .sourceOutputList = $0 { true } else { false } }) {
                    try send({ EmptyRequest(.getSourceOutputInfoList).packet(tag: $0) }, .sourceOutputList(now))
                    nextPoll = now + Self.pollInterval
                }
                timeout = Int32(max(0, (nextPoll - monotonicNow()) * 1000).rounded(.up))
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 3, timeout) >= 0 || errno == EINTR else { throw CatalogError("poll: \(errno)") }
            if fds[1].revents != 0 { return }
            if fds[2].revents != 0 { _ = earmuff_eventfd_drain(wakeFD) }
            guard fds[0].revents != 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { throw CatalogError("the server closed the connection") }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw CatalogError("read: \(String(cString: strerror(errno)))")
            }
            buffer.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            while let frame = try parser.next() {
                guard frame.descriptor.isPacket else { continue }
                var r = TagStructReader(frame.payload)
                let header = try PacketHeader.decode(from: &r)
                var changed = false
                switch Command(rawValue: header.command) {
                case .reply:
                    switch pending.removeValue(forKey: header.tag) {
                    case .serverInfo:
                        let info = try ServerInfo.decode(from: &r, version: version)
                        announcesMoves = info.packageName == "pulseaudio"
                        changed = table.withLock { t in
                            defer { t.defaultSourceName = info.defaultSourceName }
                            return t.defaultSourceName != info.defaultSourceName
                        }
                    case .sourceList:
                        let list = try SourceInfoReply.decode(from: &r, version: version).records
                        table.withLock { $0.replaceAll(list) }
                        ready.withLock { $0 = true }
                        Log.info("source catalog: \(list.count) sources, "
                                 + "\(list.filter(\.isMonitor).count) of them monitors")
                        changed = true
                    case .sourceInfo:
                        for s in try SourceInfoReply.decode(from: &r, version: version).records {
                            table.withLock { $0.update(s) }
                        }
                        changed = true
                    case .sourceOutputInfo(let askedAt):
                        let records = try SourceOutputInfoReply.decode(from: &r, version: version).records
                        changed = table.withLock { t in records.reduce(false) { t.updateOutput($1) || $0 } }
                        for o in records { onSourceOutput(o.index, o.source, askedAt) }
                    case .sourceOutputList(let askedAt):
                        let records = try SourceOutputInfoReply.decode(from: &r, version: version).records
                        changed = table.withLock { $0.replaceOutputs(records) }
                        for o in records { onSourceOutput(o.index, o.source, askedAt) }
                    case .auth, .setName, .subscribe, nil:
                        break
                    }
                case .error:
                    // A source removed before its info was asked for: its remove event follows.
                    if pending.removeValue(forKey: header.tag) == .auth {
                        throw CatalogError("the server refused authentication")
                    }
                case .subscribeEvent:
                    let e = try SubscribeEvent.decode(from: &r, version: version)
                    switch (e.facility, e.operation) {
                    case (.source?, .remove?):
                        table.withLock { $0.remove(index: e.index) }
                        changed = true
                    case (.source?, _):
                        try send({ GetSourceInfo(index: e.index).packet(tag: $0, version: version) }, .sourceInfo)
                    case (.sourceOutput?, .remove?):
                        changed = table.withLock { $0.removeOutput(index: e.index) }
                    case (.sourceOutput?, .new?), (.sourceOutput?, .change?):
                        try send({ GetSourceOutputInfo(index: e.index).packet(tag: $0, version: version) },
                                 .sourceOutputInfo(monotonicNow()))
                    case (.server?, _):
                        try send({ EmptyRequest(.getServerInfo).packet(tag: $0) }, .serverInfo)
                    default:
                        break
                    }
                default:
                    break
                }
                if changed {
                    explainFeeds(&explained)
                    onChange()
                }
            }
        }
    }

    /// Logs, once per change, the kind of each source fed through others and what feeds it
    /// (`remapped is system-audio: fed by out.monitor`).
    private func explainFeeds(_ explained: inout [UInt32: String]) {
        let t = snapshot
        var now: [UInt32: String] = [:]
        for index in t.sources.keys.sorted() {
            guard let text = t.feedExplanation(of: index) else { continue }
            now[index] = text
            if explained[index] != text { Log.info("source catalog: \(text)") }
        }
        explained = now
    }
}

/// Writes whole packets to a non-blocking socket, waiting for room when it is full;
/// the first write carries our credentials (AUTH).
private struct PacketWriter {
    let fd: Int32
    var credentialsSent = false

    init(fd: Int32) { self.fd = fd }

    mutating func send(_ payload: [UInt8]) throws {
        let frame = Frame(packet: payload).bytes
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes { buf -> Int in
                let rest = UnsafeRawBufferPointer(rebasing: buf[offset...])
                if !credentialsSent { return earmuff_send_with_creds(fd, rest.baseAddress, rest.count) }
                return earmuff_send2(fd, rest.baseAddress, rest.count, nil, 0)
            }
            if n > 0 {
                offset += n
                credentialsSent = true
            } else if errno == EAGAIN || errno == EINPROGRESS || errno == ENOTCONN {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&p, 1, 1000)
            } else {
                throw SourceCatalogWriteError(errno: errno)
            }
        }
    }
}

private struct SourceCatalogWriteError: Error, CustomStringConvertible {
    let errno: Int32
    var description: String { "write: \(String(cString: strerror(errno)))" }
}
