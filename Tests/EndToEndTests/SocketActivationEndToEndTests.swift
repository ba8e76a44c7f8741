// Socket activation as systemd does it, with systemd's own
// `systemd-socket-activate`: it binds the listening socket, waits for the
// first connection, then starts the service with the socket as fd 3 and
// LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES set. A small shell in between plays
// the service manager's `Restart=`: it keeps fd 3 and starts `earmuff serve`
// again after the first one stopped, each time with LISTEN_PID naming the new
// process (as systemd sets it in the child it forks).

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SocketActivationEndToEndTests {
        /// Starts earmuff twice under the inherited listener; the second start
        /// waits for the file `go.2`. Each start writes its pid to `pid.N`
        /// before exec, so the pid is earmuff's own.
        static let restarter = """
            dir=$1; shift
            child=""
            trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; exit 0' TERM INT
            for i in 1 2; do
                if [ "$i" != 1 ]; then
                    while [ ! -e "$dir/go.$i" ]; do sleep 0.02; done
                fi
                sh -c 'echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid.'"$i"'"; LISTEN_PID=$$; export LISTEN_PID; exec "$@"' "$dir" "$@" &
                child=$!
                wait "$child"
            done

            """

        @Test func servesEarlyClientsAndKeepsTheSocketAcrossRestarts() throws {
            guard let activate = findExecutable("systemd-socket-activate") else {
                Issue.record("systemd-socket-activate not found; install systemd")
                return
            }
            let server = try PulseServer()
            defer { server.stop() }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            for sub in ["run", "home", "config", "state", "cache", "data"] { try TempDir.makeDirectory("\(dir)/\(sub)") }
            let listen = "\(dir)/run/native"
            try Self.restarter.write(toFile: "\(dir)/restarter.sh", atomically: true, encoding: .utf8)
            let binary = try EarmuffProcess.locateBinary()
            let env = Tool.privateEnvironment(root: dir)
            let manager = try ChildProcess.spawn(
                executable: activate,
                arguments: ["-l", listen, "--fdname=earmuff.socket"] + Self.passing(env) + [
                    "/bin/sh", "\(dir)/restarter.sh", dir,
                    binary, "serve", "--listen", listen, "--upstream", server.serverString, "--log-level", "debug",
                ],
                environment: env,
                stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr.log", maxLifetime: 600)
            defer {
                manager.terminate(signal: SIGTERM, grace: 5)
            }
            func log() -> String { manager.stderrText() }

            #expect(
                Wait.untilBlocking(timeout: 30, interval: 0.02) { UnixSocket.canConnect(listen) || !manager.isRunning },
                "the socket never appeared; log:\n\(log())")
            let inode = try Self.inode(listen)
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/pid.1"), "earmuff started before any client")

            // The first client's connection is what starts earmuff: it waits and is served.
            let first = try Tool.run("pactl", args: ["info"], server: "unix:\(listen)", timeout: 60)
            #expect(first.succeeded, "\(first)\nlog:\n\(log())")
            #expect(first.stdoutText.contains("Server Name: "))
            #expect(log().contains("(socket fd 3 from the service manager)"), "log:\n\(log())")
            let pid1 = try Self.pid(in: dir, start: 1)
            let status = try ChildProcess.spawn(
                executable: binary, arguments: ["status", "--json"], environment: env,
                stdoutPath: "\(dir)/status.out", stderrPath: "\(dir)/status.err",
                maxLifetime: 60
            ).finish(timeout: 30)
            let daemon = (try? JSONSerialization.jsonObject(with: status.stdout) as? [String: Any])?["daemon"] as? [String: Any]
            #expect(daemon?["socketActivated"] as? Bool == true, "\(status)")
            #expect(daemon?["sessionSocket"] as? Bool == false, "not $XDG_RUNTIME_DIR/pulse/native: \(status)")

            // Stop earmuff: the socket stays, same inode, and still takes connections.
            kill(pid1, SIGTERM)
            #expect(Wait.untilBlocking(timeout: 30, interval: 0.02) { kill(pid1, 0) != 0 }, "earmuff did not stop")
            #expect(try Self.inode(listen) == inode, "the socket was replaced while earmuff was down")
            let waiting = try RawClient(path: listen) // connects into the backlog while nothing serves it
            defer { waiting.close() }

            // Start it again under the same listener: the waiting client is served.
            #expect(FileManager.default.createFile(atPath: "\(dir)/go.2", contents: Data()))
            try waiting.handshake(name: "waited-through-restart", timeout: 60)
            let pid2 = try Self.pid(in: dir, start: 2)
            #expect(pid2 != pid1)
            #expect(try Self.inode(listen) == inode, "the restarted earmuff bound a new socket")
            let again = try Tool.run("pactl", args: ["info"], server: "unix:\(listen)", timeout: 60)
            #expect(again.succeeded, "\(again)\nlog:\n\(log())")
            #expect(!log().contains("Address already in use"))
        }

        @Test func aPassedSocketOnAnotherPathIsRefusedWithTheFix() throws {
            guard let activate = findExecutable("systemd-socket-activate") else {
                Issue.record("systemd-socket-activate not found; install systemd")
                return
            }
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            for sub in ["run", "home", "config", "state", "cache", "data"] { try TempDir.makeDirectory("\(dir)/\(sub)") }
            let binary = try EarmuffProcess.locateBinary()
            let manager = try ChildProcess.spawn(
                executable: activate,
                arguments: ["-l", "\(dir)/run/passed"] + Self.passing(Tool.privateEnvironment(root: dir)) + [
                    binary, "serve", "--listen", "\(dir)/run/native",
                    "--upstream", "unix:\(dir)/run/nothing",
                ],
                environment: Tool.privateEnvironment(root: dir),
                stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr.log", maxLifetime: 300)
            defer { manager.terminate(signal: SIGTERM, grace: 5) }
            #expect(Wait.untilBlocking(timeout: 30, interval: 0.02) { UnixSocket.canConnect("\(dir)/run/passed") })
            let status = manager.wait(timeout: 60)
            #expect(status == 64, "log:\n\(manager.stderrText())")
            let log = manager.stderrText()
            #expect(log.contains("none listening on \(dir)/run/native"), "log:\n\(log)")
            #expect(log.contains("\(dir)/run/passed"))
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/run/native"))
        }

        /// `-E NAME` for every variable: systemd-socket-activate passes the
        /// service only those (as a service manager gives only its own).
        static func passing(_ env: [String: String]) -> [String] {
            env.keys.sorted().flatMap { ["-E", $0] }
        }

        static func inode(_ path: String) throws -> UInt {
            var st = stat()
            guard unsafe stat(path, &st) == 0 else { throw TestSupportError("stat \(path): errno \(errno)") }
            return UInt(st.st_ino)
        }

        /// The pid the restarter wrote for start `n` (waits for the file).
        static func pid(in dir: String, start n: Int) throws -> pid_t {
            let file = "\(dir)/pid.\(n)"
            guard Wait.untilBlocking(timeout: 60, interval: 0.02, { FileManager.default.fileExists(atPath: file) }),
                let text = try? String(contentsOfFile: file, encoding: .utf8),
                let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
            else { throw TestSupportError("no pid for start \(n) in \(file)") }
            return pid
        }
    }
}
