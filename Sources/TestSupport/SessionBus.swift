import Foundation
import Glibc
import Synchronization

/// A private `dbus-daemon --session` in a temp directory, and python-dbusmock
/// services on it. The bus activates nothing (no service directories), so a
/// service exists only if a test starts it. `busctl` talks to it for the
/// test. Keep it alive for the whole test (`defer { bus.stop() }`).
/// With `system: true` it is a private system bus instead (any user may
/// connect: system services drop to their own users), for RealtimeKit.
public final class SessionBus: Sendable {
    /// The temp directory (socket, config, logs).
    public let directory: String
    /// `unix:path=…`, the DBUS_SESSION_BUS_ADDRESS (or DBUS_SYSTEM_BUS_ADDRESS) value.
    public let address: String
    /// Whether this is a private system bus.
    public let isSystem: Bool
    private let daemon: ChildProcess
    private let mocks = Mutex<[ChildProcess]>([])

    public init(system: Bool = false, startTimeout: Double = 30, maxLifetime: Int = 1800) throws {
        guard let dbus = findExecutable("dbus-daemon"), findExecutable("busctl") != nil else {
            throw TestSupportError("dbus-daemon or busctl not found in PATH; install dbus and systemd")
        }
        let dir = try TempDir.make(prefix: "earmuff-bus")
        directory = dir
        address = "unix:path=\(dir)/bus"
        isSystem = system
        // System services (polkitd, rtkit-daemon) connect as their own users.
        if system { unsafe chmod(dir, 0o755) }
        do {
            try Self.configuration(socket: "\(dir)/bus", system: system).write(toFile: "\(dir)/dbus.conf", atomically: true, encoding: .utf8)
            daemon = try ChildProcess.spawn(
                executable: dbus, arguments: ["--config-file=\(dir)/dbus.conf", "--nofork", "--nopidfile"],
                environment: Tool.privateEnvironment(root: dir), stdoutPath: "\(dir)/dbus.log", stderrPath: "\(dir)/dbus.log",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
        let up = Wait.untilBlocking(timeout: startTimeout, interval: 0.02) {
            !daemon.isRunning || UnixSocket.canConnect("\(dir)/bus")
        }
        guard up, daemon.isRunning else {
            stop()
            throw TestSupportError("dbus-daemon did not start within \(startTimeout) s")
        }
    }

    /// A session (or system) bus configuration listening on `socket`, with no
    /// service directories, so it never activates (and leaves behind) any service.
    public static func configuration(socket: String, system: Bool = false) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>\(system ? "system" : "session")</type>
          <keep_umask/>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">\(system ? "\n    <allow user=\"*\"/>" : "")
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>

        """
    }

    /// A python-dbusmock template shipped with the tests (Tests/Fixtures/dbusmock/NAME.py).
    public static func fixtureTemplate(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/Fixtures/dbusmock/\(name).py").path
    }

    /// Starts `python3 -m dbusmock --template TEMPLATE` (a stock template name or a
    /// file) and waits until it owns `name`. Its call log is `logPath(name)`.
    @discardableResult
    public func startMock(
        template: String, owning name: String, parameters: [String: String] = [:],
        timeout: Double = 30
    ) throws -> ChildProcess {
        let python = findExecutable("/usr/bin/python3") ?? findExecutable("python3") ?? "python3"
        var args = ["-m", "dbusmock", "--session", "--template", template, "-l", logPath(name)]
        if !parameters.isEmpty {
            let json = try JSONSerialization.data(withJSONObject: parameters)
            args += ["--parameters", String(decoding: json, as: UTF8.self)]
        }
        return try startService(
            python, arguments: args, owning: name, timeout: timeout,
            hint: "dbusmock \(template) (python3-dbusmock installed?)")
    }

    /// Starts the real `xdg-permission-store` (Debian's xdg-desktop-portal ships it) on this
    /// bus, keeping its data (`flatpak/db`) in this bus's directory, and waits until it owns
    /// `org.freedesktop.impl.portal.PermissionStore`.
    @discardableResult
    public func startPermissionStore(timeout: Double = 30) throws -> ChildProcess {
        let candidates = ["/usr/libexec/xdg-permission-store", "/usr/lib/xdg-desktop-portal/xdg-permission-store"]
        let binary = candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestSupportError("xdg-permission-store not found; install xdg-desktop-portal") }
        return try startService(
            binary, arguments: ["--replace"], owning: "org.freedesktop.impl.portal.PermissionStore",
            timeout: timeout, hint: "xdg-permission-store")
    }

    /// Starts the real dconf service (Debian's `dconf-service`), GSettings' store on a GNOME
    /// session, writing the settings under this bus's `config` directory: a process that reads
    /// the same settings needs `XDG_CONFIG_HOME` set to `settingsHome`.
    public func startDConf(timeout: Double = 30) throws {
        let binary = "/usr/libexec/dconf-service"
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw TestSupportError("dconf-service not found; install dconf-service") }
        try startService(binary, owning: "ca.desrt.dconf", timeout: timeout, hint: "dconf-service")
    }

    /// Where the dconf service of this bus keeps the settings (`XDG_CONFIG_HOME`).
    public var settingsHome: String { "\(directory)/config" }

    /// `gsettings ARGUMENTS` on this bus and its dconf service; its output, trimmed; throws unless it succeeds.
    @discardableResult
    public func gsettings(_ arguments: String...) throws -> String {
        guard let tool = findExecutable("gsettings") else { throw TestSupportError("gsettings not found; install libglib2.0-bin") }
        var env = Tool.privateEnvironment(root: directory)
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        let out = "\(directory)/gsettings-\(UInt32.random(in: 0...UInt32.max))"
        let result = try ChildProcess.spawn(
            executable: tool, arguments: arguments, environment: env,
            stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr", maxLifetime: 60
        )
        .finish(timeout: 30)
        guard result.succeeded else { throw TestSupportError("gsettings \(arguments.joined(separator: " ")): \(result)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts the real polkitd and rtkit-daemon (Debian's `polkitd`, `rtkit`) on this
    /// system bus and waits until RealtimeKit owns its name. polkit authorizes root
    /// for anything, and no one else outside a login session.
    public func startRealtimeKit(timeout: Double = 30) throws {
        precondition(isSystem, "RealtimeKit lives on the system bus")
        guard
            let polkitd = ["/usr/lib/polkit-1/polkitd", "/usr/libexec/polkitd"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else {
            throw TestSupportError("polkitd not found; install polkitd")
        }
        let rtkit = "/usr/libexec/rtkit-daemon"
        guard FileManager.default.isExecutableFile(atPath: rtkit) else { throw TestSupportError("rtkit-daemon not found; install rtkit") }
        try startService(polkitd, arguments: ["--no-debug"], owning: "org.freedesktop.PolicyKit1", timeout: timeout)
        // No --stderr: rtkit limits its own file size to 0, so writing a log file would kill it.
        try startService(rtkit, arguments: ["--no-canary"], owning: "org.freedesktop.RealtimeKit1", timeout: timeout)
    }

    /// Runs `executable` on this bus (HOME and the XDG directories in the bus's directory,
    /// with `environment` over them) and waits until it owns `name`; its output goes to
    /// `NAME.out` there.
    @discardableResult
    public func startService(
        _ executable: String, arguments: [String] = [], owning name: String,
        environment: [String: String] = [:], timeout: Double = 30,
        hint: String? = nil
    ) throws -> ChildProcess {
        let hint = hint ?? executable
        var env = Tool.privateEnvironment(root: directory).merging(environment) { $1 }
        env[isSystem ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS"] = address
        let child = try ChildProcess.spawn(
            executable: executable, arguments: arguments, environment: env,
            stdoutPath: "\(directory)/\(name).out", stderrPath: "\(directory)/\(name).out",
            maxLifetime: 1800)
        mocks.withLock { $0.append(child) }
        let owned = Wait.untilBlocking(timeout: timeout, interval: 0.05) {
            !child.isRunning || (try? hasOwner(name)) == true
        }
        guard owned, child.isRunning else {
            let out = (try? String(contentsOfFile: "\(directory)/\(name).out", encoding: .utf8)) ?? ""
            throw TestSupportError("\(hint) did not take \(name) within \(timeout) s: \(out)")
        }
        return child
    }

    /// Where the mock owning `name` logs its calls, one line each.
    public func logPath(_ name: String) -> String { "\(directory)/\(name).calls" }

    /// The calls the mock owning `name` has logged so far.
    public func calls(_ name: String) -> String { (try? String(contentsOfFile: logPath(name), encoding: .utf8)) ?? "" }

    /// Whether `name` has an owner on the bus.
    public func hasOwner(_ name: String) throws -> Bool {
        try call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", name)
            == "b true"
    }

    /// `busctl call` on this bus; returns its output line (e.g. `u 3`), throws unless it succeeds.
    @discardableResult
    public func call(
        _ destination: String, _ path: String, _ interface: String, _ member: String,
        _ signature: String = "", _ arguments: String..., timeout: Double = 30
    ) throws -> String {
        var args = ["--address=\(address)", "call", destination, path, interface, member]
        if !signature.isEmpty { args += [signature] + arguments }
        let result = try run(findExecutable("busctl") ?? "busctl", args, timeout: timeout)
        guard result.succeeded else { throw TestSupportError("busctl \(args.joined(separator: " ")) failed: \(result)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `executable ARGS` to its end (HOME and the XDG directories in the bus's directory,
    /// `environment` over them) and returns what it did; its output files are removed.
    public func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        timeout: Double = 30
    ) throws -> ToolResult {
        let out = "\(directory)/run-\(UInt32.random(in: 0...UInt32.max))"
        defer {
            try? FileManager.default.removeItem(atPath: "\(out).stdout")
            try? FileManager.default.removeItem(atPath: "\(out).stderr")
        }
        let child = try ChildProcess.spawn(
            executable: executable, arguments: arguments,
            environment: Tool.privateEnvironment(root: directory).merging(environment) { $1 },
            stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr",
            maxLifetime: Int(timeout) + 30)
        return child.finish(timeout: timeout)
    }

    /// Stops the mocks and the bus, and removes the directory.
    public func stop() {
        for m in mocks.withLock({ $0 }) { m.terminate(signal: SIGTERM, grace: 5) }
        daemon.terminate(signal: SIGTERM, grace: 5)
        TempDir.remove(directory)
    }
}
