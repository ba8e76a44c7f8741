// `earmuff run --sandbox` as a launcher: exit status and signals pass through,
// the defaults a desktop app expects (a private writable home, a read-only
// system, a private /tmp, its X11 display), --home, --dry-run, and a clear error
// without bubblewrap. The sound paths are in SandboxRunTests.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SandboxDefaultsTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// The exit status is the app's (128+N for a signal); SIGINT and SIGTERM sent to
        /// `earmuff run` reach the app, which can handle them.
        @Test func exitStatusAndSignalsPassThrough() async throws {
            let s = try Setup()
            defer { s.stop() }
            for (script, expected) in [("exit 7", Int32(7)), ("kill -TERM $$", Int32(128 + SIGTERM))] {
                let run = try s.earmuff.startSandboxed([], command: ["sh", "-c", script])
                let result = run.outcome(timeout: 60)
                #expect(result.status == expected, "\(script): \(result)")
            }
            // A handler inside sees the forwarded signal and decides the exit status.
            let trap = "trap 'echo got-INT; exit 42' INT; echo ready; while :; do sleep 0.1; done"
            let handled = try s.earmuff.startSandboxed([], command: ["sh", "-c", trap])
            let ready = await Wait.until(timeout: 60) { handled.process.stdoutData().count >= 6 }
            #expect(ready, "\(handled.process.stderrText())")
            handled.process.send(SIGINT)
            let h = handled.outcome(timeout: 60)
            #expect(h.status == 42 && h.stdoutText.contains("got-INT"), "\(h)")

            // A sleeping app without a handler dies of the signal: 128+N.
            let sleeper = try s.earmuff.startSandboxed(
                ["--app-id", "org.example.Sleeper"],
                command: ["sh", "-c", "echo ready; exec sleep 600"])
            let up = await Wait.until(timeout: 60) { sleeper.process.stdoutData().count >= 6 }
            #expect(up, "\(sleeper.process.stderrText())")
            #expect(s.earmuff.launcherSockets(appID: "org.example.Sleeper").count == 1)
            sleeper.process.send(SIGTERM)
            let r = sleeper.outcome(timeout: 60)
            #expect(r.status == 128 + SIGTERM, "\(r)")
            let gone = await Wait.until(timeout: 60) { s.earmuff.launcherSockets(appID: "org.example.Sleeper").isEmpty }
            #expect(gone, "the launcher socket outlived the sandbox")
        }

        /// `run` ends with status 1 and a message containing `fix`, before starting anything.
        static func expectRefused(_ run: RunningTool, naming fix: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let r = run.outcome(timeout: 60)
            #expect(r.status == 1 && r.stderr.contains(fix), "\(r)", sourceLocation: sourceLocation)
        }

        /// Runs `script` in a sandbox with `options`; its result and the run (whose directory lives as long as it).
        static func sandboxedScript(
            _ s: Setup, _ options: [String], _ script: String,
            environment: [String: String] = [:]
        ) throws -> (ToolResult, RunningTool) {
            let run = try s.earmuff.startSandboxed(
                options, command: ["sh", "-c", script], environment: environment,
                maxLifetime: 300)
            return (run.wait(timeout: 120), run)
        }

        /// Runs the command in argv[1:] on a new pseudo-terminal, types Ctrl-C once it has
        /// printed "ready", and prints what it wrote and `exit N`.
        static let terminal = """
            import os, pty, select, sys, time
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            out = b""
            def read(timeout):
                global out
                r, _, _ = select.select([fd], [], [], timeout)
                if not r:
                    return False
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    return False
                out += data
                return bool(data)
            deadline = time.time() + 60
            while b"ready" not in out and time.time() < deadline and read(1):
                pass
            os.write(fd, b"\\x03")
            while read(60):
                pass
            _, status = os.waitpid(pid, 0)
            sys.stdout.write(out.decode(errors="replace"))
            print("exit", os.waitstatus_to_exitcode(status))
            """

        /// Ctrl-C typed in the terminal reaches the app (which may handle it), not only
        /// bubblewrap: the app's handler runs and decides the exit status.
        @Test func ctrlCInATerminalReachesTheApp() throws {
            let s = try Setup()
            defer { s.stop() }
            let trap = "trap 'echo got-INT; exit 42' INT; echo ready; while :; do sleep 0.1; done"
            let r = try Tool.run(
                "python3",
                args: [
                    "-c", Self.terminal, s.earmuff.binary, "run", "--sandbox",
                    "--control", s.earmuff.controlPath, "--", "sh", "-c", trap,
                ],
                server: "", timeout: 120)
            #expect(r.stdoutText.contains("got-INT") && r.stdoutText.hasSuffix("exit 42\n"), "\(r)")
        }

        /// A private home per app, kept between runs; the system read-only; /tmp private;
        /// no /dev/snd; the runtime directory holding only the sound socket; no host
        /// process in sight (nothing to ptrace) and no capabilities, even as root.
        @Test func defaultsSuitADesktopApp() throws {
            let s = try Setup()
            defer { s.stop() }
            let marker = "earmuff-sandbox-\(getpid())"
            let script = """
                echo kept > "$HOME/\(marker)" && echo home-writable
                touch /usr/\(marker) 2>/dev/null || echo usr-read-only
                touch /etc/\(marker) 2>/dev/null || echo etc-read-only
                echo x > /tmp/\(marker) && echo tmp-writable
                [ -e /dev/snd ] || echo no-dev-snd
                [ -e /dev/null ] && echo dev-null
                echo "runtime: $(ls -A "$XDG_RUNTIME_DIR" | tr '\\n' ' ')"
                echo "pulse: $(ls -A "$XDG_RUNTIME_DIR/pulse" | tr '\\n' ' ')"
                echo "server: $PULSE_SERVER"
                echo "cwd: $(pwd)"
                [ -e /proc/\(s.earmuff.process.pid) ] || echo host-processes-hidden
                grep CapEff /proc/self/status
                """
            let (r, run) = try Self.sandboxedScript(s, ["--app-id", "org.example.Home"], script)
            let dir = run.directory
            #expect(r.succeeded, "\(r)")
            let out = r.stdoutText
            for line in [
                "home-writable", "usr-read-only", "etc-read-only", "tmp-writable", "no-dev-snd", "dev-null",
                "runtime: pulse \n", "pulse: native \n", "server: unix:\(dir)/run/pulse/native",
                "cwd: \(dir)\n", "host-processes-hidden", "CapEff:\t0000000000000000",
            ] {
                #expect(out.contains(line), "missing '\(line)' in:\n\(out)")
            }
            // The home was the app's own directory, not the user's; /tmp was the sandbox's.
            let privateHome = "\(dir)/data/earmuff/sandboxes/org.example.Home"
            #expect(FileManager.default.fileExists(atPath: "\(privateHome)/\(marker)"), "\(out)")
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/\(marker)"))
            #expect(!FileManager.default.fileExists(atPath: "/tmp/\(marker)"))
            #expect(!FileManager.default.fileExists(atPath: "/usr/\(marker)"))
        }

        /// `--home DIR` shows DIR as the home, writable, and starts the app there when
        /// it was started from DIR; `--share-home` shows the user's own.
        @Test func homeChoices() throws {
            let s = try Setup()
            defer { s.stop() }
            let chosen = try Helpers.scratch()
            defer { TempDir.remove(chosen) }
            let (r, run) = try Self.sandboxedScript(s, ["--home", chosen], "echo chosen > \"$HOME/file\"; echo \"$HOME\"")
            let dir = run.directory
            #expect(r.succeeded && r.stdoutText == "\(dir)\n", "\(r)")
            #expect((try? String(contentsOfFile: "\(chosen)/file", encoding: .utf8)) == "chosen\n")

            let (shared, sharedRun) = try Self.sandboxedScript(s, ["--share-home"], "echo shared > \"$HOME/file\"; pwd")
            let sharedDir = sharedRun.directory
            #expect(shared.succeeded && shared.stdoutText == "\(sharedDir)\n", "\(shared)")
            #expect((try? String(contentsOfFile: "\(sharedDir)/file", encoding: .utf8)) == "shared\n")

            let missing = try s.earmuff.startSandboxed(["--home", "/nonexistent/earmuff-home"], command: ["true"])
            Self.expectRefused(missing, naming: "mkdir -p")
        }

        /// An X11 app inside reaches its display (through the socket in /tmp/.X11-unix,
        /// without the network namespace that holds the abstract one).
        @Test func x11AppsReachTheirDisplay() throws {
            let s = try Setup()
            defer { s.stop() }
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let x = try XServer(directory: scratch)
            defer { x.stop() }
            let (r, _) = try Self.sandboxedScript(s, [], "xdpyinfo > /dev/null && echo reached", environment: ["DISPLAY": x.name])
            #expect(r.succeeded && r.stdoutText == "reached\n", "\(r)")
            // The same with a display that does not exist fails: the check can tell.
            let (none, _) = try Self.sandboxedScript(s, [], "xdpyinfo > /dev/null && echo reached", environment: ["DISPLAY": ":\(x.display + 1)"])
            #expect(!none.succeeded && none.stdoutText.isEmpty, "\(none)")
        }

        /// `--dry-run` prints one shell-quoted bubblewrap command line and starts nothing.
        @Test func dryRunPrintsTheBubblewrapCommandLine() throws {
            let s = try Setup()
            defer { s.stop() }
            let run = try s.earmuff.startSandboxed(
                ["--dry-run", "--app-id", "org.example.Dry", "--purpose", "it's a test"],
                command: ["parecord", "out file.wav"])
            let runtime = run.directory + "/run"
            let r = run.outcome(timeout: 60)
            #expect(r.succeeded, "\(r)")
            let line = r.stdoutText
            #expect(line.hasSuffix("\n") && line.dropLast().split(separator: "\n").count == 1, "\(line)")
            #expect(line.hasPrefix((findExecutable("bwrap") ?? "bwrap") + " --unshare-all "), "\(line)")
            for part in [
                "--dev /dev", "--tmpfs /tmp", "--tmpfs \(runtime)", "/earmuff/app/org.example.Dry@",
                " \(runtime)/pulse/native", "--setenv PULSE_SERVER unix:\(runtime)/pulse/native",
                "--unsetenv PIPEWIRE_REMOTE", "--unsetenv DBUS_SESSION_BUS_ADDRESS",
                "-- parecord 'out file.wav'", #"'application.capture.purpose="it'\''s a test"'"#,
            ] {
                #expect(line.contains(part), "missing \(part) in \(line)")
            }
            #expect(!line.contains("--share-net"))
            #expect(s.earmuff.launcherSockets(appID: "org.example.Dry").isEmpty)
        }

        /// The dry run without a daemon: the display, the bus and the network as the options and
        /// the environment say (a Wayland socket in the runtime directory, an Xauthority file
        /// in a home the sandbox does not show, a bus address with escapes).
        @Test func dryRunFollowsTheDesktopEnvironment() throws {
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let runtime = "\(scratch)/run"
            try TempDir.makeDirectory(runtime)
            for file in ["\(runtime)/wayland-9", "\(scratch)/.Xauthority", "\(scratch)/bus-sock"] {
                try "".write(toFile: file, atomically: true, encoding: .utf8)
            }
            let run = try EarmuffProcess.startSandboxed(
                binary: try EarmuffProcess.locateBinary(), controlPath: "/nonexistent/control",
                ["--dry-run", "--net", "--dbus"], command: ["app"],
                environment: [
                    "XDG_RUNTIME_DIR": runtime, "WAYLAND_DISPLAY": "wayland-9", "DISPLAY": ":0",
                    "XAUTHORITY": "", "HOME": scratch, "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(scratch)/bus%2dsock,guid=1",
                ])
            let r = run.outcome(timeout: 60)
            #expect(r.succeeded, "\(r)")
            let line = r.stdoutText
            for part in [
                "--share-net", "--ro-bind \(runtime)/wayland-9 \(runtime)/wayland-9",
                "--ro-bind \(scratch)/.Xauthority \(runtime)/Xauthority", "--setenv XAUTHORITY \(runtime)/Xauthority",
                "--ro-bind \(scratch)/bus-sock \(runtime)/bus",
                "--setenv DBUS_SESSION_BUS_ADDRESS unix:path=\(runtime)/bus", "/earmuff/sandboxes/app \(scratch) ",
            ] {
                #expect(line.contains(part), "missing \(part) in \(line)")
            }
            // An abstract bus is reachable only with the network namespace: without --net, a clear error.
            let abstract = try EarmuffProcess.startSandboxed(
                binary: try EarmuffProcess.locateBinary(), controlPath: "/nonexistent/control",
                ["--dry-run", "--dbus"], command: ["app"], environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x"])
            Self.expectRefused(abstract, naming: "add --net")
            // The home is mounted over $HOME: without one, nothing runs.
            Self.expectRefused(
                try EarmuffProcess.startSandboxed(
                    binary: try EarmuffProcess.locateBinary(), controlPath: "/nonexistent/control",
                    ["--dry-run"], command: ["app"], environment: ["HOME": ""]), naming: "set HOME")
        }

        /// A missing bubblewrap is a clear error.
        @Test func missingBubblewrapIsNamed() throws {
            let s = try Setup()
            defer { s.stop() }
            // A PATH with what the test's process watchdog needs, and no bwrap.
            let bin = try Helpers.scratch()
            defer { TempDir.remove(bin) }
            for tool in ["sleep", "rm"] { unsafe symlink(findExecutable(tool) ?? "/bin/\(tool)", "\(bin)/\(tool)") }
            Self.expectRefused(
                try s.earmuff.startSandboxed([], command: ["true"], environment: ["PATH": bin]),
                naming: "apt-get install bubblewrap")
        }
    }
}
