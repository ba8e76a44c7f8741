// `earmuff doctor` against real sessions: one taken over by `earmuff setup`
// (the real server and Earmuff started as the units say, a prompt agent
// connected: every check passes), Earmuff only on its own socket (not taken
// over, and no prompt channel until an agent connects), and an upstream
// server that does not answer. The checks themselves are unit-tested in
// EarmuffCLITests; here is what they gather.
import Foundation
import Testing
import TestSupport

/// `earmuff doctor --json`, decoded.
struct DoctorView: Decodable {
    struct Check: Decodable {
        let name: String
        let outcome: String
        let message: String
        let fix: String?
    }
    let checks: [Check]
    let ok: Bool

    subscript(_ name: String) -> Check? { checks.first { $0.name == name } }

    static func decode(_ r: ToolResult) throws -> DoctorView {
        try JSONDecoder().decode(DoctorView.self, from: r.stdout)
    }
}

extension EndToEnd {
    @Suite struct DoctorEndToEndTests {
        @Test func aTakenOverSessionWithAnAgentPassesEveryCheck() async throws {
            let kind = try ServerKind.selected()
            let home = try SetupEndToEndTests.Home()
            defer { home.remove() }
            let setup = try home.setup(kind)
            try #require(setup.succeeded, "\(setup)")
            let session = try SessionServerProcess(kind: kind, home: home, userConfig: true, socketActivated: true)
            defer { session.stop() }
            let earmuff = try UnitLauncher(home: home, runtimeDir: session.runtimeDir)
            defer { earmuff.stop() }

            // Set up, and systemd (here systemd-socket-activate) holds the socket, but nothing
            // has connected: Earmuff is not running yet, and doctor says how to start it.
            let idle = try earmuff.cli(["doctor"])
            #expect(idle.status == 1, "\(idle)")
            #expect(idle.stdoutText.contains("systemctl --user start earmuff.socket"), "\(idle)")
            if kind == .pipewire {
                // Setup ran without systemctl: nothing starts Earmuff with PipeWire yet.
                let units = try DoctorView.decode(earmuff.cli(["doctor", "--json"]))["units"]
                #expect(units?.outcome == "fail" && units?.message.contains("not started with PipeWire") == true, "\(String(describing: units))")
                #expect(units?.fix == "systemctl --user enable earmuff.service", "\(String(describing: units))")
                try home.enableAsSystemctlWould()
            }

            // The first app starts it.
            let info = try Tool.run("pactl", args: ["info"], server: "", environment: ["XDG_RUNTIME_DIR": session.runtimeDir], timeout: 60)
            #expect(info.succeeded, "\(info)\nearmuff:\n\(earmuff.log())")
            let noAgent = try DoctorView.decode(earmuff.cli(["doctor", "--json"]))
            #expect(noAgent["prompts"]?.outcome == "fail", "\(noAgent.checks)")

            let agent = try ChildProcess.spawn(
                executable: try EarmuffProcess.locateBinary(), arguments: ["agent", "--answer", "deny"],
                environment: earmuff.environment, stdoutPath: "\(home.dir)/agent.out",
                stderrPath: "\(home.dir)/agent.err", maxLifetime: 300)
            defer { agent.terminate(signal: SIGTERM, grace: 5) }
            var last: ToolResult?
            let passed = try await Wait.until(timeout: 60) {
                let r = try earmuff.cli(["doctor"])
                last = r
                return r.status == 0 || !agent.isRunning
            }
            let r = try #require(last)
            #expect(passed && r.status == 0, "\(r)\nearmuff:\n\(earmuff.log())")
            let lines = r.stdoutText.split(separator: "\n").filter { !$0.hasPrefix(" ") }
            #expect(lines.count == 8, "one line per check: \(r.stdoutText)")
            #expect(!lines.contains { $0.hasPrefix("fail") }, "\(r.stdoutText)")
            let view = try DoctorView.decode(earmuff.cli(["doctor", "--json"]))
            #expect(view.ok, "\(view.checks)")
            for name in ["daemon", "session", "upstream", "prompts", "units", "store"] {
                #expect(view[name]?.outcome == "ok", "\(name): \(String(describing: view[name]))")
            }
            #expect(view["session"]?.message.contains("taken over: \(session.runtimeDir)/pulse/native is Earmuff's") == true, "\(view.checks)")
            #expect(view["upstream"]?.message.contains("unix:\(session.runtimeDir)/pulse/upstream") == true, "\(view.checks)")
            #expect(view["prompts"]?.message.contains("agent (1 connected)") == true, "\(view.checks)")
            #expect(view["store"]?.message.contains("passes PRAGMA quick_check") == true, "\(view.checks)")
            // pipewire-pulse's session has PipeWire's own socket, which the daemon gates once its
            // PipeWire gate is connected: no longer a door around Earmuff.
            if kind == .pipewire {
                var gated: DoctorView?
                try await Wait.until(timeout: 60) {
                    gated = try DoctorView.decode(earmuff.cli(["doctor", "--json"]))
                    return gated?["pipewire"]?.outcome == "ok"
                }
                #expect(gated?["pipewire"]?.outcome == "ok", "\(String(describing: gated?.checks))\nearmuff:\n\(earmuff.log())")
                #expect(gated?["pipewire"]?.message.contains("gated by the daemon") == true, "\(String(describing: gated?.checks))")
            }

            // A drop-in of someone else's that moves the server's socket again fights setup.
            let moved = kind == .pipewire ? "pipewire-pulse.socket" : "pulseaudio.socket"
            let foreign = "\(home.units)/\(moved).d/zz-local.conf"
            try "[Socket]\nListenStream=\nListenStream=%t/pulse/elsewhere\n".write(toFile: foreign, atomically: true, encoding: .utf8)
            let fought = try DoctorView.decode(earmuff.cli(["doctor", "--json"]))
            #expect(fought["units"]?.outcome == "fail" && fought["units"]?.message.contains(foreign) == true, "\(fought.checks)")
            #expect(fought["units"]?.fix?.contains("remove that line") == true, "\(fought.checks)")
        }

