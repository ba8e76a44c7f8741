// A minimal PulseAudio native-protocol client for the benchmark: blocking
// handshake and requests, then non-blocking counting of record data. It never
// asks for SHM or memfd, so audio always travels inline on the socket (what a
// socat relay needs too), and it has none of libpulse's overhead, so the
// figures are the transport's.

import CLinux
import Glibc
import LinuxSystem
import PulseWire

/// Fails a benchmark step with a message.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Cuts an arbitrarily chunked S→C byte stream into frames without copying
/// memblock payloads: it counts them, marks each frame by its first payload
/// byte, and collects packets whole.
struct FrameCounter {
    private var descriptor = [UInt8](repeating: 0, count: Limits.descriptorSize)
    private var descriptorHave = 0
    private var remaining = 0
    private var inPacket = false
    private var firstByteSeen = true
    private var packet: [UInt8] = []
    /// Whole packets received and not yet taken.
    var packets: [[UInt8]] = []
    /// Memblock payload bytes received.
    private(set) var memblockBytes: UInt64 = 0
    /// Memblock frames whose first payload byte is 0x00 (silence of signed/float formats).
    private(set) var silentFrames = 0
    /// Memblock frames whose first payload byte is the flood server's pattern.
    private(set) var patternFrames = 0
    /// Memblock frames whose first payload byte has come.
    private(set) var frames = 0

    mutating func consume(_ bytes: UnsafeRawBufferPointer) throws {
        var i = 0
        let n = bytes.count
        while i < n {
            if remaining == 0 {
                let take = min(Limits.descriptorSize - descriptorHave, n - i)
                for k in 0..<take { descriptor[descriptorHave + k] = unsafe bytes[i + k] }
                descriptorHave += take
                i += take
                guard descriptorHave == Limits.descriptorSize else { continue }
                descriptorHave = 0
                let d = unsafe descriptor.withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
                guard d.flags & FrameDescriptor.shmMask == 0, d.length > 0, d.length <= Limits.maxFrameLength else {
                    throw BenchError("bad frame from server: \(d)")
                }
                remaining = Int(d.length)
                inPacket = d.isPacket
                if inPacket {
                    packet = []
                    packet.reserveCapacity(remaining)
                } else {
                    firstByteSeen = false
                }
            } else {
                let take = min(remaining, n - i)
                if inPacket {
                    unsafe packet.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + take)]))
                } else {
                    if !firstByteSeen {
                        // A frame is counted with its first byte, not its descriptor, so a
                        // window that ends between the two counts it neither way.
                        firstByteSeen = true
                        frames += 1
                        if unsafe bytes[i] == 0 { silentFrames += 1 } else if unsafe bytes[i] == FloodPattern.byte { patternFrames += 1 }
                    }
                    memblockBytes &+= UInt64(take)
                }
                remaining -= take
                i += take
                if remaining == 0 && inPacket {
                    packets.append(packet)
                    packet = []
                }
            }
        }
    }
}

/// The flood server's payload byte (mirrored so the counter needs no TestSupport import).
enum FloodPattern {
    static let byte: UInt8 = 0x5A
}

/// One blocking native-protocol connection.
@safe
final class NativeClient {
    let fd: Int32
    private(set) var version: UInt32 = 8
    private var nextTag: UInt32 = 0
    var counter = FrameCounter()
    private let scratch: UnsafeMutableRawBufferPointer

