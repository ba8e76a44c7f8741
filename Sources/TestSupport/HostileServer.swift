// HostileServer: an upstream for earmuff that misbehaves on purpose.
//
// Each accepted connection takes the next queued `Behavior` (or `.relay` when
// none is queued). `.relay` copies bytes both ways to a real server, so
// well-behaved clients behind the same earmuff keep working (for instance a
// recorder that proves the daemon carries on). `.script` plays a minimal
// server: it answers AUTH (v35, no SHM), SET_CLIENT_NAME, CREATE_RECORD_STREAM
// and any other tagged request with valid replies built by PulseWire, and
// right after answering the trigger command it sends the script's raw bytes,
// optionally with a descriptor attached (SCM_RIGHTS), and optionally closes.
// Whether earmuff then closed the connection is counted.
//
// One thread accepts; each connection gets its own thread with blocking I/O
// and poll timeouts (test code: simplicity over scale).

import CLinux
import Foundation
import Glibc
import PulseWire
import Synchronization

/// A scripted, misbehaving native-protocol server in front of (optionally) a real one.
public final class HostileServer: Sendable {
    /// What the server sends after the handshake.
    public struct Script: Sendable {
        /// The request after whose answer `bytes` are sent.
        public var trigger: Command
        /// Whether the trigger request is answered normally before `bytes`.
        public var answerTrigger: Bool
        /// Raw bytes (usually frames) to send.
        public var bytes: [UInt8]
        /// A descriptor to attach to `bytes` (the caller keeps its own copy).
        public var passFD: Int32?
        /// Close the connection right after sending.
        public var closeAfterSending: Bool

        /// Builds a script.
        public init(
            after trigger: Command = .auth, answerTrigger: Bool = true, send bytes: [UInt8],
            passFD: Int32? = nil, closeAfterSending: Bool = false
        ) {
            self.trigger = trigger
            self.answerTrigger = answerTrigger
            self.bytes = bytes
            self.passFD = passFD
            self.closeAfterSending = closeAfterSending
        }
    }

    /// How one connection is served.
    public enum Behavior: Sendable {
        /// Copy bytes both ways to the real server given at init.
        case relay
        /// Play the minimal server and misbehave as scripted.
        case script(Script)
    }

    /// The listening socket's path.
    public let socketPath: String
    /// `unix:<socketPath>`, for `earmuff serve --upstream`.
    public var serverString: String { "unix:\(socketPath)" }
    /// The real server `.relay` connections go to (a socket path), if any.
    public let upstreamPath: String?
    /// The record channel scripted CREATE_RECORD_STREAM replies announce.
    public static let recordChannel: UInt32 = 0
    /// The source output index scripted CREATE_RECORD_STREAM replies announce.
    public static let sourceOutputIndex: UInt32 = 3

    private let listenFD: Int32
    private let queue = Mutex<[Behavior]>([])
    private let stopping = Atomic<Bool>(false)
    private let scriptedClosedByPeer = Atomic<Int>(0)
    private let scriptedStarted = Atomic<Int>(0)
    private let live = Atomic<Int>(0)
    private let fired = Atomic<Int>(0)

    /// Scripted connections accepted so far.
    public var scriptedConnections: Int { scriptedStarted.load(ordering: .acquiring) }
    /// Scripts that have sent their bytes (or failed to) so far; after this
    /// moves, the script no longer uses its `passFD` and the caller may close it.
    public var scriptsFired: Int { fired.load(ordering: .acquiring) }
    /// Scripted connections the peer (earmuff) closed so far.
    public var scriptedConnectionsClosedByPeer: Int { scriptedClosedByPeer.load(ordering: .acquiring) }

