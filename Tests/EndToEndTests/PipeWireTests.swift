// What differs behind pipewire-pulse (protocol reference section 10), each
// checked against the real server directly, to pin down the difference, and
// through earmuff, to show the proxy copes: deferred replies matched by tag,
// record channel numbers reused after a stream ends, an AUTH reply without
// SHM bits, ERROR rather than a disconnect for unknown commands, the cookie
// ignored, and module emulation that earmuff must keep refusing.
//
// These run only in the PipeWire pass (`EARMUFF_TEST_SERVER=pipewire`); the
// rest of the suite runs there too, through `PulseServer`.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

private let pipeWireSelected = (try? ServerKind.selected()) == .pipewire

extension EndToEnd {
    @Suite(.enabled(if: pipeWireSelected, "PipeWire checks run in the EARMUFF_TEST_SERVER=pipewire pass"))
    struct PipeWireTests {
        /// A PipeWire with earmuff in front of it.
        struct Setup {
            let server: PipeWireServer
            let earmuff: EarmuffProcess

            init() throws {
                server = try PipeWireServer()
                do {
                    earmuff = try EarmuffProcess(upstream: server.serverString)
                } catch {
                    server.stop()
                    throw error
                }
            }

            func stop() {
                earmuff.stop()
                server.stop()
            }

            /// Context for failure messages.
            var logs: String { "earmuff log:\n\(earmuff.log())\npipewire-pulse log (tail):\n\(String(server.log().suffix(6000)))" }

            /// Grants or denies the test process itself (the raw client's identity).
            func decide(_ verb: String) throws {
                try earmuff.control(verb, try WireClient.ownAppKey())
            }
        }

        // MARK: - The server itself

        @Test func serverStartsHeadlessAndStopsCompletely() async throws {
            let server = try PipeWireServer()
            let info = try server.pactl("info")
            #expect(info.succeeded, "\(info)")
            #expect(info.stdoutText.contains("Server Name: PulseAudio (on PipeWire "), "\(info.stdoutText)")
            #expect(info.stdoutText.contains("Default Sink: out\n"))
            #expect(info.stdoutText.contains("Default Source: mic\n"))
            // The same tone, rate and level the PulseAudio tests expect.
            #expect(PipeWireServer.toneFrequency == PulseServer.toneFrequency)
            #expect(PipeWireServer.toneRate == PulseServer.toneRate)
            #expect(PipeWireServer.toneAmplitude == PulseServer.toneAmplitude)
            let (result, audio) = try await Helpers.recordMic(server: server.serverString, format: .float32le)
            #expect(result.status == 0, "\(result)")
            let report = Helpers.analyze(audio, format: .float32le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, tolerance: 0.01), "\(report)")

            let children = [server.process, server.wireplumberProcess, server.pipewireProcess, server.dbusProcess]
            server.stop()
            for child in children {
                #expect(!child.isRunning, "\(child.command) still running")
                #expect(kill(child.pid, 0) != 0, "\(child.command) (pid \(child.pid)) still exists")
            }
            #expect(!FileManager.default.fileExists(atPath: server.directory))
            #expect(!UnixSocket.canConnect(server.socketPath))
        }

        // MARK: - AUTH: no SHM bits, cookie ignored

        /// pipewire-pulse answers AUTH with a plain 35 even to a client offering
        /// SHM and memfd, and does not look at the cookie; earmuff passes the
        /// same reply on.
        @Test func authReplyCarriesNoTransportBitsAndIgnoresTheCookie() throws {
            let setup = try Setup()
            defer { setup.stop() }
            var random = SystemRandomNumberGenerator()
            let cookie = (0..<Limits.cookieLength).map { _ in UInt8.random(in: 0...255, using: &random) }
            let offered = Limits.protocolVersion | ProtocolVersion.shmFlag | ProtocolVersion.memfdFlag
            for (label, path) in [("direct", setup.server.socketPath), ("earmuff", setup.earmuff.listenPath)] {
                let client = try WireClient(path: path)
                let reply = try client.request(
                    AuthRequest(versionWord: offered, cookie: cookie).packet(tag: 0, version: 35),
                    tag: 0)
                let word = try AuthReply.decodePacket(reply, version: 35).message.versionWord
                #expect(word == Limits.protocolVersion, "\(label): AUTH reply word \(String(word, radix: 16))\n\(setup.logs)")
                // The random cookie was accepted: the connection works.
                let info = try client.request(Self.serverInfoPacket(tag: 1), tag: 1)
                #expect(try PacketHeader.decode(info).command == Command.reply.rawValue, "\(label)\n\(setup.logs)")
            }
        }

