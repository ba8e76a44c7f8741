// The run: start the upstreams and the three ways in, measure the selected
// parts, then print the table, the ratios and the targets.

import CLinux
import Foundation
import Glibc
import PulseWire
import TestSupport

final class Bench {
    let options: Options
    let measurer: Measurer
    private var notes: [String] = []

    private var latency: [Mode: LatencyResult] = [:]
    private var throughput: [Int: [Mode: ThroughputResult]] = [:]
    private var realLatency: [Mode: LatencyResult] = [:]
    private var realThroughput: [Mode: ThroughputResult] = [:]
    private var idle: IdleMemory?
    private var recording: RecordingMemory?
    /// The calibration relay with the same recording clients, in front of the same paced server.
    private var recordingCalibration: ThroughputResult?
    private var silence: SilenceResult?
    private var glitches: [GlitchResult] = []
    /// Recorders on the real server, one window per mode: the relay's figures and
    /// the server's own CPU % in the same window.
    private var realRecorders: [Mode: (result: ThroughputResult, serverPercent: Double?)] = [:]
    private var consent = ConsentSupport(available: false, note: "not checked")
    /// Counts per unit of work (a round trip, a chunk), by what was counted.
    private var counts: [(title: String, byMode: [Mode: UnitCounts])] = []

    /// Audio rate of the recording-memory clients: s16le stereo 48 kHz.
    private let audioRate = 48000 * 2 * 2
    /// 20 ms of that.
    private let audioChunk = 48000 * 2 * 2 / 50

    init(options: Options) {
        self.options = options
        measurer = Measurer(options: options)
    }

    private func say(_ s: String) {
        FileHandle.standardError.write(Data("… \(s)\n".utf8))
    }

    private func locateEarmuff() throws -> String {
        if let b = options.earmuffBinary { return b }
        if let b = ProcessInfo.processInfo.environment["EARMUFF_BINARY"], !b.isEmpty { return b }
        let sibling = URL(fileURLWithPath: Relay.ownExecutable()).deletingLastPathComponent()
            .appendingPathComponent("earmuff").path
        guard unsafe access(sibling, X_OK) == 0 else {
            throw BenchError("earmuff binary not found next to the bench (\(sibling)); build it or pass --earmuff")
        }
        return sibling
    }

