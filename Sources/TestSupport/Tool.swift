import Foundation
import Glibc

/// Client-side libpulse settings for tool runs (written to a private client.conf).
public enum ClientConfig: Sendable {
    /// A stock client: SHM and memfd ON. The case that matters, because a
    /// naive relay breaks it.
    case `default`
    /// `enable-shm = no`, `enable-memfd = no`: audio travels inline on the socket.
    case noSHM

    /// The client.conf text. Autospawn is always off so a test never starts a
    /// user's server by accident.
    var fileContents: String {
        switch self {
        case .default:
            return "autospawn = no\n"
        case .noSHM:
            return "autospawn = no\nenable-shm = no\nenable-memfd = no\n"
        }
    }
}

/// The outcome of a finished tool run.
public struct ToolResult: Sendable, CustomStringConvertible {
    /// Exit code, or 128 + signal number; -1 if it could not be reaped.
    public let status: Int32
    /// Whether the run hit its timeout and was killed.
    public let timedOut: Bool
    /// Everything written to stdout.
    public let stdout: Data
    /// Everything written to stderr.
    public let stderr: String
    /// The command line, for diagnostics.
    public let command: [String]

    /// Exit status 0 within the timeout.
    public var succeeded: Bool { status == 0 && !timedOut }
    /// stdout as UTF-8 text.
    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }

    /// A summary for test failure messages.
    public var description: String {
        let out = stdoutText.count > 2000 ? String(stdoutText.prefix(2000)) + "…" : stdoutText
        return "\(command.joined(separator: " ")) → status \(status)\(timedOut ? " (timed out)" : "")\nstdout: \(out)\nstderr: \(stderr)"
    }
}

/// Runs the PulseAudio client tools (pactl, parecord, pacat, paplay) against
/// a given server, each in a private HOME/XDG tree with a generated client.conf,
/// so no user configuration leaks in.
public enum Tool {
    /// Runs `name` with `args` against `server` (a PULSE_SERVER string) and waits
    /// up to `timeout` seconds; a run that takes longer is killed and marked `timedOut`.
    public static func run(
        _ name: String, args: [String], server: String, clientConfig: ClientConfig = .default,
        environment: [String: String] = [:], timeout: Double = 60
    ) throws -> ToolResult {
        let running = try start(
            name, args: args, server: server, clientConfig: clientConfig,
            environment: environment, maxLifetime: Int(timeout) + 30)
        defer { running.cleanup() }
        return running.wait(timeout: timeout)
    }

