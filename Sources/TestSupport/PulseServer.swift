import Foundation
import Glibc
import Synchronization

/// Which real server the end-to-end suite runs against.
public enum ServerKind: String, Sendable, CaseIterable {
    /// PulseAudio itself (`pulseaudio`), the default.
    case pulseaudio
    /// PipeWire's `pipewire-pulse` (see `PipeWireServer`).
    case pipewire

    /// The kind named by `EARMUFF_TEST_SERVER` (`pulseaudio` when unset or empty).
    public static func selected() throws -> ServerKind {
        let value = ProcessInfo.processInfo.environment["EARMUFF_TEST_SERVER"] ?? ""
        if value.isEmpty { return .pulseaudio }
        guard let kind = ServerKind(rawValue: value) else {
            throw TestSupportError("EARMUFF_TEST_SERVER=\(value): expected one of \(allCases.map(\.rawValue))")
        }
        return kind
    }
}

/// A private, real PulseAudio server for one test, in a fresh temp directory:
/// a null sink `out` (default sink), a 440 Hz test-tone microphone `mic`
/// (float32le mono 48 kHz sine source, default source) and a native-protocol
/// socket at `socketPath` with anonymous auth.
///
/// Runs as root too (PulseAudio only warns). Realtime and high priority are
/// off so it does not crowd a small CI machine; D-Bus is pointed at a
/// nonexistent bus so nothing is autolaunched. Keep the object alive for the
/// whole test (`defer { server.stop() }`): Swift may release an object right
/// after its last use, and `deinit` stops the server.
///
/// With `EARMUFF_TEST_SERVER=pipewire` the same object runs a `PipeWireServer`
/// instead (same sink, source, tone and level; the properties point at
/// pipewire-pulse), so the whole suite runs against either server; `kind`
/// says which.
public final class PulseServer: Sendable {
    /// Which server this is.
    public let kind: ServerKind
    /// The PipeWire behind this object when `kind` is `.pipewire`.
    public let pipeWire: PipeWireServer?
    /// The private directory holding config, socket, runtime dir and log.
    public let directory: String
    /// The native-protocol socket path.
    public let socketPath: String
    /// `unix:<socketPath>`, for PULSE_SERVER or `--upstream`.
    public var serverString: String { "unix:\(socketPath)" }
    /// The server's XDG_RUNTIME_DIR.
    public let runtimeDir: String
    /// The server's log (stderr, level debug: it records each connection's SHM negotiation).
    public let logPath: String
    /// The server process.
    public let process: ChildProcess

    private let stopped = Mutex(false)
    /// Processes that feed the server (`startFineMicrophone`'s writer), ended by `stop`.
    let helpers = Mutex<[ChildProcess]>([])

    /// Name of the default sink (a null sink).
    public static let sinkName = "out"
    /// Name of the default source (a sine source).
    public static let sourceName = "mic"
    /// Frequency of the test tone on `mic`.
    public static let toneFrequency = 440.0
    /// Sample rate of `mic`.
    public static let toneRate = 48000
    /// Peak amplitude of the sine module's tone (measured: RMS ≈ 0.354).
    public static let toneAmplitude = 0.5

