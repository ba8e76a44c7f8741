// The measurements: command round trips, record throughput with relay CPU,
// resident memory with many clients, and the cost of silencing. Each one sets
// up its own client connections and tears them down, so modes never share
// state; modes are interleaved round by round so that other load on the
// machine hits them alike.

import Foundation
import Glibc
import PulseWire
import TestSupport

/// The `q` quantile of `samples` (nearest rank), nil when there are none.
func percentile(_ samples: [Double], _ q: Double) -> Double? {
    guard !samples.isEmpty else { return nil }
    let s = samples.sorted()
    return s[min(s.count - 1, max(0, Int((Double(s.count) * q).rounded(.up)) - 1))]
}

/// Percentiles of round trips, in microseconds.
struct LatencyResult {
    var p50: Double
    var p99: Double
    var mean: Double
    var count: Int
    /// The p50 and p99 of each round, in order (when measured in interleaved rounds).
    var roundP50: [Double] = []
    var roundP99: [Double] = []

    init(samples: [Double]) {
        count = samples.count
        p50 = percentile(samples, 0.5) ?? 0
        p99 = percentile(samples, 0.99) ?? 0
        mean = samples.isEmpty ? 0 : samples.reduce(0, +) / Double(samples.count)
    }

    /// The percentiles of all `samples`, and of each round's (`counts` samples each, in order).
    init(samples: [Double], rounds counts: [Int]) {
        self.init(samples: samples)
        var start = 0
        for n in counts {
            let round = Array(samples[start..<min(start + n, samples.count)])
            start += n
            guard let p50 = percentile(round, 0.5), let p99 = percentile(round, 0.99) else { continue }
            roundP50.append(p50)
            roundP99.append(p99)
        }
    }
}

/// Bytes counted over a time, with the relay's CPU time over the same window.
struct ThroughputResult {
    var bytes: UInt64 = 0
    var seconds = 0.0
    var relayCPU: Double?
    var frames = 0
    var silentFrames = 0
    var patternFrames = 0
    /// MB/s of each window added, in order (the rounds of an interleaved measurement).
    var rounds: [Double] = []

    /// MB/s (10^6 bytes per second).
    var megabytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds / 1e6 : 0 }
    /// Relay CPU seconds per GB (10^9 bytes) relayed.
    var cpuPerGB: Double? {
        guard let relayCPU, bytes > 0 else { return nil }
        return relayCPU / (Double(bytes) / 1e9)
    }
    /// Relay CPU as a percentage of one core.
    var cpuPercent: Double? {
        guard let relayCPU, seconds > 0 else { return nil }
        return relayCPU / seconds * 100
    }

    mutating func add(_ w: StreamCounter.Window, cpu: Double?) {
        bytes &+= w.bytes
        seconds += w.seconds
        frames += w.frames
        silentFrames += w.silentFrames
        patternFrames += w.patternFrames
        if w.seconds > 0 { rounds.append(Double(w.bytes) / w.seconds / 1e6) }
        if let cpu { relayCPU = (relayCPU ?? 0) + cpu }
    }
}

/// Two figures measured in the same interleaved rounds (round i of each ran one after the
/// other): the mean of their paired differences and how far it may be off. On a shared
/// machine the rounds vary by more than two relays within a few per cent of each other differ
/// (where the scheduler puts the client and the server alone moves a direct connection's
/// figure by 2x), so a difference within the 95 % interval of its mean (Student's t over the
/// rounds) says nothing, as rare events' counts are compared within 2σ.
struct RoundSpread {
    let mean: Double
    /// Half the 95 % interval of the mean.
    let bound: Double
    /// Student's t, two-sided 95 %, for 1 to 10 degrees of freedom (beyond, about 2).
    private static let t95: [Double] = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23]

    /// nil with fewer than two paired rounds.
    init?(_ a: [Double], _ b: [Double]) {
        let n = min(a.count, b.count)
        guard n >= 2 else { return nil }
        let differences = (0..<n).map { a[$0] - b[$0] }
        let mean = differences.reduce(0, +) / Double(n)
        let variance = differences.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(n - 1)
        self.mean = mean
        bound = (n - 1 <= Self.t95.count ? Self.t95[n - 2] : 2) * (variance / Double(n)).squareRoot()
    }

    /// `a` is not below `b` beyond the spread.
    var atLeast: Bool { mean >= -bound }
    /// `a` is above `b` beyond the spread.
    var above: Bool { mean > bound }

    /// The mean difference and the half interval, in `unit`, with `digits` decimals.
    func text(_ unit: String, digits: Int = 0) -> String {
        String(format: "%+.\(digits)f ± %.\(digits)f \(unit) (95 %%)", mean, bound)
    }
}

