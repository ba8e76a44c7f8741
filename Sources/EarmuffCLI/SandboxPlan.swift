// The bubblewrap command line of `earmuff run --sandbox`, as a pure function
// of the options, the environment and what exists on the host.
//
// What the sandbox shows the app, in the order bubblewrap builds it:
//   - new user, pid, ipc, uts, cgroup and (unless --net) network namespaces;
//     a new session (no terminal to inject input into); it dies with its parent;
//     as root, every capability is dropped (bubblewrap keeps root's otherwise);
//   - the system read-only: /usr, /etc, /opt, the /bin, /lib... links or
//     directories, /sys, and from /var only the font cache and the machine id;
//   - a fresh /proc of its own, a minimal /dev (null, zero, random, tty, pts,
//     shm) plus /dev/dri for the GPU: no /dev/snd;
//   - private, empty /tmp, /var/tmp and /run;
//   - the home (a private one per app, the user's own, or a chosen directory);
//   - $XDG_RUNTIME_DIR as a fresh, empty tmpfs holding only Earmuff's launcher
//     socket at pulse/native (where libpulse looks by default), the Wayland
//     socket, and with --dbus the session bus at bus. So the real server's
//     socket, pulse/upstream, pipewire-0, other runs' launcher sockets and the
//     bus are not there at all, whatever path the app tries;
//   - the X11 display socket and its Xauthority file, when a local display is set.
// The environment is the caller's, with PULSE_SERVER pointing at the launcher
// socket and the variables that name other sound paths or the bus removed.

import ControlProtocol
import Foundation

/// Builds the bubblewrap arguments for `earmuff run --sandbox`.
struct SandboxPlan {
    /// What a host path is, as far as the plan cares.
    enum Entry: Equatable {
        case directory
        case symlink(target: String)
        case other
    }

    var options: SandboxOptions
    /// The launcher socket the daemon opened for this run.
    var launcherSocket: String
    /// The host directory used as home when it is private (`SandboxOptions.Home.privatePerApp`).
    var privateHome: String
    var purpose: String?
    var environment: [String: String]
    var uid: UInt32
    /// The caller's working directory (the app starts there when the sandbox shows it).
    var workingDirectory: String
    var command: [String]
    /// What exists at a host path (nil: nothing); `lstat` in the real run.
    var lookup: (String) -> Entry?

    /// Environment variables that lead to a sound server or the session bus; removed inside.
    static let removedVariables = [
        "PULSE_RUNTIME_PATH", "PULSE_COOKIE", "PIPEWIRE_REMOTE", "PIPEWIRE_RUNTIME_DIR",
        "PIPEWIRE_CORE", "DBUS_SESSION_BUS_ADDRESS", "ESPEAKER", "AUDIODEV", "JACK_DEFAULT_SERVER",
    ]

