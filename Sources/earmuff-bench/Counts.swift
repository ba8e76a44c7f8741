// The counts part: what a relay process does per round trip and per recorded
// chunk, counted rather than timed, so that other load on the machine does not
// change the figures. For the calibration relay and earmuff on the same work:
// system calls by kind (`perf stat` on the relay's pid, the kernel's syscall
// tracepoints), the wake-ups it gives other threads (sched:sched_wakeup, in the
// waker's context), its context switches (voluntary: it went to sleep and
// had to be woken; involuntary: it was preempted) and its CPU time, from /proc.
// An idle relay makes no system call, so attaching and detaching perf around
// the work adds nothing to the counts.

import Foundation
import Glibc
import LinuxSystem
import TestSupport

/// One relay's counts over a piece of work, divided by how many units it was.
struct UnitCounts {
    /// Units of work counted (round trips, or chunks received by the clients).
    var units = 0
    /// perf event name → count per unit.
    var events: [String: Double] = [:]
    var voluntarySwitches = 0.0
    var involuntarySwitches = 0.0
    /// CPU microseconds per unit.
    var cpuMicroseconds: Double?
}

enum Counts {
    /// The system calls counted, in the order printed (the relays make no others on these paths).
    static let syscalls = ["recvmsg", "sendmsg", "read", "write", "recvfrom", "sendto", "epoll_wait", "epoll_pwait2", "epoll_ctl", "futex", "sched_yield"]
    /// Every system call, and the wake-ups the relay's threads gave other threads.
    static let totals = ["raw_syscalls:sys_enter", "sched:sched_wakeup"]
    static var eventNames: [String] { totals + syscalls.map { "syscalls:sys_enter_\($0)" } }

    /// Why counting cannot run here, or nil when it can (perf with the syscall tracepoints).
    static func unavailable() -> String? {
        guard let perf = findExecutable("perf") else { return "perf not found (apt-get install linux-perf)" }
        let out = runCapture(perf, ["stat", "-x,", "-e", eventNames.joined(separator: ","), "--", "/bin/true"])
        if out.contains("<not supported>") || out.contains("event syntax error") || out.contains("Permission") {
            return "perf cannot count the syscall tracepoints here:\n    " + out.split(separator: "\n").prefix(3).joined(separator: "\n    ")
        }
        return nil
    }

