// `earmuff run --sandbox`: a plain parecord inside records silence until its
// launcher:ID is granted and the tone after; every other sound path (the real
// server's socket, pulse/upstream, pipewire-0, /dev/snd, another run's launcher
// socket, the session bus, abstract sockets) fails from inside while it works
// from outside; a process outside cannot use the sandbox's socket; the socket
// goes when the app exits. SandboxDefaultsTests has the rest.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SandboxRunTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// Tries each target and prints `target result` per line: `ok`, or the errno name.
        /// `unix:PATH` and `abstract:NAME` connect a stream socket, `tcp:PORT` one to 127.0.0.1;
        /// `open:PATH` opens a device.
        static let probe = """
            import errno, os, socket, sys
            for t in sys.argv[1:]:
                kind, _, where = t.partition(":")
                try:
                    if kind == "open":
                        os.close(os.open(where, os.O_RDWR | os.O_NONBLOCK))
                    elif kind == "tcp":
                        socket.create_connection(("127.0.0.1", int(where)), timeout=10).close()
                    else:
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        s.connect("\\0" + where if kind == "abstract" else where)
                        s.close()
                    print(t, "ok", flush=True)
                except OSError as e:
                    print(t, errno.errorcode.get(e.errno, str(e.errno)), flush=True)
            """

        static func parse(_ text: String) -> [String: String] {
            var out: [String: String] = [:]
            for line in text.split(separator: "\n") {
                guard let space = line.lastIndex(of: " ") else { continue }
                out[String(line[..<space])] = String(line[line.index(after: space)...])
            }
            return out
        }

        /// Runs the probe inside a sandbox with `options`; its results and the run's outcome.
        static func probeInside(
            _ s: Setup, _ options: [String], _ targets: [String],
            environment: [String: String] = [:]
        ) throws -> ([String: String], ToolResult) {
            let run = try s.earmuff.startSandboxed(options, command: ["python3", "-c", probe] + targets, environment: environment)
            let result = run.outcome(timeout: 120)
            return (parse(result.stdoutText), result)
        }

        /// A plain parecord in the sandbox is launcher:ID (strong against its sandbox only): silence until granted,
        /// the tone after; an outside recorder on the same socket is itself and hears
        /// silence; the socket goes when the app exits.
        @Test func sandboxedRecorderIsTheLauncherAndHearsOnlyOnceGranted() async throws {
            let s = try Setup()
            defer { s.stop() }
            let appID = "org.example.Sandboxed"
            let rec = try s.earmuff.startSandboxedRecording(["--app-id", appID, "--purpose", "sandbox test"])
            defer { rec.tool.cleanup() }
            let status = try await s.earmuff.waitForStatus { $0.clients(of: "launcher:\(appID)").count == 1 }
            let client = status.clients(of: "launcher:\(appID)").first
            #expect(client?.strength == "sandbox", "\(String(describing: client))")

            // Undetermined: silence.
            let got = await rec.waitForAudio(seconds: 1, timeout: 90)
            #expect(got, "no audio from the sandboxed parecord: \(rec.tool.process.stderrText())\n\(s.logs)")
            #expect(rec.isExactSilence(), "the sandboxed app heard the microphone before it was granted")

            // Granted: the tone, from the next frames on.
            try s.earmuff.control("grant", "launcher:\(appID)")
            let mark = rec.byteCount()
            let more = await Wait.until(timeout: 90) { rec.byteCount() >= mark + rec.bytesPerSecond * 3 / 2 }
            #expect(more, "the sandboxed parecord stopped recording\n\(s.logs)")

            // A process outside the sandbox connects to the sandbox's socket: it is not the launcher.
            let socket = s.earmuff.launcherSockets(appID: appID)
            #expect(socket.count == 1, "\(socket)")
            if let path = socket.first {
                let outsider = try Tool.startPurposefulRecording(server: "unix:" + path, purpose: "outside")
                let outsiderAudio = await ImpersonationTests.oneSecond(of: outsider, s)
                ImpersonationTests.expectSilence(outsiderAudio, s)
                let st = try s.earmuff.status()
                #expect(st.clients(of: "launcher:\(appID)").count == 1, "the outsider was taken for the launcher")
            }

            let (result, audio) = rec.stop()
            let tail = audio.subdata(in: min(audio.count, (mark + rec.bytesPerSecond / 2) & ~1)..<audio.count)
            ImpersonationTests.expectTone(tail, s)
            #expect(result.status == 0, "\(result)")
            let gone = await Wait.until(timeout: 60) { s.earmuff.launcherSockets(appID: appID).isEmpty }
            #expect(gone, "the launcher socket outlived the sandbox\n\(s.logs)")
        }

        /// As a normal user (nobody; bubblewrap then makes a user namespace of its own):
        /// the app is still launcher:ID, has no capabilities, and hears the tone once granted.
        @Test func worksForANormalUser() async throws {
            guard getuid() == 0, findExecutable("setpriv") != nil else { return }
            // PulseAudio's anonymous socket opens to another uid simply; identification
            // and the sandbox do not depend on the server.
            guard (try? ServerKind.selected()) != .pipewire else { return }
            let nobody: UInt32 = 65534
            let server = try PulseServer()
            defer { server.stop() }
            unsafe chmod((server.socketPath as NSString).deletingLastPathComponent, 0o755)
            unsafe chmod(server.socketPath, 0o777)
            let earmuff = try EarmuffProcess(upstream: server.serverString, runAs: nobody)
            defer { earmuff.stop() }
            let appID = "org.example.User"
            try earmuff.control("grant", "launcher:\(appID)")
            let rec = try earmuff.startSandboxedRecording(["--app-id", appID, "--purpose", "test"], runAs: nobody)
            defer { rec.tool.cleanup() }
            let got = await rec.waitForAudio(seconds: 1.5, timeout: 90)
            let status = try earmuff.status()
            let (result, audio) = rec.stop()
            #expect(status.clients(of: "launcher:\(appID)").first?.strength == "sandbox", "\(status)")
            #expect(got, "\(result)\n\(earmuff.log())")
            let report = Helpers.analyze(audio.subdata(in: min(audio.count, rec.bytesPerSecond / 2)..<audio.count), format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "\(report)\n\(earmuff.log())")

            let caps = try earmuff.startSandboxed([], command: ["sh", "-c", "id -u; grep CapEff /proc/self/status"], runAs: nobody)
            let c = caps.outcome(timeout: 60)
            #expect(c.stdoutText.contains("65534\n") && c.stdoutText.contains("CapEff:\t0000000000000000"), "\(c)")
        }

        /// Every way around Earmuff works from outside and fails from inside: the real
        /// server's socket, pulse/upstream, pipewire-0, /dev/snd, another run's launcher
        /// socket, Earmuff's control socket, the session bus, an abstract socket, TCP. `--dbus` and `--net` open exactly
        /// the bus and the abstract socket.
        @Test func everyBypassFailsFromInside() async throws {
            let s = try Setup()
            defer { s.stop() }
            let world = try BypassWorld(s)
            defer { world.stop() }

            // Another run, whose launcher socket must stay out of reach.
            let other = try s.earmuff.startSandboxed(["--app-id", "org.example.Other"], command: ["sleep", "600"])
            defer { _ = other.stop(signal: SIGTERM) }
            let appeared = await Wait.until(timeout: 60) { !s.earmuff.launcherSockets(appID: "org.example.Other").isEmpty }
            #expect(appeared, "no launcher socket for the other run: \(other.process.stderrText())")
            let otherSocket = s.earmuff.launcherSockets(appID: "org.example.Other").first ?? "/nonexistent"

            let runtime = world.runtime
            let env = ["XDG_RUNTIME_DIR": runtime]
            // Also the daemon's control socket: an app that reached it could grant itself.
            let closed = world.closedTargets + ["unix:\(otherSocket)", "unix:\(s.earmuff.controlPath)"]
            let openable = ["unix:\(runtime)/bus", "abstract:\(world.abstractName)", "tcp:\(world.tcpPort)"]

            // From outside, each path leads somewhere (a device node answers, but not ENOENT).
            let outside = try Tool.run("python3", args: ["-c", Self.probe] + closed + openable, server: "")
            let before = Self.parse(outside.stdoutText)
            for t in closed + openable {
                #expect(before[t] != nil && before[t] != "ENOENT", "outside, \(t) is \(before[t] ?? "missing"): \(outside)")
            }

            // Inside: nothing but the sandbox's own socket.
            let (inside, run) = try Self.probeInside(
                s, [], ["unix:\(runtime)/pulse/native"] + closed + openable,
                environment: env)
            #expect(run.status == 0, "\(run)")
            #expect(inside["unix:\(runtime)/pulse/native"] == "ok", "the sandbox's own socket: \(run)")
            for t in closed + ["unix:\(runtime)/bus"] {
                #expect(inside[t] == "ENOENT", "inside, \(t) is \(inside[t] ?? "missing"), not absent: \(run)")
            }
            for t in ["abstract:\(world.abstractName)", "tcp:\(world.tcpPort)"] {
                #expect(inside[t] == "ECONNREFUSED", "without --net, \(t) is \(inside[t] ?? "missing"): \(run)")
            }

            // --dbus passes the session bus; --net the host's network namespace; nothing else.
            let (wider, widerRun) = try Self.probeInside(s, ["--dbus", "--net"], closed + openable, environment: env)
            for t in openable { #expect(wider[t] == "ok", "with --dbus --net, \(t) is \(wider[t] ?? "missing"): \(widerRun)") }
            for t in closed { #expect(wider[t] == "ENOENT", "with --dbus --net, \(t) is \(wider[t] ?? "missing"): \(widerRun)") }

            // The real server, named explicitly, is unreachable from inside; the default path is Earmuff.
            let upstream = try s.earmuff.startSandboxed(
                [],
                command: [
                    "env", "PULSE_SERVER=unix:\(runtime)/pulse/upstream",
                    "parecord", "--raw", "/dev/null",
                ],
                environment: env)
            let refused = upstream.outcome(timeout: 60)
            #expect(refused.status != 0 && !refused.timedOut, "parecord reached pulse/upstream from inside: \(refused)")
            let viaOutside = try Tool.run("pactl", args: ["info"], server: "unix:\(runtime)/pulse/upstream")
            #expect(viaOutside.succeeded, "pulse/upstream does not lead to the server from outside: \(viaOutside)")
            let info = try s.earmuff.startSandboxed([], command: ["pactl", "info"], environment: env)
            let infoResult = info.outcome(timeout: 60)
            #expect(infoResult.succeeded && infoResult.stdoutText.contains("Server Name"), "\(infoResult)\n\(s.logs)")
        }
    }
}