        // MARK: - Unknown commands

        /// PulseAudio disconnects a client for an unknown opcode; pipewire-pulse
        /// answers ERROR and carries on, so the server no longer ends such a
        /// connection for earmuff. Earmuff must not forward what it does not know
        /// (default deny, see HardeningTests.unknownOpcode): through earmuff the
        /// opcodes never reach pipewire-pulse, which logs every ERROR it sends
        /// ("ERROR command:<opcode> …"). Directly, each gets ERROR INVALID and the
        /// connection lives.
        @Test func unknownCommandsGetAnErrorAndTheConnectionLives() throws {
            let setup = try Setup()
            defer { setup.stop() }
            let opcodes: [UInt32] = [105, 200, 0x7FFF_FFFF]
            func packet(_ opcode: UInt32, tag: UInt32) -> [UInt8] {
                var w = TagStructWriter()
                PacketHeader(command: opcode, tag: tag).encode(into: &w)
                w.writeU32(0)
                return w.bytes
            }

            // Through earmuff first, so that the server's log holds only what earmuff let through.
            for (i, opcode) in opcodes.enumerated() {
                let client = try WireClient(path: setup.earmuff.listenPath)
                try client.handshake()
                let tag = UInt32(10 + i)
                try client.send(packet(opcode, tag: tag))
                // An ERROR for the tag or a closed connection are both fine answers.
                if let (got, reply) = try? client.nextReply(timeout: 10) {
                    #expect(
                        got == tag && (try? PacketHeader.decode(reply).command) == Command.error.rawValue,
                        "earmuff: opcode \(opcode) answered with \(Self.describe(reply))")
                }
            }
            let forwarded = setup.server.log().split(separator: "\n").filter { line in
                opcodes.contains { line.contains("ERROR command:\($0) ") }
            }
            #expect(forwarded.isEmpty, "unknown opcodes reached pipewire-pulse through earmuff:\n\(forwarded.joined(separator: "\n"))\n\(setup.logs)")