    /// Connects to `path` (blocking, with send/receive timeouts of `timeout` seconds).
    /// `scratch` is the receive buffer; connections driven from one thread may share it. It must
    /// outlive the connection, which reads into it and does not own it (the `Measurer` keeps it).
    init(path: String, scratch: UnsafeMutableRawBufferPointer, timeout: Double = 20) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(Errno(rawValue: errno))") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        _ = unsafe setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = unsafe setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard unsafe earmuff_unix_connect(fd, path) == 0 else {
            let e = errno
            close(fd)
            throw BenchError("connect \(path): \(Errno(rawValue: e))")
        }
        self.fd = fd
        unsafe self.scratch = scratch
    }

    deinit { close(fd) }

    /// Sends one packet frame.
    func send(packet payload: [UInt8]) throws {
        var frame = [UInt8]()
        frame.reserveCapacity(Limits.descriptorSize + payload.count)
        FrameDescriptor.packet(length: UInt32(payload.count)).append(to: &frame)
        frame.append(contentsOf: payload)
        try sendAll(frame)
    }

    /// Writes all of `bytes`.
    func sendAll(_ bytes: [UInt8]) throws {
        var off = 0
        try unsafe bytes.withUnsafeBytes { buf in
            while off < buf.count {
                // baseAddress is non-nil: the loop only runs for a non-empty buffer.
                let n = unsafe Glibc.send(fd, buf.baseAddress! + off, buf.count - off, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BenchError("send: \(Errno(rawValue: errno))")
                }
                off += n
            }
        }
    }

    /// What one read gave.
    enum ReadResult { case data, endOfFile, wouldBlock }

    /// Reads once from the socket into the counter. `.wouldBlock` means a
    /// non-blocking socket had nothing, or a blocking one hit its timeout.
    func readOnce() throws -> ReadResult {
        while true {
            let n = unsafe recv(fd, scratch.baseAddress, scratch.count, 0)
            if n == 0 { return .endOfFile }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
                throw BenchError("recv: \(Errno(rawValue: errno))")
            }
            try unsafe counter.consume(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
            return .data
        }
    }

    /// The next packet, reading (and counting memblocks) as needed.
    func readPacket() throws -> [UInt8] {
        while counter.packets.isEmpty {
            switch try readOnce() {
            case .data: continue
            case .endOfFile: throw BenchError("server closed the connection")
            case .wouldBlock: throw BenchError("timed out waiting for a reply")
            }
        }
        return counter.packets.removeFirst()
    }

    /// A fresh request tag.
    func takeTag() -> UInt32 {
        defer { nextTag &+= 1 }
        return nextTag
    }

    /// Sends a request and returns the reply's fields (after command and tag); ERROR throws.
    func request(_ payload: [UInt8], tag: UInt32) throws -> TagStructReader {
        try send(packet: payload)
        while true {
            let reply = try readPacket()
            var r = TagStructReader(reply)
            let header = try PacketHeader.decode(from: &r)
            guard header.tag == tag else { continue } // an event or another reply
            if header.command == Command.error.rawValue {
                throw BenchError("request refused: error \(try r.readU32())")
            }
            guard header.command == Command.reply.rawValue else {
                throw BenchError("unexpected command \(header.command) for tag \(tag)")
            }
            return r
        }
    }

    /// AUTH without SHM/memfd bits, then SET_CLIENT_NAME.
    func handshake(name: String = "earmuff-bench") throws {
        let authTag = takeTag()
        var r = try request(
            AuthRequest(versionWord: Limits.protocolVersion).packet(tag: authTag, version: 8),
            tag: authTag)
        let server = try AuthReply.decode(from: &r, version: 8)
        guard server.versionWord & ~ProtocolVersion.numberMask == 0 else {
            throw BenchError(String(format: "server offered transport flags: 0x%08x", server.versionWord))
        }
        version = ProtocolVersion.effective(client: Limits.protocolVersion, server: server.versionWord)
        var props = Proplist()
        props.set(Proplist.Key.applicationName, string: name)
        let nameTag = takeTag()
        _ = try request(SetClientName(proplist: props).packet(tag: nameTag, version: version), tag: nameTag)
    }

    /// CREATE_RECORD_STREAM; returns the reply.
    func createRecordStream(
        spec: SampleSpec, map: ChannelMap, fragSize: UInt32, source: String? = nil
    ) throws
        -> CreateRecordStreamReply
    {
        var req = CreateRecordStreamRequest()
        req.sampleSpec = spec
        req.channelMap = map
        req.sourceName = source
        req.fragSize = fragSize
        req.adjustLatency = true
        var props = Proplist()
        props.set(Proplist.Key.mediaName, string: "bench")
        req.proplist = props
        req.volume = CVolume(channels: Int(spec.channels), volume: CVolume.norm)
        let tag = takeTag()
        var r = try request(req.packet(tag: tag, version: version), tag: tag)
        return try CreateRecordStreamReply.decode(from: &r, version: version)
    }

    /// Switches the socket to non-blocking (for the counting loop).
    func setNonBlocking() {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }
}

/// A GET_SERVER_INFO round-trip timer over one connection: the request frame is
/// built once and only its tag is rewritten.
final class RoundTripper {
    let client: NativeClient
    private var frame: [UInt8]
    private var tag: UInt32 = 1_000_000

    init(client: NativeClient) {
        self.client = client
        var w = TagStructWriter(reservingCapacity: 16)
        PacketHeader(command: .getServerInfo, tag: 0).encode(into: &w)
        var f = [UInt8]()
        FrameDescriptor.packet(length: UInt32(w.bytes.count)).append(to: &f)
        f.append(contentsOf: w.bytes)
        frame = f
    }

