// Hardening: hostile input from clients and from the upstream server, and
// faults (server restarts, stuck readers, connection churn, crashes during
// decision writes, control-socket abuse).
//
// The malformed-input cases share one bench (`HardeningBench`): a real
// PulseAudio, a HostileServer in front of it that relays every connection
// unless a test queued a misbehaviour, earmuff in front of that, and a granted
// parecord that records the test tone through earmuff for the whole run. Each
// case opens its own raw connection, misbehaves, and then checks three things:
// earmuff closed that connection, its log names the cause, and the daemon and
// the recorder carried on (fresh tone arrived, a new client is served).

import Foundation
import Glibc
import PulseWire
import Synchronization
import Testing
import TestSupport

/// The shared world of the hostile-input and policy tests; rebuilt if a test broke it.
final class HardeningBench: Sendable {
    let server: PulseServer
    let hostile: HostileServer
    let earmuff: EarmuffProcess
    let recorder: Recording

    /// The tone module-sine plays into the null sink. The recorder takes it from
    /// the sink's monitor, which delivers every few milliseconds (the sine
    /// source `mic` delivers in 2 s blocks, too coarse to check after each case).
    static let toneFrequency = 1000.0

    private static let current = Mutex<HardeningBench?>(nil)

    /// The running bench (started on first use, restarted if a process died).
    static func shared() throws -> HardeningBench {
        try current.withLock { (bench: inout HardeningBench?) throws -> HardeningBench in
            if let b = bench, b.isHealthy { return b }
            bench?.shutdown()
            bench = nil
            let fresh = try HardeningBench()
            bench = fresh
            return fresh
        }
    }

    private init() throws {
        // module-stream-restore gives the EXTENSION policy test a real extension to talk to.
        server = try PulseServer(extraConfig: [
            "load-module module-stream-restore restore_device=false",
            "load-module module-sine sink=\(PulseServer.sinkName) frequency=\(Int(Self.toneFrequency))",
        ])
        do {
            hostile = try HostileServer(socketPath: "\(server.directory)/hostile", relayTo: server.serverString)
            let conf = "\(server.directory)/earmuff.conf"
            // Raw test clients have no purpose string: not disconnected for it. They are granted, so
            // that their record streams reach the server (a stream that may not record never does).
            try "missing-purpose = deny\n".write(toFile: conf, atomically: true, encoding: .utf8)
            earmuff = try EarmuffProcess(upstream: hostile.serverString, extraArguments: ["--config", conf])
            try earmuff.control("grant", try Tool.ownAppKey())
            try earmuff.control("grant", try Tool.ownAppKey(), "--kind", "system-audio")
            try earmuff.control("grant", try Tool.appKey(for: "parecord"))
            // The recorder below records the sink's monitor: system audio, granted apart.
            try earmuff.control("grant", try Tool.appKey(for: "parecord"), "--kind", "system-audio")
            try earmuff.control("deny", try Tool.appKey(for: "pactl"))
            recorder = try Tool.startRecording(
                server: earmuff.serverString, format: .s16le, rate: PulseServer.toneRate,
                channels: 1, device: "\(PulseServer.sinkName).monitor")
        } catch {
            server.stop()
            throw error
        }
        let started = Wait.untilBlocking(timeout: 60) { recorder.byteCount() >= 9600 || !recorder.tool.process.isRunning }
        guard started, recorder.tool.process.isRunning else {
            let log = earmuff.log()
            shutdown()
            throw TestSupportError("the bench recorder got no audio; earmuff log:\n\(log)")
        }
    }

    var isHealthy: Bool {
        server.process.isRunning && earmuff.process.isRunning && recorder.tool.process.isRunning
    }

    func shutdown() {
        _ = recorder.stop(timeout: 5)
        hostile.stop()
        earmuff.stop()
        server.stop()
    }

    /// earmuff's log as bytes (marks are byte offsets into it).
    func logBytes() -> [UInt8] { Array(earmuff.log().utf8) }

    /// The log written since `mark`.
    func log(since mark: Int) -> String {
        let all = logBytes()
        return String(decoding: all[min(mark, all.count)...], as: UTF8.self)
    }

    /// Waits until a log line written since `mark` contains every one of `parts`; returns it.
    func awaitLogLine(since mark: Int, containing parts: [String], timeout: Double = 5) async -> String? {
        var found: String?
        await Wait.until(timeout: timeout, interval: 0.02) {
            found = log(since: mark).split(separator: "\n").map(String.init).first { line in
                parts.allSatisfy { line.contains($0) }
            }
            return found != nil
        }
        return found
    }

