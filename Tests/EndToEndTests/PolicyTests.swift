// Command policy against a real PulseAudio: every request that could give a
// denied app real audio behind earmuff's back (section 9 of the protocol
// notes) is refused with "Access denied", never reaches the server, and
// changes nothing there; a trusted app may still load modules.
//
// The bench (see HardeningTests.swift) denies pactl and grants parecord.
// Checks of the outcome always ask the server directly, never through earmuff.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct PolicyTests {
        /// `pactl args` through earmuff (pactl is denied on the bench).
        static func proxiedPactl(_ bench: HardeningBench, _ args: [String]) throws -> ToolResult {
            try Tool.run("pactl", args: args, server: bench.earmuff.serverString, timeout: 20)
        }

        /// `pactl args` straight to the server.
        static func directPactl(_ bench: HardeningBench, _ args: [String]) throws -> ToolResult {
            try Tool.run("pactl", args: args, server: bench.server.serverString, timeout: 20)
        }

        /// Expects `result` to be pactl's "Access denied" and earmuff to have logged refusing `command`.
        static func expectRefused(
            _ result: ToolResult, _ command: String, bench: HardeningBench, since mark: Int,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async {
            #expect(
                !result.succeeded && result.stderr.contains("Access denied"),
                "not refused: \(result)", sourceLocation: sourceLocation)
            let line = await bench.awaitLogLine(since: mark, containing: ["refused \(command)"])
            #expect(
                line != nil, "earmuff did not log refusing \(command):\n\(bench.log(since: mark))",
                sourceLocation: sourceLocation)
        }

        /// Starts the bench's granted recorder on the mic and waits for its first audio.
        static func startMicRecording(
            _ bench: HardeningBench, sourceLocation: SourceLocation = #_sourceLocation
        )
            async throws -> Recording
        {
            let rec = try Tool.startRecording(
                server: bench.earmuff.serverString, rate: PulseServer.toneRate,
                device: PulseServer.sourceName)
            #expect(await rec.waitForAudio(seconds: 0.1, timeout: 30), sourceLocation: sourceLocation)
            return rec
        }

        /// Expects `rec` (the granted recorder on the mic) to go on recording the mic's tone for
        /// another 1.5 s after the attempts, then stops it.
        static func expectStillTheTone(
            _ rec: Recording, bench: HardeningBench,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async {
            let mark = rec.byteCount()
            #expect(
                await rec.waitForAudio(seconds: Double(mark) / Double(rec.bytesPerSecond) + 1.5, timeout: 30),
                "the recording stopped\n\(bench.earmuff.log())", sourceLocation: sourceLocation)
            let (_, audio) = rec.stop()
            let fresh = audio.count > mark ? audio.subdata(in: (mark & ~1)..<audio.count) : Data()
            let report = Helpers.analyze(fresh, format: .s16le)
            #expect(
                report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 1), "after the attempts: \(report)",
                sourceLocation: sourceLocation)
        }

        /// Whether a TCP connection to 127.0.0.1:`port` succeeds.
        static func tcpConnects(port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = unsafe inet_addr("127.0.0.1")
            return unsafe withUnsafePointer(to: &addr) {
                unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
        }

        /// A free-looking TCP port (nothing listens there now).
        static func freePort() -> Int {
            var port = 0
            repeat { port = Int.random(in: 20000...60000) } while tcpConnects(port: port)
            return port
        }

        /// Modules that capture or exfiltrate audio, with arguments pointing at
        /// the microphone; and a probe for the endpoint each would open.
        enum Capture: String, CaseIterable, Sendable {
            case loopback, nativeTCP, nativeUnix, pipeSink, simpleTCP, rtpSend

            var module: String {
                switch self {
                case .loopback: "module-loopback"
                case .nativeTCP: "module-native-protocol-tcp"
                case .nativeUnix: "module-native-protocol-unix"
                case .pipeSink: "module-pipe-sink"
                case .simpleTCP: "module-simple-protocol-tcp"
                case .rtpSend: "module-rtp-send"
                }
            }

            func arguments(port: Int, dir: String) -> [String] {
                switch self {
                case .loopback: ["source=\(PulseServer.sourceName)", "sink=\(PulseServer.sinkName)"]
                case .nativeTCP: ["auth-anonymous=1", "port=\(port)", "listen=127.0.0.1"]
                case .nativeUnix: ["auth-anonymous=1", "socket=\(dir)/open-native"]
                case .pipeSink: ["file=\(dir)/mic.fifo", "sink_name=exfil"]
                case .simpleTCP: ["record=true", "playback=false", "source=\(PulseServer.sourceName)", "port=\(port)", "listen=127.0.0.1"]
                case .rtpSend: ["source=\(PulseServer.sourceName)", "destination_ip=127.0.0.1", "port=\(port)"]
                }
            }
        }

        @Test(arguments: Capture.allCases)
        func deniedAppCannotLoadCaptureModule(_ capture: Capture) async throws {
            let bench = try HardeningBench.shared()
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let port = Self.freePort()
            let before = try Self.directPactl(bench, ["list", "modules", "short"])
            let mark = bench.logBytes().count
            let result = try Self.proxiedPactl(bench, ["load-module", capture.module] + capture.arguments(port: port, dir: dir))
            await Self.expectRefused(result, "LOAD_MODULE", bench: bench, since: mark)
            let after = try Self.directPactl(bench, ["list", "modules", "short"])
            #expect(
                after.succeeded && before.stdoutText == after.stdoutText,
                "the server's module list changed:\n\(before.stdoutText)\nnow:\n\(after.stdoutText)")
            #expect(!Self.tcpConnects(port: port), "something listens on port \(port)")
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/open-native"))
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/mic.fifo"))
        }

        /// Granting microphone access does not make an app trusted.
        @Test func grantedAppStillCannotLoadModules() async throws {
            let bench = try HardeningBench.shared()
            let mark = bench.logBytes().count
            // parecord is granted; drive LOAD_MODULE through a raw client identified like any other untrusted app.
            let before = try Self.directPactl(bench, ["list", "modules", "short"])
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.handshake()
            let answer = try c.request(
                RawClient.packet(.loadModule, tag: 2) { w in
                    w.writeString("module-loopback")
                    w.writeString("source=\(PulseServer.sourceName) sink=\(PulseServer.sinkName)")
                }, tag: 2)
            var code: UInt32?
            if var r = answer?.reader, answer?.command == Command.error.rawValue { code = try? r.readU32() }
            #expect(code == ErrorCode.access.rawValue, "LOAD_MODULE answered with command \(String(describing: answer?.command))")
            #expect(await bench.awaitLogLine(since: mark, containing: ["refused LOAD_MODULE"]) != nil)
            let after = try Self.directPactl(bench, ["list", "modules", "short"])
            #expect(after.succeeded && after.stdoutText == before.stdoutText, "the module list changed:\n\(after.stdoutText)")
        }

        @Test func unloadModuleIsRefused() async throws {
            let bench = try HardeningBench.shared()
            let modules = try Self.directPactl(bench, ["list", "modules", "short"])
            // PulseAudio: the native protocol module earmuff itself talks to; PipeWire has none by that name.
            let lines = modules.stdoutText.split(separator: "\n")
            let line = lines.first { $0.contains("module-native-protocol-unix") } ?? lines.first
            let index = try #require(line.flatMap { $0.split(separator: "\t").first }.map(String.init))
            let mark = bench.logBytes().count
            let result = try Self.proxiedPactl(bench, ["unload-module", index])
            await Self.expectRefused(result, "UNLOAD_MODULE", bench: bench, since: mark)
            let after = try Self.directPactl(bench, ["list", "modules", "short"])
            #expect(after.stdoutText == modules.stdoutText, "the module list changed")
        }

        @Test func exitIsRefused() async throws {
            let bench = try HardeningBench.shared()
            let mark = bench.logBytes().count
            let result = try Self.proxiedPactl(bench, ["exit"])
            await Self.expectRefused(result, "EXIT", bench: bench, since: mark)
            #expect(bench.server.process.isRunning)
        }

        /// A granted app records the microphone; a denied app tries to move that
        /// recording to the sink's monitor, kill it, mute it or change its volume,
        /// or kill its client. All refused; the recording stays on the mic and
        /// keeps recording the mic's 440 Hz tone (the monitor carries 1 kHz).
        @Test func deniedAppCannotTouchAnotherAppsRecording() async throws {
            let bench = try HardeningBench.shared()
            let rec = try await Self.startMicRecording(bench)
            defer { rec.tool.cleanup() }

            // Find the recording's source output, its client and the mic's index on the server.
            let sources = try Self.directPactl(bench, ["list", "sources", "short"])
            let micIndex = try #require(
                sources.stdoutText.split(separator: "\n")
                    .first { $0.split(separator: "\t").dropFirst().first == Substring(PulseServer.sourceName) }
                    .flatMap { $0.split(separator: "\t").first }.map(String.init))
            func outputs() throws -> [(index: String, source: String, client: String)] {
                try Self.directPactl(bench, ["list", "source-outputs", "short"]).stdoutText.split(separator: "\n").map {
                    let f = $0.split(separator: "\t").map(String.init)
                    return (f[0], f[1], f[2])
                }
            }
            let listed = try outputs()
            let ours = try #require(listed.first { $0.source == micIndex }, "no source output on the mic: \(listed)")

            let attempts: [(args: [String], command: String)] = [
                (["move-source-output", ours.index, "\(PulseServer.sinkName).monitor"], "MOVE_SOURCE_OUTPUT"),
                (["set-source-output-mute", ours.index, "1"], "SET_SOURCE_OUTPUT_MUTE"),
                (["set-source-output-volume", ours.index, "0"], "SET_SOURCE_OUTPUT_VOLUME"),
            ]
            for attempt in attempts {
                let mark = bench.logBytes().count
                let result = try Self.proxiedPactl(bench, attempt.args)
                await Self.expectRefused(result, attempt.command, bench: bench, since: mark)
            }
            // pactl has no kill commands: send them raw.
            let raw = try RawClient(path: bench.earmuff.listenPath)
            try raw.handshake()
            for (tag, command, index) in [(UInt32(2), Command.killSourceOutput, ours.index), (3, .killClient, ours.client)] {
                let mark = bench.logBytes().count
                let answer = try raw.request(RawClient.packet(command, tag: tag) { $0.writeU32(UInt32(index) ?? 0) }, tag: tag)
                var code: UInt32?
                if var r = answer?.reader, answer?.command == Command.error.rawValue { code = try? r.readU32() }
                #expect(code == ErrorCode.access.rawValue, "\(command.info.name) answered with \(String(describing: answer?.command))")
                #expect(await bench.awaitLogLine(since: mark, containing: ["refused \(command.info.name)"]) != nil)
            }
            let now = try outputs().first { $0.index == ours.index }
            #expect(now?.source == micIndex, "the recording was moved or killed: \(String(describing: now))")
            await Self.expectStillTheTone(rec, bench: bench)
        }

        /// Making the monitor the default source would make consented apps record
        /// system audio; an app without consent may not do it (nor change the default sink).
        @Test func deniedAppCannotChangeDefaultDevices() async throws {
            let bench = try HardeningBench.shared()
            for (args, command) in [
                (["set-default-source", "\(PulseServer.sinkName).monitor"], "SET_DEFAULT_SOURCE"),
                (["set-default-sink", PulseServer.sinkName], "SET_DEFAULT_SINK"),
            ] {
                let mark = bench.logBytes().count
                let result = try Self.proxiedPactl(bench, args)
                await Self.expectRefused(result, command, bench: bench, since: mark)
            }
            let info = try Self.directPactl(bench, ["get-default-source"])
            #expect(info.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == PulseServer.sourceName, "\(info)")
        }

        /// module-stream-restore WRITE would reroute future streams; refused with
        /// ERROR ACCESS. Its read-only TEST still reaches the module.
        @Test func extensionWriteIsRefused() async throws {
            let bench = try HardeningBench.shared()
            let c = try RawClient(path: bench.earmuff.listenPath)
            try c.handshake()
            func ext(_ tag: UInt32, _ sub: UInt32, _ more: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
                RawClient.packet(.extension, tag: tag) { w in
                    w.writeU32(invalidIndex)
                    w.writeString("module-stream-restore")
                    w.writeU32(sub)
                    more(&w)
                }
            }
            let mark = bench.logBytes().count
            // WRITE (2): mode REPLACE, apply immediately, one entry routing an app's recordings to the monitor.
            let write = try c.request(
                ext(2, 2) { w in
                    w.writeU32(1)
                    w.writeBool(true)
                    w.writeString("source-output-by-application-name:earmuff-probe")
                    w.writeChannelMap(.mono)
                    w.writeCVolume(CVolume(channels: 1, volume: 0x10000))
                    w.writeString("\(PulseServer.sinkName).monitor")
                    w.writeBool(false)
                }, tag: 2)
            var code: UInt32?
            if var r = write?.reader, write?.command == Command.error.rawValue { code = try? r.readU32() }
            #expect(code == ErrorCode.access.rawValue, "stream-restore WRITE answered with command \(String(describing: write?.command))")
            #expect(await bench.awaitLogLine(since: mark, containing: ["refused EXTENSION"]) != nil)
            // TEST (0) is read-only: the module answers with its version.
            let test = try c.request(ext(3, 0), tag: 3)
            #expect(test?.command == Command.reply.rawValue, "stream-restore TEST did not reach the module: \(String(describing: test?.command))")
            // READ (1) shows no such entry.
            if let read = try c.request(ext(4, 1), tag: 4), read.command == Command.reply.rawValue {
                var r = read.reader
                var names: [String] = []
                while !r.isAtEnd, let name = try? r.readString() {
                    names.append(name)
                    _ = try? r.readChannelMap(); _ = try? r.readCVolume(); _ = try? r.readString(); _ = try? r.readBool()
                }
                #expect(!names.contains("source-output-by-application-name:earmuff-probe"), "the refused WRITE was stored: \(names)")
            }
        }

        @Test func stateChangingObjectMessageIsRefused() async throws {
            let bench = try HardeningBench.shared()
            let mark = bench.logBytes().count
            let result = try Self.proxiedPactl(bench, ["send-message", "/card/none/bluez", "switch-codec", "\"sbc\""])
            await Self.expectRefused(result, "SEND_OBJECT_MESSAGE", bench: bench, since: mark)
            let readOnly = try Self.proxiedPactl(bench, ["send-message", "/core", "list-handlers"])
            #expect(readOnly.succeeded, "read-only list-handlers: \(readOnly)")
        }

        /// An app listed in `trusted-apps` may load (and unload) modules.
        @Test func trustedAppCanLoadModule() async throws {
            let bench = try HardeningBench.shared()
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let conf = "\(dir)/earmuff.conf"
            try "trusted-apps = \(try Tool.appKey(for: "pactl"))\n".write(toFile: conf, atomically: true, encoding: .utf8)
            let trusted = try EarmuffProcess(upstream: bench.server.serverString, extraArguments: ["--config", conf])
            defer { trusted.stop() }
            let load = try Tool.run(
                "pactl", args: ["load-module", "module-null-sink", "sink_name=trusted_sink"],
                server: trusted.serverString, timeout: 20)
            #expect(load.succeeded, "\(load)\n\(trusted.log())")
            let index = load.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            let sinks = try Self.directPactl(bench, ["list", "sinks", "short"])
            #expect(sinks.stdoutText.contains("trusted_sink"), "\(sinks.stdoutText)")
            let unload = try Tool.run("pactl", args: ["unload-module", index], server: trusted.serverString, timeout: 20)
            #expect(unload.succeeded, "\(unload)")
        }
    }
}