/// A target judged on figures measured in rounds: how the calibration relay stands to the
/// target's limit, and earmuff to the calibration relay, each beyond or within the spread.
struct SpreadVerdict {
    /// The calibration relay meets the limit beyond the spread of its rounds: the target is
    /// reachable on this machine.
    var calibrationReaches: Bool
    /// Earmuff is not worse than the calibration relay beyond the spread of their rounds.
    var earmuffMeetsCalibration: Bool
    /// How far earmuff is ahead of the calibration relay, for the target's line.
    var text: String

    /// Rounds of earmuff, the calibration relay and the limit, in order; `higherIsBetter` for
    /// throughput, not for round trips. nil with fewer than two rounds.
    init?(earmuff: [Double], calibration: [Double], limit: [Double], higherIsBetter: Bool, unit: String, digits: Int = 0) {
        let (reach, held) =
            higherIsBetter
            ? (RoundSpread(calibration, limit), RoundSpread(earmuff, calibration))
            : (RoundSpread(limit, calibration), RoundSpread(calibration, earmuff))
        guard let reach, let held else { return nil }
        calibrationReaches = reach.above
        earmuffMeetsCalibration = held.atLeast
        text = ", earmuff ahead of the calibration relay by \(held.text(unit, digits: digits))"
    }
}

/// A recording setup: what to ask the server for.
struct StreamRequest {
    var spec: SampleSpec
    var map: ChannelMap
    var fragSize: UInt32
    var source: String?

    static let synthetic = StreamRequest(
        spec: SampleSpec(format: .s16le, channels: 2, rate: 48000), map: .stereo, fragSize: 65536, source: nil)
}

/// Runs measurements; holds the shared receive buffer (used from this thread only).
@safe
final class Measurer {
    let options: Options
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    /// Anomalies seen while measuring (printed as notes).
    var problems: [String] = []
    /// CPU seconds of the `also` process over the last window.
    var otherCPU: Double?

    init(options: Options) { self.options = options }
    deinit { unsafe scratch.deallocate() }

    func connect(_ relay: Relay) throws -> NativeClient {
        let c = try unsafe NativeClient(path: relay.path, scratch: scratch)
        try c.handshake()
        return c
    }

    /// GET_SERVER_INFO round trips over one connection per relay, interleaved in 10 rounds.
    /// With EARMUFF_BENCH_SAMPLES=DIR each mode's are also written to DIR/SERVER-MODE.txt
    /// (`server` names the server), a line each: when it began
    /// (CLOCK_MONOTONIC ns, as `perf record -k CLOCK_MONOTONIC` stamps events) and µs.
    func latency(_ relays: [Relay], requests: Int, server: String) throws -> [Mode: LatencyResult] {
        let trippers = try relays.map { RoundTripper(client: try connect($0)) }
        for t in trippers { for _ in 0..<200 { _ = try t.once() } }
        var samples = Array(repeating: [Double](), count: relays.count)
        for i in samples.indices { samples[i].reserveCapacity(requests) }
        let dumpTo = ProcessInfo.processInfo.environment["EARMUFF_BENCH_SAMPLES"]
        var times = Array(repeating: [UInt64](), count: relays.count)
        let rounds = 10
        let perRound = (0..<rounds).map { requests / rounds + ($0 < requests % rounds ? 1 : 0) }
        for n in perRound {
            for (i, t) in trippers.enumerated() {
                for _ in 0..<n {
                    if dumpTo != nil { times[i].append(Clock.nanoseconds()) }
                    samples[i].append(try t.once())
                }
            }
        }
        var out: [Mode: LatencyResult] = [:]
        for (i, r) in relays.enumerated() { out[r.mode] = LatencyResult(samples: samples[i], rounds: perRound) }
        if let dir = dumpTo {
            for (i, r) in relays.enumerated() {
                let path = "\(dir)/\(server)-\(r.mode).txt"
                do {
                    try zip(times[i], samples[i]).map { "\($0) \($1)\n" }.joined()
                        .write(toFile: path, atomically: true, encoding: .utf8)
                } catch {
                    problems.append("EARMUFF_BENCH_SAMPLES: could not write \(path): \(error)")
                }
            }
        }
        return out
    }

