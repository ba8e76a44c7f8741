import Foundation
import Glibc
import Synchronization

/// A private, real, headless PipeWire for one test, in a fresh temp directory:
/// its own `dbus-daemon`, then `pipewire`, `wireplumber` and `pipewire-pulse`,
/// with a null sink `out` (default sink), a 440 Hz test-tone microphone `mic`
/// (mono, default source) and the PulseAudio-protocol socket at `socketPath`.
///
/// Nothing outside the directory is used: every configuration file is written
/// here (`PIPEWIRE_CONFIG_DIR`, and wireplumber's under `XDG_CONFIG_HOME`),
/// the session bus is private and activates no services, and the system bus
/// address points at a socket that does not exist. Realtime scheduling and
/// renicing are left out of the configuration, so running as root does not
/// give the daemons realtime threads that crowd a small CI machine; ALSA,
/// V4L2, libcamera and Bluetooth monitoring are off.
///
/// pipewire-pulse has no sine source, so the microphone is built: `sox`
/// writes an endless mono 440 Hz sine of amplitude `toneAmplitude` (0.5, the
/// level of `PulseServer`'s sine source) into a FIFO that pipewire-pulse's
/// `module-pipe-source` reads as the source `mic`, a source of its own as a
/// capture device is. (PipeWire's own `audiotestsrc` is no use here: in 0.3.65
/// it runs out of buffers once its first recorder leaves, and every later
/// recording of it stays empty. A loopback from a sink's monitor would be a
/// source fed from a monitor, which Earmuff takes for system audio.)
///
/// Keep the object alive for the whole test (`defer { server.stop() }`).
public final class PipeWireServer: Sendable {
    /// The private directory holding configuration, runtime dir and logs.
    public let directory: String
    /// The daemons' XDG_RUNTIME_DIR (holds `pipewire-0`, `bus` and `pulse/native`).
    public let runtimeDir: String
    /// pipewire-pulse's native-protocol socket, `<runtimeDir>/pulse/native`.
    public let socketPath: String
    /// `unix:<socketPath>`, for PULSE_SERVER or `--upstream`.
    public var serverString: String { "unix:\(socketPath)" }
    /// The private session bus the daemons use.
    public let busAddress: String
    /// pipewire-pulse's log (its protocol module logs at info level: each AUTH,
    /// SET_CLIENT_NAME, stream and module command).
    public let logPath: String
    /// The private `dbus-daemon`.
    public let dbusProcess: ChildProcess
    /// The `pipewire` daemon.
    public let pipewireProcess: ChildProcess
    /// The `wireplumber` session manager.
    public let wireplumberProcess: ChildProcess
    /// The `pipewire-pulse` server (the process the tests talk to).
    public let process: ChildProcess
    /// The inode of the socket `systemd-socket-activate` bound (with `socketActivated`).
    public let activatedSocketInode: UInt?
    /// Each tone: `pacat` playing a FIFO into a sink, and `sox` writing the sine into the FIFO.
    private let tones: Mutex<[(player: RunningTool, generator: ChildProcess)]> = Mutex([])
    /// The `sox` writing the microphone's sine into the FIFO `mic` reads.
    private let microphone: Mutex<ChildProcess?> = Mutex(nil)
    private let maxLifetime: Int

    private let stopped = Mutex(false)

    /// Name of the default sink (a null sink).
    public static let sinkName = "out"
    /// Name of the default source (the test tone).
    public static let sourceName = "mic"
    /// Frequency of the test tone on `mic`.
    public static let toneFrequency = 440.0
    /// The graph's sample rate, and the tone's.
    public static let toneRate = 48000
    /// Peak amplitude of the tone on `mic`.
    public static let toneAmplitude = 0.5