    /// Checks that the daemon and the recorder carried on after `recorderMark`
    /// (0.3 s of fresh tone), and that a new client completes a handshake.
    func expectCarriesOn(since recorderMark: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        #expect(earmuff.process.isRunning, "earmuff died:\n\(earmuff.log())", sourceLocation: sourceLocation)
        let start = (recorderMark + 1) & ~1
        let need = start + Int(0.3 * Double(PulseServer.toneRate)) * 2
        let grew = await Wait.until(timeout: 15, interval: 0.02) { recorder.byteCount() >= need }
        #expect(
            grew, "the recorder stopped getting audio (\(recorder.byteCount()) of \(need) bytes)\n\(earmuff.log())",
            sourceLocation: sourceLocation)
        let data = recorder.data()
        if data.count > start {
            let samples = AudioAnalysis.decode(data.subdata(in: start..<data.count), format: .s16le)
            let ratios = AudioAnalysis.blockToneRatios(
                samples, frequency: Self.toneFrequency,
                sampleRate: Double(PulseServer.toneRate), blockSize: 2400)
            // Most blocks, not all: pipewire-pulse sometimes leaves a gap (a phase jump) in the first block.
            let good = ratios.filter { $0 >= 0.9 }.count
            #expect(
                !ratios.isEmpty && good * 2 >= ratios.count && AudioAnalysis.rms(samples) > 0.1,
                "the recorder's fresh audio is not the tone: ratios \(ratios), rms \(AudioAnalysis.rms(samples))",
                sourceLocation: sourceLocation)
        }
        do {
            let fresh = try RawClient(path: earmuff.listenPath)
            try fresh.handshake()
        } catch {
            Issue.record("a new client was not served: \(error)\n\(earmuff.log())", sourceLocation: sourceLocation)
        }
    }

    /// A client-side case: runs `act` on a fresh connection, then expects
    /// earmuff to close it with a session line containing `expected`, and
    /// everything else to carry on. Errors from `act` (sends after earmuff
    /// already hung up) are tolerated.
    func expectClientClosed(
        _ expected: [String], timeout: Double = 5,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ act: (RawClient) throws -> Void
    ) async throws {
        let mark = logBytes().count
        let recorderMark = recorder.byteCount()
        let client = try RawClient(path: earmuff.listenPath)
        do { try act(client) } catch { /* judged by the outcome below */  }
        let closed = client.waitUntilClosed(timeout: timeout)
        #expect(closed, "earmuff kept the offending connection open\n\(log(since: mark))", sourceLocation: sourceLocation)
        let line = await awaitLogLine(since: mark, containing: ["ended:"] + expected, timeout: timeout)
        #expect(
            line != nil, "no session line containing \(expected); log since the case began:\n\(log(since: mark))",
            sourceLocation: sourceLocation)
        client.close()
        await expectCarriesOn(since: recorderMark, sourceLocation: sourceLocation)
    }

    /// A server-side case: the next upstream connection plays `script`; a raw
    /// client connects and runs `act`; earmuff must close both sides with a
    /// session line containing `expected`.
    func expectServerViolation(
        _ script: HostileServer.Script, _ expected: [String], timeout: Double = 5,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ act: (RawClient) throws -> Void = { try $0.handshake() }
    ) async throws {
        let mark = logBytes().count
        let recorderMark = recorder.byteCount()
        let closedBefore = hostile.scriptedConnectionsClosedByPeer
        hostile.enqueue(.script(script))
        let client = try RawClient(path: earmuff.listenPath)
        do { try act(client) } catch { /* judged by the outcome below */  }
        let closed = client.waitUntilClosed(timeout: timeout)
        #expect(
            closed, "earmuff kept the client of a misbehaving server connected\n\(log(since: mark))",
            sourceLocation: sourceLocation)
        let line = await awaitLogLine(since: mark, containing: ["ended:"] + expected, timeout: timeout)
        #expect(
            line != nil, "no session line containing \(expected); log since the case began:\n\(log(since: mark))",
            sourceLocation: sourceLocation)
        if !script.closeAfterSending {
            let upstreamClosed = await Wait.until(timeout: timeout) { hostile.scriptedConnectionsClosedByPeer > closedBefore }
            #expect(upstreamClosed, "earmuff kept the misbehaving server's connection open", sourceLocation: sourceLocation)
        }
        client.close()
        await expectCarriesOn(since: recorderMark, sourceLocation: sourceLocation)
    }
}

/// Byte builders for malformed frames.
enum Bad {
    static let getServerInfo = RawClient.packet(.getServerInfo, tag: 2)

    /// A packet frame whose payload is whatever `body` writes (no command/tag added).
    static func packet(flags: UInt32 = 0, _ body: (inout TagStructWriter) -> Void) -> [UInt8] {
        var w = TagStructWriter()
        body(&w)
        return RawClient.frame(w.bytes, flags: flags)
    }

    /// A bare descriptor.
    static func descriptor(
        length: UInt32, channel: UInt32 = FrameDescriptor.controlChannel, offsetHi: UInt32 = 0,
        flags: UInt32 = 0
    ) -> [UInt8] {
        FrameDescriptor(length: length, channel: channel, offsetHi: offsetHi, flags: flags).bytes
    }

    /// A memblock frame of `count` bytes of 0x5A.
    static func memblock(channel: UInt32 = 0, count: Int = 64, flags: UInt32 = 0) -> [UInt8] {
        RawClient.frame([UInt8](repeating: 0x5A, count: count), channel: channel, flags: flags)
    }

    /// CREATE_RECORD_STREAM's header and its first fields (sample spec, channel map, source index), for truncation.
    static func createRecordStreamPrefix(_ w: inout TagStructWriter, tag: UInt32 = 2) {
        PacketHeader(command: .createRecordStream, tag: tag).encode(into: &w)
        w.writeSampleSpec(SampleSpec(format: .s16le, channels: 1, rate: 48000))
        w.writeChannelMap(.mono)
        w.writeU32(invalidIndex)
    }

    /// A packet frame from a header and raw payload bytes after it.
    static func packet(_ command: Command, tag: UInt32, rawBody: [UInt8]) -> [UInt8] {
        var w = TagStructWriter()
        PacketHeader(command: command, tag: tag).encode(into: &w)
        return RawClient.frame(w.bytes + rawBody)
    }

