// Checks of the test infrastructure itself and of the direct (proxy-less)
// paths, so the proxy tests stand on measured ground: the analysis tells a
// tone from noise and silence, the private server works, a default client
// really negotiates SHM, and a naive relay really breaks it.

import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

extension EndToEnd {
    /// Earmuff's start is waited for without connecting (a connection would be an app).
    @Suite struct ListeningTests {
        @Test func aListeningSocketIsToldWithoutConnectingAndOthersAreNot() throws {
            let dir = try TempDir.make(prefix: "earmuff-listen")
            defer { TempDir.remove(dir) }
            let me = getpid()
            #expect(!UnixSocket.isListening("\(dir)/s", heldBy: me))
            let fd = try UnixSocket.listen("\(dir)/s")
            #expect(UnixSocket.isListening("\(dir)/s", heldBy: me))
            #expect(!UnixSocket.isListening("\(dir)/s2", heldBy: me))
            #expect(!UnixSocket.isListening(dir, heldBy: me))
            // Another process's socket at that path is not this one's.
            #expect(!UnixSocket.isListening("\(dir)/s", heldBy: getppid()))
            close(fd)
            #expect(!UnixSocket.isListening("\(dir)/s", heldBy: me))
        }

        /// A socket listening all along is found every time while other sockets come and go
        /// (a walk of /proc/net/unix could skip it then), and one bound but not listening is not.
        @Test func aListeningSocketIsNeverMissedWhileOthersComeAndGo() throws {
            let dir = try TempDir.make(prefix: "earmuff-listen")
            defer { TempDir.remove(dir) }
            let fd = try UnixSocket.listen("\(dir)/s")
            defer { close(fd) }
            let stop = Atomic<Bool>(false)
            let churn = Thread {
                while !stop.load(ordering: .relaxed) {
                    let others = (0..<64).map { _ in socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
                    for o in others where o >= 0 { close(o) }
                }
            }
            churn.start()
            defer { stop.store(true, ordering: .relaxed) }
            let missed = (0..<2000).filter { _ in !UnixSocket.isListening("\(dir)/s", heldBy: getpid()) }.count
            #expect(missed == 0, "missed \(missed) of 2000 times")

            let bound = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(bound) }
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            unsafe withUnsafeMutableBytes(of: &addr.sun_path) { unsafe $0.copyBytes(from: Array("\(dir)/b".utf8) + [0]) }
            let rc = unsafe withUnsafePointer(to: &addr) {
                unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe bind(bound, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(rc == 0)
            #expect(!UnixSocket.isListening("\(dir)/b", heldBy: getpid()), "bound, not listening")
        }
    }

    @Suite struct AnalysisTests {
        @Test func decodesEveryFormat() {
            #expect(AudioAnalysis.decode(Data([0x00, 0x80, 0xFF, 0x7F]), format: .s16le) == [-1, 32767.0 / 32768])
            #expect(AudioAnalysis.decode(Data([0x80, 0x00, 0xFF]), format: .u8) == [0, -1, 127.0 / 128])
            #expect(AudioAnalysis.decode(Data([0x00, 0x00, 0x80]), format: .s24le) == [-1])
            #expect(AudioAnalysis.decode(Data([0x00, 0x00, 0x40]), format: .s24le) == [0.5])
            #expect(AudioAnalysis.decode(Data([0x00, 0x00, 0x00, 0xC0]), format: .s32le) == [-0.5])
            #expect(AudioAnalysis.decode(Data([0x00, 0x00, 0x00, 0x3F]), format: .float32le) == [0.5])
            // G.711 silence decodes to (almost) zero; full scale to about ±1.
            #expect(abs(AudioAnalysis.decode(Data([0xD5]), format: .alaw)[0]) < 0.001)
            #expect(AudioAnalysis.decode(Data([0xFF]), format: .ulaw) == [0])
            #expect(AudioAnalysis.decode(Data([0x80]), format: .ulaw)[0] > 0.95)
            #expect(AudioAnalysis.decode(Data([0xAA]), format: .alaw)[0] > 0.95)
            #expect(AudioAnalysis.decode(Data([0x2A]), format: .alaw)[0] < -0.95)
            // A trailing partial sample is ignored.
            #expect(AudioAnalysis.decode(Data([1, 2, 3]), format: .s16le).count == 1)
        }

        @Test func silencePatterns() {
            for format in PCMFormat.allCases {
                let silence = Data(repeating: format.silenceByte, count: 64)
                #expect(AudioAnalysis.isUniform(silence, value: format.silenceByte))
                #expect(AudioAnalysis.rms(AudioAnalysis.decode(silence, format: format)) < 0.001, "\(format)")
            }
            #expect(!AudioAnalysis.isUniform(Data([0, 0, 1, 0]), value: 0))
            #expect(!AudioAnalysis.isUniform(Data(), value: 0))
        }

        @Test func goertzelTellsToneFromOtherSignals() {
            let rate = 48000.0
            let tone = (0..<48000).map { 0.5 * sin(2 * Double.pi * 440 * Double($0) / rate) }
            let other = (0..<48000).map { 0.5 * sin(2 * Double.pi * 1000 * Double($0) / rate) }
            var seed: UInt64 = 42
            let noise = (0..<48000).map { _ -> Double in
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                return Double(Int64(bitPattern: seed) >> 11) / Double(1 << 52) * 0.5
            }
            #expect(AudioAnalysis.toneRatio(tone, frequency: 440, sampleRate: rate) > 0.99)
            #expect(AudioAnalysis.toneRatio(other, frequency: 440, sampleRate: rate) < 0.01)
            #expect(AudioAnalysis.toneRatio(noise, frequency: 440, sampleRate: rate) < 0.01)
            #expect(AudioAnalysis.toneRatio([Double](repeating: 0, count: 1000), frequency: 440, sampleRate: rate) == 0)
            #expect(abs(AudioAnalysis.rms(tone) - 0.5 / 2.0.squareRoot()) < 0.001)
            // A phase jump half way spoils one block only.
            let jumped = Array(tone[0..<24000]) + tone[0..<24000].map { -$0 }
            let ratios = AudioAnalysis.blockToneRatios(jumped, frequency: 440, sampleRate: rate, blockSize: 4800)
            #expect(ratios.count == 10)
            #expect(AudioAnalysis.median(ratios) > 0.99)
            // Silent blocks count as 0 unless a minimum RMS skips them.
            let padded = [Double](repeating: 0, count: 9600) + Array(tone[0..<9600])
            #expect(AudioAnalysis.blockToneRatios(padded, frequency: 440, sampleRate: rate, blockSize: 4800).filter { $0 > 0.9 }.count == 2)
            #expect(AudioAnalysis.blockToneRatios(padded, frequency: 440, sampleRate: rate, blockSize: 4800, minimumRMS: 0.01).count == 2)
        }

        @Test func generatedWAVHasTheTone() {
            let wav = AudioAnalysis.sineWAV(frequency: 1000, seconds: 0.5, sampleRate: 44100, channels: 2)
            #expect(wav.count == 44 + 22050 * 4)
            #expect(wav.prefix(4) == Data("RIFF".utf8))
            let left = AudioAnalysis.channel(AudioAnalysis.decode(wav.dropFirst(44), format: .s16le), 0, of: 2)
            #expect(AudioAnalysis.toneRatio(left, frequency: 1000, sampleRate: 44100) > 0.99)
        }
    }

    @Suite struct InfrastructureTests {
        @Test func watchdogEnforcesLifetimeCap() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let child = try ChildProcess.spawn(
                executable: "/bin/sleep", arguments: ["600"], environment: [:],
                stdoutPath: "\(dir)/out", stderrPath: "\(dir)/out", maxLifetime: 1)
            let status = child.wait(timeout: 30)
            #expect(status == 128 + SIGTERM)
        }

        @Test func childrenGetOutputFilesAndExitStatus() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let child = try ChildProcess.spawn(
                executable: "/bin/sh", arguments: ["-c", "echo out; echo err >&2; echo $FOO; exit 3"],
                environment: ["FOO": "bar"], stdoutPath: "\(dir)/o", stderrPath: "\(dir)/e", maxLifetime: 60)
            #expect(child.wait(timeout: 30) == 3)
            #expect(String(decoding: child.stdoutData(), as: UTF8.self) == "out\nbar\n")
            #expect(child.stderrText() == "err\n")
        }