    /// Starts the four daemons and the tone, and waits (up to `startTimeout`
    /// seconds) until `pactl info` answers with `out` and `mic` as defaults.
    /// `extraConfig` takes PulseAudio startup-script lines (as `PulseServer` does)
    /// and carries them out the PipeWire way: `load-module module-stream-restore`
    /// and `module-device-restore` are built into pipewire-pulse and skipped,
    /// `load-module module-sine sink=S frequency=F` becomes `playTone`, and any
    /// other line runs as `pactl <line>`; one that fails makes the start fail.
    /// The watchdog ends every process when the test process dies, or after
    /// `maxLifetime` seconds.
    ///
    /// With `configHome`, pipewire-pulse runs as a session's would: with
    /// `XDG_CONFIG_HOME=configHome` and no `PIPEWIRE_CONFIG_DIR`, its main
    /// configuration in `configHome/pipewire/pipewire-pulse.conf` (written
    /// here, standing in for the distribution's) and whatever the user's
    /// `pipewire-pulse.conf.d/` there says; it is then expected to listen at
    /// `run/pulse/<pulseSocketName>`. With `socketActivated` too, it is
    /// started as its systemd socket unit would start it: by
    /// `systemd-socket-activate`, which binds that path first and passes the
    /// socket on the first connection; `activatedSocketInode` is that socket's inode.
    ///
    /// With `daemonConfig`, the daemon reads what it makes of the configuration built here
    /// (its text) instead: `earmuff setup`'s copy of it, say, with module-access holding
    /// native clients.
    public init(
        extraConfig: [String] = [], startTimeout: Double = 60, maxLifetime: Int = 1800,
        configHome: String? = nil, pulseSocketName: String = "native", socketActivated: Bool = false,
        daemonConfig: ((String) throws -> String)? = nil
    ) throws {
        var missing: [String] = []
        for tool in ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "pacat", "sox"] where findExecutable(tool) == nil {
            missing.append(tool)
        }
        // findExecutable returned non-nil for all of these (checked just above).
        guard missing.isEmpty, let dbus = findExecutable("dbus-daemon"), let pipewire = findExecutable("pipewire"),
            let wireplumber = findExecutable("wireplumber"), let pulse = findExecutable("pipewire-pulse")
        else {
            throw TestSupportError(
                "\(missing.joined(separator: ", ")) not found in PATH; install pipewire pipewire-bin pipewire-pulse wireplumber libspa-0.2-modules dbus pulseaudio-utils sox"
            )
        }
        let dir = try TempDir.make(prefix: "earmuff-pw")
        directory = dir
        runtimeDir = "\(dir)/run"
        socketPath = "\(dir)/run/pulse/\(pulseSocketName)"
        busAddress = "unix:path=\(dir)/run/bus"
        logPath = "\(dir)/pipewire-pulse.log"
        self.maxLifetime = maxLifetime
        let deadline = Wait.now() + startTimeout

        var started: [ChildProcess] = []
        func spawn(_ executable: String, _ arguments: [String], log: String, env: [String: String]) throws -> ChildProcess {
            let child = try ChildProcess.spawn(
                executable: executable, arguments: arguments, environment: env,
                stdoutPath: "\(dir)/\(log)", stderrPath: "\(dir)/\(log)",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
            started.append(child)
            return child
        }
        func waitFor(_ what: String, _ child: ChildProcess, _ condition: () -> Bool) throws {
            let ok = Wait.untilBlocking(timeout: max(0, deadline - Wait.now()), interval: 0.02) {
                !child.isRunning || condition()
            }
            guard child.isRunning, ok else {
                let why = child.isRunning ? "did not become ready within \(startTimeout) s" : "exited (status \(child.poll() ?? -1))"
                throw TestSupportError("\(what) \(why); logs:\n\(Self.logs(of: dir))")
            }
        }
        do {
            try Self.writeConfiguration(in: dir, daemon: try daemonConfig?(Self.pipewireConfig) ?? Self.pipewireConfig)
            let env = Self.environment(root: dir)
            dbusProcess = try spawn(
                dbus, ["--config-file=\(dir)/dbus.conf", "--nofork", "--nopidfile", "--print-address"],
                log: "dbus.log", env: env)
            try waitFor("dbus-daemon", dbusProcess) { UnixSocket.canConnect("\(dir)/run/bus") }
            pipewireProcess = try spawn(pipewire, [], log: "pipewire.log", env: env)
            try waitFor("pipewire", pipewireProcess) { UnixSocket.canConnect("\(dir)/run/pipewire-0") }
            var wireplumberEnv = env
            // For a diagnosis: WirePlumber's log at this level (3: what policy-node does).
            if let level = ProcessInfo.processInfo.environment["EARMUFF_TEST_WIREPLUMBER_DEBUG"] {
                wireplumberEnv["WIREPLUMBER_DEBUG"] = level
            }
            wireplumberProcess = try spawn(wireplumber, [], log: "wireplumber.log", env: wireplumberEnv)
            var pulseEnv = env
            // Info level for the protocol module only: one line per AUTH and per
            // command worth knowing about, no per-cycle noise.
            pulseEnv["PIPEWIRE_DEBUG"] = "2,mod.protocol-pulse:3"
            if let configHome {
                try TempDir.makeDirectory("\(configHome)/pipewire")
                try Self.pipewirePulseConfig.write(toFile: "\(configHome)/pipewire/pipewire-pulse.conf", atomically: true, encoding: .utf8)
                pulseEnv["XDG_CONFIG_HOME"] = configHome
                pulseEnv.removeValue(forKey: "PIPEWIRE_CONFIG_DIR")
            }
            if socketActivated {
                guard let activate = findExecutable("systemd-socket-activate") else {
                    throw TestSupportError("systemd-socket-activate not found in PATH; install systemd")
                }
                try TempDir.makeDirectory("\(dir)/run/pulse")
                // Like a service manager, it passes the service only the variables named with -E.
                let pass = pulseEnv.keys.sorted().flatMap { ["-E", $0] }
                let path = "\(dir)/run/pulse/\(pulseSocketName)"
                let child = try spawn(activate, ["-l", path] + pass + [pulse], log: "pipewire-pulse.log", env: pulseEnv)
                process = child
                var st = stat()
                try waitFor("systemd-socket-activate", child) { unsafe stat(path, &st) == 0 }
                activatedSocketInode = UInt(st.st_ino)
            } else {
                process = try spawn(pulse, [], log: "pipewire-pulse.log", env: pulseEnv)
                activatedSocketInode = nil
            }
        } catch {
            for child in started.reversed() { child.terminate(signal: SIGTERM, grace: 5) }
            TempDir.remove(dir)
            throw error
        }
        do {
            try waitUntilReady(deadline: deadline, timeout: startTimeout)
            for line in extraConfig {
                try apply(scriptLine: line)
            }
        } catch {
            stop()
            throw error
        }
    }