    /// One request/reply; returns the round trip in microseconds.
    func once() throws -> Double {
        tag &+= 1
        // The tag's value bytes follow 'L' cmd (5 bytes) and the 'L' tag byte.
        let at = Limits.descriptorSize + 6
        frame[at] = UInt8(truncatingIfNeeded: tag >> 24)
        frame[at + 1] = UInt8(truncatingIfNeeded: tag >> 16)
        frame[at + 2] = UInt8(truncatingIfNeeded: tag >> 8)
        frame[at + 3] = UInt8(truncatingIfNeeded: tag)
        let start = Clock.nanoseconds()
        try client.sendAll(frame)
        while true {
            let reply = try client.readPacket()
            let header = try PacketHeader.decode(reply)
            if header.tag == tag {
                let elapsed = Clock.nanoseconds() - start
                guard header.command == Command.reply.rawValue else {
                    throw BenchError("GET_SERVER_INFO answered with command \(header.command)")
                }
                return Double(elapsed) / 1000
            }
        }
    }
}

/// The monotonic clock.
enum Clock {
    static func nanoseconds() -> UInt64 {
        var ts = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}

/// Reads record data from many connections with epoll, counting bytes in a
/// fixed window after a warm-up.
enum StreamCounter {
    struct Window {
        var bytes: UInt64
        var seconds: Double
        var silentFrames: Int
        var patternFrames: Int
        var frames: Int
    }

    /// Drains `clients` for `warmup` seconds, calls `begin`, counts for
    /// `duration` seconds (calling `tick` about every 50 ms), calls `end` with what it counted.
    static func run(
        _ clients: [NativeClient], warmup: Double, duration: Double,
        begin: () -> Void = {}, tick: () -> Void = {}, end: (Window) -> Void = { _ in }
    ) throws -> Window {
        let ep = earmuff_epoll_create()
        guard ep >= 0 else { throw BenchError("epoll_create failed") }
        defer { close(ep) }
        for (i, c) in clients.enumerated() {
            c.setNonBlocking()
            _ = earmuff_epoll_add(ep, c.fd, EARMUFF_EPOLLIN, UInt64(i))
        }
        func totals() -> (UInt64, Int, Int, Int) {
            var b: UInt64 = 0, s = 0, p = 0, f = 0
            for c in clients {
                b &+= c.counter.memblockBytes
                s += c.counter.silentFrames
                p += c.counter.patternFrames
                f += c.counter.frames
            }
            return (b, s, p, f)
        }
        let maxEvents: Int32 = 128
        var events = [UInt32](repeating: 0, count: Int(maxEvents))
        var datas = [UInt64](repeating: 0, count: Int(maxEvents))
        let t0 = Clock.seconds()
        var windowStart = 0.0
        var started = false
        var lastTick = t0
        var startTotals: (UInt64, Int, Int, Int) = (0, 0, 0, 0)
        while true {
            let now = Clock.seconds()
            if !started && now - t0 >= warmup {
                started = true
                begin()
                windowStart = Clock.seconds()
                startTotals = totals()
            }
            if started && now - windowStart >= duration { break }
            if started && now - lastTick >= 0.05 {
                lastTick = now
                tick()
            }
            let n = unsafe events.withUnsafeMutableBufferPointer { ev in
                unsafe datas.withUnsafeMutableBufferPointer { da in
                    // baseAddress is non-nil: both arrays hold maxEvents elements.
                    unsafe earmuff_epoll_wait(ep, ev.baseAddress!, da.baseAddress!, maxEvents, 20)
                }
            }
            for k in 0..<Int(max(n, 0)) {
                let c = clients[Int(datas[k])]
                // A few reads per wake-up keeps the connections fair.
                reads: for _ in 0..<4 {
                    switch try c.readOnce() {
                    case .data: continue
                    case .wouldBlock: break reads
                    case .endOfFile: throw BenchError("server closed a recording connection")
                    }
                }
                if c.counter.packets.count > 64 { c.counter.packets.removeAll() }
            }
        }
        let endNow = Clock.seconds()
        let endTotals = totals()
        let w = Window(
            bytes: endTotals.0 &- startTotals.0, seconds: endNow - windowStart,
            silentFrames: endTotals.1 - startTotals.1, patternFrames: endTotals.2 - startTotals.2,
            frames: endTotals.3 - startTotals.3)
        end(w)
        return w
    }
}