            let client = try WireClient(path: setup.server.socketPath)
            try client.handshake()
            var tag: UInt32 = 10
            for opcode in opcodes {
                let reply = try client.request(packet(opcode, tag: tag), tag: tag)
                let header = try PacketHeader.decode(reply)
                #expect(header.command == Command.error.rawValue, "direct: opcode \(opcode) got \(Self.describe(reply))")
                if header.command == Command.error.rawValue {
                    let code = try ErrorReply.decodePacket(reply, version: 35).message.code
                    #expect(code == ErrorCode.invalid.rawValue, "direct: opcode \(opcode) → error \(code)")
                }
                tag += 1
            }
            let info = try client.request(Self.serverInfoPacket(tag: tag), tag: tag)
            #expect(try PacketHeader.decode(info).command == Command.reply.rawValue, "direct: the connection did not live on")
        }

        // MARK: - Deferred replies

        /// SET_CLIENT_NAME and CREATE_RECORD_STREAM are answered late by
        /// pipewire-pulse, so a client that pipelines requests may get replies
        /// out of order. Earmuff must pair each reply with its request by tag:
        /// the record reply's channel must carry the stream's audio (real when
        /// granted, exact silence when denied).
        @Test(arguments: ["grant", "deny"])
        func pipelinedRequestsGetTheirOwnReplies(decision: String) throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.decide(decision)
            for (label, path) in [("direct", setup.server.socketPath), ("earmuff", setup.earmuff.listenPath)] {
                let client = try WireClient(path: path)
                var batch: [UInt8] = []
                func add(_ payload: [UInt8]) { Frame(packet: payload).append(to: &batch) }
                add(AuthRequest(versionWord: Limits.protocolVersion).packet(tag: 0, version: 35))
                add(SetClientName(proplist: WireClient.clientProperties).packet(tag: 1, version: 35))
                add(WireClient.recordRequest(format: .s16le).packet(tag: 2, version: 35))
                add(Self.serverInfoPacket(tag: 3))
                add(WireClient.sourceInfoPacket(tag: 4, name: PipeWireServer.sourceName))
                try client.write(batch)
                var replies: [UInt32: [UInt8]] = [:]
                var order: [UInt32] = []
                while replies.count < 5 {
                    let (tag, payload) = try client.nextReply()
                    #expect(replies[tag] == nil, "\(label): second reply for tag \(tag)")
                    replies[tag] = payload
                    order.append(tag)
                }
                #expect(try AuthReply.decodePacket(replies[0] ?? [], version: 35).message.versionWord == 35)
                do {
                    _ = try SetClientNameReply.decodePacket(replies[1] ?? [], version: 35)
                } catch {
                    Issue.record("\(label): tag 1 is not a SET_CLIENT_NAME reply: \(error)")
                }
                let record = try CreateRecordStreamReply.decodePacket(replies[2] ?? [], version: 35).message
                #expect(record.sampleSpec == SampleSpec(format: .s16le, channels: 1, rate: UInt32(PipeWireServer.toneRate)))
                #expect(try PacketHeader.decode(replies[3] ?? []).command == Command.reply.rawValue)
                // Tag 4 may be answered before SET_CLIENT_NAME (pipewire-pulse then has not
                // yet synced its registry for this client and says NOENTITY); either
                // way it is an answer to tag 4 and to nothing else.
                let sourceInfo = try PacketHeader.decode(replies[4] ?? [])
                #expect(
                    sourceInfo.command == Command.reply.rawValue || sourceInfo.command == Command.error.rawValue,
                    "\(label): GET_SOURCE_INFO got \(Self.describe(replies[4] ?? []))")
                let audio: [UInt8]
                do {
                    audio = try client.collect(channel: record.channel, bytes: PipeWireServer.toneRate * 2)
                } catch {
                    Issue.record("\(label), \(decision), reply order \(order): \(error)\n\(setup.logs)")
                    continue
                }
                if label == "direct" || decision == "grant" {
                    let report = Helpers.analyze(Data(audio), format: .s16le)
                    #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(label), \(decision), reply order \(order): \(report)\n\(setup.logs)")
                } else {
                    #expect(
                        AudioAnalysis.isUniform(Data(audio), value: 0),
                        "\(label), \(decision), reply order \(order): not silence: \(Helpers.analyze(Data(audio), format: .s16le))\n\(setup.logs)")
                }
            }
        }

        // MARK: - Channel reuse

        /// pipewire-pulse hands a freed record channel number to the next stream.
        /// The new stream must get its own treatment: here the first stream is
        /// s16 (silence 0x00) and the second u8 (silence 0x80) on the same
        /// number, so a stale table entry shows up as the wrong silence byte or
        /// as dropped data. The first stream ends by DELETE from the client, or
        /// by the server killing it (RECORD_STREAM_KILLED). A denied stream never reaches the
        /// server (it is held: HeldStreamTests), so there is no number of the server's to reuse.
        @Test(arguments: ["direct", "grant"], ["delete", "kill"])
        func reusedChannelGetsTheNewStreamsTreatment(decision: String, ending: String) throws {
            let setup = try Setup()
            defer { setup.stop() }
            if decision != "direct" { try setup.decide(decision) }
            do {
                try checkReuse(setup: setup, decision: decision, ending: ending)
            } catch {
                Issue.record("\(decision)/\(ending): \(error)\n\(setup.logs)")
            }
        }

        private func checkReuse(setup: Setup, decision: String, ending: String) throws {
            // "direct" is the control: the same sequence straight to pipewire-pulse.
            let client = try WireClient(path: decision == "direct" ? setup.server.socketPath : setup.earmuff.listenPath)
            try client.handshake()
            let first = try client.createRecord(format: .s16le, tag: 2)
            let firstAudio = try client.collect(channel: first.channel, bytes: PipeWireServer.toneRate)
            if ending == "delete" {
                let reply = try client.request(DeleteRecordStream(channel: first.channel).packet(tag: 3, version: 35), tag: 3)
                #expect(try PacketHeader.decode(reply).command == Command.reply.rawValue)
            } else {
                // pactl has no kill command: a second, direct connection sends KILL_SOURCE_OUTPUT.
                let admin = try WireClient(path: setup.server.socketPath)
                try admin.handshake()
                var w = TagStructWriter()
                PacketHeader(command: .killSourceOutput, tag: 2).encode(into: &w)
                w.writeU32(first.sourceOutputIndex)
                let killed = try admin.request(w.bytes, tag: 2)
                #expect(try PacketHeader.decode(killed).command == Command.reply.rawValue, "kill: \(Self.describe(killed))")
                try client.waitForEvent(.recordStreamKilled)
            }
            client.discardAudio()
            let second = try client.createRecord(format: .u8, tag: 4)
            #expect(
                second.channel == first.channel,
                "pipewire-pulse gave channel \(second.channel) after \(first.channel): it no longer reuses numbers, so this test does not test reuse")
            let secondAudio = try client.collect(channel: second.channel, bytes: PipeWireServer.toneRate)
            let context = "\(decision)/\(ending), channels \(first.channel) → \(second.channel)"
            let a = Helpers.analyze(Data(firstAudio), format: .s16le)
            let b = Helpers.analyze(Data(secondAudio), format: .u8)
            #expect(a.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.4), "\(context): first \(a)\n\(setup.logs)")
            #expect(b.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.9), "\(context): second \(b)\n\(setup.logs)")
            #expect(setup.earmuff.process.isRunning, "\(setup.logs)")
        }

        // MARK: - Module emulation

        /// pipewire-pulse loads (emulated) modules on request, so earmuff must
        /// refuse LOAD_MODULE and UNLOAD_MODULE itself; nothing reaches the server.
        @Test func moduleCommandsAreRefusedAndNothingIsLoaded() throws {
            let setup = try Setup()
            defer { setup.stop() }
            // The control: the server itself does load an emulated module.
            let direct = try setup.server.pactl("load-module", "module-null-sink", "sink_name=probe")
            #expect(direct.succeeded, "\(direct)")
            let probeIndex = UInt32(direct.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect(probeIndex & 0x2000_0000 != 0, "emulated module index \(probeIndex) lacks bit 29")

            let attempts: [[String]] = [
                ["load-module", "module-loopback", "source=mic", "sink=out"],
                ["load-module", "module-native-protocol-tcp", "auth-anonymous=1", "port=0", "listen=127.0.0.1"],
                ["load-module", "module-pipe-sink", "file=/tmp/earmuff-should-not-exist", "sink_name=pipe"],
                ["unload-module", String(probeIndex)],
            ]
            for args in attempts {
                let r = try Tool.run("pactl", args: args, server: setup.earmuff.serverString)
                #expect(!r.succeeded, "\(args) succeeded through earmuff: \(r)")
                #expect(r.stderr.contains("Access denied"), "\(args): \(r)\n\(setup.logs)")
            }
            let modules = try setup.server.pactl("list", "short", "modules")
            #expect(modules.succeeded)
            // `pactl list short modules`: index, name, arguments. (The module-pipe-source
            // that makes the test microphone is listed too.)
            let loaded = modules.stdoutText.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
                .filter { $0.count >= 2 }.map { String($0[1]) }
            for name in ["module-loopback", "module-native-protocol-tcp", "module-pipe-sink"] {
                #expect(!loaded.contains(name), "\(name) was loaded:\n\(modules.stdoutText)")
            }
            #expect(loaded.contains("module-null-sink"), "the probe module went away:\n\(modules.stdoutText)")
            // pipewire-pulse logs each module request ("[pactl] LOAD_MODULE tag:… name:…"):
            // only the direct probe may be there, besides the test microphone's.
            let requests = setup.server.log().split(separator: "\n")
                .filter { $0.contains("LOAD_MODULE") && !$0.contains("name:module-pipe-source") }
            #expect(
                requests.count == 1 && requests[0].contains("name:module-null-sink"),
                "module requests reached pipewire-pulse: \(requests)")
            #expect(!FileManager.default.fileExists(atPath: "/tmp/earmuff-should-not-exist"))
        }

        // MARK: - Helpers

        /// A reply or error for failure messages.
        static func describe(_ payload: [UInt8]) -> String {
            guard let header = try? PacketHeader.decode(payload) else { return "malformed \(payload.prefix(16))" }
            if header.command == Command.error.rawValue, let e = try? ErrorReply.decodePacket(payload, version: 35) {
                return "ERROR \(e.message.code) for tag \(header.tag)"
            }
            return "command \(header.command) tag \(header.tag), \(payload.count) bytes"
        }

        /// GET_SERVER_INFO, a request every server answers.
        static func serverInfoPacket(tag: UInt32) -> [UInt8] {
            var w = TagStructWriter()
            PacketHeader(command: .getServerInfo, tag: tag).encode(into: &w)
            return w.bytes
        }
    }
}

