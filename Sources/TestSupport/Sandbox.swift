import Foundation
import Glibc

/// Apps in sandboxes shaped like Flatpak's, built with bubblewrap: the host's
/// /usr and /etc read-only, a private /run and /tmp, a `/.flatpak-info`
/// naming the app, and of the sound sockets only the one Flatpak binds,
/// `$XDG_RUNTIME_DIR/pulse/native`, at `/run/flatpak/pulse/native`, with
/// `PULSE_SERVER` pointing there (as `flatpak run` sets it).
public enum Sandbox {
    /// Where Flatpak puts the session's PulseAudio socket inside the sandbox.
    public static let flatpakPulseSocket = "/run/flatpak/pulse/native"

    /// Starts `parecord --raw` as Flatpak app `appID` seeing `sessionSocket`,
    /// declaring `purpose` when given.
    public static func startFlatpakRecording(
        appID: String, sessionSocket: String, purpose: String?, format: PCMFormat = .s16le, rate: Int = 48000,
        channels: Int = 1, maxLifetime: Int = 900
    ) throws -> Recording {
        guard let bwrap = findExecutable("bwrap") else { throw TestSupportError("bwrap not found in PATH; install bubblewrap") }
        guard let parecord = findExecutable("parecord") else { throw TestSupportError("parecord not found in PATH; install pulseaudio-utils") }
        let dir = try TempDir.make(prefix: "earmuff-flatpak")
        do {
            try TempDir.makeDirectory("\(dir)/home")
            try "[Application]\nname=\(appID)\nruntime=runtime/org.example.Platform/x86_64/1\n\n[Instance]\ninstance-id=1\n"
                .write(toFile: "\(dir)/flatpak-info", atomically: true, encoding: .utf8)
            try ClientConfig.default.fileContents.write(toFile: "\(dir)/client.conf", atomically: true, encoding: .utf8)
            var env = Tool.privateEnvironment(root: dir)
            env["XDG_RUNTIME_DIR"] = "/run/user/\(getuid())"
            env["PULSE_SERVER"] = "unix:\(flatpakPulseSocket)"
            env["PULSE_CLIENTCONFIG"] = "\(dir)/client.conf"
            if let purpose { env["PULSE_PROP"] = Tool.purposeProperty(purpose) }
            var args = ["--unshare-all", "--die-with-parent", "--new-session",
                        "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
                        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                        "--symlink", "usr/lib", "/lib"]
            if FileManager.default.fileExists(atPath: "/usr/lib64") { args += ["--symlink", "usr/lib64", "/lib64"] }
            args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
                     "--dir", "/run/user/\(getuid())",
                     "--bind", sessionSocket, flatpakPulseSocket,
                     "--ro-bind", "\(dir)/flatpak-info", "/.flatpak-info",
                     "--bind", dir, dir, "--chdir", dir,
                     parecord, "--raw", "--format=\(format.pulseName)", "--rate=\(rate)", "--channels=\(channels)",
                     "--latency-msec=20", "recording.raw"]
            let process = try ChildProcess.spawn(executable: bwrap, arguments: args, environment: env,
                                                 stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr",
                                                 maxLifetime: maxLifetime, cleanupDirectory: dir)
            return Recording(tool: RunningTool(process: process, directory: dir), format: format, rate: rate, channels: channels)
        } catch {
            TempDir.remove(dir)
            throw error
        }
    }
}
