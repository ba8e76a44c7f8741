// FloodServer: a synthetic PulseAudio native-protocol server for benchmarks.
//
// It speaks just enough of the protocol for a recording client: AUTH (answered
// with version 35 and no SHM/memfd bits), SET_CLIENT_NAME, CREATE/DELETE/CORK
// RECORD_STREAM, and cheap queries (GET_SERVER_INFO, LOOKUP_SINK/SOURCE, and
// SUBSCRIBE and the source lists that Earmuff's source catalog asks for: one
// source, "flood", a capture device) with valid replies; anything else gets
// ERROR(NOT_IMPLEMENTED). Once a record
// stream exists it sends memblock frames on the stream's channel, either as
// fast as the socket takes them (`.flood`) or at a fixed byte rate per stream
// (`.paced`, e.g. real audio rates). Every packet is encoded with PulseWire.
//
// One epoll thread owns the listening socket and every connection, all
// non-blocking; the public API only touches atomics and an eventfd. Memblock
// payloads are prebuilt once per stream and sent from the same buffer again
// and again, so the server costs one copy (into the kernel) per byte. Packets
// are only ever written between memblock frames, never inside one.

import CLinux
import Foundation
import Glibc
import PulseWire
import Synchronization

/// A synthetic upstream server that answers the handshake and floods record data.
@safe
public final class FloodServer: @unchecked Sendable {
    // @unchecked Sendable: every mutable field below `loop` is owned by the loop
    // thread; other threads only use the atomics, the eventfd and immutable lets.

    /// How fast record data is sent.
    public enum Pacing: Sendable, Equatable {
        /// As fast as the socket accepts it.
        case flood
        /// `bytesPerSecond` per stream, in memblocks of `chunkBytes` payload bytes.
        case paced(bytesPerSecond: Int, chunkBytes: Int)
    }

    /// The listening socket's path.
    public let socketPath: String
    /// `unix:<socketPath>`, for PULSE_SERVER or `earmuff serve --upstream`.
    public var serverString: String { "unix:\(socketPath)" }
    /// How data is paced.
    public let pacing: Pacing
    /// Payload bytes per memblock frame.
    public let payloadBytes: Int
    /// The byte every payload is filled with (not a silence byte of any format).
    public static let payloadByte: UInt8 = 0x5A
    /// The protocol version the server announces.
    public static let serverVersion: UInt32 = 35

    /// How long the server takes to answer GET_SERVER_INFO, in microseconds (0 by default;
    /// set from any thread): a server that answers later than a relay polls.
    public let serverInfoDelayMicroseconds = Atomic<Int>(0)
    /// The loop thread's kernel id (gettid) once it runs (0 before), for tests that pin it.
    public let kernelThreadID = Atomic<Int32>(0)
    private let connections = Atomic<Int>(0)
    private let streams = Atomic<Int>(0)
    private let sent = Atomic<UInt64>(0)
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let listenFD: Int32
    private let wakeFD: Int32
    private let epollFD: Int32

    // Loop-thread state.
    private var conns: [Int32: FloodConnection] = [:]
    private var nextClientIndex: UInt32 = 0
    private var nextSourceOutput: UInt32 = 0
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let startTime = Wait.now()

    /// Connections currently open.
    public var connectionCount: Int { connections.load(ordering: .relaxed) }
    /// Record streams currently open.
    public var streamCount: Int { streams.load(ordering: .relaxed) }
    /// Memblock payload bytes fully sent so far.
    public var bytesSent: UInt64 { sent.load(ordering: .relaxed) }

    /// Starts listening at `socketPath` and runs the loop on its own thread.
    public init(socketPath: String, pacing: Pacing = .flood, payloadBytes: Int = 64 * 1024) throws {
        precondition(payloadBytes > 0 && payloadBytes <= Int(Limits.maxFrameLength), "payload size out of range")
        if case .paced(let rate, let chunk) = pacing {
            precondition(rate > 0 && chunk > 0 && chunk <= Int(Limits.maxFrameLength), "pacing out of range")
        }
        self.socketPath = socketPath
        self.pacing = pacing
        if case .paced(_, let chunk) = pacing { self.payloadBytes = chunk } else { self.payloadBytes = payloadBytes }
        let fd = earmuff_unix_socket()
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        guard unsafe earmuff_unix_listen(fd, socketPath, 4096) == 0 else {
            let e = errno
            close(fd)
            throw TestSupportError("listen on \(socketPath): errno \(e)")
        }
        listenFD = fd
        wakeFD = earmuff_eventfd()
        epollFD = earmuff_epoll_create()
        unsafe readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        guard wakeFD >= 0, epollFD >= 0 else {
            close(fd)
            throw TestSupportError("eventfd/epoll: errno \(errno)")
        }
        _ = earmuff_epoll_add(epollFD, listenFD, EARMUFF_EPOLLIN, UInt64(UInt32(bitPattern: listenFD)))
        _ = earmuff_epoll_add(epollFD, wakeFD, EARMUFF_EPOLLIN, UInt64(UInt32(bitPattern: wakeFD)))
        let thread = Thread { [self] in run() }
        thread.name = "flood-server"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Stops the loop, closes every connection and removes the socket. Idempotent.
    /// Call it when done: the loop thread keeps the server alive until then.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = earmuff_eventfd_signal(wakeFD)
        finished.wait()
        for fd in conns.keys { close(fd) }
        conns.removeAll()
        close(listenFD)
        close(wakeFD)
        close(epollFD)
        unsafe unlink(socketPath)
        unsafe readBuffer.deallocate()
    }

