// What `earmuff setup` writes, as pure functions of where things live and
// which server runs the session: systemd user units for Earmuff, the real
// server's socket moved to `pulse/upstream`, the server's own
// configuration told so, and on PipeWire the daemon's configuration with
// module-access holding native clients for Earmuff. Nothing here touches the file system; SetupCommand
// reads the current files and carries the plan out.
import Basics
import Foundation
import Service

/// The sound server that runs the session.
public enum SessionServer: String, Sendable, CaseIterable {
    case pipewire
    case pulseaudio

    /// Its systemd user socket unit.
    var socketUnit: String { self == .pipewire ? "pipewire-pulse.socket" : "pulseaudio.socket" }
    /// Its systemd user service unit.
    var serviceUnit: String { self == .pipewire ? "pipewire-pulse.service" : "pulseaudio.service" }
    /// The name people know it by.
    var displayName: String { self == .pipewire ? "pipewire-pulse" : "PulseAudio" }
}

/// One file setup owns.
struct SetupFile: Equatable {
    let path: String
    let contents: String
}

/// Where setup writes, and what it puts into the units.
struct SetupContext {
    /// `$XDG_CONFIG_HOME`, or `$HOME/.config`.
    var configHome: String
    /// `$HOME`: PulseAudio reads the user's default.pa from `$HOME/.config/pulse`
    /// (or `$HOME/.pulse`), whatever `XDG_CONFIG_HOME` says.
    var home: String
    /// The `earmuff` binary the service runs.
    var binary: String
    /// The system's PulseAudio startup script (for `.pulseaudio`), and its text.
    var pulseSystemScript: (path: String, text: String)?
    /// The system's PipeWire daemon configuration (for `.pipewire`), and its text.
    var pipewireSystemConfig: (path: String, text: String)?
    /// Whether the package installed earmuff.socket and earmuff.service (in
    /// `SetupPlan.packagedUnitDirectory`) and they are the ones to use: setup then writes no units of its own.
    var packagedUnits = false
}

/// A setup configuration problem: exit 1, nothing written.
struct SetupError: Error, CustomStringConvertible {
    let description: String
}

enum SetupPlan {
    /// `$HOME`, and `$XDG_CONFIG_HOME` (default `$HOME/.config`); nil without an absolute HOME.
    static func directories(environment: [String: String]) -> (home: String, configHome: String)? {
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        if let x = environment["XDG_CONFIG_HOME"], x.hasPrefix("/") { return (home, x) }
        return (home, home + "/.config")
    }

    /// The first line of every file setup writes; `--undo` removes only files that carry it.
    static let marker = "# Written by earmuff setup; 'earmuff setup --undo' removes this file."

    // The directories setup made (a fresh account has no ~/.config/systemd/user) are recorded
    // the same way, in the files themselves: each file ends with a line for every directory
    // above it that setup made, so whichever of its files are left, `--undo` knows them, and
    // removes each once it is empty. A directory that was there before is never recorded.

    /// The line recording that setup made `directory`.
    static func madeLine(_ directory: String) -> String { madePrefix + directory + madeSuffix }
    private static let madePrefix = "# earmuff setup made the directory "
    private static let madeSuffix = "; 'earmuff setup --undo' removes it when it is empty."

    /// The directories above `path`, innermost first (`/a/b/c` → `/a/b`, `/a`).
    static func ancestors(of path: String) -> [String] {
        var out: [String] = []
        var dir = (path as NSString).deletingLastPathComponent
        while dir.count > 1 {
            out.append(dir)
            dir = (dir as NSString).deletingLastPathComponent
        }
        return out
    }

    /// `f`'s contents with a line for each directory of `made` above it, outermost first.
    /// (A path with a line break cannot be written on one comment line; it is not recorded.)
    static func recording(_ f: SetupFile, made: Set<String>) -> String {
        let lines = ancestors(of: f.path).reversed().filter { made.contains($0) && !$0.contains("\n") }.map(madeLine)
        return f.contents + lines.map { $0 + "\n" }.joined()
    }

