// What the setup tests share: a user's home to run `earmuff setup` in, the
// real server started as a session would start it, and Earmuff started as
// the units setup wrote say.

import Foundation
import Glibc
import TestSupport

extension EndToEnd.SetupEndToEndTests {
    /// A scratch home: `config` (XDG_CONFIG_HOME), `home`, and the system script.
    struct Home {
        let dir: String
        var config: String { "\(dir)/config" }
        var units: String { "\(dir)/config/systemd/user" }
        var systemScript: String { "\(dir)/system.pa" }

        init() throws {
            dir = try Helpers.scratch()
            for sub in ["config", "home", "run", "state"] { try TempDir.makeDirectory("\(dir)/\(sub)") }
            try EndToEnd.SetupEndToEndTests.systemScript.write(toFile: systemScript, atomically: true, encoding: .utf8)
        }

        /// Runs `earmuff ARGS` as the user of this home (no user manager, no server unless `runtime` has one).
        func earmuff(_ args: [String], runtime: String? = nil, extra: [String: String] = [:]) throws -> ToolResult {
            var env = Tool.privateEnvironment(root: dir)
            env["XDG_RUNTIME_DIR"] = runtime ?? "\(dir)/run"
            env["PULSE_CLIENTCONFIG"] = "\(dir)/client.conf"
            try "autospawn = no\n".write(toFile: "\(dir)/client.conf", atomically: true, encoding: .utf8)
            env.merge(extra) { _, new in new }
            let out = "\(dir)/cli-\(UInt32.random(in: 0...UInt32.max))"
            let child = try ChildProcess.spawn(
                executable: try EarmuffProcess.locateBinary(), arguments: args, environment: env,
                stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr", maxLifetime: 120)
            return child.finish(timeout: 90)
        }

        func setup(_ server: ServerKind, _ more: [String] = []) throws -> ToolResult {
            try earmuff(
                [
                    "setup", "--server", server == .pipewire ? "pipewire" : "pulseaudio", "--no-systemctl",
                    "--pulse-script", systemScript,
                ] + more)
        }

        /// What `systemctl --user enable earmuff.service` leaves (setup ran with --no-systemctl):
        /// PipeWire's service wants Earmuff's.
        func enableAsSystemctlWould() throws {
            try TempDir.makeDirectory("\(units)/pipewire.service.wants")
            try FileManager.default.createSymbolicLink(
                atPath: "\(units)/pipewire.service.wants/earmuff.service",
                withDestinationPath: "\(units)/earmuff.service")
        }

        /// `$HOME/.config/pulse`, where PulseAudio reads the user's default.pa.
        var pulseConfig: String { "\(dir)/home/.config/pulse" }

        /// Every regular file under the config directory and HOME, with its
        /// contents (paths relative to the config directory, or `~/…`).
        func files() -> [String: String] {
            var out: [String: String] = [:]
            for (root, prefix) in [(config, ""), ("\(dir)/home", "~/")] {
                guard let e = FileManager.default.enumerator(atPath: root) else { continue }
                for case let rel as String in e {
                    var isDir: ObjCBool = false
                    let path = "\(root)/\(rel)"
                    if unsafe FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue {
                        out[prefix + rel] = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "<unreadable>"
                    }
                }
            }
            return out
        }

        func remove() { TempDir.remove(dir) }
    }
}

/// The real server as a session runs it, in a private runtime directory: with
/// `userConfig`, reading the user configuration setup wrote (XDG_CONFIG_HOME,
/// and HOME for PulseAudio's default.pa); without it, the system's only.
/// With `socketActivated`, started the way its (moved) systemd socket unit
/// starts it: `systemd-socket-activate` binds the socket first and passes it
/// on the first connection; `activatedSocketInode` is that socket's inode, so a
/// test can tell that the server took the passed socket rather than binding
/// its own. Ready once `pactl info` answers on pulse/upstream (user
/// configuration) or pulse/native.
final class SessionServerProcess: Sendable {
    let runtimeDir: String
    let socketPath: String
    let activatedSocketInode: UInt?
    private let pipeWire: PipeWireServer?
    private let pulse: ChildProcess?
    private let dir: String?