    func run() throws {
        let started = Clock.seconds()
        let nofile = earmuff_raise_nofile()
        let needed = 2 * max(options.idleClients, options.recordingClients) + 256
        if nofile < needed {
            notes.append("RLIMIT_NOFILE is \(nofile); \(needed) would be needed for the client counts")
        }
        let binary = try locateEarmuff()
        consent = ConsentSupport.detect(binary: binary)
        let work = try TempDir.make(prefix: "ebench")
        defer { TempDir.remove(work) }
        let flood = try FloodServer(socketPath: "\(work)/flood", payloadBytes: options.payloadBytes)
        defer { flood.stop() }
        consent = consent.probed(upstream: flood.socketPath, binary: binary, workDir: work)
        say("work dir \(work), earmuff \(binary), consent: \(consent.available ? "available" : consent.note)")
        let quiesce = {
            _ = Wait.untilBlocking(timeout: 5, interval: 0.005) { flood.connectionCount == 0 }
        }

        let synthetic = options.parts.contains(.latency) || options.parts.contains(.throughput)
        if synthetic {
            let relays = try makeRelays(upstream: flood.socketPath, binary: binary, work: work)
            defer { relays.forEach { $0.stop() } }
            if options.parts.contains(.latency) {
                say("round trips: \(options.requests) GET_SERVER_INFO per mode")
                latency = try measurer.latency(relays, requests: options.requests, server: "synthetic")
                quiesce()
            }
            if options.parts.contains(.throughput) {
                for n in options.streamCounts {
                    say("record throughput: \(n) stream(s), \(options.duration) s per mode")
                    throughput[n] = try measurer.throughput(relays, streams: n, request: .synthetic, quiesce: quiesce)
                }
            }
        }

        if options.parts.contains(.real) {
            do {
                try realPulseAudio(binary: binary, work: work)
            } catch {
                notes.append("real PulseAudio part failed: \(error)")
            }
        }

        if options.parts.contains(.memory) {
            say("memory: \(options.idleClients) idle clients")
            let e1 = try Relay.earmuff(flood.socketPath, binary: binary, consent: consent, workDir: work)
            do {
                defer { e1.stop() }
                idle = try measurer.idleMemory(e1, count: options.idleClients)
            }
            quiesce()
            say("memory: \(options.recordingClients) recording clients at \(audioRate) B/s each")
            let paced = try FloodServer(
                socketPath: "\(work)/paced",
                pacing: .paced(bytesPerSecond: audioRate, chunkBytes: audioChunk))
            defer { paced.stop() }
            var req = StreamRequest.synthetic
            req.fragSize = UInt32(audioChunk)
            do {
                let e2 = try Relay.earmuff(paced.socketPath, binary: binary, consent: consent, workDir: work)
                defer { e2.stop() }
                recording = try measurer.recordingMemory(
                    e2, count: options.recordingClients,
                    bytesPerSecond: audioRate, request: req)
            }
            if options.modes.contains(.relay) {
                say("memory: the same \(options.recordingClients) recording clients through the calibration relay")
                let calibration = try Relay.calibration(paced.socketPath, workDir: work)
                defer { calibration.stop() }
                let (w, cpu) = try measurer.window(
                    calibration, streams: options.recordingClients, request: req,
                    duration: max(options.duration, 2), warmup: 0.5)
                var r = ThroughputResult()
                r.add(w, cpu: cpu)
                recordingCalibration = r
            }
        }

        if options.parts.contains(.silence) {
            if consent.available {
                let n = options.recordingClients
                say("silencing: \(n) recorders on a private PulseAudio through earmuff, granted (relayed) then denied (held)")
                // The sink's monitor, with a sine played into it: a source that delivers in real
                // time, fragment by fragment, as a device does (the sine source hands out 2 s blocks).
                let pa = try PulseServer(extraConfig: ["load-module module-sine sink=\(PulseServer.sinkName) frequency=440"])
                defer { pa.stop() }
                let e = try Relay.earmuff(pa.socketPath, binary: binary, consent: consent, workDir: work, grantSelf: false)
                defer { e.stop() }
                var monitor = Self.realRequest
                monitor.source = "\(PulseServer.sinkName).monitor"
                silence = try measurer.silence(e, server: pa, streams: n, request: monitor)
            } else {
                notes.append("silencing \(consent.note)")
            }
        }

        if options.parts.contains(.counts) {
            do {
                try countWork(flood: flood, binary: binary, work: work)
            } catch {
                notes.append("counts part failed: \(error)")
            }
        }

        if options.parts.contains(.glitch) {
            do {
                try glitchWindows(binary: binary, work: work)
            } catch {
                notes.append("glitch part failed: \(error)")
            }
        }

        report(elapsed: Clock.seconds() - started, binary: binary)
    }

    /// Two windows under stress-ng against a private PulseAudio: the measured
    /// pair alone, then with `--glitch-tabs` playback streams beside it.
    private func glitchWindows(binary: String, work: String) throws {
        let pa = try PulseServer()
        defer { pa.stop() }
        let e = try Relay.earmuff(pa.socketPath, binary: binary, consent: consent, workDir: work, grantSelf: false)
        defer { e.stop() }
        if consent.available, let pacat = findExecutable("pacat") {
            let exe =
                (try? FileManager.default.destinationOfSymbolicLink(atPath: pacat)).map {
                    $0.hasPrefix("/") ? $0 : URL(fileURLWithPath: pacat).deletingLastPathComponent().appendingPathComponent($0).path
                } ?? pacat
            try e.decide("grant", app: "exe:\(exe)", kind: "system-audio")
        }
        // The calibration relay carries a pair of its own in the same window: what any relay costs
        // a person under this load, beside what earmuff does.
        let calibration = options.modes.contains(.relay) ? try Relay.calibration(pa.socketPath, workDir: work) : nil
        defer { calibration?.stop() }
        for tabs in [0, options.glitchTabs] {
            say(
                "glitches under stress-ng: \(options.glitchSeconds) s, pacat + parecord"
                    + (tabs > 0 ? " + \(tabs) playback streams" : "") + ", direct, through the calibration relay and through earmuff at once")
            glitches.append(
                try Glitches.window(
                    server: pa, earmuff: e, calibration: calibration, extraPlayback: tabs,
                    seconds: options.glitchSeconds, workDir: work))
        }
    }