    /// Listens at `socketPath`; `.relay` connections go to `upstream` (`unix:/path` or a path).
    public init(socketPath: String, relayTo upstream: String? = nil) throws {
        self.socketPath = socketPath
        upstreamPath = upstream.map { $0.hasPrefix("unix:") ? String($0.dropFirst(5)) : $0 }
        let fd = earmuff_unix_socket()
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        guard unsafe earmuff_unix_listen(fd, socketPath, 256) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TestSupportError("listen on \(socketPath): errno \(e)")
        }
        listenFD = fd
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "hostile-accept"
        thread.start()
    }

    /// Queues the behaviour of the next accepted connection.
    public func enqueue(_ behavior: Behavior) {
        queue.withLock { $0.append(behavior) }
    }

    /// Stops accepting; connection threads end at their next poll timeout. Idempotent.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Wait.untilBlocking(timeout: 2) { live.load(ordering: .acquiring) == 0 }
        unsafe unlink(socketPath)
    }

    private var isStopping: Bool { stopping.load(ordering: .acquiring) }

    private func acceptLoop() {
        live.add(1, ordering: .acquiringAndReleasing)
        defer {
            Glibc.close(listenFD)
            live.subtract(1, ordering: .acquiringAndReleasing)
        }
        while !isStopping {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard unsafe poll(&pfd, 1, 100) > 0 else { continue }
            let fd = earmuff_accept(listenFD)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            let behavior = queue.withLock { $0.isEmpty ? Behavior.relay : $0.removeFirst() }
            live.add(1, ordering: .acquiringAndReleasing)
            let thread = Thread { [self] in
                defer { live.subtract(1, ordering: .acquiringAndReleasing) }
                switch behavior {
                case .relay: relay(fd)
                case .script(let script): play(script, on: fd)
                }
            }
            thread.name = "hostile-conn"
            thread.start()
        }
    }

    // MARK: - Relay

    private func relay(_ client: Int32) {
        defer { Glibc.close(client) }
        guard let path = upstreamPath else { return }
        let up = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard up >= 0 else { return }
        defer { Glibc.close(up) }
        guard unsafe earmuff_unix_connect(up, path) == 0 else { return }
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: up, events: Int16(POLLIN), revents: 0)]
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        while !isStopping {
            let r = unsafe poll(&fds, 2, 100)
            if r < 0 && errno != EINTR { return }
            if r <= 0 { continue }
            for i in 0..<2 where fds[i].revents != 0 {
                let from = fds[i].fd, to = fds[1 - i].fd
                let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(from, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return }
                guard sendAll(to, Array(buf[0..<n])) else { return }
            }
        }
    }

    // MARK: - Script

    private func play(_ script: Script, on fd: Int32) {
        scriptedStarted.add(1, ordering: .acquiringAndReleasing)
        defer { Glibc.close(fd) }
        var parser = FrameParser()
        var version = Limits.protocolVersion
        var didFire = false
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        while !isStopping {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = unsafe poll(&pfd, 1, 100)
            if r < 0 && errno != EINTR { return }
            if r <= 0 { continue }
            let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 {
                scriptedClosedByPeer.add(1, ordering: .acquiringAndReleasing)
                return
            }
            parser.append(contentsOf: buf[0..<n])
            while let frame = try? parser.next() {
                guard frame.descriptor.isPacket, let header = try? PacketHeader.decode(frame.payload) else { continue }
                let isTrigger = !didFire && header.command == script.trigger.rawValue
                if !isTrigger || script.answerTrigger {
                    guard let answer = answer(header, payload: frame.payload, version: &version),
                        sendAll(fd, answer)
                    else { if !isTrigger { continue } else { return } }
                }
                guard isTrigger else { continue }
                didFire = true
                defer { self.fired.add(1, ordering: .acquiringAndReleasing) }
                if !script.bytes.isEmpty {
                    let ok: Bool
                    if let pass = script.passFD {
                        let sent = unsafe script.bytes.withUnsafeBytes { unsafe earmuff_send_with_fd(fd, $0.baseAddress, $0.count, pass) }
                        ok = sent == script.bytes.count || (sent > 0 && sendAll(fd, Array(script.bytes[sent...])))
                    } else {
                        ok = sendAll(fd, script.bytes)
                    }
                    if !ok {
                        // earmuff hung up while we were still sending: it closed the connection.
                        scriptedClosedByPeer.add(1, ordering: .acquiringAndReleasing)
                        return
                    }
                }
                if script.closeAfterSending { return }
            }
        }
    }

    /// The normal answer to a request (a whole frame), or nil for none.
    private func answer(_ header: PacketHeader, payload: [UInt8], version: inout UInt32) -> [UInt8]? {
        var r = TagStructReader(payload)
        _ = try? PacketHeader.decode(from: &r)
        let tag = header.tag
        let body: [UInt8]
        switch Command(rawValue: header.command) {
        case .auth:
            if let auth = try? AuthRequest.decode(from: &r, version: version) {
                version = min(ProtocolVersion.number(of: auth.versionWord), Limits.protocolVersion)
            }
            body = AuthReply(versionWord: Limits.protocolVersion).packet(tag: tag, version: version)
        case .setClientName:
            body = SetClientNameReply(clientIndex: 7).packet(tag: tag, version: version)
        case .createRecordStream:
            let req = try? CreateRecordStreamRequest.decode(from: &r, version: version)
            var reply = CreateRecordStreamReply()
            reply.channel = Self.recordChannel
            reply.sourceOutputIndex = Self.sourceOutputIndex
            reply.maxLength = 1 << 20
            reply.fragSize = 1920
            let spec =
                req.map { $0.sampleSpec.isValid ? $0.sampleSpec : SampleSpec(format: .s16le, channels: 1, rate: 48000) }
                ?? SampleSpec(format: .s16le, channels: 1, rate: 48000)
            reply.sampleSpec = spec
            reply.channelMap = spec.channels == 1 ? .mono : .stereo
            reply.sourceIndex = 1
            reply.sourceName = "hostile"
            reply.suspended = false
            reply.sourceLatencyUsec = 20_000
            var props = Proplist()
            props.set("format.sample_format", string: "\"\(spec.format.name)\"")
            props.set("format.rate", string: "\(spec.rate)")
            props.set("format.channels", string: "\(spec.channels)")
            reply.format = FormatInfo(encoding: .pcm, properties: props)
            body = reply.packet(tag: tag, version: version)
        default:
            guard tag != PacketTag.none else { return nil }
            body = Reply(tag: tag).packet
        }
        var frame = FrameDescriptor.packet(length: UInt32(body.count)).bytes
        frame.append(contentsOf: body)
        return frame
    }
}

/// Blocking send of all of `bytes`; false if the peer is gone.
private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let n = unsafe bytes.withUnsafeBytes { buf in
            // baseAddress is non-nil: the buffer is not empty inside this loop.
            unsafe Glibc.send(fd, buf.baseAddress! + sent, buf.count - sent, Int32(MSG_NOSIGNAL))
        }
        if n < 0 {
            if errno == EINTR { continue }
            return false
        }
        sent += n
    }
    return true
}