    init(kind: ServerKind, home: EndToEnd.SetupEndToEndTests.Home, userConfig: Bool, socketActivated: Bool = false) throws {
        let socketName = userConfig ? "upstream" : "native"
        if kind == .pipewire {
            let pw = try PipeWireServer(configHome: home.config, pulseSocketName: socketName, socketActivated: socketActivated)
            pipeWire = pw
            pulse = nil
            dir = nil
            runtimeDir = pw.runtimeDir
            socketPath = pw.socketPath
            activatedSocketInode = pw.activatedSocketInode
            return
        }
        pipeWire = nil
        let dir = try TempDir.make(prefix: "earmuff-session")
        self.dir = dir
        runtimeDir = "\(dir)/run"
        let socket = "\(runtimeDir)/pulse/\(socketName)"
        socketPath = socket
        try TempDir.makeDirectory("\(runtimeDir)/pulse")
        var env = Tool.privateEnvironment(root: dir)
        env["HOME"] = "\(home.dir)/home"
        env["XDG_CONFIG_HOME"] = home.config
        env["XDG_RUNTIME_DIR"] = runtimeDir
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(dir)/no-dbus"
        env["PULSE_STATE_PATH"] = "\(dir)/state"
        let guardArgs = [
            "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--system=no", "--realtime=no",
            "--high-priority=no", "--log-target=stderr",
        ]
        // Without the user's default.pa, PulseAudio runs the system script: here the test's.
        let script = userConfig ? [] : ["-n", "-F", home.systemScript]
        let pulseaudio = try findExecutable("pulseaudio") ?? { throw TestSupportError("pulseaudio not found") }()
        var executable = pulseaudio
        var arguments = script + guardArgs
        if socketActivated {
            executable = try findExecutable("systemd-socket-activate") ?? { throw TestSupportError("systemd-socket-activate not found; install systemd") }()
            arguments = ["-l", socket] + env.keys.sorted().flatMap { ["-E", $0] } + [pulseaudio] + arguments
        }
        let child = try ChildProcess.spawn(
            executable: executable, arguments: arguments, environment: env,
            stdoutPath: "\(dir)/pulseaudio.log", stderrPath: "\(dir)/pulseaudio.log",
            maxLifetime: 900, cleanupDirectory: dir)
        pulse = child
        var st = stat()
        if socketActivated, Wait.untilBlocking(timeout: 30, interval: 0.02, { unsafe stat(socket, &st) == 0 || !child.isRunning }),
            unsafe stat(socket, &st) == 0
        {
            activatedSocketInode = UInt(st.st_ino)
        } else {
            activatedSocketInode = nil
        }
        var last = "nothing yet"
        let ready = Wait.untilBlocking(timeout: 60, interval: 0.05) {
            guard child.isRunning else { return true }
            guard FileManager.default.fileExists(atPath: socket),
                let info = try? Tool.run("pactl", args: ["info"], server: "unix:\(socket)", timeout: 10)
            else { return false }
            last = "\(info)"
            return info.succeeded
        }
        guard ready, child.isRunning else {
            let log = (try? String(contentsOfFile: "\(dir)/pulseaudio.log", encoding: .utf8)) ?? ""
            stop()
            throw TestSupportError("PulseAudio did not answer on \(socket); last pactl: \(last); log:\n\(log)")
        }
    }

    func stop() {
        pipeWire?.stop()
        pulse?.terminate(signal: SIGTERM, grace: 5)
        if let dir { TempDir.remove(dir) }
    }
}

/// Earmuff started exactly as `earmuff.socket` and `earmuff.service` say
/// (`%t` being the runtime directory), through `systemd-socket-activate`.
final class UnitLauncher: Sendable {
    let process: ChildProcess
    let environment: [String: String]
    let dir: String

    init(home: EndToEnd.SetupEndToEndTests.Home, runtimeDir: String) throws {
        let socketUnit = try String(contentsOfFile: "\(home.units)/earmuff.socket", encoding: .utf8)
        let serviceUnit = try String(contentsOfFile: "\(home.units)/earmuff.service", encoding: .utf8)
        func value(_ key: String, in text: String) throws -> String {
            guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("\(key)=") }) else {
                throw TestSupportError("no \(key)= in\n\(text)")
            }
            return String(line.dropFirst(key.count + 1)).replacingOccurrences(of: "%t", with: runtimeDir)
        }
        let listen = try value("ListenStream", in: socketUnit)
        let exec = try value("ExecStart", in: serviceUnit).split(separator: " ").map(String.init)
        dir = try TempDir.make(prefix: "earmuff-unit")
        for sub in ["home", "config", "state", "cache", "data"] { try TempDir.makeDirectory("\(dir)/\(sub)") }
        var env = Tool.privateEnvironment(root: dir)
        env["XDG_RUNTIME_DIR"] = runtimeDir
        env["XDG_CONFIG_HOME"] = home.config // the session's user: it ran setup
        environment = env
        let activate = try findExecutable("systemd-socket-activate") ?? { throw TestSupportError("systemd-socket-activate not found; install systemd") }()
        // Like a service manager, systemd-socket-activate gives the service only
        // the variables it is told to (-E).
        let pass = env.keys.sorted().flatMap { ["-E", $0] }
        process = try ChildProcess.spawn(
            executable: activate, arguments: ["-l", listen, "--fdname=earmuff.socket"] + pass + exec,
            environment: env, stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr.log",
            maxLifetime: 900, cleanupDirectory: dir)
        guard Wait.untilBlocking(timeout: 30, interval: 0.02, { FileManager.default.fileExists(atPath: listen) || !self.process.isRunning }),
            process.isRunning
        else {
            throw TestSupportError("systemd-socket-activate did not listen on \(listen): \(process.stderrText())")
        }
    }

    func log() -> String { process.stderrText() }

    func cli(_ args: [String]) throws -> ToolResult {
        let out = "\(dir)/cli-\(UInt32.random(in: 0...UInt32.max))"
        return try ChildProcess.spawn(
            executable: try EarmuffProcess.locateBinary(), arguments: args, environment: environment,
            stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr", maxLifetime: 120
        ).finish(timeout: 90)
    }

    func cliChecked(_ args: [String]) throws {
        let r = try cli(args)
        guard r.succeeded else { throw TestSupportError("earmuff \(args) failed: \(r)\nlog:\n\(log())") }
    }

    func stop() {
        process.terminate(signal: SIGTERM, grace: 5)
        TempDir.remove(dir)
    }
}