    /// The counts of the calibration relay and earmuff: per round trip against the
    /// synthetic server, per chunk with the recorders at audio rate against a paced
    /// synthetic server and against a real PulseAudio (4 streams per connection).
    private func countWork(flood: FloodServer, binary: String, work: String) throws {
        if let why = Counts.unavailable() {
            notes.append("counts: \(why)")
            return
        }
        let modes = options.modes.filter { $0 == .relay || $0 == .earmuff }
        let n = options.recordingClients
        do {
            let relays = try makeRelays(upstream: flood.socketPath, binary: binary, work: work, modes: modes)
            defer { relays.forEach { $0.stop() } }
            say("counts: \(options.requests) round trips per relay")
            counts.append(
                (
                    "per round trip (GET_SERVER_INFO, synthetic server, \(options.requests) per relay)",
                    try measurer.roundTripCounts(relays, requests: options.requests, workDir: work)
                ))
        }
        let paced = try FloodServer(
            socketPath: "\(work)/paced-counts",
            pacing: .paced(bytesPerSecond: audioRate, chunkBytes: audioChunk))
        defer { paced.stop() }
        do {
            let relays = try makeRelays(upstream: paced.socketPath, binary: binary, work: work, modes: modes)
            defer { relays.forEach { $0.stop() } }
            var req = StreamRequest.synthetic
            req.fragSize = UInt32(audioChunk)
            say("counts: \(n) recorders at audio rate, synthetic server")
            counts.append(
                (
                    "per chunk (\(n) recorders, \(audioChunk)-byte memblocks every 20 ms, paced synthetic server)",
                    try measurer.chunkCounts(
                        relays, streams: n, request: req, duration: options.duration,
                        workDir: work)
                ))
        }
        let pa = try PulseServer()
        defer { pa.stop() }
        let relays = try makeRelays(upstream: pa.socketPath, binary: binary, work: work, modes: modes)
        defer { relays.forEach { $0.stop() } }
        say("counts: \(n) recorders, real PulseAudio")
        counts.append(
            (
                "per chunk (\(n) recorders of the sine source, 4 per connection, real PulseAudio)",
                try measurer.chunkCounts(
                    relays, streams: n, perConnection: 4, request: Self.realRequest,
                    duration: max(options.duration, 4), workDir: work)
            ))
    }

    /// What the recorders on the real server ask for: 20 ms fragments of the sine source's format.
    private static let realRequest = StreamRequest(
        spec: SampleSpec(format: .float32le, channels: 1, rate: UInt32(PulseServer.toneRate)),
        map: .mono, fragSize: UInt32(PulseServer.toneRate * 4 / 50), source: nil)

    private func makeRelays(upstream: String, binary: String, work: String, modes: [Mode]? = nil) throws -> [Relay] {
        try (modes ?? options.modes).map { mode in
            switch mode {
            case .direct: return Relay.direct(upstream)
            case .socat: return try Relay.socat(upstream, workDir: work)
            case .relay: return try Relay.calibration(upstream, workDir: work)
            case .earmuff: return try Relay.earmuff(upstream, binary: binary, consent: consent, workDir: work)
            }
        }
    }

    private func realPulseAudio(binary: String, work: String) throws {
        var pa: PulseServer?
        if options.pulseServer == nil {
            say("real PulseAudio: starting a private server")
            pa = try PulseServer()
        }
        defer { pa?.stop() }
        // One of the two is set: an explicit server, or the private one.
        let socket = options.pulseServer ?? pa!.socketPath
        let relays = try makeRelays(upstream: socket, binary: binary, work: work)
        defer { relays.forEach { $0.stop() } }
        say("real PulseAudio: round trips")
        realLatency = try measurer.latency(relays, requests: options.requests, server: "real")
        say("real PulseAudio: \(options.paStreams) streams at audio rate")
        let req = Self.realRequest
        // PulseAudio's sine source has a fixed 2 s latency: it hands out audio in
        // 2 s blocks, so each window spans two blocks to average them out.
        realThroughput = try measurer.throughput(
            relays, streams: options.paStreams, request: req,
            duration: 4, rounds: 1, quiesce: { usleep(100_000) })

        // The recorders at audio rate against the real server, through each way in
        // in turn: the relay's CPU beside the server's own for the same streams, in
        // the same window (direct gives what the server spends with no relay at all).
        if let pa {
            let n = options.recordingClients
            for relay in relays {
                say("real PulseAudio: \(n) recorders, 4 per connection, \(relay.mode)")
                let (w, cpu) = try measurer.window(
                    relay, streams: n, perConnection: 4, request: req, duration: 4,
                    warmup: 0.5, also: { Proc.cpuSeconds(pa.process.pid) })
                var r = ThroughputResult()
                r.add(w, cpu: cpu)
                realRecorders[relay.mode] = (r, measurer.otherCPU.map { $0 / w.seconds * 100 })
                usleep(100_000)
            }
        }
    }