    // MARK: - Loop

    private func run() {
        kernelThreadID.store(earmuff_gettid(), ordering: .releasing)
        let maxEvents: Int32 = 256
        var events = [UInt32](repeating: 0, count: Int(maxEvents))
        var datas = [UInt64](repeating: 0, count: Int(maxEvents))
        let paced: Bool
        if case .paced = pacing { paced = true } else { paced = false }
        while !stopping.load(ordering: .acquiring) {
            let n = unsafe events.withUnsafeMutableBufferPointer { ev in
                unsafe datas.withUnsafeMutableBufferPointer { da in
                    // baseAddress is non-nil: both arrays hold maxEvents elements.
                    unsafe earmuff_epoll_wait(epollFD, ev.baseAddress!, da.baseAddress!, maxEvents, paced ? 2 : 1000)
                }
            }
            for i in 0..<Int(max(n, 0)) {
                let fd = Int32(truncatingIfNeeded: datas[i])
                if fd == wakeFD {
                    _ = earmuff_eventfd_drain(wakeFD)
                } else if fd == listenFD {
                    acceptAll()
                } else if let conn = conns[fd] {
                    handle(conn, events: events[i])
                }
            }
            if paced { pumpPaced() }
        }
        finished.signal()
    }

    private func acceptAll() {
        while true {
            let fd = earmuff_accept(listenFD)
            if fd < 0 { return }
            let conn = FloodConnection(fd: fd)
            conns[fd] = conn
            connections.wrappingAdd(1, ordering: .relaxed)
            _ = earmuff_epoll_add(epollFD, fd, EARMUFF_EPOLLIN | EARMUFF_EPOLLRDHUP, UInt64(UInt32(bitPattern: fd)))
        }
    }

    private func handle(_ conn: FloodConnection, events: UInt32) {
        if events & (EARMUFF_EPOLLIN | EARMUFF_EPOLLRDHUP | EARMUFF_EPOLLHUP | EARMUFF_EPOLLERR) != 0 {
            guard readAll(conn) else { return drop(conn) }
        }
        guard pump(conn) else { return drop(conn) }
    }

