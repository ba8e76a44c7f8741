import Foundation
import Glibc

/// `earmuff run --sandbox` started by tests: in a private directory that is also
/// the run's HOME, so with `--share-home` the app writes where the test reads
/// (relative paths land in `RunningTool.directory`), and with a private home the
/// app's home is `<directory>/data/earmuff/sandboxes/ID`. The run's
/// `XDG_RUNTIME_DIR` is `<directory>/run`, where tests put what the sandbox must hide.
extension EarmuffProcess {
    /// Starts `earmuff run --sandbox OPTIONS -- COMMAND` against this daemon, without waiting.
    /// With `runAs` (a uid, for tests running as root) the run is that user's, through `setpriv`.
    public func startSandboxed(
        _ options: [String], command: [String], environment extra: [String: String] = [:],
        maxLifetime: Int = 600, runAs: UInt32? = nil
    ) throws -> RunningTool {
        try Self.startSandboxed(
            binary: binary, controlPath: controlPath, options, command: command,
            environment: extra, maxLifetime: maxLifetime, runAs: runAs)
    }

    /// `earmuff run --sandbox` with `binary` and `controlPath` (no daemon is needed for `--dry-run`).
    public static func startSandboxed(
        binary: String, controlPath: String, _ options: [String], command: [String],
        environment extra: [String: String] = [:], maxLifetime: Int = 600,
        runAs: UInt32? = nil
    ) throws -> RunningTool {
        let dir = try TempDir.make(prefix: "earmuff-sandboxed")
        do {
            var env = Tool.privateEnvironment(root: dir)
            env["HOME"] = dir
            try TempDir.makeDirectory("\(dir)/run")
            env.merge(extra) { _, new in new }
            var launcher = ["/usr/bin/env", "-C", dir, binary, "run", "--sandbox", "--control", controlPath] + options + ["--"] + command
            if let uid = runAs {
                guard let setpriv = findExecutable("setpriv") else { throw TestSupportError("setpriv (util-linux) not found") }
                for sub in ["", "/run"] { unsafe chown(dir + sub, uid, uid) }
                launcher = [setpriv, "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + launcher
            }
            let process = try ChildProcess.spawn(
                executable: launcher[0], arguments: Array(launcher.dropFirst()),
                environment: env, stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
            return RunningTool(process: process, directory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
    }

    /// Starts `parecord --raw` into `recording.raw` inside `earmuff run --sandbox --share-home OPTIONS`.
    public func startSandboxedRecording(
        _ options: [String], format: PCMFormat = .s16le, rate: Int = 48000,
        channels: Int = 1, runAs: UInt32? = nil
    ) throws -> Recording {
        let tool = try startSandboxed(
            ["--share-home"] + options,
            command: [
                "parecord", "--raw", "--format=\(format.pulseName)", "--rate=\(rate)", "--channels=\(channels)",
                "--latency-msec=20", "recording.raw",
            ], runAs: runAs)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }

    /// The launcher sockets the daemon holds for app id `appID` (one per run).
    public func launcherSockets(appID: String) -> [String] {
        let dir = runtimeDir + "/earmuff/app"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { $0.hasPrefix(appID + "@") }.map { dir + "/" + $0 }
    }
}

extension RunningTool {
    /// Waits up to `timeout` seconds for the tool to exit, then removes its directory.
    public func outcome(timeout: Double = 60) -> ToolResult {
        defer { cleanup() }
        return wait(timeout: timeout)
    }
}