    // MARK: - Report

    private func fmt(_ v: Double?, _ digits: Int = 1) -> String {
        guard let v, v.isFinite else { return "n/a" }
        return String(format: "%.\(digits)f", v)
    }

    /// An added time, with its sign (`+3.1`, `-5.9`).
    private func signed(_ v: Double) -> String {
        v.isFinite ? String(format: "%+.1f", v) : "n/a"
    }

    private func row(_ label: String, _ cells: [String]) -> String {
        var s = label.padding(toLength: 34, withPad: " ", startingAt: 0)
        for c in cells { s += String(repeating: " ", count: max(1, 11 - c.count)) + c }
        return s
    }

    private func ratio(_ a: Double?, _ b: Double?) -> String {
        guard let a, let b, b > 0 else { return "n/a" }
        return String(format: "%.2fx", a / b)
    }

    /// What each relay adds to the direct round trip, at p50 and p99, with
    /// earmuff's added time as a multiple of socat's and the calibration relay's.
    private func addedRows(_ l: [Mode: LatencyResult]) -> [String] {
        [("  added p50 µs (vs direct)", \LatencyResult.p50), ("  added p99 µs (vs direct)", \LatencyResult.p99)]
            .map { name, key in
                let added = { (m: Mode) -> Double? in
                    guard let x = l[m]?[keyPath: key], let d = l[.direct]?[keyPath: key] else { return nil }
                    return x - d
                }
                return row(
                    name,
                    [""] + [Mode.socat, .relay, .earmuff].map { fmt(added($0)) }
                        + ["", ratio(added(.earmuff), added(.socat)), ratio(added(.earmuff), added(.relay))])
            }
    }

    /// The figure of each mode, then earmuff's ratio to direct, socat and the calibration relay.
    private func cells(digits: Int = 1, _ value: (Mode) -> Double?) -> [String] {
        let e = value(.earmuff)
        return [Mode.direct, .socat, .relay, .earmuff].map { fmt(value($0), digits) }
            + [Mode.direct, .socat, .relay].map { ratio(e, value($0)) }
    }

