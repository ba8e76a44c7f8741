// The built `earmuff serve` relaying between stock clients and a real server.
// Each test starts its own PulseServer and EarmuffProcess.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct ProxyTests {
        /// A server with earmuff in front of it; stop both with `stop()`.
        struct Setup {
            let server: PulseServer
            let earmuff: EarmuffProcess

            init(extraArguments: [String] = []) throws {
                server = try PulseServer()
                do {
                    earmuff = try EarmuffProcess(upstream: server.serverString, extraArguments: extraArguments)
                } catch {
                    server.stop()
                    throw error
                }
            }

            /// Stops earmuff, then the server; returns earmuff's exit status.
            @discardableResult
            func stop() -> Int32? {
                let status = earmuff.stop()
                server.stop()
                return status
            }

            /// Lets `tool` (identified by its executable) record real audio through
            /// earmuff, so relay tests see the tone rather than consent's silence.
            func grant(_ tool: String = "parecord") throws {
                try earmuff.control("grant", try Tool.appKey(for: tool))
            }

            /// Context for failure messages.
            var logs: String { "earmuff log:\n\(earmuff.log())" }
        }

        @Test func announcesItselfAndStopsOnSIGTERM() async throws {
            let setup = try Setup()
            defer { setup.stop() }
            // Startup may have been noticed through the socket before the line was flushed.
            let announced = await Wait.until(timeout: 30) { setup.earmuff.printedServerLine }
            #expect(announced, "stdout: \(setup.earmuff.stdoutText())")
            #expect(UnixSocket.canConnect(setup.earmuff.listenPath))
            let status = setup.earmuff.stop()
            // Handled (0) or default action (143) are both a prompt exit; 137 means it needed SIGKILL.
            #expect(status == 0 || status == 128 + SIGTERM, "exit status \(String(describing: status))")
        }

        @Test(arguments: [["info"], ["list"]])
        func pactlSeesTheSameServer(arguments: [String]) throws {
            let setup = try Setup()
            defer { setup.stop() }
            try Helpers.expectSamePactl(
                arguments, server: setup.server.serverString, relay: setup.earmuff.serverString,
                log: { setup.earmuff.log() })
        }

        @Test func paplayPlaysThroughTheProxy() async throws {
            let setup = try Setup()
            defer { setup.stop() }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let wav = "\(dir)/tone.wav"
            try AudioAnalysis.sineWAV(frequency: 1000, seconds: 2, sampleRate: 44100, channels: 2).write(to: URL(fileURLWithPath: wav))

            // Listen to the sink's monitor directly on the server.
            let monitor = try Tool.startRecording(
                server: setup.server.serverString, format: .s16le, rate: 44100,
                channels: 1, device: "\(PulseServer.sinkName).monitor")
            #expect(await monitor.waitForAudio(seconds: 0.1, timeout: 60))
            let play = try Tool.run("paplay", args: [wav], server: setup.earmuff.serverString, timeout: 90)
            #expect(play.succeeded, "\(play)\n\(setup.logs)")

            // Wait until the monitor heard at least 1.5 s of loud audio, then judge its content.
            func loudBlocks() -> [Double] {
                let samples = AudioAnalysis.decode(monitor.data(), format: .s16le)
                return AudioAnalysis.blockToneRatios(samples, frequency: 1000, sampleRate: 44100, blockSize: 4410, minimumRMS: 0.05)
            }
            await Wait.until(timeout: 60, interval: 0.1) { loudBlocks().count >= 15 }
            let ratios = loudBlocks()
            _ = monitor.stop()
            #expect(ratios.count >= 15, "heard \(ratios.count) loud blocks\n\(setup.logs)")
            #expect(AudioAnalysis.median(ratios) > 0.95)
        }

        @Test(arguments: [PCMFormat.s16le, .float32le, .u8])
        func parecordThroughTheProxyMatchesDirect(format: PCMFormat) async throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.grant()
            let (directResult, directAudio) = try await Helpers.recordMic(server: setup.server.serverString, format: format)
            let (proxyResult, proxyAudio) = try await Helpers.recordMic(server: setup.earmuff.serverString, format: format)
            #expect(directResult.status == 0, "\(directResult)")
            #expect(proxyResult.status == 0, "\(proxyResult)\n\(setup.logs)")
            let direct = Helpers.analyze(directAudio, format: format)
            let proxied = Helpers.analyze(proxyAudio, format: format)
            #expect(direct.isTone(expectedRMS: Helpers.micRMS), "direct: \(direct)")
            #expect(proxied.isTone(expectedRMS: Helpers.micRMS), "proxied: \(proxied)\n\(setup.logs)")
            #expect(abs(direct.rms - proxied.rms) < 0.02, "direct \(direct) vs proxied \(proxied)")
            #expect(proxyAudio.count % format.bytesPerSample == 0)
        }

        @Test func parecordWithoutSHMThroughTheProxy() async throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.grant()
            let (result, audio) = try await Helpers.recordMic(server: setup.earmuff.serverString, clientConfig: .noSHM)
            #expect(result.status == 0, "\(result)\n\(setup.logs)")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(report)")
        }

        /// A default client (SHM and memfd on) fails behind a byte-copying relay
        /// with "Protocol error" (see DirectServerTests.naiveRelayBreaksDefaultClient).
        /// Through earmuff it must work, and the server must see every connection
        /// negotiate inline audio.
        @Test func proxyForcesInlineAudio() async throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.grant()
            let (result, audio) = try await Helpers.recordMic(server: setup.earmuff.serverString, clientConfig: .default)
            #expect(result.status == 0, "\(result)\n\(setup.logs)")
            #expect(!result.stderr.contains("Protocol error"), "\(result)")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(report)")
            let negotiations = setup.server.shmNegotiations()
            #expect(negotiations.yes == 0, "a connection through the proxy negotiated SHM: \(negotiations)")
            #expect(negotiations.no >= 2, "\(negotiations)") // the readiness pactl and the proxied parecord
        }

        @Test func twentyClientsAtOnce() async throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.grant()
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let wav = "\(dir)/tone.wav"
            // Quiet, so ten players mixed together do not clip.
            try AudioAnalysis.sineWAV(frequency: 1000, seconds: 1, sampleRate: 44100, channels: 2, amplitude: 0.04)
                .write(to: URL(fileURLWithPath: wav))
            let monitor = try Tool.startRecording(
                server: setup.server.serverString, format: .s16le, rate: 44100,
                channels: 1, device: "\(PulseServer.sinkName).monitor")
            #expect(await monitor.waitForAudio(seconds: 0.1, timeout: 60))

            let proxy = setup.earmuff.serverString
            var recordings: [(Recording, PCMFormat, ClientConfig)] = []
            var players: [RunningTool] = []
            for i in 0..<10 {
                let format: PCMFormat = i % 2 == 0 ? .s16le : .float32le
                let config: ClientConfig = i % 3 == 0 ? .noSHM : .default
                recordings.append((try Tool.startRecording(server: proxy, format: format, clientConfig: config), format, config))
                players.append(try Tool.start("paplay", args: [wav], server: proxy, clientConfig: i % 3 == 1 ? .noSHM : .default))
            }
            // One deadline for all clients, so a stalled proxy fails the test in
            // two minutes rather than two minutes per client.
            let deadline = Wait.now() + 120
            func left() -> Double { max(1, deadline - Wait.now()) }
            for (i, player) in players.enumerated() {
                let result = player.wait(timeout: left())
                #expect(result.succeeded, "player \(i): \(result)\n\(setup.logs)")
                player.cleanup()
            }
            for (rec, _, _) in recordings {
                _ = await rec.waitForAudio(seconds: 1.0, timeout: left())
            }
            for (i, (rec, format, config)) in recordings.enumerated() {
                let (result, audio) = rec.stop()
                #expect(result.status == 0, "recorder \(i) (\(format), \(config)): \(result)")
                let report = Helpers.analyze(audio, format: format)
                #expect(report.isTone(expectedRMS: Helpers.micRMS), "recorder \(i) (\(format), \(config)): \(report)\n\(setup.logs)")
            }
            let samples = AudioAnalysis.decode(monitor.stop().audio, format: .s16le)
            let loud = AudioAnalysis.blockToneRatios(samples, frequency: 1000, sampleRate: 44100, blockSize: 4410, minimumRMS: 0.01)
            #expect(loud.count >= 5, "the sink heard \(loud.count) loud blocks")
            // Players start and stop at different moments, so many blocks hold a
            // step in the mix (a tone present for half a block scores about 0.5);
            // noise or garbage would score near 0.
            #expect(AudioAnalysis.median(loud) > 0.6, "\(loud)")
            #expect(setup.earmuff.process.isRunning, "\(setup.logs)")
        }

        /// The counterpart of the relay tests: the same recording by a denied app
        /// is exact silence of its sample format (and still as long as asked for).
        @Test(arguments: [PCMFormat.s16le, .u8, .float32le, .alaw, .ulaw])
        func deniedAppRecordsExactSilence(format: PCMFormat) async throws {
            let setup = try Setup()
            defer { setup.stop() }
            try setup.earmuff.control("deny", try Tool.appKey(for: "parecord"))
            let (result, audio) = try await Helpers.recordMic(server: setup.earmuff.serverString, format: format)
            #expect(result.status == 0, "\(result)\n\(setup.logs)")
            #expect(audio.count >= PulseServer.toneRate * format.bytesPerSample / 2, "only \(audio.count) bytes")
            #expect(
                AudioAnalysis.isUniform(audio, value: format.silenceByte),
                "\(format): not silence: \(Helpers.analyze(audio, format: format))")
        }
    }
}
