import Foundation
import Glibc

/// A private Xvfb on a free display number (never resetting when its last client
/// leaves, which would refuse the clients that connect meanwhile), listening only on its
/// /tmp/.X11-unix socket (and the abstract one Xorg servers open on Linux).
public final class XServer: Sendable {
    public let display: Int
    public let process: ChildProcess
    /// `:N`, for DISPLAY.
    public var name: String { ":\(display)" }
    /// The display's socket in the file system.
    public var socketPath: String { "/tmp/.X11-unix/X\(display)" }

    /// Starts Xvfb with its log in `directory`; tries a few free display numbers.
    public init(directory: String) throws {
        guard let xvfb = findExecutable("Xvfb") else { throw TestSupportError("Xvfb not found; install xvfb") }
        for n in 0..<20 {
            let candidate = 200 + Int(UInt32.random(in: 0..<500)) + n
            guard !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(candidate)") else { continue }
            let p = try ChildProcess.spawn(
                executable: xvfb, arguments: [":\(candidate)", "-nolisten", "tcp", "-noreset"],
                environment: Tool.privateEnvironment(root: directory),
                stdoutPath: "\(directory)/xvfb.log", stderrPath: "\(directory)/xvfb.log", maxLifetime: 600)
            if Wait.untilBlocking(timeout: 30, interval: 0.05, { UnixSocket.canConnect("/tmp/.X11-unix/X\(candidate)") || !p.isRunning }),
                p.isRunning, Self.answers(":\(candidate)", directory: directory)
            {
                display = candidate
                process = p
                return
            }
            p.terminate()
        }
        throw TestSupportError("Xvfb did not start (log in \(directory)/xvfb.log)")
    }

    public func stop() { process.terminate() }

    /// Whether a client can open the display (`xdpyinfo`), waiting up to 30 s: the socket
    /// accepts connections a little before the server serves them. True without xdpyinfo.
    static func answers(_ display: String, directory: String) -> Bool {
        guard let xdpyinfo = findExecutable("xdpyinfo") else { return true }
        var env = Tool.privateEnvironment(root: directory)
        env["DISPLAY"] = display
        return Wait.untilBlocking(timeout: 30, interval: 0.1) {
            guard
                let c = try? ChildProcess.spawn(
                    executable: xdpyinfo, arguments: [], environment: env,
                    stdoutPath: "/dev/null", stderrPath: "/dev/null", maxLifetime: 60)
            else { return false }
            return c.finish(timeout: 20).succeeded
        }
    }
}
