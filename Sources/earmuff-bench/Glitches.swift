// The glitch part: what a person hears, under load. A real PulseAudio, and
// beside each other in the same window, directly, through the calibration
// relay and through earmuff, a
// playback stream (`pacat --latency-msec=10`) and a record stream (`parecord
// --latency-msec=10`), optionally with more playback streams beside them (a
// desktop with many tabs), while `stress-ng --cpu N` keeps every core busy.
// Counted per path: the underruns and overruns the server reports to the
// clients (pacat -v prints each), the ones the server logs (at debug level,
// by stream name), and the latency pa_stream_get_latency reports (pacat -v
// prints it once a second).

import Foundation
import Glibc
import TestSupport

/// What one path (direct, the calibration relay or earmuff) saw in a glitch window.
struct GlitchCounts {
    var playbackUnderruns = 0
    var recordOverruns = 0
    /// Underrun/overrun lines in the server's log for this path's streams.
    var serverLogged = 0
    /// Playback latency samples, µs (once a second per playback stream).
    var playbackLatency: [Double] = []
    var recordLatency: [Double] = []
    /// Streams that ended before the window did (a failure, not a glitch).
    var died: [String] = []

    var glitches: Int { playbackUnderruns + recordOverruns }
}

struct GlitchResult {
    let extraPlayback: Int
    let seconds: Double
    let cpuHogs: Int
    var counts: [Mode: GlitchCounts]
}

enum Glitches {
    /// The format every stream uses: CD-like stereo at 48 kHz.
    private static let format = ["--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=10"]

    /// Runs one window: `extraPlayback` more playback streams per path beside
    /// the measured pair. `earmuff` must already let `pacat` record system audio.
    static func window(
        server: PulseServer, earmuff: Relay, calibration: Relay?, extraPlayback: Int, seconds: Double,
        workDir: String
    ) throws -> GlitchResult {
        guard let pacat = findExecutable("pacat"), let stress = findExecutable("stress-ng") else {
            throw BenchError("the glitch part needs pacat and stress-ng (apt-get install pulseaudio-utils stress-ng)")
        }
        let cpus = ProcessInfo.processInfo.activeProcessorCount
        let hog = try ChildProcess.spawn(
            executable: stress, arguments: ["--cpu", String(cpus), "--timeout", "\(Int(seconds) + 60)s", "--quiet"],
            environment: Tool.privateEnvironment(root: workDir),
            stdoutPath: "\(workDir)/stress.log", stderrPath: "\(workDir)/stress.log", maxLifetime: Int(seconds) + 90)
        defer { _ = hog.terminate(signal: SIGTERM, grace: 2) }

        let paths: [(Mode, String)] =
            [(.direct, server.socketPath)] + (calibration.map { [(.relay, $0.path)] } ?? [])
            + [(.earmuff, earmuff.path)]
        var streams: [(mode: Mode, name: String, playback: Bool, process: ChildProcess)] = []
        defer { for s in streams where s.process.isRunning { _ = s.process.terminate(signal: SIGKILL, grace: 1) } }
        // The calibration relay moves bytes and nothing else: a client that agreed on shared
        // memory with the server behind it would get blocks it cannot map. Its clients ask for
        // none, as every client of earmuff ends up (earmuff takes the flags out of AUTH).
        let noSharedMemory = "\(workDir)/client-noshm.conf"
        try "enable-shm = no\nenable-memfd = no\n".write(toFile: noSharedMemory, atomically: true, encoding: .utf8)
        for (mode, socket) in paths {
            var env = Tool.privateEnvironment(root: workDir)
            env["PULSE_SERVER"] = "unix:\(socket)"
            if mode == .relay { env["PULSE_CLIENTCONFIG"] = noSharedMemory }
            let names =
                [("\(mode)-play", true), ("\(mode)-record", false)]
                + (0..<extraPlayback).map { ("\(mode)-tab\($0)", true) }
            for (name, playback) in names {
                // Recording from the sink's monitor: a source with the sink's
                // low latency (the sine source hands out 2 s blocks).
                let args =
                    (playback ? ["--playback"] : ["--record", "--device=\(PulseServer.sinkName).monitor"])
                    + ["-v", "--stream-name=\(name)"] + format + [playback ? "/dev/zero" : "/dev/null"]
                let p = try ChildProcess.spawn(
                    executable: pacat, arguments: args, environment: env,
                    stdoutPath: "\(workDir)/\(name).out", stderrPath: "\(workDir)/\(name).log",
                    maxLifetime: Int(seconds) + 600)
                streams.append((mode, name, playback, p))
                // One at a time, as a desktop's streams start: PulseAudio
                // listens with a backlog of 5 and refuses a burst of connects.
                _ = Wait.untilBlocking(timeout: 20, interval: 0.01) {
                    p.stderrText().contains("Stream successfully created") || !p.isRunning
                }
            }
        }
        // The window is wall-clock time: the streams play and record meanwhile.
        usleep(UInt32(seconds * 1_000_000))

        var result = GlitchResult(extraPlayback: extraPlayback, seconds: seconds, cpuHogs: cpus, counts: [:])
        // Which streams ended by themselves, read before any is stopped; then all stop at once.
        let endedEarly = streams.map { !$0.process.isRunning }
        for s in streams { s.process.send(SIGINT) }
        for s in streams { _ = s.process.terminate(signal: SIGINT, grace: 5) }
        // Only the server's lines about an underrun or an overrun, found once (the log, at debug
        // level, runs to hundreds of thousands of lines), are searched for each stream's name.
        let serverLog = server.log().split(separator: "\n").filter { line in
            let lower = line.lowercased()
            return lower.contains("underrun") || lower.contains("overrun")
        }
        for (s, ended) in zip(streams, endedEarly) {
            var c = result.counts[s.mode] ?? GlitchCounts()
            let text = s.process.stderrText()
            if ended {
                let last = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" })
                    .last { !$0.hasPrefix("Time: ") && !$0.allSatisfy { $0 == " " } }
                c.died.append("\(s.name) (\(last.map(String.init) ?? "no message"))")
            }
            let latencies = latencySamples(text)
            if s.playback {
                c.playbackUnderruns += occurrences(of: "Stream underrun.", in: text)
                c.playbackLatency += latencies
            } else {
                c.recordOverruns += occurrences(of: "Stream overrun.", in: text)
                c.recordLatency += latencies
            }
            c.serverLogged += serverLog.count { $0.contains("'\(s.name)'") }
            result.counts[s.mode] = c
        }
        return result
    }

    private static func occurrences(of needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    /// The "Latency: N usec." figures of pacat -v, skipping the first two
    /// seconds (the stream's start-up).
    static func latencySamples(_ text: String) -> [Double] {
        var out: [Double] = []
        for piece in text.components(separatedBy: "Latency: ").dropFirst() {
            let digits = piece.prefix { $0.isNumber || $0 == "." }
            if let v = Double(digits), piece.dropFirst(digits.count).hasPrefix(" usec") { out.append(v) }
        }
        return Array(out.dropFirst(2))
    }
}