    /// One counting window: `streams` connections with one record stream each.
    /// `perConnection` streams share a connection (a real server takes 64 connections at most).
    /// `also` reads another process's CPU seconds over the same window (the server's).
    func window(
        _ relay: Relay, streams: Int, perConnection: Int = 1, request: StreamRequest, duration: Double,
        warmup: Double, tick: () -> Void = {}, also: (() -> Double?)? = nil
    )
        throws -> (StreamCounter.Window, Double?)
    {
        var clients = try recordingClients(relay, streams: streams, perConnection: perConnection, request: request)
        var cpu0: Double?
        var cpu1: Double?
        var other0: Double?
        let w = try StreamCounter.run(
            clients, warmup: warmup, duration: duration,
            begin: {
                cpu0 = relay.cpuSeconds(); other0 = also?()
            }, tick: tick,
            end: { _ in
                cpu1 = relay.cpuSeconds(); if let a = also?(), let b = other0 { self.otherCPU = a - b }
            })
        clients.removeAll()
        var cpu: Double?
        if let cpu0, let cpu1 { cpu = cpu1 - cpu0 }
        if w.bytes == 0, let e = relay.earmuff {
            let tail = e.log().split(separator: "\n").suffix(8).joined(separator: "\n    ")
            problems.append(
                "no record data through earmuff in a \(String(format: "%.1f", duration)) s window "
                    + "(\(streams) stream(s)); its log ends:\n    \(tail)")
        }
        return (w, cpu)
    }

    /// `streams` record streams through `relay`, `perConnection` to a connection.
    func recordingClients(
        _ relay: Relay, streams: Int, perConnection: Int, request: StreamRequest
    ) throws
        -> [NativeClient]
    {
        var clients: [NativeClient] = []
        clients.reserveCapacity(streams)
        var opened = 0
        while opened < streams {
            let c = try connect(relay)
            for _ in 0..<min(perConnection, streams - opened) {
                _ = try c.createRecordStream(
                    spec: request.spec, map: request.map, fragSize: request.fragSize,
                    source: request.source)
                opened += 1
            }
            clients.append(c)
        }
        return clients
    }

    /// Throughput per relay, modes interleaved over `rounds` windows.
    func throughput(
        _ relays: [Relay], streams: Int, request: StreamRequest, duration: Double? = nil,
        rounds: Int? = nil, quiesce: () -> Void
    ) throws -> [Mode: ThroughputResult] {
        var out: [Mode: ThroughputResult] = [:]
        let rounds = rounds ?? options.rounds
        let each = (duration ?? options.duration) / Double(rounds)
        for _ in 0..<rounds {
            for relay in relays {
                let (w, cpu) = try window(
                    relay, streams: streams, request: request, duration: each,
                    warmup: options.warmup)
                out[relay.mode, default: ThroughputResult()].add(w, cpu: cpu)
                quiesce()
            }
        }
        return out
    }
}

/// Resident memory of earmuff with idle clients.
struct IdleMemory {
    var clients: Int
    var baselineKiB: Int
    var loadedKiB: Int
    var threads: Int?
    /// Context switches of earmuff while the clients sat idle for `idleSeconds`.
    var idleContextSwitches: Int?
    var idleSeconds: Double
    var perClientKiB: Double { Double(loadedKiB - baselineKiB) / Double(max(clients, 1)) }
}