    /// 't' + bytes + NUL.
    static func string(_ s: String) -> [UInt8] { [WireTag.string] + Array(s.utf8) + [0] }
    /// 'L' + big-endian value.
    static func u32(_ v: UInt32) -> [UInt8] {
        [WireTag.u32, UInt8(v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }
    /// 'x' + length + bytes.
    static func arbitrary(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [WireTag.arbitrary]
        out += Array(u32(UInt32(bytes.count)).dropFirst())
        return out + bytes
    }

    /// SET_CLIENT_NAME (tag 1) whose proplist is made of `entries` (raw encodings) then the 'N' end.
    static func setClientName(rawEntries entries: [UInt8]) -> [UInt8] {
        packet(.setClientName, tag: 1, rawBody: [WireTag.proplist] + entries + [WireTag.nullString])
    }

    /// One well-formed proplist entry.
    static func entry(_ key: String, _ value: [UInt8]) -> [UInt8] {
        string(key) + u32(UInt32(value.count)) + arbitrary(value)
    }
}

/// A pipe whose write end a test passes around; `writerGone` tells whether every copy was closed.
struct PipePair {
    let read: Int32
    let write: Int32

    init() throws {
        var fds: [Int32] = [0, 0]
        guard unsafe pipe(&fds) == 0 else { throw TestSupportError("pipe: errno \(errno)") }
        read = fds[0]
        write = fds[1]
        _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
    }

    /// True once read() sees EOF, i.e. no process holds the write end any more.
    func writerGone(timeout: Double) -> Bool {
        Wait.untilBlocking(timeout: timeout, interval: 0.02) {
            var b: UInt8 = 0
            return unsafe Glibc.read(read, &b, 1) == 0
        }
    }
}

extension EndToEnd {
    /// Hostile input and faults (`swift test --filter Hardening`).
    @Suite enum HardeningTests {}
}

extension EndToEnd.HardeningTests {
    // MARK: - Malformed input from clients

    @Suite struct HostileClientTests {
        @Test func truncatedDescriptorThenClose() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["client closed the connection"]) { c in
                try c.handshake()
                try c.send(Array(Bad.getServerInfo.prefix(10)))
                c.shutdownWrite()
            }
        }

        @Test func truncatedPayloadThenClose() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["client closed the connection"]) { c in
                try c.handshake()
                try c.send(Bad.descriptor(length: 100) + [UInt8](repeating: 0x4C, count: 50))
                c.shutdownWrite()
            }
        }

        @Test func zeroLength() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "frame length 0"]) { c in
                try c.handshake()
                try c.send(Bad.descriptor(length: 0))
            }
        }

        @Test func lengthOver16MiB() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "exceeds the limit of 16777216"]) { c in
                try c.handshake()
                try c.send(Bad.descriptor(length: Limits.maxFrameLength + 1))
            }
        }

        @Test func shmDataReference() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "SHM bit set in flags 0x80000000"]) { c in
                try c.handshake()
                try c.send(Bad.memblock(channel: 0, count: 16, flags: 0x8000_0000))
            }
        }

        @Test func shmBitOnPacket() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "SHM bit set in flags 0x01000000"]) { c in
                try c.handshake()
                try c.send(RawClient.frame(Array(Bad.getServerInfo.dropFirst(20)), flags: 0x0100_0000))
            }
        }

        @Test func shmReleaseFrame() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "SHM bit set in flags 0x40000000"]) { c in
                try c.handshake()
                try c.send(Bad.descriptor(length: 0, offsetHi: 1, flags: 0x4000_0000))
            }
        }

        @Test func shmRevokeFrame() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "SHM bit set in flags 0xC0000000"]) { c in
                try c.handshake()
                try c.send(Bad.descriptor(length: 0, offsetHi: 1, flags: 0xC000_0000))
            }
        }

        @Test func seekModeAbove3() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "seek mode 4 is above 3"]) { c in
                try c.handshake()
                try c.send(Bad.memblock(channel: 0, count: 64, flags: 4))
            }
        }

        @Test func packetWithFlags() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "packet frame with non-zero flags 0x00000001"]) { c in
                try c.handshake()
                try c.send(RawClient.frame(Array(Bad.getServerInfo.dropFirst(20)), flags: 1))
            }
        }

        @Test func packetOfEightBytes() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "payload of 8 bytes"]) { c in
                try c.handshake()
                try c.send(RawClient.frame([WireTag.u32, 0, 0, 0, 20, WireTag.u32, 0, 0]))
            }
        }

        @Test func wrongTagTypeInHeader() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "expected tag 'L' (u32) at byte 0"]) { c in
                try c.handshake()
                try c.send(
                    Bad.packet { w in
                        w.writeString("GET_SERVER_INFO")
                        w.writeU32(2)
                    })
            }
        }

        @Test func wrongTagTypeInRequest() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "malformed CREATE_RECORD_STREAM", "expected tag 'a'"]) { c in
                try c.handshake()
                // A u32 where the sample spec belongs.
                try c.send(Bad.packet(.createRecordStream, tag: 2, rawBody: Bad.u32(44100)))
            }
        }

        @Test func unterminatedString() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "has no NUL terminator"]) { c in
                try c.handshake()
                var w = TagStructWriter()
                Bad.createRecordStreamPrefix(&w)
                // The source name runs to the end of the packet without its NUL.
                try c.send(RawClient.frame(w.bytes + [WireTag.string] + Array("mic".utf8)))
            }
        }

        @Test func proplistLengthMismatch() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "declares 9 bytes but carries 4"]) { c in
                try c.send(RawClient.auth(tag: 0))
                _ = try c.reply(tag: 0, timeout: 5)
                try c.send(Bad.setClientName(rawEntries: Bad.string("application.name") + Bad.u32(9) + Bad.arbitrary(Array("abc\0".utf8))))
            }
        }

        @Test func hugeProplistManyEntries() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "more than \(Limits.maxProplistEntries) entries"]) { c in
                try c.send(RawClient.auth(tag: 0))
                _ = try c.reply(tag: 0, timeout: 5)
                var entries: [UInt8] = []
                for i in 0..<5000 { entries += Bad.entry("x.key\(i)", Array("value\(i)\0".utf8)) }
                try c.send(Bad.setClientName(rawEntries: entries))
            }
        }

        @Test func hugeProplistValue() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "exceeds the limit of \(Limits.maxProplistValue)"]) { c in
                try c.send(RawClient.auth(tag: 0))
                _ = try c.reply(tag: 0, timeout: 5)
                // Over the value limit, under max-packet-kib (larger packets are refused unread).
                let value = [UInt8](repeating: 0x41, count: 512 << 10) + [0]
                try c.send(Bad.setClientName(rawEntries: Bad.entry("application.name", value)))
            }
        }

        @Test func invalidProplistKey() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "is empty or not ASCII"]) { c in
                try c.send(RawClient.auth(tag: 0))
                _ = try c.reply(tag: 0, timeout: 5)
                try c.send(Bad.setClientName(rawEntries: Bad.entry("", Array("x\0".utf8))))
            }
        }

        @Test func commandBeforeAuth() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "first packet must be AUTH, got GET_SERVER_INFO"]) { c in
                try c.send(Bad.getServerInfo)
            }
        }

        @Test func audioBeforeAuth() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "audio data before AUTH"]) { c in
                try c.send(Bad.memblock(channel: 0, count: 64))
            }
        }

        @Test func secondAuth() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "second AUTH"]) { c in
                try c.handshake()
                try c.send(RawClient.auth(tag: 2))
            }
        }

        @Test func truncatedAuth() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "malformed AUTH"]) { c in
                try c.send(RawClient.packet(.auth, tag: 0))
            }
        }

        /// PulseAudio drops an AUTH whose cookie is not 256 bytes; earmuff must
        /// reject it itself and say so, rather than rely on the server.
        @Test func authWithOneByteCookie() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "cookie"]) { c in
                try c.send(RawClient.auth(tag: 0, cookieLength: 1))
            }
        }

        /// Decision: an opcode earmuff does not know is never forwarded (default
        /// deny, and PulseAudio would disconnect anyway). earmuff closes the
        /// connection itself and names the opcode.
        @Test func unknownOpcode() async throws {
            let bench = try HardeningBench.shared()
            let serverLogBefore = bench.server.log().utf8.count
            try await bench.expectClientClosed(["protocol violation from the client", "65520"]) { c in
                try c.handshake()
                try c.send(RawClient.packet(0xFFF0, tag: 2))
            }
            let serverLog = String(decoding: Array(bench.server.log().utf8).dropFirst(serverLogBefore), as: UTF8.self)
            #expect(!serverLog.contains("unsupported command 65520"), "the unknown opcode reached the server")
        }

        /// Same decision for an opcode that only the server may send.
        @Test func serverOnlyOpcodeFromClient() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "REQUEST"]) { c in
                try c.handshake()
                try c.send(
                    RawClient.packet(.request, tag: 2) { w in
                        w.writeU32(0)
                        w.writeU32(4096)
                    })
            }
        }

        @Test func registerMemfdShmidWithFD() async throws {
            let bench = try HardeningBench.shared()
            let pipe = try PipePair()
            defer { Glibc.close(pipe.read) }
            try await bench.expectClientClosed(["protocol violation from the client", "REGISTER_MEMFD_SHMID"]) { c in
                defer { Glibc.close(pipe.write) }
                try c.handshake()
                try c.send(RawClient.packet(.registerMemfdShmid, tag: PacketTag.none) { $0.writeU32(1) }, passing: pipe.write)
            }
            #expect(pipe.writerGone(timeout: 5), "the descriptor sent with REGISTER_MEMFD_SHMID is still open somewhere")
        }

        @Test func enableSrbchannel() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "ENABLE_SRBCHANNEL"]) { c in
                try c.handshake()
                try c.send(RawClient.packet(.enableSrbchannel, tag: 2))
            }
        }

        @Test func disableSrbchannel() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "DISABLE_SRBCHANNEL"]) { c in
                try c.handshake()
                try c.send(RawClient.packet(.disableSrbchannel, tag: 2))
            }
        }

        @Test func truncatedCreateRecordStream() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "malformed CREATE_RECORD_STREAM"]) { c in
                try c.handshake()
                var w = TagStructWriter()
                Bad.createRecordStreamPrefix(&w)
                try c.send(RawClient.frame(w.bytes))
            }
        }

        @Test func channelMapWithTooManyChannels() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "200 channels"]) { c in
                try c.handshake()
                var w = TagStructWriter()
                PacketHeader(command: .createRecordStream, tag: 2).encode(into: &w)
                w.writeSampleSpec(SampleSpec(format: .s16le, channels: 1, rate: 48000))
                try c.send(RawClient.frame(w.bytes + [WireTag.channelMap, 200] + [UInt8](repeating: 0, count: 200)))
            }
        }

        /// Descriptors attached to every message are closed by earmuff (none
        /// reaches the server, none stays open in the daemon), and the
        /// connection keeps working.
        @Test func fdsAttachedToEveryMessage() async throws {
            let bench = try HardeningBench.shared()
            let pid = bench.earmuff.process.pid
            let baseline = ProcessStats.openFDs(pid)
            let recorderMark = bench.recorder.byteCount()
            let pipe = try PipePair()
            defer { Glibc.close(pipe.read) }
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.send(RawClient.auth(tag: 0), passing: pipe.write)
            #expect(try c.reply(tag: 0, timeout: 5) != nil)
            try c.send(RawClient.setClientName(tag: 1, name: "fd-sender"), passing: pipe.write)
            #expect(try c.reply(tag: 1, timeout: 5) != nil)
            for tag in UInt32(2)..<UInt32(52) {
                try c.send(RawClient.packet(.getServerInfo, tag: tag), passing: pipe.write)
                let answer = try c.reply(tag: tag, timeout: 5)
                #expect(
                    answer.map { (try? PacketHeader.decode($0.payload).command) == Command.reply.rawValue } == true,
                    "GET_SERVER_INFO \(tag) with an fd attached was not answered")
            }
            let during = ProcessStats.openFDs(pid)
            #expect(during <= baseline + 4, "earmuff holds \(during - baseline) more descriptors after 52 fds were sent")
            Glibc.close(pipe.write)
            #expect(pipe.writerGone(timeout: 5), "a passed descriptor is still open in earmuff or the server")
            c.close()
            let back = await Wait.until(timeout: 5) { ProcessStats.openFDs(pid) <= baseline }
            #expect(back, "earmuff's fd count \(ProcessStats.openFDs(pid)) did not return to \(baseline)")
            await bench.expectCarriesOn(since: recorderMark)
        }

        /// A client that sends one byte a second neither stalls the daemon nor
        /// other clients, and is served once its AUTH is complete.
        @Test func oneByteASecond() async throws {
            let bench = try HardeningBench.shared()
            let recorderMark = bench.recorder.byteCount()
            let slow = try RawClient(path: bench.earmuff.listenPath)
            let auth = RawClient.auth(tag: 0)
            for i in 0..<3 {
                try slow.send([auth[i]])
                // Meanwhile another client gets a full answer.
                let info = try Tool.run("pactl", args: ["info"], server: bench.earmuff.serverString, timeout: 10)
                #expect(info.succeeded, "pactl info during the trickle: \(info)")
                try await Task.sleep(nanoseconds: 1_000_000_000)
            }
            try slow.send(Array(auth[3...]))
            let reply = try slow.reply(tag: 0, timeout: 5)
            #expect(reply != nil, "the slow client's AUTH was never answered\n\(bench.earmuff.log())")
            await bench.expectCarriesOn(since: recorderMark)
        }

        /// An EXTENSION request whose arguments cannot be parsed is refused
        /// (ERROR ACCESS, never forwarded); the connection stays usable.
        @Test func unparsableExtensionIsRefused() async throws {
            let bench = try HardeningBench.shared()
            let mark = bench.logBytes().count
            let recorderMark = bench.recorder.byteCount()
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.handshake()
            let refused = try c.request(Bad.packet(.extension, tag: 2, rawBody: Bad.u32(invalidIndex)), tag: 2)
            var errorCode: UInt32?
            if var r = refused?.reader, refused?.command == Command.error.rawValue { errorCode = try? r.readU32() }
            #expect(errorCode == ErrorCode.access.rawValue, "truncated EXTENSION was answered with \(String(describing: refused?.command))")
            let info = try c.request(Bad.getServerInfo.withTag(3), tag: 3)
            #expect(info?.command == Command.reply.rawValue, "the connection did not survive a refused request")
            #expect(await bench.awaitLogLine(since: mark, containing: ["refused EXTENSION"]) != nil)
            await bench.expectCarriesOn(since: recorderMark)
        }
    }

    // MARK: - Malformed input from the server

    @Suite struct HostileServerTests {
        @Test func truncatedDescriptorThenClose() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .auth, send: Array(Bad.getServerInfo.prefix(10)), closeAfterSending: true),
                ["server closed the connection"])
        }

        @Test func zeroLength() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: Bad.descriptor(length: 0)),
                ["protocol violation from the server", "frame length 0"])
        }

        @Test func lengthOver16MiB() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: Bad.descriptor(length: 0xFFFF_FFF0)),
                ["protocol violation from the server", "exceeds the limit"])
        }

        @Test func shmDataReference() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: Bad.memblock(channel: 0, count: 16, flags: 0xA080_0000)),
                ["protocol violation from the server", "SHM bit set in flags 0xA0800000"])
        }

        @Test func shmReleaseFrame() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: Bad.descriptor(length: 0, offsetHi: 1, flags: 0x4000_0000)),
                ["protocol violation from the server", "SHM bit set in flags 0x40000000"])
        }

        @Test func seekModeAbove3() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: Bad.memblock(channel: 0, count: 32, flags: 0x7F)),
                ["protocol violation from the server", "seek mode 127 is above 3"])
        }

        @Test func packetWithFlags() async throws {
            let bench = try HardeningBench.shared()
            let event = RawClient.packet(.subscribeEvent, tag: PacketTag.none) { w in
                w.writeU32(0)
                w.writeU32(0)
            }
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: RawClient.frame(Array(event.dropFirst(20)), flags: 2)),
                ["protocol violation from the server", "packet frame with non-zero flags 0x00000002"])
        }

        @Test func packetOfFourBytes() async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: RawClient.frame([WireTag.u32, 0, 0, 0])),
                ["protocol violation from the server", "payload of 4 bytes"])
        }

        @Test func malformedAuthReply() async throws {
            let bench = try HardeningBench.shared()
            // REPLY to AUTH without the version word.
            try await bench.expectServerViolation(
                .init(after: .auth, answerTrigger: false, send: RawClient.packet(.reply, tag: 0)),
                ["protocol violation from the server", "malformed REPLY"])
        }

        @Test func enableSrbchannelWithFDs() async throws {
            let bench = try HardeningBench.shared()
            let pipe = try PipePair()
            defer { Glibc.close(pipe.read) }
            let fired = bench.hostile.scriptsFired
            let srb =
                RawClient.packet(.enableSrbchannel, tag: 0x1234_5678)
                + Bad.memblock(channel: 0, count: 16, flags: 0xA080_0000)
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: srb, passFD: pipe.write),
                ["protocol violation from the server", "shared memory"]
            ) { c in
                _ = try? c.handshake() // earmuff may hang up before the SET_CLIENT_NAME reply reaches us
                _ = Wait.untilBlocking(timeout: 5) { bench.hostile.scriptsFired > fired }
                Glibc.close(pipe.write)
            }
            #expect(pipe.writerGone(timeout: 5), "the descriptor sent with ENABLE_SRBCHANNEL is still open somewhere")
        }

        @Test func registerMemfdShmid() async throws {
            let bench = try HardeningBench.shared()
            let pipe = try PipePair()
            defer { Glibc.close(pipe.read) }
            let fired = bench.hostile.scriptsFired
            try await bench.expectServerViolation(
                .init(
                    after: .setClientName, send: RawClient.packet(.registerMemfdShmid, tag: PacketTag.none) { $0.writeU32(7) },
                    passFD: pipe.write),
                ["protocol violation from the server", "shared memory"]
            ) { c in
                _ = try? c.handshake() // earmuff may hang up before the SET_CLIENT_NAME reply reaches us
                _ = Wait.untilBlocking(timeout: 5) { bench.hostile.scriptsFired > fired }
                Glibc.close(pipe.write)
            }
            #expect(pipe.writerGone(timeout: 5), "the descriptor sent with REGISTER_MEMFD_SHMID is still open somewhere")
        }

        @Test func truncatedCreateRecordStreamReply() async throws {
            let bench = try HardeningBench.shared()
            // Only the channel: the source output index and the rest are missing.
            let reply = RawClient.packet(.reply, tag: 2) { $0.writeU32(0) }
            try await bench.expectServerViolation(
                .init(after: .createRecordStream, answerTrigger: false, send: reply),
                ["protocol violation from the server", "malformed REPLY"]
            ) { c in
                try c.handshake()
                try c.send(RawClient.createRecordStream(tag: 2))
            }
        }

        @Test func wrongTagTypeInEvent() async throws {
            let bench = try HardeningBench.shared()
            // RECORD_STREAM_KILLED with a string where the channel belongs.
            let killed = RawClient.packet(.recordStreamKilled, tag: PacketTag.none) { $0.writeString("zero") }
            try await bench.expectServerViolation(
                .init(after: .setClientName, send: killed),
                ["protocol violation from the server", "RECORD_STREAM_KILLED", "expected tag 'L'"])
        }

        /// Memblocks on a channel the client never opened are dropped; the
        /// connection carries on and the next packet arrives intact.
        @Test func memblockOnUnknownChannelIsDropped() async throws {
            let bench = try HardeningBench.shared()
            let recorderMark = bench.recorder.byteCount()
            let marker = RawClient.packet(.subscribeEvent, tag: PacketTag.none) { w in
                w.writeU32(0x10)
                w.writeU32(42)
            }
            bench.hostile.enqueue(.script(.init(after: .setClientName, send: Bad.memblock(channel: 9, count: 4000) + marker)))
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.handshake()
            let next = try c.readFrame(timeout: 5)
            #expect(next?.descriptor.isPacket == true, "a memblock on an unknown channel reached the client: \(String(describing: next?.descriptor))")
            #expect(next.map { Array(RawClient.frame($0.payload)) } == marker, "the packet after the dropped memblock was not delivered intact")
            let info = try c.request(Bad.getServerInfo, tag: 2)
            #expect(info?.command == Command.reply.rawValue, "the connection did not carry on")
            #expect(!c.peerClosed)
            await bench.expectCarriesOn(since: recorderMark)
        }

        /// Descriptors the server attaches are closed, never forwarded; the connection carries on.
        @Test func fdsFromServerAreClosed() async throws {
            let bench = try HardeningBench.shared()
            let recorderMark = bench.recorder.byteCount()
            let pipe = try PipePair()
            defer { Glibc.close(pipe.read) }
            let event = RawClient.packet(.subscribeEvent, tag: PacketTag.none) { w in
                w.writeU32(0x10)
                w.writeU32(43)
            }
            let fired = bench.hostile.scriptsFired
            bench.hostile.enqueue(.script(.init(after: .setClientName, send: event, passFD: pipe.write)))
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.handshake()
            let next = try c.readFrame(timeout: 5)
            #expect(next.map { RawClient.frame($0.payload) } == event, "the event sent with an fd was not relayed")
            _ = await Wait.until(timeout: 5) { bench.hostile.scriptsFired > fired }
            Glibc.close(pipe.write)
            #expect(pipe.writerGone(timeout: 5), "the descriptor the server sent is still open in earmuff")
            #expect(try c.request(Bad.getServerInfo, tag: 2)?.command == Command.reply.rawValue)
            await bench.expectCarriesOn(since: recorderMark)
        }
    }
}