/// A hand-driven client on one native-protocol connection (inline audio only),
/// for the wire-level differences that stock tools do not expose.
final class WireClient {
    private let fd: Int32
    private var parser = FrameParser()
    /// Packets received while waiting for something else, in order.
    private var packets: [[UInt8]] = []
    /// Audio received per channel.
    private var audio: [UInt32: [UInt8]] = [:]

    /// The properties the client announces.
    static let clientProperties: Proplist = {
        var p = Proplist()
        p.set("application.name", string: "earmuff-pipewire-test")
        return p
    }()

    /// The app key earmuff gives this test process.
    static func ownAppKey() throws -> String { try Tool.ownAppKey() }

    /// Connects to the Unix socket at `path`.
    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw TestSupportError("path too long: \(path)") }
        unsafe withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            unsafe buf.copyBytes(from: bytes)
            unsafe buf[bytes.count] = 0
        }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        let rc = unsafe withUnsafePointer(to: &addr) {
            unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe connect(fd, $0, len) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestSupportError("connect(\(path)): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Writes all of `bytes`.
    func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = unsafe bytes[sent...].withUnsafeBytes { unsafe Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TestSupportError("send: errno \(errno)") }
            sent += n
        }
    }

    /// Sends one packet.
    func send(_ payload: [UInt8]) throws { try write(Frame(packet: payload).bytes) }

    /// Reads until one more frame is parsed; audio goes to its channel's buffer.
    /// Throws on EOF or after `timeout` seconds without a frame.
    private func pump(timeout: Double) throws {
        let deadline = Wait.now() + timeout
        while true {
            if let frame = try parser.next() {
                if frame.descriptor.isPacket {
                    packets.append(frame.payload)
                } else {
                    audio[frame.descriptor.channel, default: []].append(contentsOf: frame.payload)
                }
                return
            }
            let left = deadline - Wait.now()
            guard left > 0 else { throw TestSupportError("no frame within \(timeout) s") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = unsafe poll(&p, 1, Int32(min(left, 1) * 1000))
            if ready <= 0 { continue }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { throw TestSupportError("connection closed (recv \(n), errno \(errno))") }
            parser.append(contentsOf: buf[0..<n])
        }
    }

    /// The next REPLY or ERROR packet (events are skipped): its tag and payload.
    func nextReply(timeout: Double = 40) throws -> (tag: UInt32, payload: [UInt8]) {
        let deadline = Wait.now() + timeout
        while true {
            if let i = packets.firstIndex(where: { p in
                let c = (try? PacketHeader.decode(p))?.command
                return c == Command.reply.rawValue || c == Command.error.rawValue
            }) {
                let p = packets.remove(at: i)
                return (try PacketHeader.decode(p).tag, p)
            }
            let left = deadline - Wait.now()
            guard left > 0 else { throw TestSupportError("no reply within \(timeout) s") }
            try pump(timeout: left)
        }
    }

    /// Sends `payload` and returns the REPLY or ERROR with `tag`
    /// (replies to other tags are an error: nothing else is outstanding).
    func request(_ payload: [UInt8], tag: UInt32, timeout: Double = 40) throws -> [UInt8] {
        try send(payload)
        let (got, reply) = try nextReply(timeout: timeout)
        guard got == tag else { throw TestSupportError("reply for tag \(got) while waiting for \(tag)") }
        return reply
    }

    /// Waits for a server event with `command`.
    func waitForEvent(_ command: Command, timeout: Double = 30) throws {
        let deadline = Wait.now() + timeout
        while true {
            if let i = packets.firstIndex(where: { (try? PacketHeader.decode($0))?.command == command.rawValue }) {
                packets.remove(at: i)
                return
            }
            let left = deadline - Wait.now()
            guard left > 0 else { throw TestSupportError("no \(command.info.name) within \(timeout) s") }
            try pump(timeout: left)
        }
    }

    /// AUTH and SET_CLIENT_NAME with tags 0 and 1.
    func handshake() throws {
        let auth = try request(AuthRequest(versionWord: Limits.protocolVersion).packet(tag: 0, version: 35), tag: 0)
        guard try PacketHeader.decode(auth).command == Command.reply.rawValue else { throw TestSupportError("AUTH refused") }
        let name = try request(SetClientName(proplist: Self.clientProperties).packet(tag: 1, version: 35), tag: 1)
        guard try PacketHeader.decode(name).command == Command.reply.rawValue else { throw TestSupportError("SET_CLIENT_NAME refused") }
    }

    /// A mono 48 kHz record request on the default source with 20 ms fragments.
    static func recordRequest(format: SampleFormat) -> CreateRecordStreamRequest {
        var r = CreateRecordStreamRequest()
        r.sampleSpec = SampleSpec(format: format, channels: 1, rate: UInt32(PipeWireServer.toneRate))
        r.channelMap = .mono
        r.fragSize = UInt32(PipeWireServer.toneRate / 50 * format.bytesPerSample)
        r.adjustLatency = true
        r.proplist.set("media.name", string: "pipewire-test")
        return r
    }

    /// GET_SOURCE_INFO by name.
    static func sourceInfoPacket(tag: UInt32, name: String) -> [UInt8] {
        var w = TagStructWriter()
        PacketHeader(command: .getSourceInfo, tag: tag).encode(into: &w)
        w.writeU32(invalidIndex)
        w.writeString(name)
        return w.bytes
    }

    /// Creates a record stream of `format` and returns the server's reply.
    func createRecord(format: SampleFormat, tag: UInt32) throws -> CreateRecordStreamReply {
        let reply = try request(Self.recordRequest(format: format).packet(tag: tag, version: 35), tag: tag)
        return try CreateRecordStreamReply.decodePacket(reply, version: 35).message
    }

    /// Forgets the audio received so far on every channel.
    func discardAudio() { audio.removeAll() }

    /// Waits until `bytes` of audio arrived on `channel` and returns them.
    func collect(channel: UInt32, bytes: Int, timeout: Double = 60) throws -> [UInt8] {
        let deadline = Wait.now() + timeout
        while audio[channel, default: []].count < bytes {
            guard Wait.now() < deadline else {
                throw TestSupportError(
                    "only \(audio[channel, default: []].count) of \(bytes) bytes on channel \(channel) within \(timeout) s; other channels: \(audio.mapValues(\.count))"
                )
            }
            try pump(timeout: max(0.1, deadline - Wait.now()))
        }
        return Array(audio[channel, default: []].prefix(bytes))
    }
}