    /// Polls until pipewire-pulse answers, starts the microphone, and waits until
    /// wireplumber has taken `out` and `mic` as defaults. Setting the defaults is
    /// retried because wireplumber creates the `default` metadata a moment after start.
    private func waitUntilReady(deadline: Double, timeout: Double) throws {
        var last = "nothing answered yet"
        while Wait.now() < deadline {
            for (name, child) in [
                ("pipewire", pipewireProcess), ("wireplumber", wireplumberProcess),
                ("pipewire-pulse", process), ("dbus-daemon", dbusProcess),
            ] where !child.isRunning {
                throw TestSupportError("\(name) exited during startup (status \(child.poll() ?? -1)); logs:\n\(logs())")
            }
            if UnixSocket.canConnect(socketPath) {
                let budget = max(1, min(10, deadline - Wait.now()))
                if microphone.withLock({ $0 == nil }) {
                    guard try Tool.run("pactl", args: ["info"], server: serverString, timeout: budget).succeeded else {
                        usleep(100_000)
                        continue
                    }
                    try startMicrophone(timeout: budget)
                }
                _ = try Tool.run("pactl", args: ["set-default-sink", Self.sinkName], server: serverString, timeout: budget)
                _ = try Tool.run("pactl", args: ["set-default-source", Self.sourceName], server: serverString, timeout: budget)
                let info = try Tool.run("pactl", args: ["info"], server: serverString, timeout: budget)
                let text = info.stdoutText
                if info.succeeded, text.contains("Default Sink: \(Self.sinkName)\n"),
                    text.contains("Default Source: \(Self.sourceName)\n")
                {
                    return
                }
                last = "\(info)"
            }
            usleep(100_000)
        }
        throw TestSupportError("PipeWire did not become ready within \(timeout) s; last: \(last); logs:\n\(logs())")
    }

    /// Carries out one PulseAudio startup-script line (see `init`).
    private func apply(scriptLine line: String) throws {
        let words = line.split(separator: " ").map(String.init)
        guard !words.isEmpty else { return }
        if words.count >= 2, words[0] == "load-module" {
            switch words[1] {
            case "module-stream-restore", "module-device-restore":
                return
            case "module-sine":
                var arguments: [String: String] = [:]
                for word in words.dropFirst(2) {
                    let pair = word.split(separator: "=", maxSplits: 1).map(String.init)
                    if pair.count == 2 { arguments[pair[0]] = pair[1] }
                }
                try playTone(
                    sink: arguments["sink"] ?? Self.sinkName,
                    frequency: arguments["frequency"].flatMap(Double.init) ?? Self.toneFrequency)
                return
            default:
                break
            }
        }
        let result = try Tool.run("pactl", args: words, server: serverString, timeout: 30)
        guard result.succeeded else { throw TestSupportError("pactl \(line) failed: \(result)") }
    }

