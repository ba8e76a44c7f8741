import Foundation
import Glibc

/// Apps in sandboxes shaped like Flatpak's, built with bubblewrap: the host's
/// /usr and /etc read-only, a private /run and /tmp, a `/.flatpak-info`
/// naming the app, and of the sound sockets only the one Flatpak binds,
/// `$XDG_RUNTIME_DIR/pulse/native`, at `/run/flatpak/pulse/native`, with
/// `PULSE_SERVER` pointing there (as `flatpak run` sets it).
public enum Sandbox {
    /// Where this process's cgroup v2 hierarchy is mounted, when it is writable (root with
    /// cgroupfs mounted read-write): tests make unit cgroups there as systemd would.
    public static func writableCgroup2Root() -> String? {
        guard getuid() == 0, let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard let dash = f.firstIndex(of: "-"), dash + 1 < f.count, f[dash + 1] == "cgroup2", f.count > 4 else { continue }
            let point = String(f[4])
            if unsafe access(point, W_OK) == 0 { return point }
        }
        return nil
    }

    /// Where Flatpak puts the session's PulseAudio socket inside the sandbox.
    public static let flatpakPulseSocket = "/run/flatpak/pulse/native"

    /// Starts `parecord --raw` as Flatpak app `appID` seeing `sessionSocket`,
    /// declaring `purpose` when given; in cgroup directory `cgroup` when given
    /// (the sandbox moves itself there before it starts, as systemd would place it).
    public static func startFlatpakRecording(
        appID: String, sessionSocket: String, purpose: String?, format: PCMFormat = .s16le, rate: Int = 48000,
        channels: Int = 1, maxLifetime: Int = 900, cgroup: String? = nil
    ) throws -> Recording {
        guard let parecord = findExecutable("parecord") else { throw TestSupportError("parecord not found in PATH; install pulseaudio-utils") }
        let tool = try startFlatpak(
            appID: appID, sessionSocket: sessionSocket, purpose: purpose,
            command: [
                parecord, "--raw", "--format=\(format.pulseName)", "--rate=\(rate)",
                "--channels=\(channels)", "--latency-msec=20", "recording.raw",
            ],
            maxLifetime: maxLifetime, cgroup: cgroup)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }

    /// Starts `command` as Flatpak app `appID` seeing `sessionSocket` (see `startFlatpakRecording`),
    /// and PipeWire's `pipeWireSocket` where an app given `--filesystem=xdg-run/pipewire-0`
    /// finds it, when given. `files` are copied into the sandbox's working directory
    /// (`RunningTool.directory`, the same path inside) first.
    public static func startFlatpak(
        appID: String, sessionSocket: String, purpose: String?, command: [String], files: [String] = [],
        maxLifetime: Int = 900, cgroup: String? = nil, pipeWireSocket: String? = nil
    ) throws -> RunningTool {
        guard let bwrap = findExecutable("bwrap") else { throw TestSupportError("bwrap not found in PATH; install bubblewrap") }
        let dir = try TempDir.make(prefix: "earmuff-flatpak")
        do {
            try TempDir.makeDirectory("\(dir)/home")
            for file in files {
                let target = "\(dir)/\(URL(fileURLWithPath: file).lastPathComponent)"
                try FileManager.default.copyItem(atPath: file, toPath: target)
            }
            try "[Application]\nname=\(appID)\nruntime=runtime/org.example.Platform/x86_64/1\n\n[Instance]\ninstance-id=1\n"
                .write(toFile: "\(dir)/flatpak-info", atomically: true, encoding: .utf8)
            try ClientConfig.default.fileContents.write(toFile: "\(dir)/client.conf", atomically: true, encoding: .utf8)
            var env = Tool.privateEnvironment(root: dir)
            env["XDG_RUNTIME_DIR"] = "/run/user/\(getuid())"
            env["PULSE_SERVER"] = "unix:\(flatpakPulseSocket)"
            env["PULSE_CLIENTCONFIG"] = "\(dir)/client.conf"
            if let purpose { env["PULSE_PROP"] = Tool.purposeProperty(purpose) }
            var args = [
                "--unshare-all", "--die-with-parent", "--new-session",
                "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
                "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
            ]
            if FileManager.default.fileExists(atPath: "/usr/lib64") { args += ["--symlink", "usr/lib64", "/lib64"] }
            args += [
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
                "--dir", "/run/user/\(getuid())",
                "--bind", sessionSocket, flatpakPulseSocket,
                "--ro-bind", "\(dir)/flatpak-info", "/.flatpak-info",
            ]
            if let pipeWireSocket { args += ["--bind", pipeWireSocket, "/run/user/\(getuid())/pipewire-0"] }
            args += ["--bind", dir, dir, "--chdir", dir] + command
            var executable = bwrap
            if let cgroup {
                args = ["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", cgroup, bwrap] + args
                executable = "/bin/sh"
            }
            let process = try ChildProcess.spawn(
                executable: executable, arguments: args, environment: env,
                stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
            return RunningTool(process: process, directory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
    }
}