        @Test func toolTimeoutKillsTheTool() throws {
            let server = try PulseServer()
            defer { server.stop() }
            // parecord never ends by itself; the timeout must end it.
            let result = try Tool.run("parecord", args: ["--raw", "/dev/null"], server: server.serverString, timeout: 2)
            #expect(result.timedOut)
            #expect(!result.succeeded)
        }

        @Test func pulseServerStartsAndStopsCleanly() throws {
            let server = try PulseServer()
            let info = try server.pactl("info")
            #expect(info.succeeded, "\(info)")
            #expect(info.stdoutText.contains("Default Sink: out"))
            #expect(info.stdoutText.contains("Default Source: mic"))
            #expect(info.stdoutText.contains("Server String: \(server.serverString)"))
            let pid = server.process.pid
            server.stop()
            #expect(!server.process.isRunning)
            #expect(kill(pid, 0) != 0)
            #expect(!FileManager.default.fileExists(atPath: server.directory))
            // Nothing answers at the old address any more.
            #expect(!UnixSocket.canConnect(server.socketPath))
        }
    }

    @Suite struct DirectServerTests {
        @Test(arguments: PCMFormat.allCases)
        func defaultClientRecordsTheTone(format: PCMFormat) async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let (result, audio) = try await Helpers.recordMic(server: server.serverString, format: format)
            #expect(result.status == 0, "\(result)")
            #expect(audio.count % format.bytesPerSample == 0)
            let report = Helpers.analyze(audio, format: format)
            // G.711 and u8 quantise coarsely; the tone still dominates.
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(format): \(report)")
            // A stock client really uses SHM against the bare server: the case
            // the proxy must handle. (pipewire-pulse has no SHM at all.)
            if server.kind == .pulseaudio {
                #expect(server.shmNegotiations().yes >= 1, "\(server.shmNegotiations())")
            }
        }