    /// Reads until EAGAIN and answers every whole packet; false when the connection is done.
    private func readAll(_ conn: FloodConnection) -> Bool {
        while true {
            let n = unsafe recv(conn.fd, readBuffer.baseAddress, readBuffer.count, Int32(MSG_DONTWAIT))
            if n == 0 { return false }
            if n < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK
            }
            unsafe conn.parser.append(UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]))
            do {
                while let d = try conn.parser.next(reusing: &conn.scratch) {
                    if d.isPacket { try answer(conn, payload: conn.scratch) }
                    // Memblocks from the client (playback) are ignored.
                }
            } catch {
                return false
            }
        }
    }

    private func answer(_ conn: FloodConnection, payload: [UInt8]) throws {
        var r = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &r)
        let tag = header.tag
        switch Command(rawValue: header.command) {
        case .auth:
            let auth = try AuthRequest.decode(from: &r, version: conn.version)
            conn.version = min(ProtocolVersion.number(of: auth.versionWord), Self.serverVersion)
            conn.queue(AuthReply(versionWord: Self.serverVersion).packet(tag: tag, version: conn.version))
        case .setClientName:
            _ = try SetClientName.decode(from: &r, version: conn.version)
            nextClientIndex &+= 1
            conn.queue(SetClientNameReply(clientIndex: nextClientIndex).packet(tag: tag, version: conn.version))
        case .createRecordStream:
            let req = try CreateRecordStreamRequest.decode(from: &r, version: conn.version)
            var reply = CreateRecordStreamReply()
            reply.channel = conn.nextChannel
            conn.nextChannel &+= 1
            reply.sourceOutputIndex = nextSourceOutput
            nextSourceOutput &+= 1
            reply.maxLength = req.maxLength == .max ? 4 * 1024 * 1024 : req.maxLength
            reply.fragSize = req.fragSize == .max ? UInt32(payloadBytes) : req.fragSize
            let spec = req.sampleSpec.isValid ? req.sampleSpec : SampleSpec(format: .s16le, channels: 2, rate: 48000)
            reply.sampleSpec = spec
            reply.channelMap =
                req.channelMap.channels == Int(spec.channels)
                ? req.channelMap : (spec.channels == 1 ? .mono : .stereo)
            reply.sourceIndex = 1
            reply.sourceName = "flood"
            reply.suspended = false
            reply.sourceLatencyUsec = 20_000
            var props = Proplist()
            props.set("format.sample_format", string: "\"\(spec.format.name)\"")
            props.set("format.rate", string: "\(spec.rate)")
            props.set("format.channels", string: "\(spec.channels)")
            reply.format = FormatInfo(encoding: .pcm, properties: props)
            conn.queue(reply.packet(tag: tag, version: conn.version))
            conn.streams.append(FloodStream(channel: reply.channel, payloadBytes: payloadBytes, corked: req.corked))
            streams.wrappingAdd(1, ordering: .relaxed)
            if !conn.hasStarted {
                conn.hasStarted = true
                conn.pacedStart = Wait.now() - startTime
            }
        case .deleteRecordStream:
            let channel = try r.readU32()
            if let s = conn.streams.first(where: { $0.channel == channel && !$0.deleted }) {
                conn.remove(s)
                streams.wrappingAdd(-1, ordering: .relaxed)
                conn.queue(Reply(tag: tag).packet)
            } else {
                conn.queue(ErrorReply(code: .noEntity).packet(tag: tag, version: conn.version))
            }
        case .corkRecordStream:
            let channel = try r.readU32()
            let cork = try r.readBool()
            for s in conn.streams where s.channel == channel { s.corked = cork }
            conn.queue(Reply(tag: tag).packet)
        case .getServerInfo:
            let delay = serverInfoDelayMicroseconds.load(ordering: .relaxed)
            if delay > 0 { usleep(UInt32(delay)) }
            var w = TagStructWriter(reservingCapacity: 128)
            PacketHeader(command: .reply, tag: tag).encode(into: &w)
            w.writeString("pulseaudio")
            w.writeString("16.1")
            w.writeString("bench")
            w.writeString("flood")
            w.writeSampleSpec(SampleSpec(format: .s16le, channels: 2, rate: 48000))
            w.writeString("flood-sink")
            w.writeString("flood")
            w.writeU32(0x0bad_cafe)
            if conn.version >= 15 { w.writeChannelMap(.stereo) }
            conn.queue(w.bytes)
        case .subscribe:
            conn.queue(Reply(tag: tag).packet)
        case .getSourceInfo, .getSourceInfoList:
            // Its one source (what CREATE_RECORD_STREAM names) is a capture device, not a
            // monitor, so Earmuff's source catalog classifies its streams as microphone.
            conn.queue(SourceInfoReply(records: [SourceInfo(index: 1, name: "flood")]).packet(tag: tag, version: conn.version))
        case .getSourceOutputInfoList:
            conn.queue(SourceOutputInfoReply(records: []).packet(tag: tag, version: conn.version))
        case .lookupSink, .lookupSource:
            var w = TagStructWriter(reservingCapacity: 16)
            PacketHeader(command: .reply, tag: tag).encode(into: &w)
            w.writeU32(header.command == Command.lookupSink.rawValue ? 0 : 1)
            conn.queue(w.bytes)
        default:
            if tag != PacketTag.none {
                conn.queue(ErrorReply(code: .notImplemented).packet(tag: tag, version: conn.version))
            }
        }
    }

    /// Writes queued packets and (unpaced) memblocks until EAGAIN; false if the
    /// connection failed. Keeps EPOLLOUT armed exactly while there is more to send.
    private func pump(_ conn: FloodConnection) -> Bool {
        let flooding: Bool
        if case .flood = pacing { flooding = true } else { flooding = false }
        var blocked = false
        outer: while true {
            // Packets go out only between memblock frames.
            if conn.frameOffset == 0, !conn.control.isEmpty {
                let rest = conn.control.count - conn.controlOffset
                let n = unsafe conn.control.withUnsafeBytes { buf in
                    unsafe send(conn.fd, buf.baseAddress! + conn.controlOffset, rest, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK { blocked = true; break }
                    return false
                }
                conn.controlOffset += n
                if conn.controlOffset == conn.control.count {
                    conn.control.removeAll(keepingCapacity: true)
                    conn.controlOffset = 0
                }
                continue
            }
            guard let stream = conn.currentStream() else { break }
            if conn.frameOffset == 0 && !flooding {
                guard conn.framesSent < conn.framesDue else { break }
            }
            let frame = stream.frame
            let n = unsafe frame.withUnsafeBytes { buf in
                // baseAddress is non-nil: a frame holds at least its descriptor.
                unsafe send(
                    conn.fd, buf.baseAddress! + conn.frameOffset, buf.count - conn.frameOffset,
                    Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n < 0 {
                if errno == EINTR { continue outer }
                if errno == EAGAIN || errno == EWOULDBLOCK { blocked = true; break }
                return false
            }
            conn.frameOffset += n
            if conn.frameOffset == frame.count {
                conn.frameOffset = 0
                conn.framesSent += 1
                sent.wrappingAdd(UInt64(payloadBytes), ordering: .relaxed)
                conn.advanceStream()
            }
        }
        if blocked != conn.wantsWrite {
            conn.wantsWrite = blocked
            let ev = EARMUFF_EPOLLIN | EARMUFF_EPOLLRDHUP | (blocked ? EARMUFF_EPOLLOUT : 0)
            _ = earmuff_epoll_mod(epollFD, conn.fd, ev, UInt64(UInt32(bitPattern: conn.fd)))
        }
        return true
    }

    /// Grants every paced connection the frames its elapsed time allows and sends them.
    private func pumpPaced() {
        guard case .paced(let rate, let chunk) = pacing else { return }
        let now = Wait.now() - startTime
        for conn in Array(conns.values) where !conn.streams.isEmpty {
            let active = conn.streams.reduce(0) { $0 + ($1.corked ? 0 : 1) }
            conn.framesDue = Int((now - conn.pacedStart) * Double(rate) / Double(chunk)) * active
            if conn.framesSent < conn.framesDue && !conn.wantsWrite {
                if !pump(conn) { drop(conn) }
            }
        }
    }

    private func drop(_ conn: FloodConnection) {
        _ = earmuff_epoll_del(epollFD, conn.fd)
        close(conn.fd)
        conns[conn.fd] = nil
        connections.wrappingAdd(-1, ordering: .relaxed)
        streams.wrappingAdd(-conn.streams.filter { !$0.deleted }.count, ordering: .relaxed)
    }
}

/// One record stream: its channel and the prebuilt frame (descriptor + payload).
private final class FloodStream {
    let channel: UInt32
    let frame: [UInt8]
    var corked: Bool
    /// Deleted by the client; removed at the next frame boundary.
    var deleted = false

    init(channel: UInt32, payloadBytes: Int, corked: Bool) {
        self.channel = channel
        self.corked = corked
        var f = [UInt8]()
        f.reserveCapacity(Limits.descriptorSize + payloadBytes)
        FrameDescriptor(length: UInt32(payloadBytes), channel: channel).append(to: &f)
        f.append(contentsOf: repeatElement(FloodServer.payloadByte, count: payloadBytes))
        frame = f
    }
}

/// Per-connection state, owned by the loop thread.
private final class FloodConnection {
    let fd: Int32
    var parser = FrameParser()
    var scratch = [UInt8]()
    var version: UInt32 = 8
    var nextChannel: UInt32 = 0
    var streams: [FloodStream] = []
    var current = 0
    /// Bytes of the current memblock frame already sent (0 = at a frame boundary).
    var frameOffset = 0
    var control: [UInt8] = []
    var controlOffset = 0
    var wantsWrite = false
    var framesSent = 0
    var framesDue = 0
    /// Seconds (since the server started) when this connection's first stream began.
    var pacedStart = 0.0
    var hasStarted = false

    init(fd: Int32) { self.fd = fd }

    func queue(_ payload: [UInt8]) {
        FrameDescriptor.packet(length: UInt32(payload.count)).append(to: &control)
        control.append(contentsOf: payload)
    }

    /// The stream whose frame is being sent or is next (skipping corked ones).
    func currentStream() -> FloodStream? {
        if frameOffset > 0 { return streams[current] }
        for _ in 0..<streams.count {
            if current >= streams.count { current = 0 }
            if !streams[current].corked && !streams[current].deleted { return streams[current] }
            current += 1
        }
        return nil
    }

    /// Moves to the next stream after a whole frame, dropping deleted streams.
    func advanceStream() {
        current += 1
        if streams.contains(where: { $0.deleted }) {
            let kept = streams[..<min(current, streams.count)].filter { !$0.deleted }.count
            streams.removeAll { $0.deleted }
            current = kept
        }
        if current >= streams.count { current = 0 }
    }

    /// Deletes `stream`; a frame already in progress is finished first.
    func remove(_ stream: FloodStream) {
        stream.deleted = true
        if frameOffset == 0 {
            let before = streams[..<min(current, streams.count)].filter { !$0.deleted }.count
            streams.removeAll { $0.deleted }
            current = before
            if current >= streams.count { current = 0 }
        }
    }
}