    private func report(elapsed: Double, binary: String) {
        var out: [String] = []
        let header = row("", ["direct", "socat", "relay", "earmuff", "e/direct", "e/socat", "e/relay"])
        out.append("")
        out.append(
            "earmuff-bench — \(ProcessInfo.processInfo.activeProcessorCount) CPUs, "
                + "earmuff \(binary), \(String(format: "%.0f", elapsed)) s")
        out.append("(relay: the bench's calibration relay, epoll with no parsing; e/relay is the frame budget)")
        out.append(header)

        if !latency.isEmpty {
            out.append("Round trip GET_SERVER_INFO, synthetic server (\(latency.values.first?.count ?? 0) per mode)")
            for (name, key) in [
                ("  p50 µs", \LatencyResult.p50), ("  p99 µs", \LatencyResult.p99),
                ("  mean µs", \LatencyResult.mean),
            ] {
                out.append(row(name, cells { self.latency[$0]?[keyPath: key] }))
            }
            out.append(contentsOf: addedRows(latency))
        }
        for n in options.streamCounts.sorted() {
            guard let t = throughput[n] else { continue }
            out.append(
                "Record throughput, flood server, \(n) stream\(n == 1 ? "" : "s") "
                    + "(\(options.payloadBytes)-byte memblocks)")
            out.append(row("  MB/s", cells { t[$0]?.megabytesPerSecond }))
            out.append(row("  relay CPU s/GB", cells(digits: 2) { $0 == .direct ? nil : t[$0]?.cpuPerGB }))
            out.append(
                row(
                    "  relay CPU % of a core",
                    Array(
                        cells(digits: 0) {
                            $0 == .direct ? nil : t[$0]?.cpuPercent
                        }.prefix(4))))
        }
        if !realLatency.isEmpty || !realThroughput.isEmpty {
            out.append(
                "Real PulseAudio (\(options.paStreams) streams float32le mono 48 kHz from the sine source, "
                    + "\(options.paStreams * 192) kB/s expected)")
            for (name, key) in [("  round trip p50 µs", \LatencyResult.p50), ("  round trip p99 µs", \LatencyResult.p99)] {
                out.append(row(name, cells { self.realLatency[$0]?[keyPath: key] }))
            }
            out.append(contentsOf: addedRows(realLatency))
            out.append(row("  kB/s received", cells(digits: 0) { self.realThroughput[$0].map { $0.megabytesPerSecond * 1000 } }))
            out.append(
                row(
                    "  relay CPU % of a core",
                    Array(
                        cells(digits: 2) {
                            $0 == .direct ? nil : self.realThroughput[$0]?.cpuPercent
                        }.prefix(4))))
            out.append(row("  relay CPU s/GB", cells(digits: 2) { $0 == .direct ? nil : self.realThroughput[$0]?.cpuPerGB }))
        }
        if !realRecorders.isEmpty {
            let rr = realRecorders
            out.append(
                "Real PulseAudio, \(options.recordingClients) recorders of the sine source (4 per connection), "
                    + "one window per mode")
            out.append(row("  kB/s received", cells(digits: 0) { rr[$0].map { $0.result.megabytesPerSecond * 1000 } }))
            out.append(row("  relay CPU % of a core", cells(digits: 2) { rr[$0]?.result.cpuPercent }))
            out.append(row("  server CPU % of a core", cells(digits: 2) { rr[$0]?.serverPercent }))
            out.append(
                row(
                    "  relay CPU / server's",
                    Array(
                        cells(digits: 2) { m in
                            rr[m].flatMap { r in r.result.cpuPercent.flatMap { c in r.serverPercent.map { c / $0 } } }
                        }.prefix(4))))
        }
        for (title, byMode) in counts {
            out.append("Counts \(title)")
            out.append(row("", ["relay", "earmuff", "e/relay"]))
            let events =
                [("  system calls", "raw_syscalls:sys_enter")]
                + Counts.syscalls.map { ("    \($0)", "syscalls:sys_enter_\($0)") }
                + [("  wake-ups given (sched_wakeup)", "sched:sched_wakeup")]
            let figures: [(String, (UnitCounts) -> Double?)] =
                events.map { name, event in (name, { $0.events[event] }) }
                + [
                    ("  context switches, voluntary", { $0.voluntarySwitches }),
                    ("  context switches, involuntary", { $0.involuntarySwitches }),
                    ("  CPU µs", { $0.cpuMicroseconds }),
                ]
            for (name, value) in figures {
                let r = byMode[.relay].flatMap(value), e = byMode[.earmuff].flatMap(value)
                out.append(row(name, [fmt(r, 2), fmt(e, 2), ratio(e, r)]))
            }
            out.append(row("  units counted", [Mode.relay, .earmuff].map { byMode[$0].map { String($0.units) } ?? "n/a" }))
        }
        if let idle {
            out.append("Memory of earmuff (VmRSS)")
            out.append(
                "  \(idle.clients) idle clients: \(idle.baselineKiB) KiB → \(idle.loadedKiB) KiB, "
                    + "\(fmt(idle.perClientKiB)) KiB per client\(idle.threads.map { ", \($0) threads" } ?? "")")
            out.append(
                "  context switches of earmuff while they sat idle for \(fmt(idle.idleSeconds, 0)) s: "
                    + (idle.idleContextSwitches.map(String.init) ?? "n/a"))
        }
        if let r = recording {
            if idle == nil { out.append("Memory of earmuff (VmRSS)") }
            out.append(
                "  \(r.clients) recording clients (flood server paced at \(audioRate) B/s each): "
                    + "\(r.baselineKiB) KiB → peak \(r.peakKiB) KiB, \(fmt(r.perClientKiB)) KiB per client")
            out.append(
                "    received \(fmt(r.result.megabytesPerSecond, 2)) MB/s of "
                    + "\(fmt(r.expectedBytesPerSecond / 1e6, 2)) MB/s sent, earmuff CPU "
                    + "\(fmt(r.result.cpuPercent, 1)) % of a core, \(fmt(r.result.cpuPerGB, 2)) s/GB")
            if let c = recordingCalibration {
                out.append(
                    "    the calibration relay, same clients and server: received \(fmt(c.megabytesPerSecond, 2)) MB/s, "
                        + "CPU \(fmt(c.cpuPercent, 1)) % of a core, \(fmt(c.cpuPerGB, 2)) s/GB")
            }
        }
        if let s = silence {
            out.append(
                "Silencing: \(options.recordingClients) recorders of a private PulseAudio's sink monitor (a sine played "
                    + "into it) through earmuff (4 per connection), one window each")
            out.append(row("", ["relayed", "held"]))
            out.append(
                row(
                    "  kB/s received",
                    [
                        fmt(s.relayed.result.megabytesPerSecond * 1000, 0),
                        fmt(s.held.result.megabytesPerSecond * 1000, 0),
                    ]))
            out.append(
                row(
                    "  frames silent",
                    [
                        "\(s.relayed.result.silentFrames)/\(s.relayed.result.frames)",
                        "\(s.held.result.silentFrames)/\(s.held.result.frames)",
                    ]))
            out.append(row("  earmuff CPU % of a core", [fmt(s.relayed.result.cpuPercent, 2), fmt(s.held.result.cpuPercent, 2)]))
            out.append(row("  server CPU % of a core", [fmt(s.relayed.serverPercent, 2), fmt(s.held.serverPercent, 2)]))
            out.append(row("  together", [fmt(s.relayed.totalPercent, 2), fmt(s.held.totalPercent, 2)]))
            out.append(row("  held / relayed", ["", ratio(s.held.totalPercent, s.relayed.totalPercent)]))
        }
        for g in glitches {
            out.append(
                "Under load: stress-ng --cpu \(g.cpuHogs), \(fmt(g.seconds, 0)) s, real PulseAudio, "
                    + "pacat + parecord --latency-msec=10" + (g.extraPlayback > 0 ? " + \(g.extraPlayback) playback streams" : ""))
            let d = g.counts[.direct], r = g.counts[.relay], e = g.counts[.earmuff]
            func pair(_ name: String, _ v: (GlitchCounts) -> Double?, digits: Int = 0) {
                out.append(row(name, [fmt(d.flatMap(v), digits), "", fmt(r.flatMap(v), digits), fmt(e.flatMap(v), digits), ""]))
            }
            pair("  playback underruns", { Double($0.playbackUnderruns) })
            pair("  record overruns", { Double($0.recordOverruns) })
            pair("  server-logged under/overruns", { Double($0.serverLogged) })
            pair("  playback latency p50 ms", { percentile($0.playbackLatency, 0.5).map { $0 / 1000 } }, digits: 2)
            pair("  playback latency p99 ms", { percentile($0.playbackLatency, 0.99).map { $0 / 1000 } }, digits: 2)
            pair("  record latency p99 ms", { percentile($0.recordLatency, 0.99).map { $0 / 1000 } }, digits: 2)
            for (mode, c) in g.counts where !c.died.isEmpty {
                notes.append("\(mode): streams ended early under load: \(c.died.joined(separator: ", "))")
            }
        }

        out.append("")
        out.append("Targets")
        var pass = 0, fail = 0
        func target(_ name: String, _ ok: Bool?, _ detail: String) {
            let verdict: String
            switch ok {
            case .some(true): verdict = "PASS"; pass += 1
            case .some(false): verdict = "FAIL"; fail += 1
            case .none: verdict = "----"
            }
            out.append("  \(verdict)  \(name.count < 46 ? name.padding(toLength: 46, withPad: " ", startingAt: 0) : name) \(detail)")
        }
        /// A target on earmuff's figure `e`: `meets(e, limit)` (by default, at most `limit`). Where the
        /// calibration relay, doing the same work in the same run, misses its own `calibrationLimit`
        /// with its figure `c`, no relay reaches the target on this machine: the target becomes the
        /// calibration relay's figure, and both are printed.
        ///
        /// Figures measured in rounds give `spread`: the calibration relay then shows the target
        /// reachable only by meeting it beyond the spread of its rounds, and earmuff, held to
        /// it (when it misses the target itself), meets it within the spread of theirs.
        func relayTarget(
            _ name: String, earmuff e: Double?, limit: Double?, calibration c: Double?,
            calibrationLimit: Double?, meets: (Double, Double) -> Bool = { $0 <= $1 },
            spread: SpreadVerdict? = nil, _ detail: String
        ) {
            guard let e, let limit else { return target(name, nil, detail) }
            if let c, let cl = calibrationLimit, !meets(e, limit), !(spread?.calibrationReaches ?? meets(c, cl)) {
                target(
                    name, spread?.earmuffMeetsCalibration ?? meets(e, c),
                    "unreachable, so held to the calibration relay's: \(detail) (the calibration relay's \(fmt(c, 2)) "
                        + (meets(c, cl) ? "meets \(fmt(cl, 2)) only within the spread of its rounds)" : "misses \(fmt(cl, 2)))"))
            } else {
                target(name, meets(e, limit), detail)
            }
        }
        /// Count `a` is at most count `b` but for counting noise: rare events (underruns) in windows of
        /// the same length vary by about the square root of their count, so a difference within two
        /// standard deviations of it, 2·√(a + b), says nothing.
        func atMostCount(_ a: Double, _ b: Double) -> Bool { a - b <= 2 * (a + b).squareRoot() }
        for (server, l) in [("synthetic", latency), ("real", realLatency)] {
            guard let d = l[.direct], let s = l[.socat], let e = l[.earmuff] else { continue }
            let r = l[.relay].map { ", relay \(signed($0.p50 - d.p50)) µs" } ?? ""
            let r99 = l[.relay].map { ", relay \(signed($0.p99 - d.p99)) µs" } ?? ""
            let c = l[.relay]
            /// Per round: the calibration relay against the limit (direct's figure plus half of
            /// what socat adds to it), earmuff against the calibration relay.
            func spread(_ figure: (LatencyResult) -> [Double]) -> SpreadVerdict? {
                c.flatMap { c in
                    SpreadVerdict(
                        earmuff: figure(e), calibration: figure(c),
                        limit: zip(figure(d), figure(s)).map { $0 + 0.5 * ($1 - $0) }, higherIsBetter: false,
                        unit: "µs", digits: 1)
                }
            }
            let s50 = spread { $0.roundP50 }, s99 = spread { $0.roundP99 }
            relayTarget(
                "added p50 round trip ≤ 0.5x socat's, \(server)", earmuff: e.p50 - d.p50, limit: 0.5 * (s.p50 - d.p50),
                calibration: c.map { $0.p50 - d.p50 }, calibrationLimit: 0.5 * (s.p50 - d.p50),
                spread: s50,
                "earmuff \(signed(e.p50 - d.p50)) µs, socat \(signed(s.p50 - d.p50)) µs\(r)" + (s50?.text ?? ""))
            relayTarget(
                "added p99 round trip ≤ 0.5x socat's, \(server)", earmuff: e.p99 - d.p99, limit: 0.5 * (s.p99 - d.p99),
                calibration: c.map { $0.p99 - d.p99 }, calibrationLimit: 0.5 * (s.p99 - d.p99),
                spread: s99,
                "earmuff \(signed(e.p99 - d.p99)) µs, socat \(signed(s.p99 - d.p99)) µs\(r99)" + (s99?.text ?? ""))
        }
        for n in options.streamCounts.sorted() {
            guard let t = throughput[n], let e = t[.earmuff]?.megabytesPerSecond else { continue }
            // Per round: the calibration relay against a limit (`factor` times `mode`'s figure),
            // earmuff against the calibration relay.
            func spread(_ factor: Double, of mode: Mode) -> SpreadVerdict? {
                guard let relay = t[.relay], let earmuff = t[.earmuff], let other = t[mode] else { return nil }
                return SpreadVerdict(
                    earmuff: earmuff.rounds, calibration: relay.rounds, limit: other.rounds.map { factor * $0 },
                    higherIsBetter: true, unit: "MB/s")
            }
            if let d = t[.direct]?.megabytesPerSecond {
                let c = t[.relay]?.megabytesPerSecond, verdict = spread(0.6, of: .direct)
                relayTarget(
                    "throughput ≥ 0.6x direct, \(n) stream(s)", earmuff: e, limit: 0.6 * d, calibration: c,
                    calibrationLimit: 0.6 * d, meets: >=, spread: verdict,
                    ratio(e, d) + (c.map { ", calibration relay \(ratio($0, d))" } ?? "") + (verdict?.text ?? ""))
            }
            if let s = t[.socat]?.megabytesPerSecond {
                let c = t[.relay]?.megabytesPerSecond, verdict = spread(1.5, of: .socat)
                relayTarget(
                    "throughput ≥ 1.5x socat's, \(n) stream(s)", earmuff: e, limit: 1.5 * s, calibration: c,
                    calibrationLimit: 1.5 * s, meets: >=, spread: verdict,
                    ratio(e, s) + (c.map { ", calibration relay \(ratio($0, s))" } ?? "") + (verdict?.text ?? ""))
            }
            if let ec = t[.earmuff]?.cpuPerGB, let sc = t[.socat]?.cpuPerGB {
                let c = t[.relay]?.cpuPerGB
                relayTarget(
                    "relay CPU per GB ≤ 0.5x socat's, \(n) stream(s)", earmuff: ec, limit: 0.5 * sc, calibration: c,
                    calibrationLimit: 0.5 * sc,
                    ratio(ec, sc) + (c.map { ", calibration relay \(ratio($0, sc))" } ?? ""))
            }
        }
        if let rr = realRecorders[.earmuff] {
            let e = rr.result.cpuPercent, p = rr.serverPercent
            let budget =
                realRecorders[.relay].map { r in
                    ", calibration relay \(fmt(r.result.cpuPercent, 2)) % beside \(fmt(r.serverPercent, 2)) % "
                        + "(\(ratio(r.result.cpuPercent, r.serverPercent)))"
                } ?? ""
            let calibration = realRecorders[.relay]
            relayTarget(
                "\(options.recordingClients) recorders: earmuff CPU ≤ 0.5x the server's", earmuff: e,
                limit: p.map { 0.5 * $0 }, calibration: calibration?.result.cpuPercent,
                calibrationLimit: calibration?.serverPercent.map { 0.5 * $0 },
                "earmuff \(fmt(e, 2)) %, PulseAudio \(fmt(p, 2)) % (\(ratio(e, p)))\(budget)")
        }
        if let r = recording {
            let c = recordingCalibration?.cpuPercent
            relayTarget(
                "\(r.clients) clients at audio rate ≤ 5 % of a core", earmuff: r.result.cpuPercent, limit: 5,
                calibration: c, calibrationLimit: 5,
                "\(fmt(r.result.cpuPercent, 1)) %" + (c.map { ", calibration relay \(fmt($0, 1)) %" } ?? ""))
        }
        let heldTarget = "\(options.recordingClients) recorders: held < relayed (earmuff+server)"
        if let s = silence {
            let verified =
                s.held.result.frames > 0 && s.held.result.silentFrames == s.held.result.frames
                && s.relayed.result.silentFrames < s.relayed.result.frames
            if verified {
                target(
                    heldTarget, s.held.totalPercent.flatMap { h in s.relayed.totalPercent.map { h < $0 } },
                    "held \(fmt(s.held.totalPercent, 2)) %, relayed \(fmt(s.relayed.totalPercent, 2)) % of a core "
                        + "(\(ratio(s.held.totalPercent, s.relayed.totalPercent)))")
            } else {
                target(heldTarget, false, "the held window heard something, or the relayed one only silence")
            }
        } else if options.parts.contains(.silence) {
            target(heldTarget, nil, consent.note)
        }
        if let idle {
            target("≤ 16 KiB RSS per idle client", idle.perClientKiB <= 16, "\(fmt(idle.perClientKiB)) KiB")
            target(
                "0 context switches while idle", idle.idleContextSwitches.map { $0 == 0 },
                "\(idle.idleContextSwitches.map(String.init) ?? "n/a") in \(fmt(idle.idleSeconds, 0)) s, "
                    + "\(idle.clients) clients")
        }
        for g in glitches {
            guard let d = g.counts[.direct], let e = g.counts[.earmuff] else { continue }
            let what = g.extraPlayback > 0 ? "pair + \(g.extraPlayback)" : "pair"
            // The calibration relay's figures count only if its streams lived the whole window.
            let c = g.counts[.relay].flatMap { $0.died.isEmpty ? $0 : nil }
            if !e.died.isEmpty {
                target("under load, \(what): glitches ≤ direct's", false, "earmuff's streams ended early")
            } else {
                relayTarget(
                    "under load, \(what): glitches ≤ direct's (±2σ)", earmuff: Double(e.glitches),
                    limit: Double(d.glitches), calibration: c.map { Double($0.glitches) },
                    calibrationLimit: Double(d.glitches), meets: atMostCount,
                    "earmuff \(e.glitches), direct \(d.glitches)" + (c.map { ", calibration relay \($0.glitches)" } ?? ""))
            }
            let dp = percentile(d.playbackLatency, 0.99)
            func added(_ counts: GlitchCounts?) -> Double? {
                counts.flatMap { percentile($0.playbackLatency, 0.99) }.flatMap { p in dp.map { (p - $0) / 1000 } }
            }
            relayTarget(
                "under load, \(what): added playback p99 ≤ 2 ms", earmuff: added(e), limit: 2, calibration: added(c),
                calibrationLimit: 2,
                "\(fmt(added(e), 2)) ms" + (added(c).map { ", calibration relay \(fmt($0, 2)) ms" } ?? ""))
        }
        out.append("  \(pass) passed, \(fail) failed")
        var seen = Set<String>()
        for n in notes + measurer.problems where seen.insert(n).inserted { out.append("note: \(n)") }
        print(out.joined(separator: "\n"))
    }
}
