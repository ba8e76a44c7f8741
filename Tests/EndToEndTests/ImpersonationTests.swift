// Posing as a granted app, through the real daemon in front of a private
// PulseAudio. Each test grants the key of a real recorder, then records the
// way an attacker would borrow that key: code loaded into the granted program
// from the environment or the interpreter's options, or the granted path shown
// from inside a mount namespace. The borrower must get exact silence under a
// key of its own; the clean program, the test tone.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct ImpersonationTests {
        typealias Setup = ConsentEndToEndTests.Setup
        static let purpose = ConsentEndToEndTests.purpose

        /// A Python recorder on libpulse-simple (ctypes, no module outside the standard library):
        /// 48 kHz s16le mono, 20 ms fragments, appended to `recording.raw` until killed.
        static let pythonRecorder = """
            import ctypes, sys
            pa = ctypes.CDLL("libpulse-simple.so.0")
            class Spec(ctypes.Structure):
                _fields_ = [("format", ctypes.c_int), ("rate", ctypes.c_uint32), ("channels", ctypes.c_uint8)]
            class Attr(ctypes.Structure):
                _fields_ = [(n, ctypes.c_uint32) for n in ("maxlength", "tlength", "prebuf", "minreq", "fragsize")]
            pa.pa_simple_new.restype = ctypes.c_void_p
            spec = Spec(3, 48000, 1)  # PA_SAMPLE_S16LE
            attr = Attr(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 1920)
            err = ctypes.c_int(0)
            s = pa.pa_simple_new(None, b"memo", 2, None, b"memo", ctypes.byref(spec), None, ctypes.byref(attr), ctypes.byref(err))
            if not s:
                sys.exit("pa_simple_new failed: %d" % err.value)
            buf = ctypes.create_string_buffer(1920)
            with open("recording.raw", "wb") as out:
                while pa.pa_simple_read(ctypes.c_void_p(s), buf, 1920, ctypes.byref(err)) >= 0:
                    out.write(buf.raw)
                    out.flush()
            sys.exit("pa_simple_read failed: %d" % err.value)
            """

        /// Waits for a second of audio, then stops the recorder and returns what it recorded.
        static func oneSecond(of rec: Recording, _ s: Setup) async -> Data {
            let got = await rec.waitForAudio(seconds: 1, timeout: 60)
            let (result, audio) = rec.stop()
            #expect(got, "the recorder got no audio: \(result)\n\(s.logs)")
            return audio
        }

        static func expectTone(_ audio: Data, _ s: Setup, sourceLocation: SourceLocation = #_sourceLocation) {
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(
                report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "\(report)\n\(s.logs)",
                sourceLocation: sourceLocation)
        }

        static func expectSilence(_ audio: Data, _ s: Setup, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(
                !audio.isEmpty && AudioAnalysis.isUniform(audio, value: 0), "the borrower heard the microphone\n\(s.logs)",
                sourceLocation: sourceLocation)
        }

        /// The key earmuff gave the one client whose key starts with `prefix`, as status shows it.
        static func keySeen(_ s: Setup, prefix: String) async throws -> String? {
            let status = try await s.earmuff.waitForStatus { st in st.clients.contains { $0.appKey.hasPrefix(prefix) } }
            return status.clients.first { $0.appKey.hasPrefix(prefix) }?.appKey
        }

        /// `LD_LIBRARY_PATH` (as `LD_PRELOAD`) puts other code into the granted parecord.
        @Test func linkerVariablesDoNotBorrowAGrantedExecutable() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let borrowed = try Tool.startPurposefulRecording(
                server: s.earmuff.serverString, purpose: Self.purpose,
                environment: ["LD_LIBRARY_PATH": dir])
            let key = try await Self.keySeen(s, prefix: s.key + "?")
            #expect(key == "\(s.key)?LD_LIBRARY_PATH=\(dir)")
            Self.expectSilence(await Self.oneSecond(of: borrowed, s), s)
            Self.expectTone(await Self.oneSecond(of: try s.record(), s), s)
        }

        /// `PYTHONPATH=DIR python3 granted.py`, with a sitecustomize.py in DIR that runs first.
        @Test func pythonPathDoesNotBorrowAGrantedScript() async throws {
            let s = try Setup()
            defer { s.stop() }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let script = "\(dir)/memo.py"
            try Self.pythonRecorder.write(toFile: script, atomically: true, encoding: .utf8)
            try TempDir.makeDirectory("\(dir)/evil")
            try "import os  # runs before memo.py\n".write(toFile: "\(dir)/evil/sitecustomize.py", atomically: true, encoding: .utf8)
            try s.earmuff.control("grant", "script:\(script)")

            let borrowed = try Tool.startRecordingCommand(
                "python3", args: [script], server: s.earmuff.serverString,
                purpose: Self.purpose, environment: ["PYTHONPATH": "\(dir)/evil"])
            let key = try await Self.keySeen(s, prefix: "script:\(script)?")
            #expect(key == "script:\(script)?PYTHONPATH=\(dir)/evil")
            Self.expectSilence(await Self.oneSecond(of: borrowed, s), s)

            let clean = try Tool.startRecordingCommand(
                "python3", args: [script], server: s.earmuff.serverString,
                purpose: Self.purpose)
            Self.expectTone(await Self.oneSecond(of: clean, s), s)
        }

        /// A mount namespace of its own shows pacat at the path of a granted program.
        @Test func aMountNamespaceDoesNotShowAGrantedPath() async throws {
            let s = try Setup()
            defer { s.stop() }
            guard let unshare = findExecutable("unshare") else { throw TestSupportError("unshare not found (util-linux)") }
            let pacat = String(s.key.dropFirst("exe:".count))
            // A program the user granted, whose path the borrower mounts pacat over.
            let granted = "/usr/bin/true"
            try s.earmuff.control("grant", "exe:\(granted)")
            let command =
                "mount --bind \(pacat) \(granted) && exec \(granted) --record --raw --format=s16le "
                + "--rate=48000 --channels=1 --latency-msec=20 recording.raw"
            let borrowed = try Tool.startRecordingCommand(
                unshare, args: ["--map-root-user", "--mount", "sh", "-c", command],
                server: s.earmuff.serverString, purpose: Self.purpose)
            let key = try await Self.keySeen(s, prefix: "sandboxed:")
            #expect(key == "sandboxed:unknown", "\(s.logs)")
            Self.expectSilence(await Self.oneSecond(of: borrowed, s), s)
        }

        /// The entries of earmuff's launcher-socket directory that belong to `appID`.
        static func launcherSockets(_ s: Setup, appID: String) -> [String] {
            let dir = s.earmuff.runtimeDir + "/earmuff/app"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            return names.filter { $0 == appID || $0.hasPrefix(appID + "@") }.map { dir + "/" + $0 }
        }

        /// A launcher socket admits only its `earmuff run`'s process tree, and is gone when the command exits.
        @Test func aLauncherSocketServesOnlyItsRunAndEndsWithIt() async throws {
            let s = try Setup()
            defer { s.stop() }
            let appID = "org.victim.Notes"
            try s.earmuff.control("grant", "launcher:\(appID)")
            let run = try Tool.start(
                s.earmuff.binary,
                args: [
                    "run", "--app-id", appID, "--control", s.earmuff.controlPath,
                    "--", "sleep", "600",
                ], server: "unix:/nonexistent/pulse/native")
            let appeared = await Wait.until(timeout: 60) { !Self.launcherSockets(s, appID: appID).isEmpty }
            #expect(appeared, "no launcher socket: \(run.process.stderrText())\n\(s.logs)")
            guard let socket = Self.launcherSockets(s, appID: appID).first else { return }

            // Another process of the user connects to that socket: it is not the launcher.
            let outsider = try Tool.startPurposefulRecording(server: "unix:" + socket, purpose: Self.purpose)
            let key = try await Self.keySeen(s, prefix: s.key)
            #expect(key == s.key, "\(s.logs)")
            Self.expectSilence(await Self.oneSecond(of: outsider, s), s)

            // The command exits: its socket goes with it.
            _ = run.stop(signal: SIGTERM)
            let gone = await Wait.until(timeout: 60) { Self.launcherSockets(s, appID: appID).isEmpty }
            #expect(gone, "launcher socket still there after its command exited\n\(s.logs)")
        }

        /// Only `earmuff run` may ask for a launcher socket, not any program on the control socket.
        @Test func onlyEarmuffRunRegistersALauncher() async throws {
            let s = try Setup()
            defer { s.stop() }
            let control = try ControlConnection(path: s.earmuff.controlPath)
            let reply = try control.request(["type": "register-launcher", "appId": "org.victim.Notes"], id: 1)
            #expect(reply?["type"] as? String == "error", "\(String(describing: reply))")
            #expect((reply?["message"] as? String)?.contains("only 'earmuff run'") == true, "\(String(describing: reply))")
            #expect(Self.launcherSockets(s, appID: "org.victim.Notes").isEmpty)
        }

        /// Connects as a granted script; then a forked child asks to record on the inherited
        /// connection, after the parent exec'd another program ("exec") or while it still runs
        /// the script ("fork"); or the script records itself ("self"); or the script exec's a
        /// shell in place (same pid), whose builtin printf sends the request ("inplace").
        static let handOver = """
            import os, socket, sys, time
            path, auth, name, create, out, mode = sys.argv[1:7]
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            def reply():
                head = b""
                while len(head) < 20:
                    head += s.recv(20 - len(head))
                need = int.from_bytes(head[:4], "big")
                while need > 0:
                    need -= len(s.recv(need))
            for request in (auth, name):
                s.sendall(open(request, "rb").read())
                reply()
            me = os.readlink("/proc/self/exe")
            if mode == "inplace":
                os.set_inheritable(s.fileno(), True)
                octal = "".join("\\%03o" % b for b in open(create, "rb").read())
                os.execv("/bin/sh", ["sh", "-c", "printf '%s' >&%d; : > '%s.done'; exec sleep 60" % (octal, s.fileno(), out)])
            if mode == "self" or os.fork() == 0:
                if mode == "exec":
                    while os.readlink("/proc/%d/exe" % os.getppid()) == me:
                        time.sleep(0.01)
                s.sendall(open(create, "rb").read())
                with open(out, "wb") as f:
                    try:
                        while f.tell() < 200000:
                            data = s.recv(65536)
                            if not data:
                                break
                            f.write(data)
                            f.flush()
                    except OSError:
                        pass
                os.rename(out, out + ".done")
                if mode == "self":
                    time.sleep(60)
                os._exit(0)
            s.close()
            if mode == "exec":
                os.execv("/bin/sleep", ["sleep", "60"])
            time.sleep(60)
            """

        /// The bytes the child received, once it is done. The child sends `request` (a record
        /// stream's by default).
        static func handOver(
            _ s: Setup, mode: String,
            request: [UInt8] = RawClient.createRecordStream(tag: 2, properties: ["application.capture.purpose": "x"])
        )
            async throws -> (received: Data, tool: RunningTool)
        {
            let dir = try Helpers.scratch()
            let script = "\(dir)/handover.py"
            try Self.handOver.write(toFile: script, atomically: true, encoding: .utf8)
            try s.earmuff.control("grant", "script:\(script)")
            for (name, bytes) in [
                ("auth", RawClient.auth(tag: 0)), ("name", RawClient.setClientName(tag: 1, name: "handover")),
                ("create", request),
            ] {
                try Data(bytes).write(to: URL(fileURLWithPath: "\(dir)/\(name)"))
            }
            let tool = try Tool.start(
                "python3",
                args: [
                    script, s.earmuff.listenPath, "\(dir)/auth", "\(dir)/name",
                    "\(dir)/create", "\(dir)/out", mode,
                ], server: s.earmuff.serverString)
            let done = await Wait.until(timeout: 60) { FileManager.default.fileExists(atPath: "\(dir)/out.done") }
            #expect(done, "the child did not finish\n\(tool.process.stderrText())\n\(s.logs)")
            let data = (try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/out.done"))) ?? Data()
            TempDir.remove(dir)
            return (data, tool)
        }

        @Test func aConnectionHandedOverByExecIsClosed() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (received, tool) = try await Self.handOver(s, mode: "exec")
            defer { _ = tool.stop(signal: SIGKILL) }
            #expect(received.count < 1000, "the child recorded \(received.count) bytes on a handed-over connection")
            let logged = await Wait.until(timeout: 30) {
                let log = s.earmuff.log()
                return log.contains("its identity changed since it connected") || log.contains("was sent by pid")
            }
            #expect(logged, "\(s.logs)")
        }

        /// A child the connection was handed to records nothing while the parent still runs the script.
        @Test func aForkedChildCannotRecordOnItsParentsConnection() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (received, tool) = try await Self.handOver(s, mode: "fork")
            defer { _ = tool.stop(signal: SIGKILL) }
            #expect(received.count < 1000, "the child recorded \(received.count) bytes on its parent's connection")
            let logged = await Wait.until(timeout: 30) { s.earmuff.log().contains("was sent by pid") }
            #expect(logged, "\(s.logs)")
        }

        /// The granted script recording itself gets the tone (so the tests above can fail).
        @Test func theProgramThatConnectedRecords() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (received, tool) = try await Self.handOver(s, mode: "self")
            defer { _ = tool.stop(signal: SIGKILL) }
            #expect(received.count >= 200000 && received.contains { $0 != 0 }, "\(received.count) bytes\n\(s.logs)")
        }

        /// A program whose path carries terminal escapes cannot rewrite what status, agent and
        /// watch print (a forged line read "flatpak:us.zoom.Zoom (identified by flatpak)").
        @Test func escapesInAPathAreShownNotObeyed() async throws {
            let s = try Setup()
            defer { s.stop() }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let forged = "\(dir)/rec\u{1B}[1A\u{1B}[2Kflatpak:us.zoom.Zoom (identified by flatpak)"
            let pacat = String(s.key.dropFirst("exe:".count))
            try FileManager.default.copyItem(atPath: pacat, toPath: forged)
            let watch = try s.earmuff.startCLI(["watch"])
            defer { _ = watch.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny"])
            defer { _ = agent.stop() }
            // Both print their first line once subscribed: events before that would not reach watch.
            let listening = await Wait.until(timeout: 60) {
                watch.output().contains("watching") && agent.output().contains("answering every prompt")
            }
            #expect(listening, "agent:\n\(agent.output())\nwatch:\n\(watch.output())\n\(s.logs)")
            let rec = try Tool.startRecordingCommand(
                forged,
                args: [
                    "--record", "--raw", "--format=s16le", "--rate=48000",
                    "--channels=1", "--latency-msec=20", "recording.raw",
                ],
                server: s.earmuff.serverString, purpose: Self.purpose)
            defer { _ = rec.stop() }
            let seen = await Wait.until(timeout: 60) { agent.output().contains("us.zoom.Zoom") && watch.output().contains("us.zoom.Zoom") }
            #expect(seen, "agent:\n\(agent.output())\nwatch:\n\(watch.output())\n\(s.logs)")
            let status = try s.earmuff.runCLI(["status"]).stdoutText
            let apps = try s.earmuff.runCLI(["apps"]).stdoutText
            for (name, text) in [("status", status), ("apps", apps), ("agent", agent.output()), ("watch", watch.output())] {
                #expect(!text.unicodeScalars.contains { $0.value == 0x1B }, "\(name) printed a raw escape:\n\(text)")
                #expect(text.contains("\\x1B[1A"), "\(name) does not show the escape:\n\(text)")
            }
        }

        /// A sandbox with a made-up /.flatpak-info started from a terminal: the user's systemd
        /// runs it in the terminal's unit, not in the app's `app-flatpak-ID-N.scope`, so it is
        /// not that app. The same sandbox in a scope named for the app is taken for it: a
        /// hand-made cgroup of that name is the limit the README states.
        @Test func aFlatpakInfoFromATerminalIsNotTheApp() async throws {
            guard let root = Sandbox.writableCgroup2Root() else { return } // needs root and a writable cgroup2
            let s = try Setup()
            defer { s.stop() }
            let appID = "org.victim.Recorder"
            try s.earmuff.control("grant", "flatpak:\(appID)")
            let slice = "\(root)/user.slice/user-\(getuid()).slice/user@\(getuid()).service/app.slice"
            let terminal = "\(slice)/vte-spawn-earmuff-\(getpid()).scope"
            let scope = "\(slice)/app-flatpak-\(appID)-\(getpid()).scope"
            for dir in [terminal, scope] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            defer { for dir in [terminal, scope] { unsafe rmdir(dir) } }

            let forged = try Sandbox.startFlatpakRecording(
                appID: appID, sessionSocket: s.earmuff.listenPath,
                purpose: Self.purpose, cgroup: terminal)
            let key = try await Self.keySeen(s, prefix: "sandboxed:")
            #expect(key == "sandboxed:unknown", "\(forged.tool.process.stderrText())\n\(s.logs)")
            Self.expectSilence(await Self.oneSecond(of: forged, s), s)
            #expect(s.earmuff.log().contains("its /.flatpak-info names \(appID), but it runs in vte-spawn-earmuff"), "\(s.logs)")

            let scoped = try Sandbox.startFlatpakRecording(
                appID: appID, sessionSocket: s.earmuff.listenPath,
                purpose: Self.purpose, cgroup: scope)
            let status = try await s.earmuff.waitForStatus { !$0.clients(of: "flatpak:\(appID)").isEmpty }
            #expect(status.clients(of: "flatpak:\(appID)").first?.identifiedBy == "flatpak", "\(status)")
            Self.expectTone(await Self.oneSecond(of: scoped, s), s)
        }

        /// A same-uid host process that builds what a Flatpak app shows (an `app-flatpak-ID-N.scope`
        /// cgroup of its own and a `/.flatpak-info` bound with bwrap) is taken for the app: the
        /// cgroup path is all the kernel tells. It is never labelled strong outright: status, apps
        /// and the prompt say the identity holds against the app's sandbox only, and that any
        /// unsandboxed program of yours can build it.
        @Test func aHandMadeFlatpakScopeIsLabelledForWhatItResists() async throws {
            guard let root = Sandbox.writableCgroup2Root() else { return } // needs root and a writable cgroup2
            let s = try Setup()
            defer { s.stop() }
            let appID = "org.victim.Recorder"
            let key = "flatpak:\(appID)"
            let scope = "\(root)/user.slice/user-\(getuid()).slice/user@\(getuid()).service/app.slice/app-flatpak-\(appID)-\(getpid()).scope"
            try FileManager.default.createDirectory(atPath: scope, withIntermediateDirectories: true)
            defer { unsafe rmdir(scope) }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny"])
            defer { _ = agent.stop() }
            #expect(await Wait.until(timeout: 60) { agent.output().contains("answering every prompt") }, "\(agent.output())")

            let forged = try Sandbox.startFlatpakRecording(
                appID: appID, sessionSocket: s.earmuff.listenPath,
                purpose: Self.purpose, cgroup: scope)
            defer { _ = forged.stop() }
            let status = try await s.earmuff.waitForStatus { !$0.clients(of: key).isEmpty }
            let client = status.clients(of: key).first
            #expect(client?.identifiedBy == "flatpak" && client?.strength == "sandbox", "\(status)\n\(s.logs)")
            let statusText = try s.earmuff.runCLI(["status"]).stdoutText
            #expect(statusText.contains("flatpak, strong against its sandbox only"), "\(statusText)")

            // The prompt says who else can build it; the agent's deny makes an apps row.
            #expect(await Wait.until(timeout: 60) { agent.output().contains(key) }, "\(agent.output())\n\(s.logs)")
            #expect(
                agent.output().contains(
                    "strong against its sandbox only: the app cannot change its scope or metadata "
                        + "from inside, but any unsandboxed program of yours can build both"), "\(agent.output())")
            #expect(!agent.output().contains("(strong:"), "\(agent.output())")
            var apps: [AppView] = []
            await Wait.until(timeout: 60) {
                apps = (try? s.earmuff.apps())?.filter { $0.key == key } ?? []
                return !apps.isEmpty
            }
            #expect(apps.first?.strength == "sandbox", "\(apps)")
            let appsText = try s.earmuff.runCLI(["apps"]).stdoutText
            #expect(appsText.contains("flatpak, strong against its sandbox only"), "\(appsText)")
        }

        /// A process that makes itself non-dumpable cannot be inspected. It once fell back to a
        /// key every hidden process shared (exe:unknown); granted, every such process recorded.
        /// Now each gets a key of its own and never real audio. Staged as another user (a
        /// non-dumpable process of root stays readable to root): earmuff and the app run as nobody.
        @Test func aHiddenProcessNeverSharesAGrantedKey() async throws {
            // The system python: an interpreter under root's home (pyenv) is not nobody's to run.
            let python = "/usr/bin/python3"
            guard getuid() == 0, let setpriv = findExecutable("setpriv"), unsafe access(python, X_OK) == 0 else { return }
            // Identification does not depend on the server; the private pipewire-pulse is not
            // opened to another uid as simply as PulseAudio's anonymous socket, so PulseAudio only.
            guard (try? ServerKind.selected()) != .pipewire else { return }
            let nobody: UInt32 = 65534
            let server = try PulseServer()
            defer { server.stop() }
            // Let nobody reach the private server (anonymous auth), as a user's own server would be.
            let serverDir = (server.socketPath as NSString).deletingLastPathComponent
            unsafe chmod(serverDir, 0o755)
            unsafe chmod(server.socketPath, 0o777)
            let earmuff = try EarmuffProcess(upstream: server.serverString, runAs: nobody)
            defer { earmuff.stop() }
            try earmuff.control("grant", "exe:unknown")

            let dir = try TempDir.make(prefix: "earmuff-hidden")
            defer { TempDir.remove(dir) }
            unsafe chown(dir, nobody, nobody)
            let script = "\(dir)/hidden.py"
            try ("import ctypes\nctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE\n" + Self.pythonRecorder)
                .write(toFile: script, atomically: true, encoding: .utf8)
            var env = Tool.privateEnvironment(root: dir)
            env["PULSE_SERVER"] = earmuff.serverString
            env["PULSE_PROP"] = Tool.purposeProperty(Self.purpose)
            let child = try ChildProcess.spawn(
                executable: setpriv,
                arguments: [
                    "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
                    "/usr/bin/env", "-C", dir, python, script,
                ],
                environment: env, stdoutPath: "\(dir)/out", stderrPath: "\(dir)/err",
                maxLifetime: 120)
            defer { _ = child.terminate(signal: SIGKILL, grace: 1) }
            let status = try await earmuff.waitForStatus { $0.clients.contains { $0.appKey.hasPrefix("unknown:pid-") } }
            let client = status.clients.first { $0.appKey.hasPrefix("unknown:pid-") }
            #expect(client?.identifiedBy == "uninspectable", "\(status)\n\(child.stderrText())\n\(earmuff.log())")
            let file = "\(dir)/recording.raw"
            func bytes() -> Data { (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data() }
            let got = await Wait.until(timeout: 60) { bytes().count >= 96000 || !child.isRunning }
            #expect(got, "\(child.stderrText())\n\(earmuff.log())")
            let audio = bytes()
            #expect(!audio.isEmpty && AudioAnalysis.isUniform(audio, value: 0), "a hidden process heard the microphone")
        }
    }
}