extension Array where Element == UInt8 {
    /// A copy of a packet frame with its tag (payload bytes 5…9, after the command) replaced.
    func withTag(_ tag: UInt32) -> [UInt8] {
        var out = self
        let at = Limits.descriptorSize + 6
        out[at] = UInt8(tag >> 24)
        out[at + 1] = UInt8(truncatingIfNeeded: tag >> 16)
        out[at + 2] = UInt8(truncatingIfNeeded: tag >> 8)
        out[at + 3] = UInt8(truncatingIfNeeded: tag)
        return out
    }
}

extension EndToEnd.HardeningTests {
    // MARK: - Faults

    @Suite struct FaultTests {
        /// earmuff pointed at a symlink, so a restarted server can take the old one's place.
        struct Restartable {
            let dir: String
            var link: String { "\(dir)/upstream" }

            init() throws { dir = try Helpers.scratch() }

            func point(at server: PulseServer) throws {
                unsafe unlink(link)
                guard unsafe symlink(server.socketPath, link) == 0 else { throw TestSupportError("symlink: errno \(errno)") }
            }
        }

        /// A missing upstream for tests that need only the control socket.
        static func controlOnlyEarmuff(_ extra: [String] = []) throws -> (EarmuffProcess, String) {
            let dir = try Helpers.scratch()
            return (try EarmuffProcess(upstream: "unix:\(dir)/no-server", extraArguments: extra), dir)
        }