    /// Starts the microphone: a FIFO, `module-pipe-source` reading it as `mic`, and `sox`
    /// writing the endless sine into it.
    private func startMicrophone(timeout: Double) throws {
        guard let sox = findExecutable("sox") else { throw TestSupportError("sox not found in PATH; install sox") }
        let fifo = "\(directory)/mic.fifo"
        guard unsafe mkfifo(fifo, 0o600) == 0 else { throw TestSupportError("mkfifo \(fifo): errno \(errno)") }
        // Held open meanwhile, so the generator's open cannot block should the source fail to open it.
        let hold = unsafe open(fifo, O_RDWR | O_CLOEXEC)
        defer { if hold >= 0 { close(hold) } }
        let load = try Tool.run(
            "pactl",
            args: [
                "load-module", "module-pipe-source", "source_name=\(Self.sourceName)",
                "file=\(fifo)", "format=float32le", "rate=\(Self.toneRate)", "channels=1",
            ],
            server: serverString, timeout: timeout)
        guard load.succeeded else { throw TestSupportError("pactl load-module module-pipe-source failed: \(load); logs:\n\(logs())") }
        let generator = try ChildProcess.spawn(
            executable: sox,
            arguments: [
                "-q", "-n", "-r", String(Self.toneRate), "-c", "1", "-b", "32", "-e", "floating-point", "-t", "raw", "-",
                "synth", "86400", "sine", String(Self.toneFrequency), "vol", String(Self.toneAmplitude),
            ],
            environment: Tool.privateEnvironment(root: directory),
            stdoutPath: fifo, stderrPath: "\(directory)/sox.log", maxLifetime: maxLifetime)
        microphone.withLock { $0 = generator }
    }

    /// Plays an endless mono sine of `frequency` Hz and peak `amplitude` into
    /// `sink` until `stop()`, and waits (up to `timeout` seconds) until the sink runs.
    public func playTone(sink: String, frequency: Double, amplitude: Double = 0.5, timeout: Double = 30) throws {
        guard let sox = findExecutable("sox") else { throw TestSupportError("sox not found in PATH; install sox") }
        let deadline = Wait.now() + timeout
        let fifo = "\(directory)/tone-\(tones.withLock { $0.count }).fifo"
        guard unsafe mkfifo(fifo, 0o600) == 0 else { throw TestSupportError("mkfifo \(fifo): errno \(errno)") }
        // A generous buffer: the tone does not care about latency, and a player
        // starved on a busy machine would leave gaps of silence in the sink.
        let player = try Tool.start(
            "pacat",
            args: [
                "--playback", "--raw", "--format=float32le", "--rate=\(Self.toneRate)", "--channels=1",
                "--device=\(sink)", "--latency-msec=500", "--client-name=earmuff-test-tone", fifo,
            ],
            server: serverString, maxLifetime: maxLifetime)
        // Hold the FIFO open meanwhile, so the generator's open cannot block
        // (and with it posix_spawn) should the player fail before opening it.
        let hold = unsafe open(fifo, O_RDWR | O_CLOEXEC)
        defer { if hold >= 0 { close(hold) } }
        let generator = try ChildProcess.spawn(
            executable: sox,
            arguments: [
                "-q", "-n", "-r", String(Self.toneRate), "-c", "1", "-b", "32", "-e", "floating-point", "-t", "raw", "-",
                "synth", "86400", "sine", String(frequency), "vol", String(amplitude),
            ],
            environment: Tool.privateEnvironment(root: directory),
            stdoutPath: fifo, stderrPath: "\(directory)/sox.log", maxLifetime: maxLifetime)
        tones.withLock { $0.append((player, generator)) }
        var last = "nothing yet"
        while Wait.now() < deadline {
            guard player.process.isRunning, generator.isRunning else {
                throw TestSupportError(
                    "the tone stopped: pacat \(player.process.poll().map(String.init) ?? "running") \(player.process.stderrText()), sox \(generator.poll().map(String.init) ?? "running") \(generator.stderrText())"
                )
            }
            let sinks = try Tool.run("pactl", args: ["list", "short", "sinks"], server: serverString, timeout: 10)
            if sinks.stdoutText.split(separator: "\n").contains(where: {
                $0.split(separator: "\t").dropFirst().first == Substring(sink) && $0.hasSuffix("RUNNING")
            }) {
                return
            }
            last = sinks.stdoutText
            usleep(50_000)
        }
        throw TestSupportError("sink \(sink) never ran with the tone; sinks: \(last); logs:\n\(logs())")
    }

