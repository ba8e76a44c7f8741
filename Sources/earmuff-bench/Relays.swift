// The ways a client reaches the server in the benchmark: directly, via a
// forking socat relay, via the bench's own calibration relay (the least a
// relay can do, CalibrationRelay.swift), and via earmuff. Each gives the
// socket path clients use and a way to read the relay's CPU time (for socat:
// the listener plus every forked child, since each connection gets its own
// process).

import Foundation
import Glibc
import TestSupport

/// How clients reach the server.
enum Mode: String, CaseIterable {
    case direct, socat, relay, earmuff
}

/// Readings from /proc.
enum Proc {
    private static let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// The fields of /proc/<pid>/stat after the command name (field 3 onwards).
    private static func statFields(_ pid: pid_t) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// CPU time of a process (all its threads), in seconds: the sum of the
    /// threads' nanosecond run times from schedstat, else utime + stime
    /// (10 ms ticks, too coarse for audio-rate windows).
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        if let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty {
            var ns = 0.0
            var ok = true
            for t in tasks {
                guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/schedstat", encoding: .utf8),
                    let first = text.split(separator: " ").first, let v = Double(first)
                else {
                    ok = false
                    break
                }
                ns += v
            }
            if ok { return ns / 1e9 }
        }
        guard let f = statFields(pid), f.count > 12, let u = Double(f[11]), let s = Double(f[12]) else { return nil }
        return (u + s) / ticks
    }

    /// utime + stime of `pid` and all its living descendants, in seconds.
    static func treeCPUSeconds(_ pid: pid_t) -> Double {
        var parent: [pid_t: pid_t] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let p = pid_t(name), let f = statFields(p), f.count > 1, let pp = pid_t(f[1]) else { continue }
            parent[p] = pp
        }
        var total = cpuSeconds(pid) ?? 0
        for (p, _) in parent where p != pid {
            var q = p
            var depth = 0
            while let up = parent[q], up > 1, depth < 16 {
                if up == pid {
                    total += cpuSeconds(p) ?? 0
                    break
                }
                q = up
                depth += 1
            }
        }
        return total
    }

    /// A `Vm…:` line of /proc/<pid>/status, in KiB.
    static func statusKiB(_ pid: pid_t, _ key: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
            return Int(line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// Context switches (voluntary and not) so far, per thread of `pid`.
    static func contextSwitches(_ pid: pid_t) -> [String: Int]? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var perThread: [String: Int] = [:]
        for t in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/status", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:")
                || line.hasPrefix("nonvoluntary_ctxt_switches:")
            {
                perThread[t, default: 0] += Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        return perThread
    }

    /// Context switches between two readings of `contextSwitches` (threads that
    /// ended in between are not counted; threads that started count whole).
    static func contextSwitches(from before: [String: Int], to after: [String: Int]) -> Int {
        after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
    }

    /// Resident memory (VmRSS) in KiB.
    static func rssKiB(_ pid: pid_t) -> Int? { statusKiB(pid, "VmRSS") }

    /// Number of threads.
    static func threads(_ pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Threads:") {
            return Int(line.dropFirst(8).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}

/// What the bench knows about earmuff's consent support.
struct ConsentSupport {
    /// `serve` takes --control/--store and the CLI has grant/deny.
    let available: Bool
    /// Why not, when unavailable.
    let note: String

    static func detect(binary: String) -> ConsentSupport {
        let top = runCapture(binary, ["--help"])
        let serve = runCapture(binary, ["serve", "--help"])
        var missing: [String] = []
        if !top.contains("grant") { missing.append("`earmuff grant`") }
        if !top.contains("deny") { missing.append("`earmuff deny`") }
        if !serve.contains("--control") { missing.append("`serve --control`") }
        if !serve.contains("--store") { missing.append("`serve --store`") }
        if missing.isEmpty { return ConsentSupport(available: true, note: "") }
        return ConsentSupport(available: false, note: "pending: \(missing.joined(separator: ", ")) not in this build")
    }

    /// Starts one earmuff with consent options and checks that `grant` reaches
    /// it; returns `self`, or an unavailable support saying what is missing.
    func probed(upstream: String, binary: String, workDir: String) -> ConsentSupport {
        guard available else { return self }
        do {
            let e = try Relay.earmuff(upstream, binary: binary, consent: self, workDir: workDir, grantSelf: false)
            defer { e.stop() }
            try e.decide("grant")
            return self
        } catch {
            let text = "\(error)"
            let why =
                text.split(separator: "\n").last { $0.hasPrefix("stderr:") }
                .map { String($0.dropFirst(7)).trimmingCharacters(in: .whitespaces) } ?? text
            return ConsentSupport(
                available: false,
                note: "pending: the CLI has grant/deny, but `earmuff grant` could not reach "
                    + "`earmuff serve --control PATH` (\(why))")
        }
    }

    /// Whether `serve --help` mentions `--log-level`.
    static func serveTakesLogLevel(binary: String) -> Bool {
        runCapture(binary, ["serve", "--help"]).contains("--log-level")
    }
}

/// Runs a short command and returns stdout + stderr (empty on failure).
func runCapture(_ executable: String, _ args: [String], timeout: Double = 20) -> String {
    guard let dir = try? TempDir.make(prefix: "ebench-cmd") else { return "" }
    defer { TempDir.remove(dir) }
    var env = Tool.privateEnvironment(root: dir)
    env["HOME"] = dir
    guard
        let p = try? ChildProcess.spawn(
            executable: executable, arguments: args, environment: env,
            stdoutPath: "\(dir)/out", stderrPath: "\(dir)/out", maxLifetime: Int(timeout) + 10)
    else { return "" }
    if p.wait(timeout: timeout) == nil { p.terminate(signal: SIGKILL) }
    return String(decoding: p.stdoutData(), as: UTF8.self)
}

/// A running way in: the path clients connect to, and the relay process if any.
final class Relay {
    let mode: Mode
    /// Where clients connect.
    let path: String
    /// The relay's pid (nil for direct).
    let pid: pid_t?
    /// The relay's process, for socat and the calibration relay.
    private let child: ChildProcess?
    let earmuff: EarmuffProcess?
    /// The app key earmuff gives the benchmark's own binary.
    let appKey: String
    /// The explicit control socket, when consent is on.
    let controlPath: String?

    private init(
        mode: Mode, path: String, pid: pid_t?, child: ChildProcess?, earmuff: EarmuffProcess?,
        controlPath: String?
    ) {
        self.mode = mode
        self.path = path
        self.pid = pid
        self.child = child
        self.earmuff = earmuff
        self.controlPath = controlPath
        self.appKey = "exe:" + Relay.ownExecutable()
    }

    static func ownExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// A direct connection to `upstream`.
    static func direct(_ upstream: String) -> Relay {
        Relay(mode: .direct, path: upstream, pid: nil, child: nil, earmuff: nil, controlPath: nil)
    }

    /// `socat UNIX-LISTEN:<dir>/socat,fork UNIX-CONNECT:<upstream>`.
    static func socat(_ upstream: String, workDir: String) throws -> Relay {
        guard let exe = findExecutable("socat") else { throw BenchError("socat not found; apt-get install socat") }
        let path = "\(workDir)/socat-\(UInt32.random(in: 0...UInt32.max))"
        let p = try ChildProcess.spawn(
            executable: exe, arguments: ["UNIX-LISTEN:\(path),fork", "UNIX-CONNECT:\(upstream)"],
            environment: Tool.privateEnvironment(root: workDir),
            stdoutPath: "\(path).log", stderrPath: "\(path).log", maxLifetime: 1200)
        let ok = Wait.untilBlocking(timeout: 10, interval: 0.01) {
            FileManager.default.fileExists(atPath: path) || !p.isRunning
        }
        guard ok, p.isRunning else { throw BenchError("socat did not start listening at \(path)") }
        return Relay(mode: .socat, path: path, pid: p.pid, child: p, earmuff: nil, controlPath: nil)
    }

    /// The calibration relay (this binary with `--calibration-relay`).
    static func calibration(_ upstream: String, workDir: String) throws -> Relay {
        let path = "\(workDir)/relay-\(UInt32.random(in: 0...UInt32.max))"
        let p = try ChildProcess.spawn(
            executable: ownExecutable(), arguments: [CalibrationRelay.argument, path, upstream],
            environment: Tool.privateEnvironment(root: workDir),
            stdoutPath: "\(path).log", stderrPath: "\(path).log", maxLifetime: 1200)
        let ok = Wait.untilBlocking(timeout: 10, interval: 0.01) {
            FileManager.default.fileExists(atPath: path) || !p.isRunning
        }
        guard ok, p.isRunning else {
            throw BenchError("the calibration relay did not start listening at \(path): \(p.stderrText())")
        }
        return Relay(mode: .relay, path: path, pid: p.pid, child: p, earmuff: nil, controlPath: nil)
    }

    /// `earmuff serve` in front of `upstream`; with consent, the benchmark's own
    /// binary is granted so streams carry real samples.
    static func earmuff(
        _ upstream: String, binary: String, consent: ConsentSupport, workDir: String,
        grantSelf: Bool = true
    ) throws -> Relay {
        unsafe setenv("EARMUFF_BINARY", binary, 1)
        var args: [String] = []
        if ConsentSupport.serveTakesLogLevelCached(binary: binary) {
            args += ["--log-level", ProcessInfo.processInfo.environment["EARMUFF_BENCH_LOG_LEVEL"] ?? "warn"]
        }
        // The memory part connects 1,000 clients of one app: lift the client limits.
        // EARMUFF_BENCH_CONFIG: more configuration lines, e.g. "realtime-priority = 0".
        let config = "\(workDir)/earmuff-bench.conf"
        var lines = "max-clients = 4096\nmax-clients-per-app = 4096\n"
        if let more = ProcessInfo.processInfo.environment["EARMUFF_BENCH_CONFIG"] { lines += more + "\n" }
        if FileManager.default.createFile(atPath: config, contents: Data(lines.utf8)) {
            args += ["--config", config]
        }
        // EARMUFF_BENCH_SERVE_ARGS: more `earmuff serve` arguments, e.g. "--coalesce-ms 0".
        args += (ProcessInfo.processInfo.environment["EARMUFF_BENCH_SERVE_ARGS"] ?? "")
            .split(separator: " ").map(String.init)
        var control: String?
        if consent.available {
            let tag = UInt32.random(in: 0...UInt32.max)
            control = "\(workDir)/control-\(tag)"
            args += ["--control", control!, "--store", "\(workDir)/store-\(tag).db"]
        }
        let e = try EarmuffProcess(upstream: "unix:\(upstream)", extraArguments: args, maxLifetime: 1200)
        let relay = Relay(
            mode: .earmuff, path: e.listenPath, pid: e.process.pid, child: nil, earmuff: e,
            controlPath: control)
        if consent.available && grantSelf { try relay.decide("grant") }
        return relay
    }

    /// Runs `earmuff grant|deny <app>` (default: this binary) against this instance.
    func decide(_ verb: String, app: String? = nil, kind: String? = nil) throws {
        guard let earmuff, let controlPath else { throw BenchError("consent is not available") }
        // The control socket may come up a moment after the client socket.
        _ = Wait.untilBlocking(timeout: 5, interval: 0.01) { FileManager.default.fileExists(atPath: controlPath) }
        let r = try earmuff.runCLI([verb, app ?? appKey, "--control", controlPath] + (kind.map { ["--kind", $0] } ?? []))
        guard r.succeeded else { throw BenchError("earmuff \(verb) failed: \(r)") }
    }

    /// CPU seconds used by the relay so far (nil for direct).
    func cpuSeconds() -> Double? {
        guard let pid else { return nil }
        switch mode {
        case .direct: return nil
        case .socat: return Proc.treeCPUSeconds(pid)
        case .relay, .earmuff: return Proc.cpuSeconds(pid)
        }
    }

    /// Stops the relay.
    func stop() {
        child?.terminate(signal: SIGTERM, grace: 2)
        if let child { TempDir.remove(child.stdoutPath) }
        earmuff?.stop()
        if mode == .socat || mode == .relay { unsafe unlink(path) }
    }
}

extension ConsentSupport {
    nonisolated(unsafe) private static var logLevelCache: [String: Bool] = [:]

    /// `serveTakesLogLevel`, asked once per binary (the bench is single-threaded here).
    static func serveTakesLogLevelCached(binary: String) -> Bool {
        if let v = unsafe logLevelCache[binary] { return v }
        let v = serveTakesLogLevel(binary: binary)
        unsafe logLevelCache[binary] = v
        return v
    }
}