        @Test func upstreamKilledAndRestarted() async throws {
            let up = try Restartable()
            defer { TempDir.remove(up.dir) }
            let first = try PulseServer()
            defer { first.stop() }
            try up.point(at: first)
            let earmuff = try EarmuffProcess(upstream: "unix:\(up.link)")
            defer { earmuff.stop() }
            try earmuff.control("grant", try Tool.appKey(for: "parecord"))
            let rec = try Tool.startRecording(server: earmuff.serverString, rate: PulseServer.toneRate)
            defer { rec.tool.cleanup() }
            #expect(await rec.waitForAudio(seconds: 0.5, timeout: 30), "no audio before the kill\n\(earmuff.log())")
            let idle = try RawClient(path: earmuff.listenPath)
            try idle.handshake()

            first.process.terminate(signal: SIGKILL)
            // Clients see a clean disconnect: the connection closes, parecord exits.
            #expect(idle.waitUntilClosed(timeout: 10), "a client stayed connected to a dead server")
            let recResult = rec.tool.wait(timeout: 15)
            #expect(!recResult.timedOut, "parecord hung after the server died: \(recResult)")
            #expect(earmuff.process.isRunning, "earmuff died with its server\n\(earmuff.log())")
            // While the server is gone, new clients fail promptly instead of hanging.
            let during = try Tool.run("pactl", args: ["info"], server: earmuff.serverString, timeout: 20)
            #expect(!during.succeeded && !during.timedOut, "pactl info with no server: \(during)")

            let second = try PulseServer()
            defer { second.stop() }
            try up.point(at: second)
            let info = try Tool.run("pactl", args: ["info"], server: earmuff.serverString, timeout: 20)
            #expect(info.succeeded, "pactl info after the restart: \(info)\n\(earmuff.log())")
            let (result, audio) = try await Helpers.recordMic(server: earmuff.serverString, seconds: 0.5)
            #expect(result.status == 0, "\(result)")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.4), "after the restart: \(report)\n\(earmuff.log())")
            #expect(earmuff.process.isRunning)
        }

