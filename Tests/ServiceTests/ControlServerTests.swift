// ControlServer tests against a real Unix socket, with a small in-test handler.
// They run in ServiceTests (the control server lives in Service).
import Consent
import ControlProtocol
import Foundation
import Glibc
import EarmuffClient
import LinuxSystem
import Service
import Testing

/// A value behind an NSLock (visible to the thread sanitizer).
final class Locked<Value>: @unchecked Sendable { // unchecked: `value` is only touched under `lock`
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Records what the server tells it; answers from a canned table.
final class RecordingHandler: ControlHandler {
    struct State {
        var opened: [ControlConnectionID] = []
        var closed: [ControlConnectionID] = []
        var requests: [ControlRequest] = []
    }

    let state = Locked(State())
    let server = Locked<ControlServer?>(nil)

    func connectionOpened(_ connection: ControlConnectionID, peer: ControlPeer) {
        #expect(peer.uid == geteuid())
        #expect(peer.pid == getpid())
        state.withLock { $0.opened.append(connection) }
    }

    func handle(_ request: ControlRequest, from connection: ControlConnectionID) -> ControlResponse {
        state.withLock { $0.requests.append(request) }
        switch request {
        case .status:
            return .status(
                StatusPayload(
                    daemon: DaemonInfo(
                        pid: getpid(), version: "test", listenPath: "/l", controlPath: "/c",
                        storePath: "/s", uptimeSeconds: 1),
                    upstream: UpstreamInfo(server: "unix:/u", reachable: false)))
        case .apps:
            return .apps([AppInfo(key: "exe:/usr/bin/pacat", state: .undetermined, reason: .none)])
        case .setDecision(let app, _, _, _, _), .reset(let app, _):
            if app == "nope" { return .error(ControlError(.unknownApp, "no known app matches 'nope'; run 'earmuff apps'")) }
            return .app(AppInfo(key: app, state: .granted, reason: .user))
        case .becomeAgent:
            // Pending prompts go out with `send` during handle: they must follow the reply.
            server.withLock { $0 }?.send(.prompt(PromptInfo(id: 9, appKey: "exe:/x", identifiedBy: .executable)), to: connection)
            return .ok
        case .subscribe, .answerPrompt, .setAccess:
            return .ok
        case .registerLauncher(let id, _):
            return .launcher(LauncherInfo(appKey: "launcher:\(id)", socketPath: "/tmp/\(id)"))
        case .log:
            return .usage([])
        }
    }

    func connectionClosed(_ connection: ControlConnectionID) {
        state.withLock { $0.closed.append(connection) }
    }

    var closedCount: Int { state.withLock { $0.closed.count } }
}

/// Log lines a server wrote.
final class LogBox: Sendable {
    let lines = Locked<[String]>([])
    func contains(_ s: String) -> Bool { lines.withLock { $0.contains { $0.contains(s) } } }
}

/// A temporary directory, a server in it, and its handler.
final class ServerFixture {
    let dir: String
    let path: String
    let handler = RecordingHandler()
    let server: ControlServer
    let logs: LogBox

    /// `options`, whose peers (all this process) count as Earmuff's own programs unless they say.
    init(options: ControlServerOptions = ControlServerOptions(daemonVersion: "9.9.9")) throws {
        var options = options
        if options.ownProgram == nil { options.ownProgram = { _ in true } }
        var template = Array("/tmp/earmuff-ctl-XXXXXX".utf8CString)
        let made = unsafe template.withUnsafeMutableBufferPointer { unsafe mkdtemp($0.baseAddress!) } // non-nil: the buffer is a valid C string
        unsafe #expect(made != nil)
        dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        path = dir + "/run/earmuff/control"
        let logs = LogBox()
        self.logs = logs
        server = try ControlServer(path: path, handler: handler, options: options) { _, line in logs.lines.withLock { $0.append(line) } }
        handler.server.withLock { $0 = server }
        server.start()
    }

    deinit {
        server.stop()
        _ = try? FileManager.default.removeItem(atPath: dir)
    }

    func connect() throws -> ControlClient { try ControlClient(path: path) }
    func raw() throws -> RawConnection { try RawConnection(path: path) }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A plain blocking socket that sends any bytes and reads lines with a timeout.
final class RawConnection {
    let fd: Int32
    var framer = LineFramer(limit: ControlLimits.maxServerLine)

