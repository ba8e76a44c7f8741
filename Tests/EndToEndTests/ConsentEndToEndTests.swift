// Consent through the real daemon: the built `earmuff serve` in front of a
// private PulseAudio, stock `parecord` as the app, the `earmuff` CLI as the
// user, scripted agents and `prompt-command` as the person answering.
//
// Every test starts its own server and daemon. Audio is judged by content:
// exact silence bytes of the stream's format, or the 440 Hz test tone by its
// energy share (Helpers.analyze). The only byte-position bounds are generous
// ones (a second of audio) on where a decision takes effect in a running
// recording; no assertion is on wall-clock speed.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct ConsentEndToEndTests {
        /// The purpose the recorders declare (application.capture.purpose).
        static let purpose = "Consent test"

        /// A server with earmuff in front of it, optionally with a config file and a given store.
        struct Setup {
            let server: PulseServer
            let earmuff: EarmuffProcess
            /// Holds the config file; removed by `stop`.
            let scratch: String
            /// The app key of parecord (`exe:` + the real path of pacat).
            let key: String

            init(
                config: [String] = [], store: String? = nil, server existing: PulseServer? = nil,
                environment: [String: String] = [:]
            ) throws {
                key = try Tool.appKey(for: "parecord")
                scratch = try Helpers.scratch()
                var args: [String] = []
                if !config.isEmpty {
                    let file = "\(scratch)/earmuff.conf"
                    try (config.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
                    args += ["--config", file]
                }
                if let store { args += ["--store", store] }
                do {
                    server = try existing ?? PulseServer()
                } catch {
                    TempDir.remove(scratch)
                    throw error
                }
                do {
                    earmuff = try EarmuffProcess(upstream: server.serverString, extraArguments: args, environment: environment)
                } catch {
                    server.stop()
                    TempDir.remove(scratch)
                    throw error
                }
            }

            /// Stops earmuff, then the server, and removes the scratch directory.
            func stop() {
                earmuff.stop()
                server.stop()
                TempDir.remove(scratch)
            }

            /// Starts parecord through earmuff, declaring `purpose` unless it is nil.
            func record(
                format: PCMFormat = .s16le, rate: Int = PulseServer.toneRate, channels: Int = 1,
                purpose: String? = ConsentEndToEndTests.purpose, device: String? = nil,
                extraArguments: [String] = []
            ) throws -> Recording {
                try Tool.startPurposefulRecording(
                    server: earmuff.serverString, purpose: purpose, format: format,
                    rate: rate, channels: channels, device: device,
                    extraArguments: extraArguments)
            }

            /// Context for failure messages.
            var logs: String { "earmuff log:\n\(earmuff.log())" }
        }

        // MARK: helpers

        /// Bytes of `seconds` of `rec`'s audio, rounded down to whole frames.
        static func bytes(_ seconds: Double, of rec: Recording) -> Int {
            let frame = rec.format.bytesPerSample * rec.channels
            return Int(seconds * Double(rec.bytesPerSecond)) / frame * frame
        }

        /// Waits until `rec` holds real (non-silent) audio and at least `seconds` of it after
        /// the first non-silent byte. Returns whether that happened.
        /// Whether `audio` (s16le) is exact silence first and then the test tone to its end.
        static func isSilenceThenTone(_ audio: Data) -> Bool {
            let at = (audio.firstIndex { $0 != 0 } ?? audio.count) / 2 * 2
            return at > 0
                && Helpers.analyze(audio.subdata(in: at..<audio.count), format: .s16le)
                    .isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.9)
        }

        static func waitForToneAfterSwitch(_ rec: Recording, seconds: Double, timeout: Double = 60) async -> Bool {
            await Wait.until(timeout: timeout, interval: 0.05) {
                guard let off = rec.firstNonSilentOffset() else { return !rec.tool.process.isRunning }
                return rec.byteCount() >= off + bytes(seconds, of: rec) || !rec.tool.process.isRunning
            }
            guard let off = rec.firstNonSilentOffset() else { return false }
            return rec.byteCount() >= off + bytes(seconds, of: rec)
        }

        /// The longest run of whole frames that are exact silence in `audio`, in frames.
        static func longestSilentRun(_ audio: Data, format: PCMFormat, channels: Int = 1) -> Int {
            let frame = format.bytesPerSample * channels
            var longest = 0, run = 0
            unsafe audio.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
                var i = 0
                while i + frame <= raw.count {
                    var silent = true
                    for j in i..<(i + frame) where unsafe raw[j] != format.silenceByte { silent = false; break }
                    run = silent ? run + 1 : 0
                    longest = max(longest, run)
                    i += frame
                }
            }
            return longest
        }

        /// Waits until a `prompt` line for `key` shows up in the agent's output.
        static func promptLine(_ cli: RunningCLI, key: String) async throws -> ControlLine? {
            try await cli.waitForLine { $0.type == "prompt" && $0.prompt?.appKey == key }
        }

        /// A watcher can follow a stream from start to end: `stream-ended` names it as
        /// `stream-started` did (channel, source, sample format), after it left the daemon.
        @Test func streamEventsNameTheStreamFromStartToEnd() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            let started = try await watch.waitForLine { $0.event == "stream-started" && $0.stream?.appKey == s.key }
            #expect(await rec.waitForAudio(seconds: 0.5, timeout: 60), "\(s.logs)")
            _ = rec.stop()
            let ended = try await watch.waitForLine { $0.event == "stream-ended" && $0.stream?.appKey == s.key }
            let a = try #require(started?.stream, "\(watch.summary)")
            let b = try #require(ended?.stream, "\(watch.summary)")
            #expect(a.stream != nil && b.stream == a.stream && b.client == a.client, "started \(a), ended \(b)")
            #expect(b.source == a.source && b.sampleSpec == a.sampleSpec && b.kind == a.kind, "started \(a), ended \(b)")
        }

        // MARK: 1. undetermined

        /// Two concurrent recordings of an undetermined app: both exact silence from the first
        /// frame, and one prompt for the app (status and the event stream agree).
        @Test func undeterminedAppRecordsSilenceAndRaisesOnePrompt() async throws {
            let s = try Setup()
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }

            let a = try s.record()
            let b = try s.record()
            #expect(await a.waitForAudio(seconds: 1, timeout: 60), "\(s.logs)")
            #expect(await b.waitForAudio(seconds: 1, timeout: 60), "\(s.logs)")
            let status = try await s.earmuff.waitForStatus { $0.streams(of: s.key).count == 2 }
            #expect(status.clients(of: s.key).count == 2, "\(status)")
            #expect(status.streams(of: s.key).count == 2, "\(status)")
            #expect(status.streams(of: s.key).allSatisfy { $0.audio == "silenced" && ($0.bytesReal ?? 1) == 0 }, "\(status)")
            let prompts = status.prompts(of: s.key)
            #expect(prompts.count == 1, "\(status)")
            #expect(prompts.first?.purpose == Self.purpose, "\(prompts)")
            #expect(prompts.first?.identifiedBy == "exe", "\(prompts)")
            #expect(prompts.first?.source == PulseServer.sourceName, "\(prompts)")
            #expect(
                prompts.first.map { p in status.clients(of: s.key).contains { $0.pid == p.pid } } == true,
                "the prompt's pid is one of the recorders: \(status)")

            let first = try await watch.waitForLine { $0.event == "prompt-raised" && $0.prompt?.appKey == s.key }
            #expect(first != nil, "\(watch.summary)")
            let (ra, audioA) = a.stop()
            let (rb, audioB) = b.stop()
            #expect(ra.status == 0, "\(ra)")
            #expect(rb.status == 0, "\(rb)")
            for audio in [audioA, audioB] {
                #expect(audio.count >= Self.bytes(1, of: a), "only \(audio.count) bytes")
                #expect(AudioAnalysis.isUniform(audio, value: 0), "not silence: \(Helpers.analyze(audio, format: .s16le))\n\(s.logs)")
            }
            // Both streams have ended: still exactly one prompt was ever raised.
            let raised = try watch.lines().filter { $0.event == "prompt-raised" && $0.prompt?.appKey == s.key }
            #expect(raised.count == 1, "\(watch.summary)")
            #expect(try s.earmuff.app(s.key)?.state == "undetermined")
        }

        // MARK: 2. allow

        /// An agent connecting after the prompt was raised gets it; its `allow` turns the
        /// running recording into the tone: same process, same connection, silence then tone.
        @Test func agentAllowTurnsRunningRecordingIntoTone() async throws {
            let s = try Setup()
            defer { s.stop() }
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5, timeout: 60), "\(s.logs)")
            #expect(rec.isExactSilence(), "undetermined audio is not silence")
            let before = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            #expect(before.clients(of: s.key).count == 1, "\(before)")
            let clientID = before.clients(of: s.key).first?.id

            let agent = try s.earmuff.startCLI(["agent", "--answer", "allow", "--json"])
            defer { agent.stop() }
            let prompt = try await Self.promptLine(agent, key: s.key)
            #expect(prompt?.prompt?.purpose == Self.purpose, "\(agent.summary)")
            let answered = try await agent.waitForLine { $0.type == "answered" }
            #expect(answered?.accepted == true, "\(agent.summary)")
            #expect(answered?.answeredPrompt == prompt?.prompt?.id)

            #expect(await Self.waitForToneAfterSwitch(rec, seconds: 1.2), "no tone after allow\n\(s.logs)")
            #expect(rec.tool.process.isRunning, "parecord ended: \(rec.tool.process.stderrText())")
            let after = try s.earmuff.status()
            #expect(after.clients(of: s.key).map(\.id) == [clientID].compactMap { $0 }, "reconnected? \(before) vs \(after)")
            #expect(after.streams(of: s.key).map(\.audio) == ["real"], "\(after)")
            #expect(after.prompts.isEmpty, "\(after)")
            // Once real, earmuff silences nothing more of the stream.
            let silencedAtSwitch = after.streams(of: s.key).first?.bytesSilenced
            let mark = rec.byteCount()
            _ = await Wait.until(timeout: 60) { rec.byteCount() >= mark + Self.bytes(0.5, of: rec) || !rec.tool.process.isRunning }
            let atEnd = try s.earmuff.status().streams(of: s.key).first?.bytesSilenced
            #expect(
                atEnd == silencedAtSwitch && atEnd != nil,
                "silenced again after the switch: \(String(describing: silencedAtSwitch)) → \(String(describing: atEnd))")

            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            guard let switchAt = audio.firstIndex(where: { $0 != 0 }).map({ $0 / 2 * 2 }) else {
                Issue.record("the recording never left silence\n\(s.logs)")
                return
            }
            #expect(switchAt >= Self.bytes(0.5, of: rec), "silence before the answer was only \(switchAt) bytes")
            let tail = audio.subdata(in: switchAt..<audio.count)
            let report = Helpers.analyze(tail, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 1), "after allow: \(report)")
            // One switch: once real, no stretch of silence comes back (the sine has no 10 ms of zeros).
            // PipeWire's tone, a player feeding a null sink, drops a period now and then on a loaded
            // machine, directly too; there the counters above are the check.
            if (try? ServerKind.selected()) != .pipewire {
                #expect(Self.longestSilentRun(tail, format: .s16le) < 480, "silence after the switch")
            }
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "granted" && app?.reason == "user", "\(String(describing: app))")
        }

        // MARK: 3. deny

        /// An agent's `deny`: silence throughout, stored denied, and the next stream does not prompt.
        @Test func agentDenyKeepsSilence() async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny", "--json"])
            defer { agent.stop() }
            let rec = try s.record()
            let answered = try await agent.waitForLine { $0.type == "answered" }
            #expect(answered?.accepted == true, "\(agent.summary)\n\(s.logs)")
            let atAnswer = rec.byteCount()
            await Wait.until(timeout: 60) { rec.byteCount() >= atAnswer + Self.bytes(1, of: rec) || !rec.tool.process.isRunning }
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            #expect(audio.count >= atAnswer + Self.bytes(1, of: rec))
            #expect(AudioAnalysis.isUniform(audio, value: 0), "denied app heard something: \(Helpers.analyze(audio, format: .s16le))")
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "denied" && app?.reason == "user", "\(String(describing: app))")

            // A later stream: silence again, and no prompt (the answer is remembered).
            let again = try s.record()
            #expect(await again.waitForAudio(seconds: 0.5))
            let status = try s.earmuff.status()
            #expect(status.prompts.isEmpty, "\(status)")
            #expect(status.streams(of: s.key).map(\.audio) == ["silenced"], "\(status)")
            let (_, audio2) = again.stop()
            #expect(AudioAnalysis.isUniform(audio2, value: 0))
            let prompts = try agent.lines().filter { $0.type == "prompt" }
            #expect(prompts.count == 1, "\(agent.summary)")
        }

        /// `earmuff deny` on a granted app flips its running recording to silence at once and for good.
        @Test func cliDenyFlipsRunningGrantedRecordingToSilence() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.6, timeout: 60))
            #expect(rec.data().prefix(Self.bytes(0.01, of: rec)).contains { $0 != 0 }, "granted audio starts silent")
            try s.earmuff.control("deny", s.key)
            let atDeny = rec.byteCount()
            await Wait.until(timeout: 60) { rec.byteCount() >= atDeny + Self.bytes(1.5, of: rec) || !rec.tool.process.isRunning }
            let status = try s.earmuff.status()
            #expect(status.streams(of: s.key).map(\.audio) == ["silenced"], "\(status)")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            guard let last = audio.lastIndex(where: { $0 != 0 }) else {
                Issue.record("no real audio before the deny")
                return
            }
            let head = audio.prefix(min(last, atDeny) / 2 * 2)
            let report = Helpers.analyze(Data(head), format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "before deny: \(report)")
            // Whatever was in flight when the CLI returned is at most a second of audio;
            // then silence to the end.
            #expect(last < atDeny + Self.bytes(1, of: rec), "real audio \(last - atDeny) bytes after the deny returned")
            #expect(audio.count - last >= Self.bytes(0.5, of: rec), "too little silence after deny")
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "denied" && app?.reason == "user", "\(String(describing: app))")
        }

        // MARK: 4. reset

        /// `reset` makes a granted app undetermined: its running stream goes silent, and its next
        /// stream prompts again.
        @Test func resetReturnsToUndeterminedAndPromptsAgain() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let granted = try s.record()
            #expect(await granted.waitForAudio(seconds: 0.3))
            #expect(try s.earmuff.status().prompts.isEmpty)
            try s.earmuff.control("reset", s.key)
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "undetermined" && app?.reason == "reset", "\(String(describing: app))")
            let atReset = granted.byteCount()
            await Wait.until(timeout: 60) { granted.byteCount() >= atReset + Self.bytes(1.5, of: granted) }
            let (_, first) = granted.stop()
            #expect(first.prefix(Self.bytes(0.2, of: granted)).contains { $0 != 0 }, "granted audio was silent")
            #expect(AudioAnalysis.isUniform(first.suffix(Self.bytes(0.4, of: granted)), value: 0), "still real after reset")

            let next = try s.record()
            #expect(await next.waitForAudio(seconds: 0.5))
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            #expect(status.prompts(of: s.key).count == 1, "no new prompt after reset: \(status)\n\(s.logs)")
            let (_, audio) = next.stop()
            #expect(AudioAnalysis.isUniform(audio, value: 0))
        }

        // MARK: 5. once

        /// `once`: real audio for the client connected at the answer; after it leaves, the app is
        /// silent and prompts again; the store never says granted.
        @Test func onceLastsUntilTheClientDisconnects() async throws {
            let s = try Setup()
            defer { s.stop() }
            let rec = try s.record()
            let first = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            let firstPrompt = try #require(first.prompts(of: s.key).first, "\(first)\n\(s.logs)")
            let agent = try s.earmuff.startCLI(["agent", "--answer", "once", "--json"])
            let answered = try await agent.waitForLine { $0.type == "answered" }
            #expect(answered?.accepted == true, "\(agent.summary)")
            agent.stop() // the next prompt must stay pending
            #expect(await Self.waitForToneAfterSwitch(rec, seconds: 1), "once did not make the recording real\n\(s.logs)")
            let during = try s.earmuff.app(s.key)
            #expect(during?.state == "undetermined" && during?.reason == "user-once", "\(String(describing: during))")
            let (_, audio) = rec.stop()
            let switchAt = (audio.firstIndex { $0 != 0 } ?? audio.count) / 2 * 2
            #expect(
                Helpers.analyze(audio.subdata(in: switchAt..<audio.count), format: .s16le)
                    .isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.9))
            try await s.earmuff.waitForStatus { $0.clients(of: s.key).isEmpty }

            let next = try s.record()
            #expect(await next.waitForAudio(seconds: 1))
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            let again = status.prompts(of: s.key)
            #expect(again.count == 1 && again.first?.id != firstPrompt.id, "\(status)")
            let (_, audio2) = next.stop()
            #expect(AudioAnalysis.isUniform(audio2, value: 0), "once outlived its client: \(Helpers.analyze(audio2, format: .s16le))")
            let after = try s.earmuff.app(s.key)
            #expect(after?.state == "undetermined", "\(String(describing: after))")
        }

        // MARK: 6. persistence

        /// Decisions survive a daemon restart on the same store: the granted app records the tone
        /// from its first block, and nothing prompts.
        @Test func decisionsPersistAcrossRestart() async throws {
            let storeDir = try Helpers.scratch()
            defer { TempDir.remove(storeDir) }
            let store = "\(storeDir)/permissions.sqlite"
            let first = try Setup(store: store)
            try first.earmuff.control("grant", first.key)
            try first.earmuff.control("deny", "launcher:org.example.Denied")
            let status = first.earmuff.stop()
            #expect(status == 0 || status == 128 + SIGTERM, "earmuff exit \(String(describing: status))")

            let s = try Setup(store: store, server: first.server)
            defer {
                s.stop()
                TempDir.remove(first.scratch)
            }
            try await checkGrantedAfterRestart(s)
            #expect(try s.earmuff.app("launcher:org.example.Denied")?.state == "denied")
        }

        /// The same after `kill -9`: a decision the CLI reported done is on disk.
        @Test func decisionsSurviveKill9() async throws {
            let storeDir = try Helpers.scratch()
            defer { TempDir.remove(storeDir) }
            let store = "\(storeDir)/permissions.sqlite"
            let first = try Setup(store: store)
            try first.earmuff.control("grant", first.key)
            first.earmuff.process.terminate(signal: SIGKILL)
            first.earmuff.stop()

            let s = try Setup(store: store, server: first.server)
            defer {
                s.stop()
                TempDir.remove(first.scratch)
            }
            try await checkGrantedAfterRestart(s)
        }

        func checkGrantedAfterRestart(_ s: Setup) async throws {
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "granted" && app?.reason == "user", "after restart: \(String(describing: app))\n\(s.logs)")
            // No purpose needed: missing-purpose concerns undetermined apps only.
            let rec = try s.record(purpose: nil)
            #expect(await rec.waitForAudio(seconds: 1))
            let status = try s.earmuff.status()
            #expect(status.prompts.isEmpty, "\(status)")
            #expect(status.streams(of: s.key).map(\.audio) == ["real"], "\(status)")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)\n\(s.logs)")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(report)")
            #expect(audio.prefix(Self.bytes(0.05, of: rec)).contains { $0 != 0 }, "the first frames were silenced")
        }

        // MARK: 7. missing purpose

        /// `missing-purpose = disconnect` (the strict mode): a recorder without a purpose is
        /// disconnected; the daemon keeps serving.
        @Test func missingPurposeDisconnects() async throws {
            let s = try Setup(config: ["missing-purpose = disconnect"])
            defer { s.stop() }
            let rec = try s.record(purpose: nil)
            let result = rec.tool.wait(timeout: 60)
            #expect(!result.timedOut && result.status != 0, "parecord without a purpose kept recording: \(result)\n\(s.logs)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0) || rec.data().isEmpty, "it got real audio")
            rec.tool.cleanup()
            let status = try await s.earmuff.waitForStatus { $0.clients(of: s.key).isEmpty }
            #expect(status.clients(of: s.key).isEmpty, "\(status)")
            #expect(status.prompts.isEmpty, "\(status)")
            #expect(s.earmuff.log().contains("missing-purpose"), "\(s.logs)")
            let app = try s.earmuff.app(s.key)
            #expect(app == nil || app?.state == "undetermined", "\(String(describing: app))")

            // Still serving: pactl works and a recorder with a purpose records (silence, one prompt).
            #expect(s.earmuff.process.isRunning)
            let info = try Tool.run("pactl", args: ["info"], server: s.earmuff.serverString)
            #expect(info.succeeded, "\(info)")
            let ok = try s.record()
            #expect(await ok.waitForAudio(seconds: 0.5), "\(s.logs)")
            #expect(try s.earmuff.status().prompts(of: s.key).count == 1)
            let (r2, audio) = ok.stop()
            #expect(r2.status == 0, "\(r2)")
            #expect(AudioAnalysis.isUniform(audio, value: 0))
        }

        /// The default config (`missing-purpose = prompt`): a plain parecord, as in the README,
        /// records silence and raises one prompt that says it gave no reason.
        @Test func defaultConfigPromptsForAppsWithoutPurpose() async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent"])
            defer { agent.stop() }
            let rec = try s.record(purpose: nil)
            #expect(await rec.waitForAudio(seconds: 1), "\(rec.tool.process.stderrText())\n\(s.logs)")
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            #expect(status.prompts(of: s.key).count == 1, "\(status)")
            #expect(status.prompts(of: s.key).first?.purpose == nil, "\(status)")
            let said = await Wait.until(timeout: 60, interval: 0.05) { agent.output().contains("gave no reason") }
            #expect(said, "agent output:\n\(agent.output())\n\(s.logs)")
            #expect(
                agent.output().components(separatedBy: "wants to use your microphone").count == 2,
                "one prompt expected:\n\(agent.output())")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            #expect(AudioAnalysis.isUniform(audio, value: 0))
        }

        /// `missing-purpose = deny`: stored denied with reason missing-purpose, silence, no prompt.
        @Test func missingPurposeDenyMode() async throws {
            let s = try Setup(config: ["missing-purpose = deny"])
            defer { s.stop() }
            let rec = try s.record(purpose: nil)
            #expect(await rec.waitForAudio(seconds: 1), "\(rec.tool.process.stderrText())\n\(s.logs)")
            let status = try s.earmuff.status()
            #expect(status.prompts.isEmpty, "\(status)")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            #expect(AudioAnalysis.isUniform(audio, value: 0))
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "denied" && app?.reason == "missing-purpose", "\(String(describing: app))")
        }

        // MARK: 8. formats

        /// Every sample format of a denied app is exact silence of that format, every byte, from the
        /// first frame; the same recordings granted carry the tone (so the check can tell).
        @Test func everyFormatSilencesForADeniedApp() async throws {
            let s = try Setup()
            defer { s.stop() }
            // Mono 48 kHz and stereo 44.1 kHz alternate, so frames of 1 to 8 bytes are covered.
            let cases = PCMFormat.allCases.enumerated().map { i, f in (f, i % 2 == 0 ? 48000 : 44100, i % 2 == 0 ? 1 : 2) }
            try s.earmuff.control("deny", s.key)
            let denied = try cases.map { try s.record(format: $0.0, rate: $0.1, channels: $0.2) }
            for rec in denied { _ = await rec.waitForAudio(seconds: 0.6) }
            let status = try s.earmuff.status()
            #expect(status.streams(of: s.key).count == cases.count, "\(status)")
            #expect(status.streams(of: s.key).allSatisfy { $0.audio == "silenced" }, "\(status)")
            for (rec, (format, rate, channels)) in zip(denied, cases) {
                let (result, audio) = rec.stop()
                #expect(result.status == 0, "\(format): \(result)")
                #expect(audio.count >= Self.bytes(0.6, of: rec), "\(format): only \(audio.count) bytes")
                #expect(audio.count % (format.bytesPerSample * channels) == 0, "\(format): partial frame")
                let wrong = audio.firstIndex { $0 != format.silenceByte }.map { $0 - audio.startIndex }
                #expect(wrong == nil, "\(format) \(channels)ch \(rate)Hz: byte \(wrong ?? 0) is not 0x\(String(format.silenceByte, radix: 16))")
            }

            try s.earmuff.control("grant", s.key)
            let granted = try cases.map { try s.record(format: $0.0, rate: $0.1, channels: $0.2) }
            for rec in granted { _ = await rec.waitForAudio(seconds: 0.6) }
            for (rec, (format, rate, channels)) in zip(granted, cases) {
                let (_, audio) = rec.stop()
                let samples = AudioAnalysis.channel(AudioAnalysis.decode(audio, format: format), 0, of: channels)
                let ratios = AudioAnalysis.blockToneRatios(
                    samples, frequency: PulseServer.toneFrequency,
                    sampleRate: Double(rate), blockSize: rate / 10)
                #expect(AudioAnalysis.median(ratios) > 0.9, "\(format) granted: ratios \(ratios)")
                #expect(abs(AudioAnalysis.rms(samples) - Helpers.micRMS) < 0.05, "\(format) granted: rms \(AudioAnalysis.rms(samples))")
            }
        }

        // MARK: 9. monitors

        /// A denied app recording a sink's monitor, or one sink input (`--monitor-stream`), while a
        /// tone plays into the sink: not a single real sample. Direct and granted recordings of the
        /// same hear the tone.
        @Test func deniedAppHearsNothingFromMonitors() async throws {
            let s = try Setup()
            defer { s.stop() }
            let wav = "\(s.scratch)/tone.wav"
            try AudioAnalysis.sineWAV(frequency: 1000, seconds: 30, sampleRate: 48000, channels: 1, amplitude: 0.5)
                .write(to: URL(fileURLWithPath: wav))
            let player = try Tool.start("paplay", args: [wav], server: s.server.serverString)
            defer { player.cleanup() }
            var index: String?
            await Wait.until(timeout: 60, interval: 0.1) {
                // paplay's own sink input (PipeWire's test tone is another one).
                let list = (try? s.server.pactl("list", "sink-inputs"))?.stdoutText ?? ""
                var current: String?
                for line in list.split(separator: "\n") {
                    if line.hasPrefix("Sink Input #") { current = String(line.dropFirst("Sink Input #".count)) }
                    if line.contains("application.name = \"paplay\"") { index = current }
                }
                return index != nil
            }
            let sinkInput = try #require(index, "paplay's sink input did not appear")
            let direct = try Tool.startRecording(server: s.server.serverString, device: "\(PulseServer.sinkName).monitor")

            try s.earmuff.control("deny", s.key)
            let monitor = try s.record(device: "\(PulseServer.sinkName).monitor")
            let stream = try s.record(extraArguments: ["--monitor-stream=\(sinkInput)"])
            for rec in [direct, monitor, stream] { _ = await rec.waitForAudio(seconds: 1) }
            for (name, rec) in [("monitor source", monitor), ("monitor stream", stream)] {
                let (result, audio) = rec.stop()
                #expect(result.status == 0, "\(name): \(result)")
                #expect(audio.count >= Self.bytes(1, of: rec), "\(name): \(audio.count) bytes")
                #expect(
                    AudioAnalysis.isUniform(audio, value: 0),
                    "\(name): a denied app heard \(Helpers.analyze(audio, format: .s16le, frequency: 1000))")
            }
            let (_, heard) = direct.stop()
            let directReport = Helpers.analyze(heard.suffix(Self.bytes(0.5, of: direct)), format: .s16le, frequency: 1000)
            #expect(directReport.medianRatio > 0.9, "the sink's monitor did not carry the tone: \(directReport)")

            // A recording of another app's stream is app audio, decided apart from the microphone.
            try s.earmuff.control("grant", s.key, "--kind", "app-audio")
            let allowed = try s.record(extraArguments: ["--monitor-stream=\(sinkInput)"])
            _ = await allowed.waitForAudio(seconds: 1)
            let (_, real) = allowed.stop()
            let report = Helpers.analyze(real.suffix(Self.bytes(0.5, of: allowed)), format: .s16le, frequency: 1000)
            #expect(report.medianRatio > 0.9, "granted monitor stream: \(report)")
        }

        // MARK: 10. CLI

        /// Exit codes 0 / 1 / 64 / 127 and parseable `--json`.
        @Test func cliExitCodesAndJSON() async throws {
            let s = try Setup()
            defer { s.stop() }
            func run(_ args: [String]) throws -> ToolResult { try s.earmuff.runCLI(args) }

            for args in [["grant", "no-such-app"], ["deny", "no-such-app"], ["reset", "no-such-app"]] {
                let r = try run(args)
                #expect(r.status == 1, "\(r)")
                #expect(r.stderr.contains("no-such-app"), "\(r)")
            }
            let usage: [[String]] = [
                [], ["status", "--bogus"], ["grant"], ["agent", "--answer", "maybe"],
                ["run"], ["run", "--app-id", "-bad", "--", "true"], ["frobnicate"],
                ["apps", "extra"], ["status", "--json=yes"],
            ]
            for args in usage {
                let r = try run(args)
                #expect(r.status == 64, "\(r)")
                #expect(!r.stderr.isEmpty, "\(r)")
            }
            let missing = "\(s.scratch)/no-daemon/control"
            for args in [["status"], ["apps", "--json"], ["grant", s.key], ["watch"], ["agent", "--answer", "allow"]] {
                let r = try run(args + ["--control", missing])
                #expect(r.status == 1, "\(r)")
                #expect(r.stderr.contains(missing) || r.stderr.contains("earmuff serve"), "\(r)")
            }
            for args in [["--help"]] + ["serve", "status", "apps", "grant", "deny", "reset", "agent", "run", "watch"].map({ [$0, "--help"] }) {
                let r = try run(args)
                #expect(r.status == 0, "\(r)")
                #expect(r.stdoutText.contains("earmuff"), "\(r)")
            }
            let notFound = try run(["run", "--listen", s.earmuff.listenPath, "--", "/nonexistent/command"])
            #expect(notFound.status == 127, "\(notFound)")

            let status = try ConsentJSON.decode(StatusView.self, from: run(["status", "--json"]).stdout)
            #expect(status.prompts.isEmpty && status.streams.isEmpty)
            let granted = try ConsentJSON.decode(AppView.self, from: run(["grant", s.key, "--json"]).stdout)
            #expect(granted.key == s.key && granted.state == "granted", "\(granted)")
            let apps = try ConsentJSON.decode([AppView].self, from: run(["apps", "--json"]).stdout)
            #expect(apps.contains { $0.key == s.key && $0.state == "granted" }, "\(apps)")
            // A known app's executable name resolves to its key.
            let rec = try s.record()
            _ = await rec.waitForAudio(seconds: 0.2)
            _ = rec.stop()
            let byName = try run(["deny", "pacat", "--json"])
            #expect(byName.status == 0, "\(byName)")
            #expect(try s.earmuff.app(s.key)?.state == "denied")
        }

        // MARK: 11. earmuff run

        /// `earmuff run --app-id` gives the command a socket of its own: the app is
        /// `launcher:ID`, with the purpose given to `run`.
        @Test func runWithAppIDIdentifiesTheLauncher() async throws {
            let s = try Setup()
            defer { s.stop() }
            let launcherKey = "launcher:org.example.Notes"
            let rec = try Tool.startRecordingThroughRun(
                earmuffBinary: s.earmuff.binary,
                runArguments: ["--app-id", "org.example.Notes", "--purpose", "Voice notes", "--control", s.earmuff.controlPath],
                server: "unix:/nonexistent/pulse/native")
            #expect(await rec.waitForAudio(seconds: 1), "\(rec.tool.process.stderrText())\n\(s.logs)")
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: launcherKey).count == 1 }
            #expect(status.clients(of: launcherKey).map(\.identifiedBy) == ["launcher"], "\(status)")
            #expect(status.clients(of: s.key).isEmpty, "\(status)")
            #expect(status.prompts(of: launcherKey).first?.purpose == "Voice notes", "\(status)")
            #expect(status.streams(of: launcherKey).map(\.audio) == ["silenced"], "\(status)")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            #expect(AudioAnalysis.isUniform(audio, value: 0))
            let app = try s.earmuff.app(launcherKey)
            #expect(app?.identifiedBy == "launcher" && app?.state == "undetermined", "\(String(describing: app))")
            try s.earmuff.control("grant", launcherKey)
            #expect(try s.earmuff.app(s.key)?.state != "granted", "granting the launcher granted the executable")
        }

        /// `earmuff run --purpose` without an app id: the executable's key, the purpose
        /// (quotes and backslashes intact) in the prompt.
        @Test func runWithPurposeDeclaresIt() async throws {
            let s = try Setup()
            defer { s.stop() }
            let purpose = #"Notes "quoted" \ and 'single'"#
            let rec = try Tool.startRecordingThroughRun(
                earmuffBinary: s.earmuff.binary, runArguments: ["--purpose", purpose, "--listen", s.earmuff.listenPath],
                server: "unix:/nonexistent/pulse/native")
            #expect(await rec.waitForAudio(seconds: 0.5), "\(rec.tool.process.stderrText())\n\(s.logs)")
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            #expect(status.prompts(of: s.key).first?.purpose == purpose, "\(status)")
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            #expect(AudioAnalysis.isUniform(audio, value: 0))
        }

        // MARK: 12. prompt-command and prompt-timeout

        /// With no agent, `prompt-command` answers: exit 0 grants (the recording turns real), exit 1
        /// denies; it sees the prompt in its environment.
        @Test(arguments: [0, 1])
        func promptCommandAnswers(exitStatus: Int) async throws {
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let script = "\(scratch)/answer.sh"
            try """
            printf '%s|%s|%s\\n' "$EARMUFF_APP_KEY" "$EARMUFF_PURPOSE" "$EARMUFF_PID" > '\(scratch)/seen'
            exit \(exitStatus)

            """.write(toFile: script, atomically: true, encoding: .utf8)
            let s = try Setup(config: ["prompt-command = /bin/sh \(script)"])
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(resolved?.resolution?.outcome == (exitStatus == 0 ? "allow" : "deny"), "\(watch.summary)\n\(s.logs)")
            if exitStatus == 0 {
                #expect(await Self.waitForToneAfterSwitch(rec, seconds: 1), "\(s.logs)")
            } else {
                _ = await rec.waitForAudio(seconds: 1)
            }
            let (_, audio) = rec.stop()
            if exitStatus == 0 {
                let at = (audio.firstIndex { $0 != 0 } ?? audio.count) / 2 * 2
                #expect(
                    Helpers.analyze(audio.subdata(in: at..<audio.count), format: .s16le)
                        .isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.9))
            } else {
                #expect(AudioAnalysis.isUniform(audio, value: 0))
            }
            let app = try s.earmuff.app(s.key)
            #expect(
                app?.state == (exitStatus == 0 ? "granted" : "denied") && app?.reason == "prompt-command",
                "\(String(describing: app))")
            let seen = (try? String(contentsOfFile: "\(scratch)/seen", encoding: .utf8)) ?? ""
            #expect(seen.hasPrefix("\(s.key)|\(Self.purpose)|"), "prompt-command environment: \(seen)")
        }

        /// An unanswered prompt times out after `prompt-timeout`: the app stays undetermined
        /// (silence) and its next stream prompts again.
        @Test func promptTimeoutLeavesUndeterminedAndReprompts() async throws {
            let s = try Setup(config: ["prompt-timeout = 1"])
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            let timedOut = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(timedOut?.resolution?.outcome == "timeout", "\(watch.summary)\n\(s.logs)")
            let status = try s.earmuff.status()
            #expect(status.prompts.isEmpty, "\(status)")
            #expect(status.streams(of: s.key).map(\.audio) == ["silenced"], "\(status)")
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "undetermined" && app?.reason == "prompt-timeout", "\(String(describing: app))")
            let (_, audio) = rec.stop()
            #expect(AudioAnalysis.isUniform(audio, value: 0))

            let next = try s.record()
            _ = await next.waitForAudio(seconds: 0.3)
            let raised = try await watch.waitForLine { line in
                line.event == "prompt-raised" && line.prompt?.appKey == s.key && line.prompt?.id != timedOut?.resolution?.prompt
            }
            #expect(raised != nil, "no second prompt: \(watch.summary)")
            let (_, audio2) = next.stop()
            #expect(AudioAnalysis.isUniform(audio2, value: 0))
        }

        // MARK: agents

        /// Two agents get the same prompt; the first answer wins, the other is told the prompt is
        /// no longer pending, and the stored state is the winner's. Both agents are registered
        /// before the prompt is raised.
        @Test func firstAnswerWins() async throws {
            let s = try Setup()
            defer { s.stop() }
            let answers = ["allow", "deny"]
            let agents = try answers.map { try s.earmuff.startCLI(["agent", "--answer", $0, "--json"]) }
            defer { for agent in agents { agent.stop() } }
            let both = try await s.earmuff.waitForStatus { $0.promptChannels?.agents == 2 }
            #expect(both.promptChannels?.agents == 2, "\(agents.map { $0.output() })\n\(s.logs)")
            let rec = try s.record()
            defer { _ = rec.stop() }
            var ids: [UInt64] = []
            var winners: [String] = []
            for (agent, answer) in zip(agents, answers) {
                let prompt = try await agent.waitForLine { $0.type == "prompt" }
                #expect(prompt?.prompt?.appKey == s.key, "\(agent.output())")
                ids.append(prompt?.prompt?.id ?? 0)
                let answered = try await agent.waitForLine { $0.type == "answered" }
                if answered?.accepted == true { winners.append(answer) }
            }
            #expect(ids.count == 2 && ids[0] == ids[1] && ids[0] > 0, "both agents get the same prompt: \(ids)")
            #expect(winners.count == 1, "accepted answers: \(winners)")
            let state = try s.earmuff.app(s.key)?.state
            #expect(state == (winners.first == "allow" ? "granted" : "denied"), "\(String(describing: state))")
        }

        // MARK: peak detect

        /// A level meter (a PEAK_DETECT record stream, as pavucontrol opens) of a denied app gets
        /// zero peaks from its first frame; granted, the same stream reports the tone's peaks.
        @Test func deniedPeakDetectStreamGetsZeros() async throws {
            let s = try Setup()
            defer { s.stop() }
            let client = try RawClient(path: s.earmuff.listenPath)
            defer { client.close() }
            try client.handshake(name: "level meter", properties: ["application.capture.purpose": Self.purpose])
            let me = try await s.earmuff.waitForStatus { $0.clients.contains { $0.pid == getpid() } }
            let key = try #require(me.clients.first { $0.pid == getpid() }?.appKey, "\(me)")
            try s.earmuff.control("deny", key)

            var request = CreateRecordStreamRequest()
            request.sampleSpec = SampleSpec(format: .float32le, channels: 1, rate: 100)
            request.channelMap = .mono
            request.peakDetect = true
            request.volume = CVolume(channels: 1, volume: CVolume.norm) // the server wants one value per channel
            request.adjustLatency = true
            request.fragSize = 16
            request.maxLength = 1 << 16
            request.proplist.set(Proplist.Key.mediaName, string: "peak")
            let (channel, spec) = try client.createRecordStream(request, tag: 2)
            #expect(spec.format == .float32le, "\(spec)")
            let status = try s.earmuff.status()
            #expect(status.streams(of: key).map(\.audio) == ["silenced"], "\(status)")
            let silent = try client.recordData(channel: channel, bytes: 200)
            #expect(silent.count >= 200, "\(silent.count) bytes\n\(s.logs)")
            #expect(
                !silent.isEmpty && silent.allSatisfy { $0 == 0 }, "a denied level meter saw peaks: \(AudioAnalysis.decode(Data(silent), format: .float32le))")

            try s.earmuff.control("grant", key)
            // Frames silenced before the grant may still be queued; read on until 20 peaks in a row are real.
            var later: [UInt8] = []
            let deadline = Wait.now() + 60
            // pipewire-pulse's own peak stream repeats 0.5, 0.5, 0.0 (seen on a
            // direct connection too), so count real peaks, not an unbroken run.
            func realRun() -> Bool {
                let tail = AudioAnalysis.decode(Data(later.prefix(later.count / 4 * 4)), format: .float32le).suffix(30)
                return tail.count == 30 && tail.filter { $0 != 0 }.count >= 15
            }
            while Wait.now() < deadline, !realRun() {
                let chunk = try client.recordData(channel: channel, bytes: 4, timeout: max(0.1, deadline - Wait.now()))
                if chunk.isEmpty { break }
                later += chunk
            }
            let peaks = AudioAnalysis.decode(Data(later), format: .float32le)
            let firstReal = peaks.firstIndex { $0 != 0 } ?? peaks.count
            let real = peaks[firstReal...]
            let nonZero = real.filter { $0 != 0 }
            #expect(nonZero.count >= 15 && nonZero.allSatisfy { abs($0 - 0.5) < 0.05 }, "granted peaks: \(peaks)")
            if s.server.kind == .pulseaudio {
                #expect(real.allSatisfy { $0 != 0 }, "PulseAudio sends a peak for every period once granted: \(peaks)")
            }
        }
    }
}
