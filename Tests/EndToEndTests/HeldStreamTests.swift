// A recording that may not record has no stream on the real server: Earmuff answers it and
// sends it silence itself, so no device opens for it and nothing on the desktop says it
// records. Judged on the real server's own state, read directly (not through Earmuff): its
// source-outputs, the microphone's state, and GNOME Shell's and KDE's indicator rules applied to them.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct HeldStreamTests {
        typealias E2E = ConsentEndToEndTests
        typealias Claims = VolumeControlClaimTests

        /// The state the real server gives its microphone (`pactl list sources short`).
        static func microphoneState(_ server: PulseServer) throws -> String {
            try microphoneState(server: server.serverString)
        }

        /// The microphone's state as the Pulse server at `server` lists it.
        static func microphoneState(server: String) throws -> String {
            let r = try Tool.run("pactl", args: ["list", "sources", "short"], server: server, timeout: 30)
            guard r.succeeded else { throw TestSupportError("pactl list sources short: \(r)") }
            for line in r.stdoutText.split(separator: "\n") {
                let fields = line.split(separator: "\t").map(String.init)
                if fields.count >= 5 && fields[1] == PulseServer.sourceName { return fields[4] }
            }
            throw TestSupportError("no \(PulseServer.sourceName) in \(r.stdoutText)")
        }

        /// Waits until the real server lists `count` source-outputs and the microphone is
        /// RUNNING (or not); the seconds it took, or nil.
        static func waitForServer(
            _ s: E2E.Setup, outputs count: Int, running: Bool, since start: Date,
            timeout: Double = 30
        ) async -> Double? {
            let ok = await Wait.until(timeout: timeout, interval: 0.005) {
                guard let outputs = try? Claims.sourceOutputs(s.server), let state = try? microphoneState(s.server) else { return false }
                return outputs.count == count && (state == "RUNNING") == running
            }
            return ok ? Date().timeIntervalSince(start) : nil
        }

        /// `pactl subscribe` on the real server, once it is seen to receive events (it prints the
        /// change of a sink volume made for it).
        static func watchServer(_ s: E2E.Setup) async throws -> RunningTool {
            try await watchServer(server: s.server.serverString)
        }

        /// `pactl subscribe` on the Pulse server at `server` (whose sink is `out`), once it receives events.
        static func watchServer(server: String) async throws -> RunningTool {
            let watch = try Tool.start("pactl", args: ["subscribe"], server: server)
            var volume = 99
            let subscribed = await Wait.until(timeout: 30, interval: 0.1) {
                volume = volume == 99 ? 100 : 99
                _ = try? Tool.run("pactl", args: ["set-sink-volume", PulseServer.sinkName, "\(volume)%"], server: server, timeout: 30)
                return String(decoding: watch.process.stdoutData(), as: UTF8.self).contains("on sink")
            }
            if !subscribed { throw TestSupportError("pactl subscribe printed no event: \(watch.process.stderrText())") }
            return watch
        }

        /// Waits until `rec` has its first non-silent byte; the seconds it took, or nil.
        static func waitForTone(_ rec: Recording, since start: Date, timeout: Double = 30) async -> Double? {
            let ok = await Wait.until(timeout: timeout, interval: 0.005) { rec.firstNonSilentOffset() != nil }
            return ok ? Date().timeIntervalSince(start) : nil
        }

        /// The real recorders: `parecord`, GStreamer's `pulsesrc`, `ffmpeg -f pulse`, each writing
        /// s16le mono at the tone's rate; the app key of its executable.
        static func startRecorder(_ name: String, _ s: E2E.Setup) throws -> (Recording, String) {
            let rate = PulseServer.toneRate
            switch name {
            case "pulsesrc":
                let caps = "audio/x-raw,format=S16LE,rate=\(rate),channels=1"
                let rec = try Tool.startRecordingCommand(
                    "gst-launch-1.0",
                    args: [
                        "-q", "pulsesrc", "!", "audioconvert", "!", "audioresample", "!", caps, "!",
                        "filesink", "location=recording.raw", "buffer-mode=unbuffered",
                    ],
                    server: s.earmuff.serverString, purpose: E2E.purpose)
                return (rec, try Tool.appKey(for: "gst-launch-1.0"))
            case "ffmpeg":
                let rec = try Tool.startRecordingCommand(
                    "ffmpeg",
                    args: [
                        "-nostdin", "-loglevel", "error", "-f", "pulse", "-sample_rate", "\(rate)",
                        "-channels", "1", "-fragment_size", "1920", "-i", "default", "-f", "s16le",
                        "-flush_packets", "1", "recording.raw",
                    ],
                    server: s.earmuff.serverString, purpose: E2E.purpose)
                return (rec, try Tool.appKey(for: "ffmpeg"))
            default:
                return (try s.record(), s.key)
            }
        }

        /// The recorders taken from held to granted and back. `ffmpeg -f pulse` only in front of
        /// pipewire-pulse: PulseAudio's test microphone (module-sine-source) has a fixed 2 s
        /// latency, so a stream made mid-recording gets its first seconds at once, and ffmpeg,
        /// whose timestamps are the wall clock less the latency, stops when they go back.
        /// pipewire-pulse's test microphone delivers in real time.
        static let switchedRecorders = ["parecord", "pulsesrc"] + ((try? ServerKind.selected()) == .pipewire ? ["ffmpeg"] : [])

        /// Undetermined, then granted, then denied, in one running recorder: while it may not
        /// record the server has no source-output and the microphone does not run, yet the
        /// recording grows in real time with exact zeros; granted, the microphone runs and the
        /// tone comes in the same recording; denied, the source-output goes while zeros go on.
        @Test(arguments: switchedRecorders)
        func aRecordingThatMayNotRecordOpensNoDevice(_ recorder: String) async throws {
            let s = try E2E.Setup()
            defer { s.stop() }
            let watch = try await Self.watchServer(s)
            defer { watch.cleanup() }
            let (rec, key) = try Self.startRecorder(recorder, s)
            defer { _ = rec.stop() }
            #expect(await rec.waitForBytes(E2E.bytes(1.0, of: rec)), "the held recording does not grow\n\(s.logs)")
            #expect(rec.firstNonSilentOffset() == nil, "an undetermined recording heard something")
            let events = String(decoding: watch.process.stdoutData(), as: UTF8.self)
            #expect(!events.contains("source-output"), "the server had a source-output of an undetermined app, if briefly:\n\(events)")
            let outputs = try Claims.sourceOutputs(s.server)
            #expect(outputs.isEmpty, "the server has a source-output of an undetermined app: \(outputs)")
            #expect(!Claims.indicatorOn(outputs) && !Claims.kdeIndicatorOn(outputs), "the desktop's indicator would light")
            #expect(try Self.microphoneState(s.server) != "RUNNING", "the microphone runs for an undetermined app")

            let before = rec.byteCount()
            let granted = Date()
            try s.earmuff.control("grant", key)
            let tone = await Self.waitForTone(rec, since: granted)
            let running = await Self.waitForServer(s, outputs: 1, running: true, since: granted)
            #expect(running != nil && tone != nil, "granted, but no source-output or no tone\n\(s.logs)")
            print("held stream, \(recorder): granted → tone in the recording after \(ms(tone)), microphone RUNNING after \(ms(running))")
            let shown = try Claims.sourceOutputs(s.server)
            #expect(Claims.indicatorOn(shown) && Claims.kdeIndicatorOn(shown), "granted, the desktop's indicator would not light")
            // Through Earmuff too: the relay reads the server's source-output records (to leave
            // concealed native ones out) and passes them.
            let through = try Claims.sourceOutputs(server: s.earmuff.serverString)
            #expect(through.count == shown.count, "through Earmuff: \(through)\ndirectly: \(shown)")
            #expect(!s.earmuff.log().contains("could not be read"), "\(s.logs)")
            #expect(rec.firstNonSilentOffset().map { $0 >= before } ?? false, "tone before the grant")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "the tone does not go on\n\(s.logs)")

            let denied = Date()
            try s.earmuff.control("deny", key)
            let released = await Self.waitForServer(s, outputs: 0, running: false, since: denied)
            #expect(released != nil, "denied, the server still records for it\n\(s.logs)")
            print("held stream, \(recorder): denied → source-output gone and microphone idle after \(ms(released))")
            let atDeny = rec.byteCount()
            #expect(await rec.waitForBytes(atDeny + E2E.bytes(1.0, of: rec)), "the recording stopped growing\n\(s.logs)")
            let tail = rec.data().suffix(E2E.bytes(0.5, of: rec))
            #expect(tail.allSatisfy { $0 == 0 }, "denied, the recording is not silence")
            #expect(rec.tool.process.isRunning, "the recorder ended: \(rec.tool.process.stderrText())")
        }

        /// A held stream keeps time like a server stream: a second of wall time is about a second
        /// of audio, and the latency queries are answered so that an app's timestamps run on
        /// (ffmpeg stops at the first one that goes back).
        @Test(arguments: ["parecord", "ffmpeg"])
        func aHeldRecordingRunsInRealTime(_ recorder: String) async throws {
            let s = try E2E.Setup()
            defer { s.stop() }
            let (rec, key): (Recording, String)
            if recorder == "parecord" {
                (rec, key) = (try s.record(format: .float32le, rate: 44100, channels: 2), s.key)
            } else {
                (rec, key) = try Self.startRecorder(recorder, s)
            }
            try s.earmuff.control("deny", key)
            defer { _ = rec.stop() }
            #expect(await rec.waitForBytes(E2E.bytes(0.5, of: rec)), "\(s.logs)")
            let start = Date(), first = rec.byteCount()
            #expect(await rec.waitForBytes(first + E2E.bytes(2.0, of: rec)), "\(s.logs)")
            let seconds = Date().timeIntervalSince(start)
            let audio = Double(rec.byteCount() - first) / Double(rec.bytesPerSecond)
            print("held stream, \(recorder): \(String(format: "%.2f", audio)) s of audio in \(String(format: "%.2f", seconds)) s")
            // The audio cannot run ahead of the clock (a fragment of slack); behind, the machine is slow.
            #expect(audio <= seconds + 0.25, "\(audio) s of audio in \(seconds) s")
            #expect(rec.data().allSatisfy { $0 == 0 })
            #expect(try Claims.sourceOutputs(s.server).isEmpty)
            #expect(rec.tool.process.isRunning, "the recorder ended: \(rec.tool.process.stderrText())")
        }
    }
}

private func ms(_ seconds: Double?) -> String {
    seconds.map { String(format: "%.0f ms", $0 * 1000) } ?? "never"
}
