// A prompt storm: 100 distinct undetermined apps start recording at once.
// Each is a copy of parecord at its own path, so each is its own app (exe:
// key) and raises its own prompt. Nobody answers. What must hold: at most one
// desktop dialog on the bus at a time, at most one prompt-command process at a
// time, and every prompt times out within a second of its prompt-timeout.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite(.serialized) struct PromptStormTests {
        static let apps = 100
        static let timeout = 3.0

        /// `count` copies of parecord, each in its own directory under `root` (each its own app).
        static func recorders(in root: String, count: Int = apps) throws -> [String] {
            guard
                let pacat = unsafe findExecutable("parecord").flatMap({ unsafe realpath($0, nil) }).map({ p -> String in
                    defer { unsafe free(p) }
                    return unsafe String(cString: p)
                })
            else { throw TestSupportError("parecord not found; install pulseaudio-utils") }
            return try (0..<count).map { i in
                let dir = "\(root)/app\(i)"
                try TempDir.makeDirectory(dir)
                try FileManager.default.copyItem(atPath: pacat, toPath: "\(dir)/parecord")
                return "\(dir)/parecord"
            }
        }

        /// `channel` "portal": the Access backend mock is on the bus; "command": no desktop,
        /// a prompt-command that never answers (it records how many copies of it run).
        @Test(arguments: ["portal", "command"])
        func hundredAppsAtOnce(_ channel: String) async throws {
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let tools = try Self.recorders(in: scratch)
            try TempDir.makeDirectory("\(scratch)/running")
            let script = "\(scratch)/prompt.sh"
            // Counts the copies of itself that are alive (by pid, so one killed without its
            // trap running is not counted), then waits to be killed.
            try """
            trap 'rm -f "\(scratch)/running/$$"; exit 143' TERM
            touch "\(scratch)/running/$$"
            n=0; alive=""
            for f in "\(scratch)"/running/*; do
                p="${f##*/}"
                if kill -0 "$p" 2>/dev/null; then n=$((n+1)); alive="$alive $p:$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)"; fi
            done
            echo "$n $$$alive" >> "\(scratch)/concurrency"
            sleep 120 &
            wait

            """.write(toFile: script, atomically: true, encoding: .utf8)

            let bus = channel == "portal" ? try DesktopMocks.portalBus() : nil
            defer { bus?.stop() }
            let env = try bus.map { try DesktopMocks.environment($0) } ?? [:]
            // pipewire-pulse, as PulseAudio takes at most 64 clients (MAX_CONNECTIONS in protocol-native.c).
            let server = try PipeWireServer()
            defer { server.stop() }
            let conf = "\(scratch)/earmuff.conf"
            // The private pipewire-pulse takes 256 clients; earmuff's own limit must let 100 apps in,
            // and every one of them is prompted here (the caps are PromptCapTests' concern).
            try
                ("prompt-timeout = \(Self.timeout)\nprompt-command = /bin/sh \(script)\nmax-clients = 200\n"
                + "max-pending-prompts = 200\nmax-pending-prompts-per-uid = 200\n")
                .write(toFile: conf, atomically: true, encoding: .utf8)
            let earmuff = try EarmuffProcess(
                upstream: server.serverString, extraArguments: ["--config", conf],
                environment: env)
            defer { earmuff.stop() }
            let watch = try await earmuff.startWatch()
            defer { watch.stop() }

            var recordings: [Recording] = []
            defer { for r in recordings { _ = r.stop() } }
            func start(_ tool: String) throws -> Recording {
                try Tool.startPurposefulRecording(
                    server: earmuff.serverString, purpose: "Storm", latencyMsec: 200,
                    tool: tool)
            }
            for tool in tools { recordings.append(try start(tool)) }
            // Every app raises one prompt and every prompt times out. A server under a storm
            // of connections may drop one before its stream exists: start that app again.
            var restarts = 0
            let done = await Wait.until(timeout: 180, interval: 0.2) {
                let lines = (try? watch.lines()) ?? []
                let prompted = Set(lines.compactMap { $0.event == "prompt-raised" ? $0.prompt?.appKey : nil })
                for (i, tool) in tools.enumerated()
                where !recordings[i].tool.process.isRunning
                    && !prompted.contains("exe:\(tool)") && restarts < Self.apps
                {
                    _ = recordings[i].stop()
                    if let again = try? start(tool) { recordings[i] = again }
                    restarts += 1
                }
                return lines.filter { $0.event == "prompt-resolved" }.count >= Self.apps
            }
            if restarts > 0 { print("prompt storm (\(channel)): restarted \(restarts) recorders the server dropped") }
            let lines = try watch.lines()
            let raised = Dictionary(
                lines.compactMap { l in l.event == "prompt-raised" ? l.prompt.map { ($0.id, $0) } : nil },
                uniquingKeysWith: { a, _ in a })
            let resolved = lines.compactMap { $0.event == "prompt-resolved" ? $0.resolution : nil }
            #expect(done, "\(resolved.count) of \(Self.apps) prompts resolved\n\(earmuff.log())")
            #expect(Set(raised.values.map(\.appKey)).count == Self.apps, "\(raised.count) prompts raised")
            var lateness: [Double] = []
            for r in resolved {
                #expect(r.outcome == "timeout", "\(r)")
                guard let at = raised[r.prompt]?.raisedAt, let end = r.resolvedAt else {
                    Issue.record("no times for prompt \(r.prompt)")
                    continue
                }
                lateness.append(end - at - Self.timeout)
            }
            let worst = lateness.max() ?? .infinity
            let earliest = lateness.min() ?? -.infinity
            print("prompt storm (\(channel)): \(lateness.count) timeouts, lateness min \(earliest) s, max \(worst) s")
            #expect(worst < 1.0, "a timeout fired \(worst) s late")
            #expect(earliest > -0.05, "a timeout fired \(-earliest) s early")

            if let bus {
                let stats = try DesktopMocks.portalStats(bus)
                print("prompt storm (portal): dialogs shown \(stats.shown), most open at once \(stats.maxOpen), closed \(stats.closed)")
                #expect(stats.maxOpen <= 1, "\(stats.maxOpen) dialogs were open at once")
                #expect(stats.shown >= 1 && stats.open == 0, "\(stats)")
                #expect(stats.closed == stats.shown, "every dialog is closed when its prompt times out: \(stats)")
            } else {
                let log = (try? String(contentsOfFile: "\(scratch)/concurrency", encoding: .utf8)) ?? ""
                let counts = log.split(separator: "\n").compactMap { $0.split(separator: " ").first.flatMap { Int($0) } }
                print("prompt storm (command): \(counts.count) prompt-command runs, most at once \(counts.max() ?? 0)")
                #expect(!counts.isEmpty, "the prompt command never ran\n\(earmuff.log())")
                #expect((counts.max() ?? 0) <= 1, "prompt-command copies at once (count, pid, alive pid:state):\n\(log)")
                // Each command is killed with its prompt: none is left running.
                let gone = await Wait.until(timeout: 30, interval: 0.1) {
                    ((try? FileManager.default.contentsOfDirectory(atPath: "\(scratch)/running")) ?? ["?"]).isEmpty
                }
                #expect(gone, "prompt-command still running after its prompt timed out")
            }
        }
    }
}