/// Resident memory and throughput of earmuff with recording clients at audio rate.
struct RecordingMemory {
    var clients: Int
    var baselineKiB: Int
    var peakKiB: Int
    var endKiB: Int
    var expectedBytesPerSecond: Double
    var result: ThroughputResult
    var perClientKiB: Double { Double(peakKiB - baselineKiB) / Double(max(clients, 1)) }
}

extension Measurer {
    /// Connects `count` idle (authenticated) clients through a fresh earmuff and reads its RSS.
    func idleMemory(_ relay: Relay, count: Int) throws -> IdleMemory {
        guard let pid = relay.pid else { throw BenchError("no earmuff pid") }
        do { _ = try connect(relay) } // warm up lazily initialised state, then let it go
        usleep(300_000)
        let base = Proc.rssKiB(pid) ?? 0
        var clients: [NativeClient] = []
        clients.reserveCapacity(count)
        for _ in 0..<count { clients.append(try connect(relay)) }
        usleep(500_000)
        let loaded = Proc.rssKiB(pid) ?? 0
        let threads = Proc.threads(pid)
        // An idle relay sleeps: no timers, no polling, no wake-ups while nobody sends.
        let idleSeconds = options.duration >= 3 ? 10.0 : 2.0
        let before = Proc.contextSwitches(pid)
        usleep(useconds_t(idleSeconds * 1e6))
        let after = Proc.contextSwitches(pid)
        let switches = before.flatMap { b in after.map { Proc.contextSwitches(from: b, to: $0) } }
        clients.removeAll()
        return IdleMemory(
            clients: count, baselineKiB: base, loadedKiB: loaded, threads: threads,
            idleContextSwitches: switches, idleSeconds: idleSeconds)
    }

    /// `count` recording clients through a fresh earmuff in front of a paced server.
    func recordingMemory(
        _ relay: Relay, count: Int, bytesPerSecond: Int, request: StreamRequest
    ) throws
        -> RecordingMemory
    {
        guard let pid = relay.pid else { throw BenchError("no earmuff pid") }
        do { _ = try connect(relay) }
        usleep(300_000)
        let base = Proc.rssKiB(pid) ?? 0
        var peak = base
        let (w, cpu) = try window(
            relay, streams: count, request: request, duration: max(options.duration, 2),
            warmup: 0.5, tick: { peak = max(peak, Proc.rssKiB(pid) ?? 0) })
        let end = Proc.rssKiB(pid) ?? 0
        peak = max(peak, end)
        var r = ThroughputResult()
        r.add(w, cpu: cpu)
        return RecordingMemory(
            clients: count, baselineKiB: base, peakKiB: peak, endKiB: end,
            expectedBytesPerSecond: Double(count * bytesPerSecond), result: r)
    }
}

/// Granted against denied record throughput through one earmuff.
/// One window of recorders through earmuff on a real server: earmuff's CPU and the server's.
struct ServerWindow {
    var result = ThroughputResult()
    /// The server's CPU % of a core in the same window.
    var serverPercent: Double?
    /// Earmuff's and the server's CPU together, % of a core.
    var totalPercent: Double? { result.cpuPercent.flatMap { e in serverPercent.map { e + $0 } } }
}

/// The same recorders relayed (granted) and held (denied).
struct SilenceResult {
    var relayed = ServerWindow()
    var held = ServerWindow()
}

extension Measurer {
    /// `streams` recorders (4 per connection) through `relay` in front of `server`: granted, then
    /// denied, one window each, earmuff's CPU beside the server's.
    func silence(_ relay: Relay, server: PulseServer, streams: Int, request: StreamRequest) throws -> SilenceResult {
        var out = SilenceResult()
        for (verb, keyPath) in [("grant", \SilenceResult.relayed), ("deny", \SilenceResult.held)] {
            try relay.decide(verb, kind: "system-audio")
            let (w, cpu) = try window(
                relay, streams: streams, perConnection: 4, request: request, duration: 4,
                warmup: 0.5, also: { Proc.cpuSeconds(server.process.pid) })
            out[keyPath: keyPath].result.add(w, cpu: cpu)
            out[keyPath: keyPath].serverPercent = otherCPU.map { $0 / w.seconds * 100 }
            usleep(100_000)
        }
        return out
    }
}