    /// Starts the server and waits (up to `startTimeout` seconds) until `pactl info`
    /// answers. `extraConfig` lines are appended to the startup script (for PipeWire
    /// see `PipeWireServer.init`). The watchdog ends the server when the test
    /// process dies, or after `maxLifetime` seconds. `kind` nil means `ServerKind.selected()`.
    public init(
        extraConfig: [String] = [], startTimeout: Double = 60, maxLifetime: Int = 1800,
        kind: ServerKind? = nil
    ) throws {
        let kind = try kind ?? ServerKind.selected()
        self.kind = kind
        if kind == .pipewire {
            let server = try PipeWireServer(extraConfig: extraConfig, startTimeout: startTimeout, maxLifetime: maxLifetime)
            pipeWire = server
            directory = server.directory
            socketPath = server.socketPath
            runtimeDir = server.runtimeDir
            logPath = server.logPath
            process = server.process
            return
        }
        pipeWire = nil
        guard let pulseaudio = findExecutable("pulseaudio") else {
            throw TestSupportError("pulseaudio not found in PATH; install pulseaudio (apt-get install pulseaudio pulseaudio-utils)")
        }
        let dir = try TempDir.make(prefix: "earmuff-pa")
        directory = dir
        socketPath = "\(dir)/native"
        runtimeDir = "\(dir)/run"
        logPath = "\(dir)/pulseaudio.log"
        do {
            try TempDir.makeDirectory(runtimeDir)
            let script =
                ([
                    "load-module module-native-protocol-unix socket=\(socketPath) auth-anonymous=1",
                    "load-module module-null-sink sink_name=\(Self.sinkName)",
                    "load-module module-sine-source source_name=\(Self.sourceName) rate=\(Self.toneRate) frequency=\(Int(Self.toneFrequency))",
                    "set-default-sink \(Self.sinkName)",
                    "set-default-source \(Self.sourceName)",
                ] + extraConfig).joined(separator: "\n") + "\n"
            try script.write(toFile: "\(dir)/server.pa", atomically: true, encoding: .utf8)
            try "".write(toFile: "\(dir)/daemon.conf", atomically: true, encoding: .utf8)

            var env = Tool.privateEnvironment(root: dir)
            env["XDG_RUNTIME_DIR"] = runtimeDir
            env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(dir)/no-dbus"
            env["PULSE_RUNTIME_PATH"] = "\(runtimeDir)/pulse"
            env["PULSE_STATE_PATH"] = "\(dir)/state/pulse"
            process = try ChildProcess.spawn(
                executable: pulseaudio,
                arguments: [
                    "-n", "-F", "\(dir)/server.pa",
                    "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                    "--system=no", "--realtime=no", "--high-priority=no",
                    "--disallow-exit=yes", "--log-target=stderr", "--log-level=debug",
                ],
                environment: env, stdoutPath: logPath, stderrPath: logPath,
                maxLifetime: maxLifetime, cleanupDirectory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
        do {
            try waitUntilReady(timeout: startTimeout)
        } catch {
            stop()
            throw error
        }
    }

    private func waitUntilReady(timeout: Double) throws {
        let deadline = Wait.now() + timeout
        var last: ToolResult?
        while Wait.now() < deadline {
            guard process.isRunning else {
                throw TestSupportError("pulseaudio exited during startup (status \(process.poll() ?? -1)); log:\n\(log())")
            }
            if FileManager.default.fileExists(atPath: socketPath) {
                let info = try Tool.run(
                    "pactl", args: ["info"], server: serverString, clientConfig: .noSHM,
                    timeout: max(1, min(10, deadline - Wait.now())))
                if info.succeeded { return }
                last = info
            }
            usleep(50_000)
        }
        throw TestSupportError("pulseaudio did not answer within \(timeout) s; last pactl: \(last.map { "\($0)" } ?? "none"); log:\n\(log())")
    }

    /// The server's log so far (for PipeWire: all four daemons' logs).
    public func log() -> String {
        if let pipeWire { return pipeWire.logs() }
        let data = (try? Data(contentsOf: URL(fileURLWithPath: logPath))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// How many connections so far negotiated SHM (`yes`) or inline audio (`no`),
    /// from the server's "Negotiated SHM:" debug lines. pipewire-pulse has no SHM:
    /// there every authenticated connection counts as `no`.
    public func shmNegotiations() -> (yes: Int, no: Int) {
        if let pipeWire { return (0, pipeWire.authCount()) }
        var yes = 0, no = 0
        for line in log().split(separator: "\n") where line.contains("Negotiated SHM: ") {
            if line.hasSuffix("Negotiated SHM: yes") { yes += 1 } else if line.hasSuffix("Negotiated SHM: no") { no += 1 }
        }
        return (yes, no)
    }

    /// Runs `pactl args` directly against this server.
    public func pactl(_ args: String..., timeout: Double = 30) throws -> ToolResult {
        try Tool.run("pactl", args: args, server: serverString, timeout: timeout)
    }

    /// Stops the server (SIGTERM, SIGKILL after `grace` seconds) and removes its
    /// directory. Safe to call more than once.
    public func stop(grace: Double = 5) {
        let first = stopped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        for helper in helpers.withLock({ $0 }) { helper.terminate(signal: SIGTERM, grace: grace) }
        if let pipeWire {
            pipeWire.stop(grace: grace)
            return
        }
        process.terminate(signal: SIGTERM, grace: grace)
        TempDir.remove(directory)
    }

    deinit { stop() }
}