    /// Starts `name` with `args` against `server` without waiting for it.
    /// Relative file arguments are relative to the tool's private directory
    /// (`RunningTool.directory`).
    public static func start(
        _ name: String, args: [String], server: String, clientConfig: ClientConfig = .default,
        environment: [String: String] = [:], maxLifetime: Int = 900
    ) throws -> RunningTool {
        guard let executable = findExecutable(name) else {
            throw TestSupportError("\(name) not found in PATH; install pulseaudio-utils")
        }
        let dir = try TempDir.make(prefix: "earmuff-tool")
        do {
            var env = privateEnvironment(root: dir)
            try TempDir.makeDirectory("\(dir)/run")
            let conf = "\(dir)/client.conf"
            try clientConfig.fileContents.write(toFile: conf, atomically: true, encoding: .utf8)
            env["PULSE_CLIENTCONFIG"] = conf
            // An empty server leaves PULSE_SERVER unset: libpulse then finds
            // the server the default way ($XDG_RUNTIME_DIR/pulse/native).
            if !server.isEmpty { env["PULSE_SERVER"] = server }
            env.merge(environment) { _, new in new }
            let process = try ChildProcess.spawn(
                executable: "/usr/bin/env",
                arguments: ["-C", dir, executable] + args,
                environment: env,
                stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
            return RunningTool(process: process, directory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
    }

    /// Starts `parecord --raw` into a file in the tool's directory, with small
    /// fragments (`--latency-msec`) so data arrives quickly.
    public static func startRecording(
        server: String, format: PCMFormat = .s16le, rate: Int = 48000, channels: Int = 1,
        device: String? = nil, latencyMsec: Int = 20, clientConfig: ClientConfig = .default,
        environment: [String: String] = [:]
    ) throws -> Recording {
        var args = [
            "--raw", "--format=\(format.pulseName)", "--rate=\(rate)", "--channels=\(channels)",
            "--latency-msec=\(latencyMsec)",
        ]
        if let device { args.append("--device=\(device)") }
        args.append("recording.raw")
        let tool = try start(
            "parecord", args: args, server: server, clientConfig: clientConfig,
            environment: environment)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }

    /// The app key earmuff gives a tool it identifies by executable:
    /// `exe:` plus the real path (`parecord` is a link to `pacat`).
    public static func appKey(for name: String) throws -> String {
        guard let path = findExecutable(name) else { throw TestSupportError("\(name) not found in PATH") }
        return "exe:" + URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    /// The app key earmuff gives the running test process (its raw clients).
    public static func ownAppKey() throws -> String {
        "exe:" + (try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    }

    /// HOME, XDG dirs and locale for a process rooted at `root`; PATH is inherited.
    public static func privateEnvironment(root: String) -> [String: String] {
        [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": "\(root)/home",
            "XDG_CONFIG_HOME": "\(root)/config",
            "XDG_STATE_HOME": "\(root)/state",
            "XDG_CACHE_HOME": "\(root)/cache",
            "XDG_DATA_HOME": "\(root)/data",
            "XDG_RUNTIME_DIR": "\(root)/run",
            "LC_ALL": "C",
            "LANG": "C",
        ]
    }
}

/// A tool started with `Tool.start`, running in its private directory.
public final class RunningTool: Sendable {
    /// The process.
    public let process: ChildProcess
    /// The tool's private directory (its working directory; removed by `cleanup`).
    public let directory: String

    init(process: ChildProcess, directory: String) {
        self.process = process
        self.directory = directory
    }

    /// Waits up to `timeout` seconds for the tool to exit by itself (killing it after that).
    public func wait(timeout: Double) -> ToolResult {
        process.finish(timeout: timeout)
    }

    /// Sends `signal` (SIGINT by default, which pacat/parecord treat as "finish"),
    /// then waits up to `timeout` seconds before killing it.
    public func stop(signal: Int32 = SIGINT, timeout: Double = 20) -> ToolResult {
        process.send(signal)
        return wait(timeout: timeout)
    }

    /// Removes the private directory (the process must have finished).
    public func cleanup() {
        if process.isRunning { process.terminate(signal: SIGKILL) }
        TempDir.remove(directory)
    }

    deinit { cleanup() }
}

/// A `parecord --raw` run writing into a file, read while it grows.
public final class Recording: Sendable {
    /// The parecord process.
    public let tool: RunningTool
    /// The sample format asked for.
    public let format: PCMFormat
    /// The sample rate asked for.
    public let rate: Int
    /// The channel count asked for.
    public let channels: Int
    /// Path of the raw output file.
    public var file: String { "\(tool.directory)/recording.raw" }

    public init(tool: RunningTool, format: PCMFormat, rate: Int, channels: Int) {
        self.tool = tool
        self.format = format
        self.rate = rate
        self.channels = channels
    }

    /// Bytes per second of audio in the file.
    public var bytesPerSecond: Int { format.bytesPerSample * channels * rate }

    /// The bytes recorded so far.
    public func data() -> Data {
        (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
    }

    /// How many bytes the file holds now.
    public func byteCount() -> Int {
        var st = stat()
        return unsafe stat(file, &st) == 0 ? Int(st.st_size) : 0
    }

    /// Waits until at least `seconds` of audio were recorded (or parecord exited).
    /// Returns whether the amount was reached.
    public func waitForAudio(seconds: Double, timeout: Double = 60) async -> Bool {
        await waitForBytes(Int(seconds * Double(bytesPerSecond)), timeout: timeout)
    }

    /// Waits until the file holds at least `count` bytes (or the recorder exited); whether it does.
    public func waitForBytes(_ count: Int, timeout: Double = 60) async -> Bool {
        await Wait.until(timeout: timeout, interval: 0.05) {
            byteCount() >= count || !tool.process.isRunning
        }
        return byteCount() >= count
    }

    /// Stops parecord (SIGINT) and returns its result and everything it recorded.
    /// The private directory is removed afterwards.
    public func stop(signal: Int32 = SIGINT, timeout: Double = 20) -> (result: ToolResult, audio: Data) {
        let result = tool.stop(signal: signal, timeout: timeout)
        let audio = data()
        tool.cleanup()
        return (result, audio)
    }
}