        /// One client records and never reads while the server floods; another
        /// recording client keeps getting data and earmuff's memory stays bounded.
        @Test func clientThatNeverReads() async throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let flood = try FloodServer(socketPath: "\(dir)/flood", pacing: .flood)
            defer { flood.stop() }
            let conf = "\(dir)/earmuff.conf"
            try "missing-purpose = deny\n".write(toFile: conf, atomically: true, encoding: .utf8)
            let earmuff = try EarmuffProcess(upstream: flood.serverString, extraArguments: ["--config", conf])
            defer { earmuff.stop() }
            // Granted: a stream that may not record never reaches the flooding server.
            try earmuff.control("grant", try Tool.ownAppKey())
            let pid = earmuff.process.pid
            let baselineRSS = ProcessStats.residentKiB(pid)

            let stuck = try RawClient(path: earmuff.listenPath)
            try stuck.handshake()
            try stuck.send(RawClient.createRecordStream(tag: 2))
            let reader = try RawClient(path: earmuff.listenPath)
            try reader.handshake()
            try reader.send(RawClient.createRecordStream(tag: 2))

            var received = 0
            var peakRSS = baselineRSS
            let deadline = Wait.now() + 3
            while Wait.now() < deadline {
                if let frame = try reader.readFrame(timeout: 0.5), !frame.descriptor.isPacket {
                    received += frame.payload.count
                }
                peakRSS = max(peakRSS, ProcessStats.residentKiB(pid))
                if reader.peerClosed { break }
            }
            #expect(!reader.peerClosed, "the reading client was disconnected\n\(earmuff.log())")
            #expect(received >= 4 << 20, "the reading client got only \(received) bytes in 3 s while another client stalled")
            let growth = peakRSS - baselineRSS
            #expect(growth < 96 * 1024, "earmuff grew by \(growth) KiB while a client did not read")
            #expect(earmuff.process.isRunning)
            // Reading again after the stall, the stuck client gets its data in order.
            if let first = try stuck.readFrame(timeout: 5) {
                #expect(first.descriptor.isPacket, "the stuck client's first frame should be its CREATE reply")
            }
        }