        /// Units left pointing at a binary that is gone (a build directory cleaned, a copy removed).
        @Test func aServiceRunningAMissingBinaryIsStale() throws {
            let kind = try ServerKind.selected()
            let home = try SetupEndToEndTests.Home()
            defer { home.remove() }
            let setup = try home.setup(kind, ["--binary", "\(home.dir)/gone/earmuff"])
            try #require(setup.succeeded, "\(setup)")
            let r = try home.earmuff(["doctor", "--json"])
            #expect(r.status == 1, "\(r)")
            let view = try DoctorView.decode(r)
            let units = try #require(view["units"])
            #expect(units.outcome == "fail" && units.message.contains("runs \(home.dir)/gone/earmuff, which is not there any more"), "\(units)")
            #expect(units.fix?.contains("earmuff setup") == true, "\(units)")
            // Set up, no daemon, nothing listening on pulse/native: what to start.
            #expect(view["session"]?.outcome == "fail" && view["session"]?.fix == "systemctl --user enable --now earmuff.socket", "\(view.checks)")
        }

        @Test func notTakenOverAndNoPromptChannelSaySoAndWhatToRun() async throws {
            let s = try ConsentEndToEndTests.Setup()
            defer { s.stop() }
            let r = try s.earmuff.runCLI(["doctor"])
            #expect(r.status == 1, "\(r)")
            let view = try DoctorView.decode(s.earmuff.runCLI(["doctor", "--json"]))
            #expect(!view.ok)
            #expect(view["daemon"]?.outcome == "ok", "\(view.checks)")
            #expect(view["upstream"]?.outcome == "ok", "\(view.checks)")
            let session = try #require(view["session"])
            #expect(session.outcome == "fail" && session.message.hasPrefix("not taken over"), "\(session)")
            #expect(session.message.contains(s.earmuff.listenPath), "\(session)")
            #expect(session.fix?.contains("earmuff setup") == true, "\(session)")
            // No session bus, no prompt-command, no agent.
            let prompts = try #require(view["prompts"])
            #expect(prompts.outcome == "fail" && prompts.message.hasPrefix("no prompt channel"), "\(prompts)")
            #expect(prompts.message.contains("portal: no session bus") && prompts.message.contains("agent: none connected"), "\(prompts)")
            #expect(prompts.fix?.contains("earmuff agent") == true, "\(prompts)")
            #expect(r.stdoutText.contains("fail  session   not taken over"), "\(r)")
            #expect(r.stdoutText.contains("      fix: run 'earmuff setup'"), "\(r)")

            // A connected agent is a channel.
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny"])
            defer { agent.stop() }
            let channel = try await Wait.until(timeout: 60) {
                try DoctorView.decode(s.earmuff.runCLI(["doctor", "--json"]))["prompts"]?.outcome == "ok" || !agent.process.isRunning
            }
            #expect(channel && agent.process.isRunning, "\(agent.summary)")
        }

        @Test func aPromptCommandIsAChannel() throws {
            let s = try ConsentEndToEndTests.Setup(config: ["prompt-command = exit 1"])
            defer { s.stop() }
            let view = try DoctorView.decode(s.earmuff.runCLI(["doctor", "--json"]))
            #expect(view["prompts"]?.outcome == "ok", "\(view.checks)")
            #expect(view["prompts"]?.message.contains("command (prompt-command)") == true, "\(view.checks)")
        }

        @Test func anUnreachableUpstreamFailsAndNamesTheServer() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let upstream = "unix:\(dir)/no-server/native"
            let earmuff = try EarmuffProcess(upstream: upstream)
            defer { earmuff.stop() }
            let r = try earmuff.runCLI(["doctor"])
            #expect(r.status == 1, "\(r)")
            let view = try DoctorView.decode(earmuff.runCLI(["doctor", "--json"]))
            let check = try #require(view["upstream"])
            #expect(check.outcome == "fail", "\(check)")
            #expect(check.message.contains("does not answer at \(upstream)"), "\(check)")
            #expect(check.fix?.contains("systemctl --user start pipewire-pulse.socket") == true, "\(check)")
            #expect(view["daemon"]?.outcome == "ok", "\(view.checks)")
        }
    }
}