    /// The directories `text` (a file setup wrote) records as made by setup.
    static func madeDirectories(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix(madePrefix), line.hasSuffix(madeSuffix) else { return nil }
            let dir = String(line.dropFirst(madePrefix.count).dropLast(madeSuffix.count))
            return dir.hasPrefix("/") ? dir : nil
        }
    }

    /// `text` without its record of made directories: what setup compares with what it would write.
    static func withoutRecord(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !($0.hasPrefix(madePrefix) && $0.hasSuffix(madeSuffix)) }.joined(separator: "\n")
    }
    /// The socket apps connect to (Earmuff's, after setup), relative to `$XDG_RUNTIME_DIR`.
    static let sessionSocket = "pulse/native"
    /// Where the real server listens after setup, relative to `$XDG_RUNTIME_DIR`.
    static let upstreamSocket = "pulse/upstream"

    static func unitDirectory(_ c: SetupContext) -> String { "\(c.configHome)/systemd/user" }
    /// Where the Debian package puts the user units (systemd's system-wide user unit directory).
    static let packagedUnitDirectory = "/usr/lib/systemd/user"
    /// The binary the packaged earmuff.service runs.
    static let packagedBinary = "/usr/bin/earmuff"
    static let unitNames = ["earmuff.socket", "earmuff.service"]
    static func socketDropIn(_ c: SetupContext, _ s: SessionServer) -> String {
        "\(unitDirectory(c))/\(s.socketUnit).d/earmuff.conf"
    }
    static func pipewirePulseDropIn(_ c: SetupContext) -> String { "\(c.configHome)/pipewire/pipewire-pulse.conf.d/earmuff.conf" }
    /// The user's PipeWire daemon configuration, which replaces the system's.
    static func pipewireConfig(_ c: SetupContext) -> String { "\(c.configHome)/pipewire/pipewire.conf" }
    /// Where the system's daemon configuration is looked for, in PipeWire's own order.
    static let pipewireSystemConfigs = ["/etc/pipewire/pipewire.conf", "/usr/share/pipewire/pipewire.conf"]
    static func pulseScript(_ c: SetupContext) -> String { "\(c.home)/.config/pulse/default.pa" }
    /// The older user location, which PulseAudio reads first.
    static func legacyPulseScript(_ c: SetupContext) -> String { "\(c.home)/.pulse/default.pa" }

    /// Every path setup may write, for any server (what `--undo` looks at).
    static func allPaths(_ c: SetupContext) -> [String] {
        [
            "\(unitDirectory(c))/earmuff.socket", "\(unitDirectory(c))/earmuff.service",
            socketDropIn(c, .pipewire), pipewirePulseDropIn(c), pipewireConfig(c), socketDropIn(c, .pulseaudio), pulseScript(c),
        ]
    }

    /// The files for `server`: Earmuff's units (unless packaged ones are used), and the server's drop-ins.
    static func files(_ c: SetupContext, server: SessionServer) throws -> [SetupFile] {
        var files =
            c.packagedUnits
            ? []
            : [
                SetupFile(path: "\(unitDirectory(c))/earmuff.socket", contents: socketUnit(server)),
                SetupFile(path: "\(unitDirectory(c))/earmuff.service", contents: serviceUnit(server, binary: c.binary)),
            ]
        files.append(SetupFile(path: socketDropIn(c, server), contents: movedSocket(server)))
        switch server {
        case .pipewire:
            files.append(SetupFile(path: pipewirePulseDropIn(c), contents: pipewirePulseAddress))
            guard let system = c.pipewireSystemConfig else {
                throw SetupError(
                    description:
                        "PipeWire's configuration was not found (\(pipewireSystemConfigs.joined(separator: " or "))); reinstall pipewire, or give it with --pipewire-config FILE"
                )
            }
            files.append(SetupFile(path: pipewireConfig(c), contents: try pipewireHoldConfig(from: system.text, path: system.path, binary: c.binary)))
        case .pulseaudio:
            guard let system = c.pulseSystemScript else {
                throw SetupError(
                    description: "PulseAudio's startup script was not found (/etc/pulse/default.pa); reinstall pulseaudio, or give it with --pulse-script FILE")
            }
            files.append(SetupFile(path: pulseScript(c), contents: try pulseStartupScript(from: system.text, path: system.path)))
        }
        return files
    }

    /// The first line of the units the package installs (setup enables them, never edits them).
    static let packagedMarker = "# Installed by the earmuff package; 'earmuff setup' enables it for you (the package enables it for nobody)."

    /// Earmuff's socket unit: setup's for `server`, or the packaged one (nil), which fits either server.
    static func socketUnit(_ server: SessionServer?) -> String {
        // Priority= and Backlog= as the server's own socket unit sets them.
        let backlog = server == .pulseaudio ? "Backlog=5\n" : ""
        let docs = server == nil ? "Documentation=man:earmuff(1)\n" : ""
        return """
            \(server == nil ? packagedMarker : marker)
            [Unit]
            Description=Earmuff consent proxy: the session's PulseAudio socket
            \(docs)
            [Socket]
            Priority=6
            \(backlog)ListenStream=%t/\(sessionSocket)

            [Install]
            WantedBy=sockets.target

            """
    }

    /// Earmuff's service unit: setup's for `server` running `binary`, or the packaged one (nil), ordered after either server's socket.
    static func serviceUnit(_ server: SessionServer?, binary: String) -> String {
        let order =
            server.map { "Wants=\($0.socketUnit)\nAfter=\($0.socketUnit)" }
            ?? "Documentation=man:earmuff(1)\nAfter=\(SessionServer.allCases.map(\.socketUnit).joined(separator: " "))"
        return """
            \(server == nil ? packagedMarker : marker)
            [Unit]
            Description=Earmuff consent proxy in front of \(server?.displayName ?? "the session's sound server")
            Requires=earmuff.socket
            \(order)

            [Service]
            Type=simple
            ExecStart=\(quoteForExec(binary)) serve --listen %t/\(sessionSocket) --upstream unix:%t/\(upstreamSocket)
            Restart=on-failure
            Slice=session.slice

            [Install]
            # Started with PipeWire, too: its native clients wait for Earmuff at connect.
            WantedBy=\(pipewireService)
            Also=earmuff.socket

            """
    }

    /// The PipeWire daemon's user unit, with which Earmuff starts: it holds its native clients
    /// until Earmuff releases them, and socket activation of pipewire.socket starts it for
    /// the first one, Pulse client or not.
    static let pipewireService = "pipewire.service"

    /// Where `systemctl --user enable earmuff.service` records that PipeWire wants it.
    static func startedWithPipeWire(_ c: SetupContext) -> String {
        "\(unitDirectory(c))/\(pipewireService).wants/earmuff.service"
    }

    /// The drop-in that moves the real server's socket unit to `pulse/upstream`.
    static func movedSocket(_ server: SessionServer) -> String {
        """
        \(marker)
        # Earmuff listens on %t/\(sessionSocket); \(server.displayName) moves behind it.
        [Socket]
        ListenStream=
        ListenStream=%t/\(upstreamSocket)

        """
    }

    /// pipewire-pulse takes a socket-activated descriptor only when its path is
    /// one of `server.address`, and otherwise binds that address itself.
    static let pipewirePulseAddress = """
        \(marker)
        # pipewire-pulse listens behind Earmuff, at $XDG_RUNTIME_DIR/\(upstreamSocket).
        pulse.properties = {
            server.address = [ "unix:upstream" ]
        }

        """

    /// The system's startup script with its `module-native-protocol-unix` line
    /// moved to `socket=upstream` (relative: under `$XDG_RUNTIME_DIR/pulse`).
    /// A copy rather than `.include`: the system script runs in `.fail` mode,
    /// so its own load of the protocol on `pulse/native`, where Earmuff
    /// listens, would stop the server.
    static func pulseStartupScript(from system: String, path: String) throws -> String {
        var moved = 0
        var out: [String] = []
        for line in system.split(separator: "\n", omittingEmptySubsequences: false) {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.count >= 2, words[0] == "load-module", words[1] == "module-native-protocol-unix" {
                let kept = words.dropFirst(2).filter { !$0.hasPrefix("socket=") }.map(String.init)
                out.append("# earmuff setup: was \"\(line)\"")
                out.append((["load-module", "module-native-protocol-unix", "socket=upstream"] + kept).joined(separator: " "))
                moved += 1
            } else {
                out.append(String(line))
            }
        }
        guard moved > 0 else {
            throw SetupError(
                description:
                    "\(path) loads no module-native-protocol-unix, so there is no socket to move behind Earmuff; restore the distribution's default.pa (or give another script with --pulse-script FILE)"
            )
        }
        return """
            \(marker)
            # PulseAudio's startup script, copied from \(path) with the native
            # protocol moved to $XDG_RUNTIME_DIR/\(upstreamSocket), behind Earmuff.
            # Run 'earmuff setup' again after the system script changes.


            """ + out.joined(separator: "\n") + (out.last == "" ? "" : "\n")
    }

    /// What module-access admits at connect by argv[0] (which any process can set: the gate
    /// checks each by its executable and uid all the same): the sound system's own programs,
    /// by name and by path, and Earmuff, whose gate releases everyone else.
    static func accessAllowed(binary: String) -> [String] {
        var names: [String] = []
        // pipewire-pulse runs the daemon's executable under its own argv[0].
        let programs = PipeWireSoundSystem.executables + ["/usr/bin/pipewire-pulse"] + PipeWireSoundSystem.sessionManagers
        for program in programs + [binary, "/usr/bin/earmuff"] {
            for name in [program, String(program.split(separator: "/").last ?? "")] where !names.contains(name) {
                names.append(name)
            }
        }
        return names
    }

    /// The system's PipeWire configuration with its `libpipewire-module-access` entry
    /// replaced by one that holds every other client for Earmuff (`access.force`, a
    /// `pipewire.access` no WirePlumber rule matches, so the session manager leaves those
    /// clients alone): each waits, without permissions, until Earmuff's gate has identified
    /// it and released it. A copy rather than a drop-in: PipeWire 0.3.65 appends the
    /// modules of `pipewire.conf.d/` files, so a second module-access would run after the
    /// system's, which has already let every client in. (From 0.3.83 module-access has
    /// `access.socket`, per-socket access, and a `pipewire-0-manager` socket.)
    static func pipewireHoldConfig(from system: String, path: String, binary: String) throws -> String {
        let chars = Array(system)
        guard let nameAt = system.range(of: "libpipewire-module-access").map({ system.distance(from: system.startIndex, to: $0.lowerBound) }),
            system.ranges(of: "libpipewire-module-access").count == 1,
            let open = chars[..<nameAt].lastIndex(of: "{"), let close = closingBrace(chars, from: open)
        else {
            throw SetupError(
                description:
                    "\(path) has no single libpipewire-module-access entry to give Earmuff's access rules to; restore the distribution's pipewire.conf (or give another with --pipewire-config FILE)"
            )
        }
        let allowed = accessAllowed(binary: binary).map { "\"\($0)\"" }.joined(separator: " ")
        let entry = """
            { name = libpipewire-module-access
                    args = {
                        # Admitted at connect by argv[0]; Earmuff checks each by its executable all the same.
                        access.allowed = [ \(allowed) ]
                        # Every other client waits until Earmuff has identified it and set its permissions.
                        access.force = \(OwnNodes.holdAccess)
                    }
                }
            """
        let held = String(chars[..<open]) + "# earmuff setup: module-access's entry, replaced\n    " + entry + String(chars[(close + 1)...])
        return """
            \(marker)
            # PipeWire's configuration, copied from \(path) with module-access holding
            # native clients until Earmuff has identified them, and Earmuff's silent
            # source among its objects (restart pipewire to load it).
            # Run 'earmuff setup' again after the system configuration changes.


            """ + withSilentSource(held)
    }

    /// `config` with Earmuff's silent source first among its `context.objects` (a section of
    /// its own when it has none): a node of the server itself, there from its start and whatever
    /// happens to Earmuff, on which the gate keeps every stream that may not record.
    static func withSilentSource(_ config: String) -> String {
        let args = OwnNodes.silentSourceArguments.map { key, value in
            "\(key) = \(value.hasPrefix("[") ? value : "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\"")"
        }.joined(separator: "\n            ")
        let object = """
                # earmuff setup: the silent source, which holds what may not be heard.
                { factory = adapter
                    args = {
                        \(args)
                    }
                }
            """
        var lines = config.components(separatedBy: "\n")
        if let at = lines.firstIndex(where: { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return words.first == "context.objects" && words.last == "[" && words.count <= 3
        }) {
            lines.insert(object, at: at + 1)
            return lines.joined(separator: "\n")
        }
        return config + (config.hasSuffix("\n") ? "" : "\n") + "\ncontext.objects = [\n" + object + "]\n"
    }

    /// The index of the `}` that closes the `{` at `open`, past strings and `#` comments.
    private static func closingBrace(_ chars: [Character], from open: Int) -> Int? {
        var depth = 0
        var i = open
        var quoted = false
        var comment = false
        while i < chars.count {
            let c = chars[i]
            if comment {
                comment = c != "\n"
            } else if quoted {
                if c == "\\" { i += 1 } else if c == "\"" { quoted = false }
            } else if c == "#" {
                comment = true
            } else if c == "\"" {
                quoted = true
            } else if c == "{" {
                depth += 1
            } else if c == "}" {
                depth -= 1
                if depth == 0 { return i }
            }
            i += 1
        }
        return nil
    }

    /// The `systemctl --user` commands that switch the session over, in order.
    static func takeoverCommands(_ server: SessionServer, filesChanged: Bool) -> [[String]] {
        guard filesChanged else { return [enableCommand] }
        return [
            ["daemon-reload"],
            ["stop", server.serviceUnit, server.socketUnit],
        ] + pipewireRestart(server) + [
            ["start", server.socketUnit],
            enableCommand,
        ]
    }

    /// Enables and starts Earmuff's socket and service: it runs from now on, and is started
    /// again by its socket and with PipeWire.
    static let enableCommand = ["enable", "--now", "earmuff.socket", "earmuff.service"]

    /// The `systemctl --user` commands of `--undo`: before and after the files go.
    static func undoCommands(_ server: SessionServer?) -> (before: [[String]], after: [[String]]) {
        var after: [[String]] = [["daemon-reload"]]
        if let server {
            after += [["stop", server.serviceUnit, server.socketUnit]] + pipewireRestart(server) + [["start", server.socketUnit]]
        }
        return ([["disable", "--now", "earmuff.socket", "earmuff.service"]], after)
    }

    /// PipeWire reads its configuration (module-access's rules) only when it starts.
    static func pipewireRestart(_ server: SessionServer) -> [[String]] {
        server == .pipewire ? [["restart", "pipewire.service"]] : []
    }

    /// Quotes an ExecStart= executable path when it needs it (systemd.service(5) quoting).
    static func quoteForExec(_ path: String) -> String {
        let escaped = path.replacingOccurrences(of: "%", with: "%%")
        if escaped.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" || $0 == "'" }) {
            return "\"" + escaped.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return escaped
    }
}