        /// 1,000 connections opened and dropped (some mid-handshake, some mid-frame):
        /// earmuff's descriptors and memory return to their baseline.
        @Test func thousandConnectionsOpenedAndDropped() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let earmuff = try EarmuffProcess(upstream: server.serverString)
            defer { earmuff.stop() }
            let pid = earmuff.process.pid
            // Warm up allocator pools and lazily created state before taking the baseline.
            for _ in 0..<20 { try RawClient(path: earmuff.listenPath).handshake() }
            await Wait.until(timeout: 5) { ProcessStats.openFDs(pid) <= ProcessStats.openFDs(pid) }
            try await Task.sleep(nanoseconds: 300_000_000)
            let baseFDs = ProcessStats.openFDs(pid)
            let baseRSS = ProcessStats.residentKiB(pid)

            var opened = 0
            var handshakes = 0
            while opened < 1000 {
                var batch: [RawClient] = []
                for i in 0..<25 {
                    let c = try RawClient(path: earmuff.listenPath)
                    switch (opened + i) % 4 {
                    case 0: try c.send(RawClient.auth(tag: 0)) // AUTH, then drop
                    case 1: try c.send(Array(RawClient.auth(tag: 0).prefix(30))) // mid-frame
                    case 2: break // nothing at all
                    default:
                        try c.handshake()
                        handshakes += 1
                    }
                    batch.append(c)
                }
                opened += batch.count
                for c in batch { c.close() }
                // PulseAudio accepts 64 clients at a time: let earmuff close the upstream side first.
                let settled = await Wait.until(timeout: 10) { ProcessStats.openFDs(pid) <= baseFDs + 4 }
                #expect(settled, "after \(opened) connections earmuff holds \(ProcessStats.openFDs(pid)) fds (baseline \(baseFDs))")
                if !settled { break }
            }
            #expect(handshakes == 250)
            let fdsBack = await Wait.until(timeout: 10) { ProcessStats.openFDs(pid) <= baseFDs }
            #expect(fdsBack, "fds: \(ProcessStats.openFDs(pid)) vs baseline \(baseFDs)")
            let rss = ProcessStats.residentKiB(pid)
            #expect(rss - baseRSS < 16 * 1024, "VmRSS grew from \(baseRSS) KiB to \(rss) KiB")
            let info = try Tool.run("pactl", args: ["info"], server: earmuff.serverString, timeout: 20)
            #expect(info.succeeded, "\(info)")
        }

        /// `kill -9` in the middle of a burst of decision writes: the store opens
        /// clean and every decision whose command reported success is there.
        @Test func killDuringDecisionBurst() async throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let store = "\(dir)/permissions.sqlite"
            let first = try EarmuffProcess(upstream: "unix:\(dir)/no-server", extraArguments: ["--store", store])
            defer { first.stop() }

            final class Burst: Sendable {
                /// Key → state of every write whose CLI command exited 0.
                let committed = Mutex<[String: String]>([:])
                let stop = Atomic<Bool>(false)
            }
            let burst = Burst()
            // Plain threads: the CLI runs block, and must not starve the test's own task.
            let done = DispatchGroup()
            for w in 0..<2 {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    var i = 0
                    while !burst.stop.load(ordering: .acquiring) {
                        let key = "exe:/opt/burst/app-\(w)-\(i)"
                        let state = i % 2 == 0 ? "grant" : "deny"
                        i += 1
                        guard let r = try? first.runCLI([state, key], timeout: 10) else { break }
                        if r.succeeded {
                            burst.committed.withLock { $0[key] = state == "grant" ? "granted" : "denied" }
                        } else if !first.process.isRunning {
                            break
                        }
                    }
                }
            }
            await Wait.until(timeout: 60) { burst.committed.withLock { $0.count } >= 12 }
            first.process.send(SIGKILL)
            _ = first.process.wait(timeout: 10)
            burst.stop.store(true, ordering: .releasing)
            let finished = done.wait(timeout: .now() + 30) == .success
            #expect(finished, "the CLI workers did not stop")
            let written = burst.committed.withLock { $0 }
            #expect(written.count >= 12)

            if findExecutable("sqlite3") != nil {
                let check = try Tool.run("sqlite3", args: [store, "PRAGMA integrity_check;"], server: "unix:/nonexistent", timeout: 20)
                #expect(
                    check.succeeded && check.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "ok",
                    "integrity_check after kill -9: \(check)")
            }
            let second = try EarmuffProcess(upstream: "unix:\(dir)/no-server", extraArguments: ["--store", store])
            defer { second.stop() }
            let apps = try second.control("apps", "--json")
            let list = (try? JSONSerialization.jsonObject(with: apps.stdout)) as? [[String: Any]] ?? []
            var stored: [String: String] = [:]
            for app in list {
                if let key = app["key"] as? String, let state = app["state"] as? String { stored[key] = state }
            }
            let lost = written.filter { stored[$0.key] != $0.value }
            #expect(lost.isEmpty, "decisions reported as saved but missing or different after kill -9: \(lost.sorted { $0.key < $1.key })\nstored: \(stored)")
        }

        /// Other uids cannot reach the control socket: the directory keeps them
        /// out, and with the directory opened up the daemon itself refuses them.
        @Test func controlSocketRefusesOtherUIDs() async throws {
            guard getuid() == 0, let setpriv = findExecutable("setpriv") else {
                Issue.record("needs root and setpriv to run a client as another uid")
                return
            }
            let (earmuff, dir) = try Self.controlOnlyEarmuff()
            defer { earmuff.stop(); TempDir.remove(dir) }
            let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", earmuff.binary]
            func runAsNobody(_ args: [String]) throws -> ToolResult {
                let out = "\(dir)/nobody-\(UInt32.random(in: 0...UInt32.max))"
                let child = try ChildProcess.spawn(
                    executable: setpriv, arguments: asNobody + args,
                    environment: earmuff.environment,
                    stdoutPath: "\(out).out", stderrPath: "\(out).err", maxLifetime: 60)
                return child.finish(timeout: 20)
            }
            // The binary itself runs as nobody (so a refusal below is about the socket).
            let version = try runAsNobody(["--version"])
            #expect(version.succeeded, "earmuff --version as nobody: \(version)")

            let blocked = try runAsNobody(["status", "--control", earmuff.controlPath])
            #expect(!blocked.succeeded && !blocked.timedOut, "nobody reached the control socket: \(blocked)")

            // Open the way on the file system: the daemon's own uid check must refuse.
            for path in [earmuff.directory, earmuff.runtimeDir, "\(earmuff.runtimeDir)/earmuff"] { unsafe chmod(path, 0o755) }
            unsafe chmod(earmuff.controlPath, 0o666)
            let refused = try runAsNobody(["status", "--control", earmuff.controlPath])
            #expect(!refused.succeeded && !refused.timedOut, "the daemon served uid 65534: \(refused)")
            #expect(earmuff.log().contains("uid 65534"), "the daemon did not log refusing uid 65534:\n\(earmuff.log())")
            #expect(earmuff.process.isRunning)
            let root = try earmuff.runCLI(["status"])
            #expect(root.succeeded, "root is not served any more: \(root)\n\(earmuff.log())")
        }

        /// Garbage, unknown requests, an oversized line and half-written lines
        /// on the control socket: each gets an error or a close, and the daemon
        /// keeps serving.
        @Test(arguments: [
            ("garbage", Array("this is not json\n".utf8)),
            ("binary", [0, 1, 2, 0xFF, 0xFE, 10]),
            ("unknown request", Array("{\"type\":\"launch-missiles\",\"id\":1}\n".utf8)),
            ("wrong field types", Array("{\"type\":\"set-decision\",\"id\":\"x\",\"app\":5,\"state\":[]}\n".utf8)),
            ("oversized line", [UInt8](repeating: 0x61, count: 1 << 20)),
        ])
        func controlSocketSurvivesBadLines(name: String, bytes: [UInt8]) async throws {
            let (earmuff, dir) = try Self.controlOnlyEarmuff()
            defer { earmuff.stop(); TempDir.remove(dir) }
            let c = try RawClient(path: earmuff.controlPath)
            _ = c.readRaw(timeout: 2) // the daemon's hello, if it greets first
            try? c.send(bytes)
            let answer = String(decoding: c.readRaw(timeout: 5), as: UTF8.self)
            #expect(
                answer.contains("\"error\"") || c.waitUntilClosed(timeout: 5),
                "\(name): neither an error nor a close; got \(answer)")
            c.close()
            #expect(earmuff.process.isRunning, "\(name) killed the daemon\n\(earmuff.log())")
            let status = try earmuff.runCLI(["status"])
            #expect(status.succeeded, "\(name): status afterwards: \(status)\n\(earmuff.log())")
        }

        @Test func controlSocketSurvivesHalfWrittenLines() async throws {
            let (earmuff, dir) = try Self.controlOnlyEarmuff()
            defer { earmuff.stop(); TempDir.remove(dir) }
            // Half a request, then hang up.
            let a = try RawClient(path: earmuff.controlPath)
            try a.send(Array("{\"type\":\"sta".utf8))
            a.close()
            // Half a request, wait, then the rest: it is answered.
            let b = try RawClient(path: earmuff.controlPath)
            _ = b.readRaw(timeout: 2)
            try b.send(Array("{\"type\":\"sta".utf8))
            try await Task.sleep(nanoseconds: 300_000_000)
            try b.send(Array("tus\",\"id\":7}\n".utf8))
            let answer = String(decoding: b.readRaw(timeout: 5), as: UTF8.self)
            #expect(answer.contains("\"status\""), "the completed half line was not answered: \(answer)")
            // Many connections left with partial lines do not block others.
            var idle: [RawClient] = []
            for _ in 0..<50 {
                let c = try RawClient(path: earmuff.controlPath)
                try c.send(Array("{\"type\":".utf8))
                idle.append(c)
            }
            let status = try earmuff.runCLI(["status"])
            #expect(status.succeeded, "status with 50 half-written lines pending: \(status)\n\(earmuff.log())")
            for c in idle { c.close() }
            #expect(earmuff.process.isRunning)
        }
    }
}