    /// What a native PipeWire client (`pw-loopback`, `pw-cli`) needs to reach this daemon.
    public var nativeClientEnvironment: [String: String] {
        ["PIPEWIRE_RUNTIME_DIR": runtimeDir, "PIPEWIRE_CONFIG_DIR": "\(directory)/pipewire"]
    }

    /// pipewire-pulse's log so far.
    public func log() -> String { Self.read(logPath) }

    /// All four daemons' logs so far, each under a heading.
    public func logs() -> String { Self.logs(of: directory) }

    /// How many connections pipewire-pulse has authenticated (its `AUTH` log lines).
    public func authCount() -> Int {
        log().split(separator: "\n").filter { $0.contains(" AUTH tag:") }.count
    }

    /// Runs `pactl args` directly against this server.
    public func pactl(_ args: String..., timeout: Double = 30) throws -> ToolResult {
        try Tool.run("pactl", args: args, server: serverString, timeout: timeout)
    }

    /// Stops pipewire-pulse, wireplumber, pipewire and the bus in that order
    /// (SIGTERM, SIGKILL after `grace` seconds each) and removes the directory.
    /// Safe to call more than once.
    public func stop(grace: Double = 5) {
        let first = stopped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        for (player, generator) in tones.withLock({ $0 }) {
            player.process.terminate(signal: SIGTERM, grace: grace)
            player.cleanup()
            // The generator dies of SIGPIPE once the player is gone; SIGKILL if it
            // is still blocked in a write.
            generator.terminate(signal: SIGKILL, grace: grace)
        }
        // Blocked in a write to the FIFO once the source stops reading.
        microphone.withLock { $0 }?.terminate(signal: SIGKILL, grace: grace)
        for child in [process, wireplumberProcess, pipewireProcess, dbusProcess] {
            child.terminate(signal: SIGTERM, grace: grace)
        }
        // For a diagnosis: the servers' logs kept, in a directory of this server's name there.
        if let keep = ProcessInfo.processInfo.environment["EARMUFF_TEST_KEEP_SERVER_LOGS"] {
            let into = "\(keep)/\(directory.split(separator: "/").last ?? "pipewire")"
            try? FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: true)
            for name in ["pipewire.log", "wireplumber.log", "pipewire-pulse.log"] {
                try? FileManager.default.copyItem(atPath: "\(directory)/\(name)", toPath: "\(into)/\(name)")
            }
        }
        TempDir.remove(directory)
    }

    deinit { stop() }

    // MARK: - Configuration

    private static func environment(root: String) -> [String: String] {
        var env = Tool.privateEnvironment(root: root)
        env["XDG_RUNTIME_DIR"] = "\(root)/run"
        env["PIPEWIRE_RUNTIME_DIR"] = "\(root)/run"
        env["PULSE_RUNTIME_PATH"] = "\(root)/run/pulse"
        env["PIPEWIRE_CONFIG_DIR"] = "\(root)/pipewire"
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(root)/run/bus"
        // No system bus: anything that tries it fails at once instead of
        // reaching the host's.
        env["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(root)/no-system-bus"
        return env
    }

    private static func writeConfiguration(in dir: String, daemon: String) throws {
        for sub in ["run", "home", "config/wireplumber/main.lua.d", "state", "cache", "data", "pipewire"] {
            try TempDir.makeDirectory("\(dir)/\(sub)")
        }
        let files: [(String, String)] = [
            ("dbus.conf", SessionBus.configuration(socket: "\(dir)/run/bus")),
            ("pipewire/pipewire.conf", daemon),
            ("pipewire/pipewire-pulse.conf", pipewirePulseConfig),
            ("pipewire/client.conf", clientConfig),
            ("config/wireplumber/wireplumber.conf", wireplumberConfig),
            ("config/wireplumber/main.lua.d/90-earmuff-test.lua", wireplumberMonitorsOff),
        ]
        for (path, text) in files {
            try text.write(toFile: "\(dir)/\(path)", atomically: true, encoding: .utf8)
        }
    }

    /// The daemon: Debian's module list minus rt, portal, profiler and x11-bell;
    /// the two stock drivers and the null sink `out`.
    private static let pipewireConfig = """
        context.properties = {
            link.max-buffers = 16
            core.daemon = true
            core.name = pipewire-0
            default.clock.rate = \(toneRate)
        }
        context.spa-libs = {
            audio.convert.* = audioconvert/libspa-audioconvert
            support.* = support/libspa-support
        }
        context.modules = [
            { name = libpipewire-module-protocol-native }
            { name = libpipewire-module-metadata }
            { name = libpipewire-module-spa-device-factory }
            { name = libpipewire-module-spa-node-factory }
            { name = libpipewire-module-client-node }
            { name = libpipewire-module-client-device }
            { name = libpipewire-module-access args = { } }
            { name = libpipewire-module-adapter }
            { name = libpipewire-module-link-factory }
            { name = libpipewire-module-session-manager }
        ]
        context.objects = [
            { factory = spa-node-factory args = { factory.name = support.node.driver node.name = Dummy-Driver
                node.group = pipewire.dummy priority.driver = 20000 } }
            { factory = spa-node-factory args = { factory.name = support.node.driver node.name = Freewheel-Driver
                priority.driver = 19000 node.group = pipewire.freewheel node.freewheel = true } }
            { factory = adapter args = { factory.name = support.null-audio-sink node.name = \(sinkName)
                node.description = "Null output" media.class = Audio/Sink audio.position = [ FL FR ]
                monitor.channel-volumes = true } }
        ]

        """

    /// pipewire-pulse: Debian's configuration minus rt and the always-sink.
    private static let pipewirePulseConfig = """
        context.properties = { }
        context.spa-libs = {
            audio.convert.* = audioconvert/libspa-audioconvert
            support.* = support/libspa-support
        }
        context.modules = [
            { name = libpipewire-module-protocol-native }
            { name = libpipewire-module-client-node }
            { name = libpipewire-module-adapter }
            { name = libpipewire-module-metadata }
            { name = libpipewire-module-protocol-pulse args = { } }
        ]
        pulse.properties = {
            server.address = [ { address = "unix:native" max-clients = 256 } ]
        }

        """

    /// For PipeWire's own clients (none of the tests' tools use it; present so
    /// that nothing falls back to a system file).
    private static let clientConfig = """
        context.properties = { }
        context.spa-libs = {
            audio.convert.* = audioconvert/libspa-audioconvert
            support.* = support/libspa-support
        }
        context.modules = [
            { name = libpipewire-module-protocol-native }
            { name = libpipewire-module-client-node }
            { name = libpipewire-module-client-device }
            { name = libpipewire-module-adapter }
            { name = libpipewire-module-metadata }
            { name = libpipewire-module-session-manager }
        ]

        """

    /// wireplumber: Debian's configuration minus rt and the Bluetooth part.
    private static let wireplumberConfig = """
        context.properties = {
            log.level = 2
            wireplumber.script-engine = lua-scripting
        }
        context.spa-libs = {
            audio.convert.* = audioconvert/libspa-audioconvert
            support.* = support/libspa-support
        }
        context.modules = [
            { name = libpipewire-module-protocol-native }
            { name = libpipewire-module-client-node }
            { name = libpipewire-module-client-device }
            { name = libpipewire-module-adapter }
            { name = libpipewire-module-metadata }
            { name = libpipewire-module-session-manager }
        ]
        wireplumber.components = [
            { name = libwireplumber-module-lua-scripting, type = module }
            { name = main.lua, type = config/lua }
            { name = policy.lua, type = config/lua }
        ]

        """

    /// No hardware: the test machine's sound cards and cameras stay out of the graph.
    private static let wireplumberMonitorsOff = """
        alsa_monitor.enabled = false
        v4l2_monitor.enabled = false
        libcamera_monitor.enabled = false

        """

    private static func read(_ path: String) -> String {
        String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data(), as: UTF8.self)
    }

    private static func logs(of dir: String) -> String {
        ["dbus.log", "pipewire.log", "wireplumber.log", "pipewire-pulse.log", "sox.log"].map { name in
            let text = read("\(dir)/\(name)")
            let tail = text.count > 8000 ? "…" + String(text.suffix(8000)) : text
            return "--- \(name)\n\(tail)"
        }.joined(separator: "\n")
    }
}