/// What the bypass test puts around a sandboxed run: in the run's runtime directory
/// `pulse/upstream` (a link to the real server's socket, as `earmuff setup` leaves it),
/// `pipewire-0` (PipeWire's real socket, or a listening stand-in before PulseAudio) and
/// `bus` (a listening stand-in); an abstract socket; and a /dev/snd capture node
/// (the machine's, or a stand-in made with mknod and removed after).
final class BypassWorld {
    let runtime: String
    let abstractName: String
    /// A port on 127.0.0.1 listening on the host (a sound server on TCP).
    let tcpPort: UInt16
    let device: String
    private var listeners: [Int32] = []
    private var madeDevice: String?
    private var madeDirectory = false
    private let abstractListener: ChildProcess
    /// Paths that must be unreachable from inside, as probe targets.
    let closedTargets: [String]

    init(_ s: EndToEnd.SandboxRunTests.Setup) throws {
        // The sandboxed runs of the test get `<dir>/run` of their own; the world is
        // built in the runtime directory they share the shape of, see `startSandboxed`.
        runtime = try TempDir.make(prefix: "earmuff-bypass")
        abstractName = "earmuff-test-abstract-\(getpid())"
        guard let socat = findExecutable("socat") else { throw TestSupportError("socat not found; install socat") }
        abstractListener = try ChildProcess.spawn(
            executable: socat, arguments: ["ABSTRACT-LISTEN:\(abstractName),fork", "EXEC:/bin/true"],
            environment: ProcessInfo.processInfo.environment,
            stdoutPath: "\(runtime).socat.out", stderrPath: "\(runtime).socat.err",
            maxLifetime: 900, cleanupDirectory: nil)
        try TempDir.makeDirectory("\(runtime)/pulse")
        unsafe symlink(s.server.socketPath, "\(runtime)/pulse/upstream")
        if let pw = s.server.pipeWire {
            unsafe symlink(pw.runtimeDir + "/pipewire-0", "\(runtime)/pipewire-0")
        } else {
            listeners.append(try UnixSocket.listen("\(runtime)/pipewire-0"))
        }
        listeners.append(try UnixSocket.listen("\(runtime)/bus"))
        let (tcp, port) = try Self.listenTCP()
        listeners.append(tcp)
        tcpPort = port
        device = try Self.captureNode(madeDevice: &madeDevice, madeDirectory: &madeDirectory)
        var closed = [
            "unix:\(s.server.socketPath)", "unix:\(runtime)/pulse/upstream", "unix:\(runtime)/pipewire-0",
            "open:\(device)",
        ]
        if let pw = s.server.pipeWire { closed.append("unix:\(pw.runtimeDir)/pipewire-0") }
        closedTargets = closed
        let listening = Wait.untilBlocking(timeout: 30) { Self.abstractAnswers(self.abstractName) }
        if !listening { stop(); throw TestSupportError("socat never listened on @\(abstractName)") }
    }