    init(path: String, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if var size = receiveBuffer {
            unsafe setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        try FileDescriptor.borrowing(fd) { s throws(Errno) in try s.connect(to: path) }
    }

    deinit { close(fd) }

    func write(_ s: String) throws { try write(Array(s.utf8)) }

    func write(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            // non-nil: bytes is non-empty here
            let n = unsafe bytes.withUnsafeBytes { unsafe Glibc.send(fd, $0.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send: \(unsafe String(cString: strerror(errno)))") }
            off += n
        }
    }

    /// The next line, nil at EOF; throws after `seconds` without one.
    func readLine(seconds: Int32 = 10) throws -> String? {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            if let line = try framer.readLine() { return String(decoding: line, as: UTF8.self) }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard unsafe poll(&p, 1, seconds * 1000) == 1 else { throw TestFailure("no line within \(seconds) s") }
            let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return nil }
            if n < 0 { return nil } // ECONNRESET counts as closed
            framer.append(buf[0..<n])
        }
    }

    func readMessage() throws -> ServerMessage {
        guard let line = try readLine() else { throw TestFailure("connection closed") }
        return try ControlCodec.decodeServerMessage(Array(line.utf8))
    }

    /// True when the server closes the connection (after any remaining lines).
    func readUntilClosed() throws -> [String] {
        var lines: [String] = []
        while let l = try readLine() { lines.append(l) }
        return lines
    }
}

func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(2000)
    }
    return condition()
}