    /// Voluntary and involuntary context switches of every thread of `pid` so far.
    private static func switches(_ pid: pid_t) -> (voluntary: Int, involuntary: Int) {
        var v = 0, i = 0
        for t in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/status", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                let value = Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
                if line.hasPrefix("voluntary_ctxt_switches:") { v += value }
                if line.hasPrefix("nonvoluntary_ctxt_switches:") { i += value }
            }
        }
        return (v, i)
    }

    /// A running `perf stat` on one process, counting between `init` and `finish`.
    final class Counter {
        private let perf: ChildProcess
        private let output: String
        private let pid: pid_t
        /// perf's control fifo (we write commands) and acknowledgement fifo (it answers "ack").
        private let control: Int32
        private let acknowledgement: Int32
        private let switches0: (voluntary: Int, involuntary: Int)
        private let cpu0: Double?

        /// Starts `perf stat` on `pid` with its counters off, then turns them on and
        /// returns once perf says they count.
        init(pid: pid_t, workDir: String) throws {
            guard let exe = findExecutable("perf") else { throw BenchError("perf not found") }
            self.pid = pid
            output = "\(workDir)/perf-\(pid)-\(UInt32.random(in: 0...UInt32.max)).csv"
            let ctl = "\(output).ctl", ack = "\(output).ack"
            guard unsafe mkfifo(ctl, 0o600) == 0, unsafe mkfifo(ack, 0o600) == 0 else {
                throw BenchError("mkfifo: \(Errno(rawValue: errno))")
            }
            // Read-write: the open never blocks, and perf finds a reader when it opens it.
            acknowledgement = unsafe open(ack, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            perf = try ChildProcess.spawn(
                executable: exe,
                arguments: [
                    "stat", "-x,", "-o", output, "--delay", "-1",
                    "--control", "fifo:\(ctl),\(ack)",
                    "-e", Counts.eventNames.joined(separator: ","), "-p", String(pid),
                ],
                environment: Tool.privateEnvironment(root: workDir), stdoutPath: "\(output).log",
                stderrPath: "\(output).log", maxLifetime: 600)
            // Opening for writing succeeds once perf has the fifo open for reading.
            var fd: Int32 = -1
            _ = Wait.untilBlocking(timeout: 20, interval: 0.005) { [perf] in
                fd = unsafe open(ctl, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                return fd >= 0 || !perf.isRunning
            }
            control = fd
            switches0 = Counts.switches(pid)
            cpu0 = Proc.cpuSeconds(pid)
            guard control >= 0, acknowledgement >= 0, perf.isRunning else {
                throw BenchError("perf stat did not start on pid \(pid): \(perf.stderrText())")
            }
            try command("enable")
        }

        deinit {
            close(control)
            close(acknowledgement)
            perf.terminate(signal: SIGKILL)
            for f in [output, "\(output).log", "\(output).ctl", "\(output).ack"] { unsafe unlink(f) }
        }

        /// Sends perf a control command and waits for its acknowledgement.
        private func command(_ name: String) throws {
            let line = Array("\(name)\n".utf8)
            guard unsafe line.withUnsafeBytes({ unsafe write(control, $0.baseAddress, $0.count) }) == line.count else {
                throw BenchError("perf control: \(Errno(rawValue: errno))")
            }
            var got: [UInt8] = []
            let acked = Wait.untilBlocking(timeout: 20, interval: 0.001) { [perf, acknowledgement] in
                var buf = [UInt8](repeating: 0, count: 16)
                let n = unsafe read(acknowledgement, &buf, buf.count)
                if n > 0 { got += buf[0..<n] }
                return got.contains(UInt8(ascii: "\n")) || !perf.isRunning
            }
            guard acked, String(decoding: got, as: UTF8.self).hasPrefix("ack") else {
                throw BenchError("perf did not acknowledge \(name): \(perf.stderrText())")
            }
        }

        /// Stops counting and divides everything by `units`.
        func finish(units: Int) throws -> UnitCounts {
            try command("disable")
            let switches1 = Counts.switches(pid)
            let cpu1 = Proc.cpuSeconds(pid)
            perf.send(SIGINT)
            guard perf.wait(timeout: 20) != nil else { throw BenchError("perf stat did not stop") }
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            var r = UnitCounts(units: units)
            let n = Double(max(units, 1))
            // -x, lines: value,unit,event,…
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let f = line.split(separator: ",", omittingEmptySubsequences: false)
                guard f.count > 2, let v = Double(f[0]) else { continue }
                r.events[String(f[2]), default: 0] += v / n
            }
            guard !r.events.isEmpty else { throw BenchError("perf stat counted nothing: \(perf.stderrText()) \(text)") }
            r.voluntarySwitches = Double(switches1.voluntary - switches0.voluntary) / n
            r.involuntarySwitches = Double(switches1.involuntary - switches0.involuntary) / n
            if let cpu0, let cpu1 { r.cpuMicroseconds = (cpu1 - cpu0) * 1e6 / n }
            return r
        }
    }
}

extension Measurer {
    /// `requests` round trips through each relay, counted.
    func roundTripCounts(_ relays: [Relay], requests: Int, workDir: String) throws -> [Mode: UnitCounts] {
        var out: [Mode: UnitCounts] = [:]
        for relay in relays {
            guard let pid = relay.pid else { continue }
            let tripper = RoundTripper(client: try connect(relay))
            for _ in 0..<200 { _ = try tripper.once() }
            let counter = try Counts.Counter(pid: pid, workDir: workDir)
            for _ in 0..<requests { _ = try tripper.once() }
            out[relay.mode] = try counter.finish(units: requests)
        }
        return out
    }

    /// `streams` record streams (`perConnection` to a connection) through each relay for
    /// `duration` seconds, counted per memblock the clients received.
    func chunkCounts(
        _ relays: [Relay], streams: Int, perConnection: Int = 1, request: StreamRequest,
        duration: Double, workDir: String
    ) throws -> [Mode: UnitCounts] {
        var out: [Mode: UnitCounts] = [:]
        for relay in relays {
            guard let pid = relay.pid else { continue }
            let clients = try recordingClients(relay, streams: streams, perConnection: perConnection, request: request)
            var counter: Counts.Counter?
            var failure: Error?
            var result: UnitCounts?
            _ = try StreamCounter.run(
                clients, warmup: 0.5, duration: duration,
                begin: {
                    do { counter = try Counts.Counter(pid: pid, workDir: workDir) } catch { failure = error }
                },
                end: { window in
                    do { result = try counter?.finish(units: window.frames) } catch { failure = error }
                })
            if let failure { throw failure }
            guard let result, result.units > 0 else { throw BenchError("no record data through the \(relay.mode) relay") }
            out[relay.mode] = result
        }
        return out
    }
}