    /// The top-level system directories shown read-only (as links where the host has links).
    static let systemDirectories = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]

    /// A failure to build the sandbox: one line naming cause and fix.
    struct PlanError: Error, Equatable {
        var message: String
    }

    var home: String { environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/" }
    /// `$XDG_RUNTIME_DIR`: the same path inside as on the host, where the sandbox replaces its contents.
    var runtimeDirectory: String { ClientPaths.runtimeDirectory(environment: environment, uid: uid) }
    /// Where the launcher socket appears inside.
    var pulseSocket: String { runtimeDirectory + "/pulse/native" }

    /// The arguments after `bwrap`.
    func arguments() throws(PlanError) -> [String] {
        guard home != "/" else {
            // The home is mounted over this path: "/" would hide the whole system.
            throw PlanError(message: "HOME is unset or not an absolute directory other than /; set HOME to your home directory")
        }
        var a = ["--unshare-all"]
        if options.network { a.append("--share-net") }
        a += ["--die-with-parent", "--new-session"]
        if uid == 0 { a += ["--cap-drop", "ALL"] }

        for dir in Self.systemDirectories {
            switch lookup(dir) {
            case .symlink(let target)?: a += ["--symlink", target, dir]
            case .directory?: a += ["--ro-bind", dir, dir]
            default: break
            }
        }
        a += [
            "--ro-bind-try", "/sys", "/sys",
            "--proc", "/proc", "--dev", "/dev", "--dev-bind-try", "/dev/dri", "/dev/dri",
            "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run",
            "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
            "--ro-bind-try", "/var/lib/dbus/machine-id", "/var/lib/dbus/machine-id",
            "--symlink", "../run", "/var/run",
        ]
        if options.network {
            // /etc/resolv.conf often points into /run (systemd-resolved, resolvconf).
            a += [
                "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve",
                "--ro-bind-try", "/run/resolvconf", "/run/resolvconf",
            ]
        }

        a += ["--bind", homeSource, home]

        // The runtime directory comes after the home, so it is empty even when it lies inside a shared home.
        let runtime = runtimeDirectory
        a += ["--perms", "0700", "--tmpfs", runtime, "--ro-bind", launcherSocket, pulseSocket]
        var env: [(String, String?)] = [("XDG_RUNTIME_DIR", runtime), ("PULSE_SERVER", "unix:" + pulseSocket)]
        for name in Self.removedVariables { env.append((name, nil)) }
        if let purpose {
            env.append(("PULSE_PROP", PulseProp.appending(PulseProp.purposeKey, purpose, to: environment["PULSE_PROP"])))
        }
        if let wayland = environment["WAYLAND_DISPLAY"], !wayland.isEmpty {
            let host = wayland.hasPrefix("/") ? wayland : runtimeDirectory + "/" + wayland
            if lookup(host) != nil { a += ["--ro-bind", host, wayland.hasPrefix("/") ? wayland : runtime + "/" + wayland] }
        }
        a += x11(env: &env)
        if options.sessionBus {
            let (source, address) = try sessionBus()
            if let source { a += ["--ro-bind", source, runtime + "/bus"] }
            env.append(("DBUS_SESSION_BUS_ADDRESS", address))
        }
        for (name, value) in env {
            if let value { a += ["--setenv", name, value] } else { a += ["--unsetenv", name] }
        }
        a += ["--chdir", insideWorkingDirectory, "--"] + command
        return a
    }

    /// The host directory shown as the home.
    var homeSource: String {
        switch options.home {
        case .privatePerApp: privateHome
        case .shared: home
        case .directory(let dir): dir
        }
    }

    /// Where the app starts: the caller's directory when the sandbox shows it
    /// (inside the home it sees), else the home.
    var insideWorkingDirectory: String {
        let source = homeSource
        if Self.isInside(workingDirectory, source) && !Self.isInside(workingDirectory, runtimeDirectory) {
            return home + workingDirectory.dropFirst(source.count)
        }
        return home
    }

    static func isInside(_ path: String, _ dir: String) -> Bool {
        path == dir || path.hasPrefix(dir.hasSuffix("/") ? dir : dir + "/")
    }

    /// The display socket and Xauthority of a local X11 display (`:N`, `:N.S`, `unix:N`).
    func x11(env: inout [(String, String?)]) -> [String] {
        guard let display = environment["DISPLAY"], let number = Self.localDisplayNumber(display) else { return [] }
        var a: [String] = []
        let socket = "/tmp/.X11-unix/X\(number)"
        if lookup(socket) != nil { a += ["--ro-bind", socket, socket] }
        let given = environment["XAUTHORITY"].flatMap { $0.isEmpty ? nil : $0 }
        let file = given ?? home + "/.Xauthority"
        guard file.hasPrefix("/"), lookup(file) != nil else { return a }
        if (Self.isInside(file, home) && options.home != .shared) || Self.isInside(file, runtimeDirectory) {
            // Not visible inside as it is: bound where the app can read it.
            let inside = runtimeDirectory + "/Xauthority"
            a += ["--ro-bind", file, inside]
            env.append(("XAUTHORITY", inside))
        } else if given != nil || options.home != .shared {
            a += ["--ro-bind", file, file]
        }
        return a
    }

    /// The display number of a local X11 display, nil for a remote one (which needs the network).
    static func localDisplayNumber(_ display: String) -> String? {
        var rest = Substring(display)
        if rest.hasPrefix("unix:") { rest = rest.dropFirst(5) } else if rest.hasPrefix(":") { rest = rest.dropFirst() } else { return nil }
        let number = rest.prefix { $0.isNumber }
        guard !number.isEmpty, rest.dropFirst(number.count).allSatisfy({ $0 == "." || $0.isNumber }) else { return nil }
        return String(number)
    }

    /// The session bus: the socket to bind at `$XDG_RUNTIME_DIR/bus` (nil when the bus is
    /// reached another way) and the address the app gets.
    func sessionBus() throws(PlanError) -> (source: String?, address: String) {
        let inside = "unix:path=" + runtimeDirectory + "/bus"
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else {
            let source = runtimeDirectory + "/bus"
            guard lookup(source) != nil else {
                throw PlanError(
                    message: "--dbus: no session bus (DBUS_SESSION_BUS_ADDRESS is unset and \(source) does not exist); start one or leave out --dbus")
            }
            return (source, inside)
        }
        for entry in address.split(separator: ";") {
            guard entry.hasPrefix("unix:") else { continue }
            for kv in entry.dropFirst(5).split(separator: ",") where kv.hasPrefix("path=") {
                return (String(kv.dropFirst(5)).removingPercentEscapes, inside)
            }
            if entry.contains("abstract=") {
                guard options.network else {
                    throw PlanError(
                        message: "--dbus: the session bus is at an abstract socket (\(address)), which only the host's network namespace reaches; add --net")
                }
                return (nil, address)
            }
        }
        throw PlanError(
            message: "--dbus: cannot pass the session bus at '\(address)' (only unix:path= and, with --net, unix:abstract= addresses); leave out --dbus")
    }

    /// The default app id: the command's file name, reduced to app-id characters.
    static func defaultAppID(command: String) -> String {
        let name = command.split(separator: "/").last.map(String.init) ?? command
        var id = String(
            name.unicodeScalars.map { s -> Character in
                (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "." || s == "-" || s == "_"
                    ? Character(s) : "_"
            })
        while let f = id.first, f == "." || f == "-" { id.removeFirst() }
        id = String(id.prefix(255))
        return id.isEmpty ? "app" : id
    }

    /// One shell-quoted command line (for --dry-run).
    static func shellLine(_ words: [String]) -> String {
        words.map(shellQuote).joined(separator: " ")
    }

    static func shellQuote(_ word: String) -> String {
        let plain =
            !word.isEmpty
            && word.unicodeScalars.allSatisfy { s in
                (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || "@%+=:,./-_".unicodeScalars.contains(s)
            }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension String {
    /// D-Bus addresses escape bytes as %XX.
    var removingPercentEscapes: String {
        guard contains("%") else { return self }
        var bytes: [UInt8] = []
        var u = Array(utf8)[...]
        while let b = u.popFirst() {
            if b == UInt8(ascii: "%"), u.count >= 2, let v = UInt8(String(decoding: u.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v)
                u = u.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