@Suite(.serialized) struct ControlServerTests {
    @Test func greetsAndAnswersWithTheRequestId() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        guard case .response(nil, .hello(let hello)) = try raw.readMessage() else { throw TestFailure("no greeting") }
        #expect(hello == ServerHello(daemonVersion: "9.9.9", pid: getpid()))
        try raw.write("{\"type\":\"status\",\"id\":41}\n{\"type\":\"apps\",\"id\":42}\n")
        guard case .response(41, .status(let s)) = try raw.readMessage() else { throw TestFailure("no status") }
        #expect(s.upstream.server == "unix:/u")
        guard case .response(42, .apps(let apps)) = try raw.readMessage() else { throw TestFailure("no apps") }
        #expect(apps.map(\.key) == ["exe:/usr/bin/pacat"])
        #expect(f.handler.state.withLock { $0.requests } == [.status, .apps])
        #expect(f.handler.state.withLock { $0.opened.count } == 1)
    }

    @Test func clientRequestsAndHandlerErrors() throws {
        let f = try ServerFixture()
        let c = try f.connect()
        #expect(c.greeting.daemonVersion == "9.9.9")
        #expect(
            try c.request(.setDecision(app: "exe:/bin/x", state: .granted, reason: nil)) == .app(AppInfo(key: "exe:/bin/x", state: .granted, reason: .user)))
        #expect {
            _ = try c.request(.reset(app: "nope"))
        } throws: { e in
            guard let e = e as? ControlClientError else { return false }
            return e.kind == .daemon && e.reply?.code == .unknownApp
        }
        // The connection survives an error reply.
        #expect(
            try c.request(.registerLauncher(appID: "org.example.Notes", purpose: nil))
                == .launcher(LauncherInfo(appKey: "launcher:org.example.Notes", socketPath: "/tmp/org.example.Notes")))
    }

    @Test func directoryAndSocketModes() throws {
        let f = try ServerFixture()
        var st = stat()
        unsafe #expect(stat(f.dir + "/run/earmuff", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
        unsafe #expect(stat(f.path, &st) == 0)
        #expect(st.st_mode & S_IFMT == S_IFSOCK)
        #expect(st.st_mode & 0o777 == 0o600)
    }

    @Test func aDirectoryThatWasThereKeepsItsMode() throws {
        // As /tmp would be: anybody may write into it, with the sticky bit.
        let f = try ServerFixture()
        f.server.stop()
        let shared = f.dir + "/shared"
        unsafe #expect(mkdir(shared, 0o700) == 0 && chmod(shared, 0o1777) == 0)
        let server = try ControlServer(path: shared + "/control", handler: f.handler)
        defer { server.stop() }
        var st = stat()
        unsafe #expect(stat(shared, &st) == 0)
        #expect(st.st_mode & 0o7777 == 0o1777, "mode \(String(st.st_mode & 0o7777, radix: 8))")
    }

    @Test func aDirectoryAnybodyMayReplaceTheSocketInIsRefused() throws {
        let f = try ServerFixture()
        f.server.stop()
        let open = f.dir + "/open"
        unsafe #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
        #expect {
            _ = try ControlServer(path: open + "/control", handler: f.handler)
        } throws: { e in
            guard let e = e as? ControlServerError else { return false }
            return e.code == .permissionDenied && e.description.contains("writable by everyone")
        }
        var st = stat()
        unsafe #expect(stat(open, &st) == 0 && st.st_mode & 0o7777 == 0o777)
    }

    @Test func aSecondServerOnALiveSocketIsRefused() throws {
        let f = try ServerFixture()
        #expect {
            _ = try ControlServer(path: f.path, handler: f.handler)
        } throws: { e in
            (e as? ControlServerError)?.code == .addressInUse
        }
        // The first one still works.
        _ = try f.connect().request(.status)
    }

    @Test func aStaleSocketIsReplaced() throws {
        let f = try ServerFixture()
        f.server.stop()
        // Leave a stale socket file behind, as a crashed daemon would.
        try FileDescriptor.unixSocket().listen(at: f.path, backlog: 1)
        let again = try ControlServer(path: f.path, handler: f.handler)
        again.start()
        defer { again.stop() }
        _ = try ControlClient(path: f.path).request(.status)
    }

    @Test func subscribersGetBroadcastEventsOthersDoNot() throws {
        let f = try ServerFixture()
        let sub = try f.connect()
        let other = try f.connect()
        #expect(try sub.request(.subscribe) == .ok)
        #expect(f.server.subscriberCount == 1)
        let event = ControlEvent.decisionChanged(AppInfo(key: "exe:/x", state: .denied, reason: .user))
        let server = f.server
        let t = Thread { server.broadcast(event) }
        t.start()
        #expect(try sub.receive(timeoutMs: 10000) == .event(event))
        // The other connection sees only its own reply.
        #expect(try other.request(.status) != .ok)
        #expect(try other.receive(timeoutMs: 100) == nil)
    }

    @Test func messagesSentDuringHandleFollowTheReply() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        try raw.write("{\"type\":\"become-agent\",\"id\":5}\n")
        #expect(try raw.readMessage() == .response(id: 5, .ok))
        #expect(try raw.readMessage() == .prompt(PromptInfo(id: 9, appKey: "exe:/x", identifiedBy: .executable)))
    }

    @Test func garbageGetsAnErrorThenClose() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        try raw.write("this is not json\n{\"type\":\"status\",\"id\":1}\n")
        let lines = try raw.readUntilClosed()
        #expect(lines.count == 1)
        guard case .response(nil, .error(let e)) = try ControlCodec.decodeServerMessage(Array(lines[0].utf8)) else { throw TestFailure("no error") }
        #expect(e.code == .badRequest)
        #expect(waitUntil { f.handler.closedCount == 1 })
        #expect(f.handler.state.withLock { $0.requests }.isEmpty)
        // The server still serves others.
        _ = try f.connect().request(.status)
    }

    @Test func oversizedLineGetsTooLargeThenClose() throws {
        let f = try ServerFixture(options: ControlServerOptions(maxLineBytes: 1024))
        let raw = try f.raw()
        _ = try raw.readMessage()
        // No newline at all: the limit is enforced before the line ends.
        try raw.write([UInt8](repeating: UInt8(ascii: "x"), count: 4096))
        let lines = try raw.readUntilClosed()
        #expect(lines.count == 1)
        guard case .response(nil, .error(let e)) = try ControlCodec.decodeServerMessage(Array(lines[0].utf8)) else { throw TestFailure("no error") }
        #expect(e.code == .tooLarge)
        _ = try f.connect().request(.status)
    }

    @Test func defaultLimitAccepts64KiBAndRejectsMore() throws {
        let f = try ServerFixture()
        let ok = try f.raw()
        _ = try ok.readMessage()
        // A set-decision whose line is exactly 64 KiB long.
        let head = "{\"type\":\"set-decision\",\"id\":1,\"state\":\"granted\",\"app\":\"exe:/"
        let tail = "\"}"
        let pad = String(repeating: "a", count: 65536 - head.utf8.count - tail.utf8.count)
        try ok.write(head + pad + tail + "\n")
        guard case .response(1, .app(let app)) = try ok.readMessage() else { throw TestFailure("no reply to a 64 KiB line") }
        #expect(app.key.utf8.count == 5 + pad.utf8.count)

        let big = try f.raw()
        _ = try big.readMessage()
        try big.write(head + pad + "a" + tail + "\n")
        let lines = try big.readUntilClosed()
        #expect(lines.count == 1 && lines[0].contains("too-large"))
    }

    @Test func halfWrittenLineWaitsForTheRest() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        try raw.write("{\"type\":\"sta")
        usleep(100_000)
        // Others are served while the line is incomplete.
        _ = try f.connect().request(.apps)
        #expect(f.handler.state.withLock { $0.requests } == [.apps])
        try raw.write("tus\",\"id\":3}\n")
        guard case .response(3, .status) = try raw.readMessage() else { throw TestFailure("no status") }
    }

    @Test func unknownTypeAndBadFieldsKeepTheConnection() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        try raw.write("{\"type\":\"frobnicate\",\"id\":1}\n{\"type\":\"reset\",\"id\":2}\n{\"type\":\"status\",\"id\":3}\n")
        guard case .response(1, .error(let e1)) = try raw.readMessage() else { throw TestFailure("no error 1") }
        #expect(e1.code == .unknownRequest)
        guard case .response(2, .error(let e2)) = try raw.readMessage() else { throw TestFailure("no error 2") }
        #expect(e2.code == .badRequest)
        #expect(e2.message.contains("app"))
        guard case .response(3, .status) = try raw.readMessage() else { throw TestFailure("no status") }
    }

    @Test func versionHandshake() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        try raw.write("{\"type\":\"hello\",\"id\":1,\"version\":1,\"client\":\"test\"}\n")
        guard case .response(1, .hello(let h)) = try raw.readMessage() else { throw TestFailure("no hello") }
        #expect(h.version == 1)

        let future = try f.raw()
        _ = try future.readMessage()
        try future.write("{\"type\":\"hello\",\"id\":7,\"version\":2}\n{\"type\":\"status\",\"id\":8}\n")
        let lines = try future.readUntilClosed()
        #expect(lines.count == 1)
        guard case .response(7, .error(let e)) = try ControlCodec.decodeServerMessage(Array(lines[0].utf8)) else { throw TestFailure("no version error") }
        #expect(e.code == .version)
    }

    @Test func halfClosedClientStillGetsItsReply() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        try raw.write("{\"type\":\"apps\",\"id\":4}\n")
        shutdown(raw.fd, Int32(SHUT_WR))
        let lines = try raw.readUntilClosed()
        #expect(lines.count == 2)
        #expect(lines.last?.contains("\"id\":4") == true)
    }

    @Test func aSubscriberThatNeverReadsIsDroppedWithoutBlocking() throws {
        let f = try ServerFixture(options: ControlServerOptions(maxPendingOutputBytes: 256 * 1024))
        let stalled = try RawConnection(path: f.path, receiveBuffer: 4096)
        try stalled.write("{\"type\":\"subscribe\",\"id\":1}\n")
        #expect(waitUntil { f.server.subscriberCount == 1 })
        let live = try f.connect()
        #expect(try live.request(.subscribe) == .ok)
        #expect(f.server.subscriberCount == 2)

        let event = ControlEvent.promptRaised(
            PromptInfo(
                id: 1, appKey: "exe:/x", identifiedBy: .executable,
                purpose: String(repeating: "p", count: 1000)))
        let start = Date()
        var received = 0
        for _ in 0..<2000 {
            f.server.broadcast(event)
            // The reading subscriber keeps up: it takes each event before the next is sent, so
            // only the stalled one's output grows, however slowly a loaded machine runs the server.
            if let m = try live.receive(timeoutMs: 10000) {
                #expect(m == .event(event))
                received += 1
            }
        }
        #expect(Date().timeIntervalSince(start) < 30) // broadcast never waits for a peer
        #expect(waitUntil { f.handler.closedCount == 1 })
        #expect(f.server.subscriberCount == 1)
        #expect(f.logs.contains("not reading"))
        while received < 2000, let m = try live.receive(timeoutMs: 10000) {
            #expect(m == .event(event))
            received += 1
        }
        #expect(received == 2000)
    }

    @Test func refusedUIDIsClosedAndLogged() throws {
        let f = try ServerFixture(options: ControlServerOptions(allowedUIDs: [geteuid() &+ 12345]))
        let raw = try f.raw()
        #expect(try raw.readUntilClosed().isEmpty)
        #expect(f.handler.state.withLock { $0.opened }.isEmpty)
        #expect(f.logs.contains("refused pid \(getpid()) uid \(geteuid())"))
    }

    @Test func stopClosesConnectionsAndRemovesTheSocket() throws {
        let f = try ServerFixture()
        let raw = try f.raw()
        _ = try raw.readMessage()
        #expect(waitUntil { f.server.connectionCount == 1 })
        f.server.stop()
        #expect(try raw.readUntilClosed().isEmpty)
        #expect(f.handler.closedCount == 1)
        unsafe #expect(access(f.path, F_OK) != 0)
        #expect {
            _ = try ControlClient(path: f.path)
        } throws: { e in
            guard let e = e as? ControlClientError else { return false }
            return e.kind == .unreachable && e.message.contains("start it with 'earmuff serve'")
        }
    }

    @Test func relativePathIsRejected() {
        #expect(throws: ControlServerError.self) {
            _ = try ControlServer(path: "relative/control", handler: RecordingHandler())
        }
    }
}
