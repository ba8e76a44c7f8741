// End-to-end tests: real PulseAudio servers, the built `earmuff` binary and the
// stock client tools, each test with its own private server (and proxy).
//
// All suites are nested in one serialized suite so that only one server runs
// at a time on a small machine. Audio is judged by content (the 440 Hz tone's
// share of the energy, its RMS, exact silence), never by wall-clock timing;
// deadlines are generous.

import Foundation
import Testing
import TestSupport

@Suite(.serialized, .timeLimit(.minutes(10)))
enum EndToEnd {}

/// What a recording of a tone looks like.
struct ToneReport: CustomStringConvertible {
    let seconds: Double
    let rms: Double
    let medianRatio: Double
    /// Share of 100 ms blocks whose energy is at least 90 % at the tone frequency.
    let goodBlockFraction: Double

    var description: String {
        String(
            format: "%.2f s, rms %.3f, median tone ratio %.3f, good blocks %.0f%%",
            seconds, rms, medianRatio, goodBlockFraction * 100)
    }

    /// The recording is the test tone: long enough, loud enough, and tonal throughout.
    func isTone(expectedRMS: Double, tolerance: Double = 0.05, minimumSeconds: Double = 0.9) -> Bool {
        seconds >= minimumSeconds && abs(rms - expectedRMS) <= tolerance
            && medianRatio > 0.95 && goodBlockFraction >= Self.minimumGoodBlocks
    }

    /// PulseAudio's sine source is gapless. PipeWire's tone (a player feeding a
    /// null sink whose monitor is the microphone) drops a period now and then on
    /// a loaded machine, directly as well as through earmuff, so a short
    /// recording may have a broken 100 ms block or two; silence still fails on
    /// its RMS and median ratio.
    static let minimumGoodBlocks: Double = (try? ServerKind.selected()) == .pipewire ? 0.5 : 0.9
}

enum Helpers {
    /// RMS of the server's 440 Hz test tone (a sine of amplitude 0.5).
    static let micRMS = PulseServer.toneAmplitude / 2.0.squareRoot()

    /// Analyses mono `audio` of `format` at `rate` for a tone of `frequency`.
    static func analyze(
        _ audio: Data, format: PCMFormat, rate: Int = PulseServer.toneRate,
        frequency: Double = PulseServer.toneFrequency
    ) -> ToneReport {
        let samples = AudioAnalysis.decode(audio, format: format)
        let ratios = AudioAnalysis.blockToneRatios(
            samples, frequency: frequency, sampleRate: Double(rate),
            blockSize: rate / 10)
        let good = ratios.filter { $0 >= 0.9 }.count
        return ToneReport(
            seconds: Double(samples.count) / Double(rate),
            rms: AudioAnalysis.rms(samples),
            medianRatio: AudioAnalysis.median(ratios),
            goodBlockFraction: ratios.isEmpty ? 0 : Double(good) / Double(ratios.count))
    }

    /// Records about `seconds` of the default source (the mic) from `server`
    /// in mono at 48 kHz; returns parecord's result and the audio.
    static func recordMic(
        server: String, format: PCMFormat = .s16le, clientConfig: ClientConfig = .default,
        seconds: Double = 1.0
    ) async throws -> (result: ToolResult, audio: Data) {
        let rec = try Tool.startRecording(
            server: server, format: format, rate: PulseServer.toneRate,
            channels: 1, clientConfig: clientConfig)
        _ = await rec.waitForAudio(seconds: seconds, timeout: 90)
        return rec.stop()
    }

    /// `pactl` output with what legitimately differs between two connections removed:
    /// - `Server String:` is the address the client dialled (the proxy's socket vs the server's);
    /// - `Client Index:` is the asking connection's own index, new for every connection;
    /// - measured latencies (`Latency: N usec`) change from one moment to the next
    ///   (the configured latency after them is kept);
    /// - the `Client #N` entry of the asking pactl itself (its index and pid differ per run).
    ///   Any other client, such as an extra connection the proxy kept open upstream,
    ///   stays in and shows up as a difference.
    /// `Tile Size` is kept: it is the client's own mempool block size and does not
    /// depend on the path to the server.
    static func normalizePactl(_ text: String) -> String {
        let blocks = text.components(separatedBy: "\n\n").filter { block in
            !(block.hasPrefix("Client #") && block.contains("application.process.binary = \"pactl\""))
        }
        let lines = blocks.joined(separator: "\n\n").split(separator: "\n", omittingEmptySubsequences: false)
        return lines.compactMap { line -> String? in
            if line.hasPrefix("Server String:") || line.hasPrefix("Client Index:") { return nil }
            var s = String(line)
            if let r = s.range(of: #"Latency: [0-9]+ usec"#, options: .regularExpression) {
                s.replaceSubrange(r, with: "Latency: <measured> usec")
            }
            return s
        }.joined(separator: "\n")
    }

    /// Runs `pactl arguments` straight to `server` and through `relay`, and expects both to
    /// succeed with the same output (normalized as above); `log` is the relay's, for failures.
    static func expectSamePactl(
        _ arguments: [String], server: String, relay: String, log: () -> String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let direct = try Tool.run("pactl", args: arguments, server: server)
        let relayed = try Tool.run("pactl", args: arguments, server: relay)
        #expect(direct.succeeded, "\(direct)", sourceLocation: sourceLocation)
        #expect(relayed.succeeded, "\(relayed)\nrelay log:\n\(log())", sourceLocation: sourceLocation)
        let a = normalizePactl(direct.stdoutText)
        let b = normalizePactl(relayed.stdoutText)
        #expect(a.count > 100, "suspiciously short output: \(a)", sourceLocation: sourceLocation)
        #expect(a == b, "differences:\n\(diff(a, b))", sourceLocation: sourceLocation)
    }

    /// Lines of `a` and `b` that differ, for failure messages.
    static func diff(_ a: String, _ b: String) -> String {
        let la = a.split(separator: "\n", omittingEmptySubsequences: false)
        let lb = b.split(separator: "\n", omittingEmptySubsequences: false)
        var out: [String] = []
        for i in 0..<max(la.count, lb.count) {
            let x = i < la.count ? String(la[i]) : "<none>"
            let y = i < lb.count ? String(lb[i]) : "<none>"
            if x != y { out.append("line \(i + 1):\n  direct: \(x)\n  proxy:  \(y)") }
            if out.count >= 20 { break }
        }
        return out.joined(separator: "\n")
    }

    /// A fresh directory for test files, removed by the caller.
    static func scratch() throws -> String { try TempDir.make(prefix: "earmuff-test") }
}
