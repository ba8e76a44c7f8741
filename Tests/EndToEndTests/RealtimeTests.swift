// Real-time audio loops: the relay's loops (and nothing else) ask the real
// RealtimeKit (rtkit-daemon, with the real polkitd, on a private system bus)
// for SCHED_RR; without it they set it directly where the daemon may, else a
// higher nice level; and `earmuff status` says what they got and why not better.
// The kernel is the judge: each thread's policy and nice level are read back
// from /proc.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct RealtimeTests {
        /// `daemon.audioThreads` of `earmuff status --json`.
        struct AudioThreads: Decodable {
            var scheduling: String
            var policy: String
            var priority: Int32?
            var nice: Int32?
            var via: String?
            var threads: Int
            var note: String?
        }

        struct Status: Decodable {
            struct Daemon: Decodable { var audioThreads: AudioThreads? }
            var daemon: Daemon
        }

        /// A thread of the daemon as the kernel schedules it.
        struct KernelThread {
            var name: String
            var policy: Int32
            var priority: Int32
            var nice: Int32
        }

        static func threads(of pid: pid_t) -> [KernelThread] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.compactMap { t in
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/stat", encoding: .utf8),
                    let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
                else { return nil }
                let name = String(stat[stat.index(after: open)..<close])
                // Fields after the name start at field 3: nice is field 19, rt_priority 40, policy 41.
                let f = stat[stat.index(after: close)...].split(separator: " ")
                guard f.count > 38, let nice = Int32(f[16]), let prio = Int32(f[37]), let policy = Int32(f[38]) else {
                    return nil
                }
                return KernelThread(name: name, policy: policy, priority: prio, nice: nice)
            }
        }

        static func audioThreads(_ e: EarmuffProcess) throws -> AudioThreads? {
            let r = try e.control("status", "--json")
            return try JSONDecoder().decode(Status.self, from: r.stdout).daemon.audioThreads
        }

        /// Starts earmuff with two loops in front of a private PulseAudio; `systemBus`
        /// is DBUS_SYSTEM_BUS_ADDRESS (a path that does not exist: no RealtimeKit).
        static func start(
            _ server: PulseServer, systemBus: String, config: String? = nil,
            runAs: UInt32? = nil
        ) throws -> EarmuffProcess {
            var args = ["--loops", "2"]
            if let config {
                let path = "\(server.directory)/realtime-\(UInt32.random(in: 0...UInt32.max)).conf"
                try config.write(toFile: path, atomically: true, encoding: .utf8)
                if runAs != nil { unsafe chmod(path, 0o644) }
                args += ["--config", path]
            }
            return try EarmuffProcess(
                upstream: server.serverString, extraArguments: args,
                environment: ["DBUS_SYSTEM_BUS_ADDRESS": systemBus], runAs: runAs)
        }

        /// Waits until status reports the audio threads (they are raised right after start).
        static func settled(_ e: EarmuffProcess) async throws -> AudioThreads? {
            var last: AudioThreads?
            _ = await Wait.until(timeout: 30) {
                last = try? audioThreads(e)
                return last?.threads == 2
            }
            return last
        }

        static let noBus = "unix:path=/nonexistent/system_bus_socket"

        /// Root with RealtimeKit: the two loops get SCHED_RR at priority 5 from RealtimeKit;
        /// the control, timer and other threads stay at normal scheduling.
        @Test(.enabled(if: getuid() == 0)) func realtimeKitMakesTheLoopsRealtime() async throws {
            let bus = try SessionBus(system: true)
            defer { bus.stop() }
            try bus.startRealtimeKit()
            let server = try PulseServer()
            defer { server.stop() }
            let e = try Self.start(server, systemBus: bus.address)
            defer { e.stop() }

            let got = try await Self.settled(e)
            #expect(got?.scheduling == "realtime" && got?.policy == "SCHED_RR" && got?.priority == 5, "\(String(describing: got))\n\(e.log())")
            #expect(got?.via == "RealtimeKit", "\(String(describing: got))\n\(e.log())")
            let threads = Self.threads(of: e.process.pid)
            let realtime = threads.filter { $0.policy == SCHED_RR }
            #expect(realtime.map(\.name).sorted() == ["loop-0", "loop-1"], "\(threads)")
            #expect(realtime.allSatisfy { $0.priority == 5 }, "\(threads)")
            #expect(threads.contains { $0.name == "control" && $0.policy == SCHED_OTHER }, "\(threads)")

            // Audio still flows through real-time loops.
            let rec = try Tool.startRecording(server: e.serverString, format: .s16le)
            defer { _ = rec.stop() }
            #expect(await Wait.until(timeout: 30) { rec.byteCount() > 48000 }, "no audio through real-time loops\n\(e.log())")
            let status = try e.control("status")
            #expect(status.stdoutText.contains("real-time (SCHED_RR priority 5, via RealtimeKit), 2 threads"), "\(status)")
        }

        /// Root without RealtimeKit sets SCHED_RR itself, and says RealtimeKit was not there.
        @Test(.enabled(if: getuid() == 0)) func withoutRealtimeKitRootSetsItDirectly() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let e = try Self.start(server, systemBus: Self.noBus)
            defer { e.stop() }
            let got = try await Self.settled(e)
            #expect(got?.scheduling == "realtime" && got?.via == "sched_setscheduler", "\(String(describing: got))\n\(e.log())")
            #expect(Self.threads(of: e.process.pid).filter { $0.policy == SCHED_RR }.count == 2)
            #expect(e.log().contains("RealtimeKit: "), "the log does not say why RealtimeKit was not used:\n\(e.log())")

            // SIGXCPU (what the kernel sends at RLIMIT_RTTIME's soft limit when a loop
            // spins) puts the loops back to normal scheduling; the daemon goes on.
            kill(e.process.pid, SIGXCPU)
            var after: AudioThreads?
            let back = await Wait.until(timeout: 30) {
                after = try? Self.audioThreads(e)
                return after?.scheduling == "normal"
            }
            #expect(back && after?.note?.contains("too long without sleeping") == true, "\(String(describing: after))")
            #expect(!Self.threads(of: e.process.pid).contains { $0.policy == SCHED_RR })
            let info = try Tool.run("pactl", args: ["info"], server: e.serverString, timeout: 20)
            #expect(info.succeeded, "the daemon stopped relaying after SIGXCPU: \(info)\n\(e.log())")
        }

        /// realtime-priority = 0 keeps the loops out of real-time; nice-level raises only them.
        @Test(.enabled(if: getuid() == 0)) func niceLevelWhenRealtimeIsOff() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let e = try Self.start(server, systemBus: Self.noBus, config: "realtime-priority = 0\nnice-level = -7\n")
            defer { e.stop() }
            let got = try await Self.settled(e)
            #expect(
                got?.scheduling == "high-priority" && got?.nice == -7 && got?.via == "setpriority",
                "\(String(describing: got))\n\(e.log())")
            let threads = Self.threads(of: e.process.pid)
            #expect(threads.filter { $0.nice == -7 }.map(\.name).sorted() == ["loop-0", "loop-1"], "\(threads)")
            #expect(!threads.contains { $0.policy == SCHED_RR }, "\(threads)")
        }

        /// Both off in the configuration: the loops stay as they are, nobody is asked, and
        /// neither the log nor status says that something refused.
        @Test func offInTheConfigurationAsksNobody() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let e = try Self.start(server, systemBus: Self.noBus, config: "realtime-priority = 0\nnice-level = 0\n")
            defer { e.stop() }
            let got = try await Self.settled(e)
            #expect(got?.scheduling == "normal" && got?.via == nil && got?.note == nil, "\(String(describing: got))")
            let said = await Wait.until(timeout: 30) { e.log().contains("audio threads: normal scheduling") }
            #expect(said, "\(e.log())")
            #expect(e.log().contains("normal scheduling (realtime-priority = 0 and nice-level = 0 in the configuration)"), "\(e.log())")
            #expect(!Self.threads(of: e.process.pid).contains { $0.policy == SCHED_RR || $0.nice < 0 })
        }

        /// An unprivileged daemon with no RealtimeKit runs normally and says what refused.
        @Test(.enabled(if: getuid() == 0 && findExecutable("setpriv") != nil)) func unprivilegedWithoutRealtimeKitSaysWhy() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            unsafe chmod(server.directory, 0o755)
            unsafe chmod(server.socketPath, 0o777)
            let e = try Self.start(server, systemBus: Self.noBus, runAs: 65534)
            defer { e.stop() }
            let got = try await Self.settled(e)
            #expect(got?.scheduling == "normal" && got?.via == nil, "\(String(describing: got))\n\(e.log())")
            let note = got?.note ?? ""
            #expect(
                note.contains("RealtimeKit") && note.contains("sched_setscheduler") && note.contains("setpriority"),
                "the note does not say what refused: \(note)")
            #expect(!Self.threads(of: e.process.pid).contains { $0.policy == SCHED_RR || $0.nice < 0 })
        }
    }
}
