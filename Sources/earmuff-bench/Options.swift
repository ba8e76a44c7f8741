// Command-line options of earmuff-bench (hand-written parser: usage errors go
// to stderr with exit 64, --help to stdout with exit 0).

import Foundation
import Glibc

/// The parts of the benchmark that can be run.
enum Part: String, CaseIterable {
    case latency, throughput, real, memory, silence, glitch, counts
}

struct Options {
    var parts: Set<Part> = Set(Part.allCases)
    var modes: [Mode] = Mode.allCases
    /// Seconds counted per mode and measurement (split over `rounds`).
    var duration = 3.0
    /// Rounds that interleave the modes (reduces the effect of other load).
    var rounds = 6
    var warmup = 0.3
    var requests = 10_000
    var streamCounts = [1, 64]
    var payloadBytes = 64 * 1024
    var idleClients = 1000
    var recordingClients = 200
    var paStreams = 8
    /// Seconds of each glitch window, and the playback streams beside the measured pair.
    var glitchSeconds = 30.0
    /// Three paths (direct, the calibration relay, earmuff) of the pair and these many playback streams
    /// each: PulseAudio takes at most 64 connections (MAX_CONNECTIONS in protocol-native.c).
    var glitchTabs = 18
    var earmuffBinary: String?
    var pulseServer: String?

    static let usage = """
        usage: earmuff-bench [options]

        Measures earmuff against a direct connection and a socat relay on the same
        work, prints a table with the ratios and checks the performance targets.
        Build in release first: swift build -c release

        options:
          --quick               1 s per measurement, 1 round, 2000 round trips,
                                200 idle / 50 recording clients, 10 s glitch windows
          --only PARTS          comma list of: latency, throughput, real, memory, silence
                                (recorders held against relayed: needs pulseaudio),
                                glitch, counts (system calls, wake-ups and context
                                switches per round trip and per chunk: needs perf)
          --skip PARTS          the same, to leave out
          --modes MODES         comma list of: direct, socat, relay, earmuff (default all;
                                relay is the calibration relay)
          --duration S          seconds counted per mode and measurement (default 3)
          --rounds N            rounds interleaving the modes (default 6)
          --requests N          round trips per mode (default 10000)
          --streams LIST        concurrent record streams, e.g. 1,64 (default)
          --payload BYTES       memblock payload of the flood server (default 65536)
          --idle-clients N      idle clients for the memory figure (default 1000)
          --recording-clients N recording clients at audio rate (default 200)
          --pa-streams N        streams against the real PulseAudio (default 8)
          --glitch-seconds S    each glitch window under stress-ng (default 30, quick 10)
          --glitch-tabs N       playback streams beside the measured pair in the
                                second glitch window (default 18: three paths
                                of 20 streams stay within PulseAudio's 64
                                connections)
          --pulse-server PATH   for the real-server part, use this running server's
                                socket (e.g. pipewire-pulse) instead of a private
                                PulseAudio
          --earmuff PATH        the earmuff binary (default: next to this one,
                                or $EARMUFF_BINARY)
          -h, --help            this text

        environment: EARMUFF_BENCH_LOG_LEVEL (earmuff's --log-level, default warn),
        EARMUFF_BENCH_SERVE_ARGS (more `earmuff serve` arguments, e.g. "--coalesce-ms 0"),
        EARMUFF_BENCH_CONFIG (more configuration lines, e.g. "realtime-priority = 0"),
        EARMUFF_BENCH_SAMPLES (a directory: every round trip, with when it began, to
        DIR/{synthetic,real}-MODE.txt)
        """

    static func parse(_ args: [String]) -> Options {
        var o = Options()
        var i = 0
        func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("earmuff-bench: \(message)\n\(usage)\n".utf8))
            exit(64)
        }
        func value() -> String {
            i += 1
            guard i < args.count else { fail("\(args[i - 1]) needs a value") }
            return args[i]
        }
        func number<T: LosslessStringConvertible & Comparable & Numeric>(_ s: String, _ what: String) -> T {
            guard let v = T(s), v > 0 else { fail("\(what) must be a positive number, got \(s)") }
            return v
        }
        func parts(_ s: String) -> Set<Part> {
            Set(
                s.split(separator: ",").map { p -> Part in
                    guard let part = Part(rawValue: String(p)) else { fail("unknown part \(p)") }
                    return part
                })
        }
        var quick = false
        var explicitDuration = false, explicitRounds = false, explicitRequests = false
        var explicitIdle = false, explicitRecording = false, explicitGlitch = false
        while i < args.count {
            switch args[i] {
            case "-h", "--help":
                print(usage)
                exit(0)
            case "--quick": quick = true
            case "--only": o.parts = parts(value())
            case "--skip": o.parts.subtract(parts(value()))
            case "--modes":
                o.modes = value().split(separator: ",").map { m -> Mode in
                    guard let mode = Mode(rawValue: String(m)) else { fail("unknown mode \(m)") }
                    return mode
                }
            case "--duration": o.duration = number(value(), "--duration"); explicitDuration = true
            case "--rounds": o.rounds = number(value(), "--rounds"); explicitRounds = true
            case "--requests": o.requests = number(value(), "--requests"); explicitRequests = true
            case "--streams":
                o.streamCounts = value().split(separator: ",").map { number(String($0), "--streams") }
            case "--payload": o.payloadBytes = number(value(), "--payload")
            case "--idle-clients": o.idleClients = number(value(), "--idle-clients"); explicitIdle = true
            case "--recording-clients":
                o.recordingClients = number(value(), "--recording-clients"); explicitRecording = true
            case "--pa-streams": o.paStreams = number(value(), "--pa-streams")
            case "--glitch-seconds":
                o.glitchSeconds = number(value(), "--glitch-seconds"); explicitGlitch = true
            case "--glitch-tabs": o.glitchTabs = number(value(), "--glitch-tabs")
            case "--earmuff": o.earmuffBinary = value()
            case "--pulse-server":
                let v = value()
                o.pulseServer = v.hasPrefix("unix:") ? String(v.dropFirst(5)) : v
            default: fail("unknown option \(args[i])")
            }
            i += 1
        }
        if quick {
            if !explicitDuration { o.duration = 1 }
            if !explicitRounds { o.rounds = 1 }
            if !explicitRequests { o.requests = 2000 }
            if !explicitIdle { o.idleClients = 200 }
            if !explicitRecording { o.recordingClients = 50 }
            if !explicitGlitch { o.glitchSeconds = 10 }
        }
        guard o.payloadBytes <= 16 * 1024 * 1024 else { fail("--payload is at most 16 MiB") }
        return o
    }
}