    /// A listening TCP socket on 127.0.0.1 at a port the kernel picks.
    static func listenTCP() throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = unsafe withUnsafeMutablePointer(to: &addr) { p in
            unsafe p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                unsafe bind(fd, $0, len) == 0 && Glibc.listen(fd, 16) == 0 && getsockname(fd, $0, &len) == 0
            }
        }
        guard ok else {
            close(fd)
            throw TestSupportError("cannot listen on 127.0.0.1: errno \(errno)")
        }
        return (fd, UInt16(bigEndian: addr.sin_port))
    }

    static func abstractAnswers(_ name: String) -> Bool {
        (try? Tool.run("python3", args: ["-c", EndToEnd.SandboxRunTests.probe, "abstract:\(name)"], server: ""))?
            .stdoutText.contains(" ok") == true
    }

    /// A character device under /dev/snd: the machine's first, or a stand-in capture node.
    static func captureNode(madeDevice: inout String?, madeDirectory: inout Bool) throws -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev/snd")) ?? []).sorted()
        for n in names {
            var st = stat()
            if unsafe stat("/dev/snd/\(n)", &st) == 0 && st.st_mode & S_IFMT == S_IFCHR { return "/dev/snd/\(n)" }
        }
        if unsafe access("/dev/snd", F_OK) != 0 {
            guard unsafe mkdir("/dev/snd", 0o755) == 0 else { throw TestSupportError("cannot make /dev/snd (errno \(errno)); run as root") }
            madeDirectory = true
        }
        let path = "/dev/snd/pcmC99D0c"
        // ALSA's major number 116, minor 99 (dev_t major << 8 | minor for numbers this small):
        // no such card, so the node opens to no driver.
        guard unsafe mknod(path, S_IFCHR | 0o660, dev_t(116 << 8 | 99)) == 0 || errno == EEXIST else {
            throw TestSupportError("cannot make a stand-in \(path) (errno \(errno)); run as root")
        }
        madeDevice = path
        return path
    }

    func stop() {
        for fd in listeners { close(fd) }
        listeners = []
        _ = abstractListener.terminate()
        if let d = madeDevice { unsafe unlink(d) }
        if madeDirectory { unsafe rmdir("/dev/snd") }
        TempDir.remove(runtime)
        unsafe unlink("\(runtime).socat.out")
        unsafe unlink("\(runtime).socat.err")
    }
}
