// `earmuff setup`: the files it writes, checked by systemd itself, and a
// session taken over end to end. No systemd user manager runs here, so setup
// runs with --no-systemctl (the commands it would run are checked in its
// output), and the test plays the manager: it starts the real server with
// the configuration setup wrote (XDG_CONFIG_HOME), and Earmuff exactly as
// earmuff.socket and earmuff.service say, through `systemd-socket-activate`.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SetupEndToEndTests {
        /// A PulseAudio system startup script like the distribution's, with the test microphone.
        static let systemScript = """
            load-module module-native-protocol-unix auth-anonymous=1
            load-module module-null-sink sink_name=\(PulseServer.sinkName)
            load-module module-sine-source source_name=\(PulseServer.sourceName) rate=\(PulseServer.toneRate) frequency=\(Int(PulseServer.toneFrequency))
            set-default-sink \(PulseServer.sinkName)
            set-default-source \(PulseServer.sourceName)

            """

        static let pipewireFiles: Set = [
            "systemd/user/earmuff.socket", "systemd/user/earmuff.service",
            "systemd/user/pipewire-pulse.socket.d/earmuff.conf",
            "pipewire/pipewire-pulse.conf.d/earmuff.conf", "pipewire/pipewire.conf",
        ]
        static let pulseFiles: Set = [
            "systemd/user/earmuff.socket", "systemd/user/earmuff.service",
            "systemd/user/pulseaudio.socket.d/earmuff.conf", "~/.config/pulse/default.pa",
        ]

        @Test(arguments: [ServerKind.pipewire, .pulseaudio])
        func systemdAcceptsTheUnits(_ server: ServerKind) throws {
            let home = try Home()
            defer { home.remove() }
            let r = try home.setup(server)
            #expect(r.succeeded, "\(r)")
            var env = Tool.privateEnvironment(root: home.dir)
            // The trailing colon keeps the system's unit directories after ours.
            env["SYSTEMD_UNIT_PATH"] = "\(home.units):"
            let moved = server == .pipewire ? "pipewire-pulse.socket" : "pulseaudio.socket"
            var units = ["\(home.units)/earmuff.socket", "\(home.units)/earmuff.service"]
            if FileManager.default.fileExists(atPath: "/usr/lib/systemd/user/\(moved)") { units.append(moved) }
            let verify = try ChildProcess.spawn(
                executable: try #require(findExecutable("systemd-analyze")),
                arguments: ["--user", "verify"] + units, environment: env,
                stdoutPath: "\(home.dir)/verify.out", stderrPath: "\(home.dir)/verify.err",
                maxLifetime: 120
            ).finish(timeout: 90)
            #expect(verify.succeeded, "\(verify)")
            #expect(verify.stderr.isEmpty, "systemd-analyze warned: \(verify.stderr)")
            let socket = try String(contentsOfFile: "\(home.units)/earmuff.socket", encoding: .utf8)
            #expect(socket.contains("ListenStream=%t/pulse/native\n"))
            #expect(socket.contains("Priority=6\n"))
            let service = try String(contentsOfFile: "\(home.units)/earmuff.service", encoding: .utf8)
            #expect(service.contains("ExecStart=\(try EarmuffProcess.locateBinary()) serve --listen %t/pulse/native --upstream unix:%t/pulse/upstream\n"))
            #expect(service.contains("Restart=on-failure\n"))
            #expect(service.contains("After=\(moved)\n"))
            let dropIn = try String(contentsOfFile: "\(home.units)/\(moved).d/earmuff.conf", encoding: .utf8)
            #expect(dropIn.contains("ListenStream=\nListenStream=%t/pulse/upstream\n"))

            // A binary whose path needs quoting in ExecStart=.
            try TempDir.makeDirectory("\(home.dir)/with space")
            try FileManager.default.copyItem(atPath: try EarmuffProcess.locateBinary(), toPath: "\(home.dir)/with space/earmuff")
            let quoted = try home.setup(server, ["--binary", "\(home.dir)/with space/earmuff"])
            #expect(quoted.succeeded, "\(quoted)")
            let requoted = try String(contentsOfFile: "\(home.units)/earmuff.service", encoding: .utf8)
            #expect(requoted.contains("ExecStart=\"\(home.dir)/with space/earmuff\" serve "), "\(requoted)")
            let verifyQuoted = try ChildProcess.spawn(
                executable: try #require(findExecutable("systemd-analyze")),
                arguments: ["--user", "verify", "\(home.units)/earmuff.service"], environment: env,
                stdoutPath: "\(home.dir)/verify2.out", stderrPath: "\(home.dir)/verify2.err",
                maxLifetime: 120
            ).finish(timeout: 90)
            #expect(verifyQuoted.succeeded && verifyQuoted.stderr.isEmpty, "\(verifyQuoted)")
        }

        @Test func movesTheNativeProtocolOfTheDistributionsDefaultPa() throws {
            let system = "/etc/pulse/default.pa"
            guard let original = try? String(contentsOfFile: system, encoding: .utf8) else {
                Issue.record("\(system) missing; install pulseaudio")
                return
            }
            let home = try Home()
            defer { home.remove() }
            let r = try home.earmuff(["setup", "--server", "pulseaudio", "--no-systemctl"])
            #expect(r.succeeded, "\(r)")
            let written = try String(contentsOfFile: "\(home.pulseConfig)/default.pa", encoding: .utf8)
            let loads = written.split(separator: "\n").filter { $0.hasPrefix("load-module module-native-protocol-unix") }
            #expect(loads == ["load-module module-native-protocol-unix socket=upstream"], "\(written)")
            // Every other line of the system script is kept, in order, after setup's
            // five header lines; each moved line is preceded by a comment with the original.
            let native = "load-module module-native-protocol-unix"
            let body = written.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(5)
                .filter { !$0.hasPrefix("# earmuff setup: was ") && !$0.hasPrefix(native) && !$0.hasPrefix("# earmuff setup made the directory ") }
            let expected = original.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix(native) }
            #expect(Array(body) == expected, "\(written)")
            #expect(written.contains("# earmuff setup: was \"\(native)\"\n"))
        }

        @Test func dryRunWritesNothingAndASecondRunChangesNothing() throws {
            let home = try Home()
            defer { home.remove() }
            let dry = try home.setup(.pipewire, ["--dry-run"])
            #expect(dry.succeeded, "\(dry)")
            #expect(home.files().isEmpty, "dry run wrote \(home.files().keys)")
            for f in Self.pipewireFiles { #expect(dry.stdoutText.contains("would write \(home.config)/\(f):"), "\(dry)") }
            for cmd in [
                "daemon-reload", "stop pipewire-pulse.service pipewire-pulse.socket", "restart pipewire.service", "start pipewire-pulse.socket",
                "enable --now earmuff.socket earmuff.service",
            ] {
                #expect(dry.stdoutText.contains("would run: systemctl --user \(cmd)\n"), "\(dry)")
            }

            let first = try home.setup(.pipewire)
            #expect(first.succeeded, "\(first)")
            #expect(Set(home.files().keys) == Self.pipewireFiles)
            #expect(first.stdoutText.contains("not running systemctl (--no-systemctl)"))
            let written = home.files()
            var inodes: [String: UInt] = [:]
            for f in written.keys { var st = stat(); unsafe stat("\(home.config)/\(f)", &st); inodes[f] = UInt(st.st_ino) }

            let second = try home.setup(.pipewire)
            #expect(second.succeeded, "\(second)")
            #expect(second.stdoutText.contains("nothing to change"), "\(second)")
            #expect(home.files() == written)
            for f in written.keys { var st = stat(); unsafe stat("\(home.config)/\(f)", &st); #expect(UInt(st.st_ino) == inodes[f], "\(f) rewritten") }
            let dryAgain = try home.setup(.pipewire, ["--dry-run"])
            #expect(!dryAgain.stdoutText.contains("would write"), "\(dryAgain)")
            #expect(!dryAgain.stdoutText.contains("would run: systemctl --user stop"), "\(dryAgain)")
        }

        /// `--undo` removes the directories setup made once they are empty (a fresh account has no
        /// ~/.config/systemd/user), never one that was there before or that holds anything else.
        @Test(arguments: [ServerKind.pipewire, .pulseaudio])
        func undoRemovesTheDirectoriesSetupMadeAndNoOther(_ server: ServerKind) throws {
            let home = try Home()
            defer { home.remove() }
            let fm = FileManager.default
            // The user's own directory, with a file of theirs, is there before setup.
            try TempDir.makeDirectory("\(home.config)/pipewire")
            try "context.properties = { }\n".write(toFile: "\(home.config)/pipewire/mine.conf", atomically: true, encoding: .utf8)
            let before = Set(try fm.subpathsOfDirectory(atPath: home.dir))
            let r = try home.setup(server)
            #expect(r.succeeded, "\(r)")
            #expect(fm.fileExists(atPath: home.units))
            let dry = try home.earmuff(["setup", "--undo", "--no-systemctl", "--dry-run"])
            #expect(dry.stdoutText.contains("would remove \(home.dir)/config/systemd if nothing else is in it"), "\(dry)")
            let undo = try home.earmuff(["setup", "--undo", "--no-systemctl"])
            #expect(undo.succeeded, "\(undo)")
            #expect(undo.stdoutText.contains("removed \(home.units) (made by earmuff setup, now empty)\n"), "\(undo)")
            // (pactl, asked about module-x11-publish, may leave its runtime directory.)
            let after = Set(try fm.subpathsOfDirectory(atPath: home.dir))
                .filter { !$0.hasPrefix("cli-") && $0 != "client.conf" && !$0.hasPrefix("run/") }
            #expect(after == before, "left: \(after.subtracting(before).sorted()); gone: \(before.subtracting(after).sorted())")
        }

        /// Every file under `roots`, with its contents.
        static func tree(_ roots: [String]) -> [String: Data] {
            var out: [String: Data] = [:]
            for root in roots {
                guard let e = FileManager.default.enumerator(atPath: root) else { continue }
                for case let rel as String in e { out["\(root)/\(rel)"] = FileManager.default.contents(atPath: "\(root)/\(rel)") }
            }
            return out
        }

        /// On PipeWire, setup copies the system's daemon configuration with module-access holding
        /// native clients for Earmuff (shown by --dry-run, written by setup, removed by --undo),
        /// and PipeWire's and WirePlumber's own configuration, the system's and the user's, is
        /// as it was after the undo.
        @Test func theNativeHoldIsShownWrittenAndUndoneLeavingTheConfigurationsAsTheyWere() throws {
            let home = try Home()
            defer { home.remove() }
            let system = "\(home.dir)/system-pipewire.conf"
            try FileManager.default.copyItem(
                atPath: try #require(
                    ["/etc/pipewire/pipewire.conf", "/usr/share/pipewire/pipewire.conf"]
                        .first { FileManager.default.fileExists(atPath: $0) }, "no pipewire.conf; install pipewire"), toPath: system)
            // The user's own PipeWire and WirePlumber files, which setup must not touch.
            try TempDir.makeDirectory("\(home.config)/pipewire/pipewire.conf.d")
            try "context.properties = { }\n".write(toFile: "\(home.config)/pipewire/pipewire.conf.d/mine.conf", atomically: true, encoding: .utf8)
            try TempDir.makeDirectory("\(home.config)/wireplumber/main.lua.d")
            try "-- mine\n".write(toFile: "\(home.config)/wireplumber/main.lua.d/50-mine.lua", atomically: true, encoding: .utf8)
            let roots = [
                "/etc/pipewire", "/usr/share/pipewire", "/etc/wireplumber", "/usr/share/wireplumber",
                "\(home.config)/pipewire", "\(home.config)/wireplumber", system,
            ]
            let before = Self.tree(roots)
            let written = "\(home.config)/pipewire/pipewire.conf"

            let dry = try home.setup(.pipewire, ["--pipewire-config", system, "--dry-run"])
            #expect(dry.succeeded, "\(dry)")
            #expect(dry.stdoutText.contains("would write \(written):"), "\(dry)")
            #expect(dry.stdoutText.contains("        access.force = earmuff\n"), "\(dry)")
            #expect(dry.stdoutText.contains("would run: systemctl --user restart pipewire.service\n"), "\(dry)")
            #expect(Self.tree(roots) == before, "a dry run changed files")

            let r = try home.setup(.pipewire, ["--pipewire-config", system])
            #expect(r.succeeded, "\(r)")
            #expect(r.stdoutText.contains("pipewire must be restarted"), "\(r)")
            let text = try String(contentsOfFile: written, encoding: .utf8)
            let binary = try EarmuffProcess.locateBinary()
            #expect(text.contains("access.force = earmuff\n"), "\(text)")
            for name in ["\"/usr/bin/wireplumber\"", "\"wireplumber\"", "\"pipewire-pulse\"", "\"/usr/libexec/xdg-desktop-portal\"", "\"\(binary)\""] {
                #expect(text.contains(name), "\(name) not allowed: \(text)")
            }
            // The rest of the system's configuration is kept: every module it loads, once.
            let original = try String(contentsOfFile: system, encoding: .utf8)
            for module in original.ranges(of: /name = (libpipewire-module-[a-z0-9-]+)/).map({ String(original[$0]) }) {
                #expect(text.ranges(of: module).count == original.ranges(of: module).count, "\(module): \(text)")
            }
            let undo = try home.earmuff(["setup", "--undo", "--no-systemctl"])
            #expect(undo.succeeded, "\(undo)")
            #expect(undo.stdoutText.contains("removed \(written)\n"), "\(undo)")
            #expect(undo.stdoutText.contains("systemctl --user restart pipewire.service\n"), "\(undo)")
            #expect(Self.tree(roots) == before, "setup and undo changed PipeWire's or WirePlumber's configuration")

            // A system configuration without module-access: refused, nothing written.
            try "context.modules = [ ]\n".write(toFile: system, atomically: true, encoding: .utf8)
            let refused = try home.setup(.pipewire, ["--pipewire-config", system])
            #expect(refused.status == 1 && refused.stderr.contains("has no single libpipewire-module-access entry"), "\(refused)")
            #expect(!FileManager.default.fileExists(atPath: written))
        }

        @Test func refusesWhatItCannotHandleAndWritesNothing() throws {
            let home = try Home()
            defer { home.remove() }
            // No server anywhere, none named.
            let none = try home.earmuff(["setup", "--no-systemctl"])
            #expect(none.status == 1, "\(none)")
            #expect(none.stderr.contains("no sound server found"), "\(none)")
            #expect(none.stderr.contains("--server pipewire|pulseaudio"))
            #expect(home.files().isEmpty)

            // A drop-in of the user's own that moves the socket elsewhere.
            let foreign = "\(home.units)/pipewire-pulse.socket.d/override.conf"
            try TempDir.makeDirectory("\(home.units)/pipewire-pulse.socket.d")
            try "[Socket]\nListenStream=\nListenStream=%t/pulse/mine\n".write(toFile: foreign, atomically: true, encoding: .utf8)
            let r = try home.setup(.pipewire)
            #expect(r.status == 1, "\(r)")
            #expect(r.stderr.contains("\(foreign):2 sets ListenStream"), "\(r)")
            #expect(r.stderr.contains("remove that line"))
            #expect(Set(home.files().keys) == ["systemd/user/pipewire-pulse.socket.d/override.conf"])
            try FileManager.default.removeItem(atPath: foreign)

            // A default.pa of the user's own is not overwritten.
            try TempDir.makeDirectory(home.pulseConfig)
            try "load-module module-null-sink\n".write(toFile: "\(home.pulseConfig)/default.pa", atomically: true, encoding: .utf8)
            let pa = try home.setup(.pulseaudio)
            #expect(pa.status == 1, "\(pa)")
            #expect(pa.stderr.contains("\(home.pulseConfig)/default.pa exists and was not written by earmuff setup"), "\(pa)")
            #expect(Set(home.files().keys) == ["~/.config/pulse/default.pa"])
        }

        /// A stand-in for `systemctl` (no user manager runs here): it logs its
        /// arguments, says pipewire-pulse.socket is enabled, and fails the
        /// command named by FAKE_SYSTEMCTL_FAIL.
        static let fakeSystemctl = """
            #!/bin/sh
            echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
            case "$*" in
                "--user is-enabled pipewire-pulse.socket") echo enabled; exit 0 ;;
                "--user is-enabled "*) echo disabled; exit 1 ;;
            esac
            if [ -n "$FAKE_SYSTEMCTL_FAIL" ] && [ "$*" = "--user $FAKE_SYSTEMCTL_FAIL" ]; then
                echo "Job for unit failed." >&2; exit 1
            fi
            exit 0

            """

        /// Runs setup as if a user manager ran: `$XDG_RUNTIME_DIR/systemd/private`
        /// exists and `systemctl` is the fake above. Returns the result and the commands it ran.
        func withFakeManager(_ home: Home, _ args: [String], fail: String = "") throws -> (ToolResult, [String]) {
            try TempDir.makeDirectory("\(home.dir)/bin")
            try TempDir.makeDirectory("\(home.dir)/run/systemd")
            _ = FileManager.default.createFile(atPath: "\(home.dir)/run/systemd/private", contents: Data())
            try Self.fakeSystemctl.write(toFile: "\(home.dir)/bin/systemctl", atomically: true, encoding: .utf8)
            unsafe chmod("\(home.dir)/bin/systemctl", 0o755)
            let log = "\(home.dir)/systemctl.log"
            try? FileManager.default.removeItem(atPath: log)
            let r = try home.earmuff(
                args,
                extra: [
                    "PATH": "\(home.dir)/bin:/usr/bin:/bin", "FAKE_SYSTEMCTL_LOG": log,
                    "FAKE_SYSTEMCTL_FAIL": fail,
                ])
            let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            return (r, lines)
        }

        @Test func runsSystemctlInOrderWhenAUserManagerRuns() throws {
            let home = try Home()
            defer { home.remove() }
            // No server answers pactl: the enabled socket unit tells which server it is.
            let (first, ran) = try withFakeManager(home, ["setup"])
            #expect(first.succeeded, "\(first)")
            #expect(
                ran == [
                    "--user is-enabled pipewire-pulse.socket", "--user daemon-reload",
                    "--user stop pipewire-pulse.service pipewire-pulse.socket", "--user restart pipewire.service",
                    "--user start pipewire-pulse.socket", "--user enable --now earmuff.socket earmuff.service",
                ], "\(ran)")
            #expect(Set(home.files().keys) == Self.pipewireFiles)

            let (second, again) = try withFakeManager(home, ["setup", "--server", "pipewire"])
            #expect(second.succeeded, "\(second)")
            #expect(again == ["--user enable --now earmuff.socket earmuff.service"], "a second run restarted the server: \(again)")

            let before = home.files()
            let (dryUndo, ranDry) = try withFakeManager(home, ["setup", "--undo", "--dry-run"])
            #expect(dryUndo.succeeded && ranDry.isEmpty, "\(dryUndo) \(ranDry)")
            #expect(home.files() == before, "a dry undo changed files")
            for f in Self.pipewireFiles { #expect(dryUndo.stdoutText.contains("would remove \(home.config)/\(f)\n"), "\(dryUndo)") }
            #expect(dryUndo.stdoutText.contains("would run: systemctl --user disable --now earmuff.socket earmuff.service\n"))

            let (undo, undone) = try withFakeManager(home, ["setup", "--undo"])
            #expect(undo.succeeded, "\(undo)")
            #expect(
                undone == [
                    "--user disable --now earmuff.socket earmuff.service", "--user daemon-reload",
                    "--user stop pipewire-pulse.service pipewire-pulse.socket", "--user restart pipewire.service",
                    "--user start pipewire-pulse.socket",
                ], "\(undone)")
            #expect(home.files().isEmpty, "\(home.files().keys)")
        }

        @Test func aFailingSystemctlCommandStopsSetupWithItsError() throws {
            let home = try Home()
            defer { home.remove() }
            let (r, ran) = try withFakeManager(home, ["setup", "--server", "pipewire"], fail: "start pipewire-pulse.socket")
            #expect(r.status == 1, "\(r)")
            #expect(r.stderr.contains("systemctl --user start pipewire-pulse.socket failed (status 1): Job for unit failed."), "\(r)")
            #expect(ran.last == "--user start pipewire-pulse.socket", "\(ran)")
        }

        /// PulseAudio under X11: module-x11-publish announces the real socket in
        /// the root window; setup notices and prints commands that really remove it.
        @Test(.enabled(if: (try? ServerKind.selected()) == .pulseaudio, "a PulseAudio module"))
        func pulseAudiosX11PublishIsFoundAndTheAdviceWorks() throws {
            guard findExecutable("Xvfb") != nil, let xprop = findExecutable("xprop") else {
                Issue.record("Xvfb or xprop not found; install xvfb x11-utils")
                return
            }
            let home = try Home()
            defer { home.remove() }
            let x: XServer
            do {
                x = try XServer(directory: home.dir)
            } catch {
                Issue.record("\(error)")
                return
            }
            defer { x.stop() }
            let display = x.display
            let server = try PulseServer(extraConfig: ["load-module module-x11-publish display=:\(display)"], kind: .pulseaudio)
            defer { server.stop() }
            func rootProperty() throws -> String {
                try ChildProcess.spawn(
                    executable: xprop, arguments: ["-display", ":\(display)", "-root", "PULSE_SERVER"],
                    environment: Tool.privateEnvironment(root: home.dir), stdoutPath: "\(home.dir)/xprop.out",
                    stderrPath: "\(home.dir)/xprop.err", maxLifetime: 60
                ).finish(timeout: 30).stdoutText
            }
            #expect(try rootProperty().contains(server.socketPath), "module-x11-publish did not publish the socket")

            let r = try home.earmuff(["setup", "--dry-run"], extra: ["PULSE_SERVER": server.serverString])
            #expect(r.succeeded, "\(r)")
            #expect(r.stdoutText.contains("module-x11-publish is loaded in this session now"), "\(r)")
            #expect(r.stdoutText.contains("pactl unload-module module-x11-publish; xprop -root -remove PULSE_SERVER"))

            // The advice, carried out: the property is gone and stays gone.
            let unload = try server.pactl("unload-module", "module-x11-publish")
            #expect(unload.succeeded, "\(unload)")
            _ = try ChildProcess.spawn(
                executable: xprop, arguments: ["-display", ":\(display)", "-root", "-remove", "PULSE_SERVER"],
                environment: Tool.privateEnvironment(root: home.dir), stdoutPath: "\(home.dir)/xprop2.out",
                stderrPath: "\(home.dir)/xprop2.err", maxLifetime: 60
            ).finish(timeout: 30)
            let after = try rootProperty()
            #expect(!after.contains(server.socketPath) && !after.contains("PULSE_SERVER(STRING)"), "PULSE_SERVER is still on the root window: \(after)")
        }

        @Test func detectsTheServerFromPactl() throws {
            let server = try PulseServer()
            defer { server.stop() }
            let home = try Home()
            defer { home.remove() }
            let r = try home.earmuff(["setup", "--dry-run"], extra: ["PULSE_SERVER": server.serverString])
            #expect(r.succeeded, "\(r)")
            let name = server.kind == .pipewire ? "pipewire-pulse" : "PulseAudio"
            #expect(r.stdoutText.contains("the session's server is \(name)"), "\(r)")
        }

        @Test func takesOverTheSessionAndUndoes() async throws {
            let kind = try ServerKind.selected()
            let home = try Home()
            defer { home.remove() }
            let key = try Tool.appKey(for: "parecord")

            let setup = try home.setup(kind)
            #expect(setup.succeeded, "\(setup)")

            // The real server, configured by what setup wrote and started as its moved
            // socket unit starts it: it takes the socket on pulse/upstream (same inode).
            let session = try SessionServerProcess(kind: kind, home: home, userConfig: true, socketActivated: true)
            defer { session.stop() }
            #expect(session.socketPath == "\(session.runtimeDir)/pulse/upstream")
            #expect(
                try SocketActivationEndToEndTests.inode(session.socketPath) == session.activatedSocketInode,
                "the server bound its own socket instead of taking the one systemd passed")
            #expect(!FileManager.default.fileExists(atPath: "\(session.runtimeDir)/pulse/native"))

            // Earmuff as the units say, socket-activated on pulse/native.
            let earmuff = try UnitLauncher(home: home, runtimeDir: session.runtimeDir)
            defer { earmuff.stop() }
            let env = ["XDG_RUNTIME_DIR": session.runtimeDir]

            // Nothing has connected yet, so systemd has not started Earmuff: status says why.
            let idle = try earmuff.cli(["status"])
            #expect(idle.status == 1 && idle.stderr.contains("session: set up by earmuff setup"), "\(idle)")

            let info = try Tool.run("pactl", args: ["info"], server: "", environment: env, timeout: 60)
            #expect(info.succeeded, "\(info)\nearmuff:\n\(earmuff.log())")
            #expect(info.stdoutText.contains("Server String: \(session.runtimeDir)/pulse/native"), "\(info)")

            // `earmuff run` points its command at the session socket now.
            let viaRun = try earmuff.cli(["run", "--purpose", "Setup test", "--", "pactl", "info"])
            #expect(viaRun.succeeded && viaRun.stdoutText.contains("Server String: unix:\(session.runtimeDir)/pulse/native\n"), "\(viaRun)")

            let rec = try Tool.startPurposefulRecording(server: "", purpose: "Setup test", environment: env)
            #expect(await rec.waitForAudio(seconds: 1.0, timeout: 90), "earmuff:\n\(earmuff.log())")
            let status = try earmuff.cli(["status", "--json"])
            try #require(status.succeeded, "\(status)\nearmuff:\n\(earmuff.log())\nparecord: \(rec.tool.process.stderrText())")
            let view = try ConsentJSON.decode(StatusView.self, from: status.stdout)
            #expect(!view.clients(of: key).isEmpty, "status: \(status.stdoutText)")
            let daemon = try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any]
            let daemonInfo = daemon?["daemon"] as? [String: Any]
            #expect(daemonInfo?["sessionSocket"] as? Bool == true && daemonInfo?["socketActivated"] as? Bool == true, "\(status.stdoutText)")
            let text = try earmuff.cli(["status"])
            #expect(text.stdoutText.contains("session: taken over"), "\(text.stdoutText)")
            #expect(text.stdoutText.contains("the real server is at unix:\(session.runtimeDir)/pulse/upstream"), "\(text.stdoutText)")
            let (_, silent) = rec.stop()
            #expect(silent.count > 0 && silent.allSatisfy { $0 == 0 }, "undecided app heard something")

            try earmuff.cliChecked(["grant", key])
            let rec2 = try Tool.startPurposefulRecording(server: "", purpose: "Setup test", environment: env)
            _ = await rec2.waitForAudio(seconds: 1.5, timeout: 90)
            let (_, granted) = rec2.stop()
            let report = Helpers.analyze(granted, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "\(report)")

            // Undo: exactly setup's files go, and the server is back on pulse/native.
            earmuff.stop()
            session.stop()
            let undo = try home.earmuff(["setup", "--undo", "--no-systemctl"])
            #expect(undo.succeeded, "\(undo)")
            let ours = kind == .pipewire ? Self.pipewireFiles : Self.pulseFiles
            #expect(Set(home.files().keys).isDisjoint(with: ours), "left: \(home.files().keys)")
            let direct = try SessionServerProcess(kind: kind, home: home, userConfig: false)
            defer { direct.stop() }
            #expect(!FileManager.default.fileExists(atPath: "\(direct.runtimeDir)/pulse/upstream"))
            let rec3 = try Tool.startRecording(server: "", environment: ["XDG_RUNTIME_DIR": direct.runtimeDir])
            _ = await rec3.waitForAudio(seconds: 1.5, timeout: 90)
            let (_, straight) = rec3.stop()
            #expect(Helpers.analyze(straight, format: .s16le).isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5))
        }

        @Test func aFlatpakSandboxGoesThroughEarmuff() async throws {
            let kind = try ServerKind.selected()
            let home = try Home()
            defer { home.remove() }
            let setup = try home.setup(kind)
            #expect(setup.succeeded, "\(setup)")
            let session = try SessionServerProcess(kind: kind, home: home, userConfig: true)
            defer { session.stop() }
            let earmuff = try UnitLauncher(home: home, runtimeDir: session.runtimeDir)
            defer { earmuff.stop() }
            let appID = "org.example.Recorder"
            let key = "flatpak:\(appID)"
            let socket = "\(session.runtimeDir)/pulse/native"

            let rec = try Sandbox.startFlatpakRecording(appID: appID, sessionSocket: socket, purpose: "Flatpak test")
            #expect(
                await rec.waitForAudio(seconds: 1.0, timeout: 90),
                "sandbox: \(rec.tool.process.stderrText())\nearmuff:\n\(earmuff.log())")
            let status = try earmuff.cli(["status", "--json"])
            try #require(status.succeeded, "\(status)")
            let clients = try ConsentJSON.decode(StatusView.self, from: status.stdout).clients(of: key)
            #expect(clients.first?.identifiedBy == "flatpak", "status: \(status.stdoutText)")
            let (_, silent) = rec.stop()
            #expect(silent.count > 0 && silent.allSatisfy { $0 == 0 }, "an undecided Flatpak heard something")

            try earmuff.cliChecked(["grant", key])
            let rec2 = try Sandbox.startFlatpakRecording(appID: appID, sessionSocket: socket, purpose: "Flatpak test")
            _ = await rec2.waitForAudio(seconds: 1.5, timeout: 90)
            let (_, granted) = rec2.stop()
            let report = Helpers.analyze(granted, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "\(report)")
        }
    }
}