        @Test func noSHMClientRecordsInline() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let (result, audio) = try await Helpers.recordMic(server: server.serverString, clientConfig: .noSHM)
            #expect(result.status == 0, "\(result)")
            #expect(Helpers.analyze(audio, format: .s16le).isTone(expectedRMS: Helpers.micRMS))
            #expect(server.shmNegotiations().yes == 0)
        }

        /// The control for the proxy's inline-audio test: a relay that only copies
        /// bytes (socat) breaks a default client, while a no-SHM client works.
        @Test func naiveRelayBreaksDefaultClient() async throws {
            guard let socat = findExecutable("socat") else {
                Issue.record("socat not installed (apt-get install socat)")
                return
            }
            let server = try PulseServer()
            defer { server.stop() }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let relay = try ChildProcess.spawn(
                executable: socat, arguments: ["UNIX-LISTEN:\(dir)/relay,fork", "UNIX-CONNECT:\(server.socketPath)"],
                environment: [:], stdoutPath: "\(dir)/socat.log", stderrPath: "\(dir)/socat.log", maxLifetime: 600)
            defer { relay.terminate() }
            #expect(Wait.untilBlocking(timeout: 30) { FileManager.default.fileExists(atPath: "\(dir)/relay") })
            let through = "unix:\(dir)/relay"

            let shmBefore = server.shmNegotiations().yes
            let (broken, brokenAudio) = try await Helpers.recordMic(server: through, clientConfig: .default)
            let negotiatedSHM = server.shmNegotiations().yes > shmBefore
            if server.kind == .pipewire {
                // pipewire-pulse never offers SHM, so byte copying carries even a default client.
                #expect(
                    broken.status == 0 && Helpers.analyze(brokenAudio, format: .s16le).isTone(expectedRMS: Helpers.micRMS),
                    "a byte-copying relay failed in front of pipewire-pulse: \(broken)")
            } else if negotiatedSHM {
                // Audio in shared memory the relay cannot carry (its descriptors are not
                // passed on). PulseAudio offers SHM only once it has seen the peer's
                // credentials; when it has not, it keeps audio inline and socat carries it.
                #expect(
                    broken.status != 0 || !Helpers.analyze(brokenAudio, format: .s16le).isTone(expectedRMS: Helpers.micRMS),
                    "a byte-copying relay unexpectedly carried a client with SHM: \(broken)")
            }

            let (works, audio) = try await Helpers.recordMic(server: through, clientConfig: .noSHM)
            #expect(works.status == 0, "\(works)")
            #expect(Helpers.analyze(audio, format: .s16le).isTone(expectedRMS: Helpers.micRMS))
        }
    }
}
