// `earmuff setup`: makes Earmuff the session's PulseAudio socket (systemd
// user units, the real server moved to pulse/upstream), `--undo` puts the
// session back, `--dry-run` shows what either would do. The files are in
// SetupPlan; this file reads what is there, refuses foreign configuration,
// writes, and runs `systemctl --user`.
import ControlProtocol
import Foundation
import Glibc

/// `earmuff setup [--undo] [--dry-run] [--server pipewire|pulseaudio] [--no-systemctl] [--binary PATH] [--pulse-script FILE] [--pipewire-config FILE]`.
public enum SetupCommand {
    static var usage: String { ClientUsage.text(for: "setup") }

    struct Options {
        var undo = false
        var dryRun = false
        var server: SessionServer?
        var noSystemctl = false
        var binary: String?
        var pulseScript = "/etc/pulse/default.pa"
        /// The system's PipeWire configuration (nil: the first of SetupPlan.pipewireSystemConfigs).
        var pipewireConfig: String?
        /// Where packaged units are looked for (no option: tests point it elsewhere).
        var packagedUnitDirectory = SetupPlan.packagedUnitDirectory
    }

    /// The options after `setup`; nil for `--help`. Only options CommandTable lists for setup are taken.
    static func parse(_ arguments: [String]) throws(UsageError) -> Options? {
        var o = Options()
        var i = 0
        func value(_ flag: String) -> String? {
            i += 1
            return i < arguments.count ? arguments[i] : nil
        }
        while i < arguments.count {
            let a = arguments[i]
            guard CommandTable.known("setup").option(a) != nil else {
                throw UsageError("unknown argument '\(a)'; see 'earmuff setup --help'", subcommand: "setup")
            }
            switch a {
            case "-h", "--help": return nil
            case "--undo": o.undo = true
            case "--dry-run", "-n": o.dryRun = true
            case "--no-systemctl": o.noSystemctl = true
            case "--server":
                guard let v = value(a), let s = SessionServer(rawValue: v) else {
                    throw UsageError("--server takes pipewire or pulseaudio", subcommand: "setup")
                }
                o.server = s
            case "--binary":
                guard let v = value(a), v.hasPrefix("/") else { throw UsageError("--binary takes an absolute path", subcommand: "setup") }
                o.binary = v
            case "--pulse-script":
                guard let v = value(a) else { throw UsageError("--pulse-script takes a file", subcommand: "setup") }
                o.pulseScript = v
            case "--pipewire-config":
                guard let v = value(a) else { throw UsageError("--pipewire-config takes a file", subcommand: "setup") }
                o.pipewireConfig = v
            default:
                throw UsageError("'\(a)' is in the table of setup's options but not handled; this is a bug in earmuff", subcommand: "setup")
            }
            i += 1
        }
        return o
    }

    /// Runs with the arguments after `setup`; returns the exit status.
    public static func run(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32 {
        let o: Options
        do throws(UsageError) {
            guard let parsed = try parse(arguments) else { Terminal.out(usage); return 0 }
            o = parsed
        } catch {
            Terminal.error("earmuff setup: \(error.message)")
            return 64
        }
        do {
            let runner = SetupRunner(options: o, environment: environment)
            return try o.undo ? runner.undo() : runner.setup()
        } catch {
            Terminal.error("earmuff setup: \(error)")
            return 1
        }
    }
}

/// Carries out setup or undo.
struct SetupRunner {
    let options: SetupCommand.Options
    let environment: [String: String]

    private func say(_ s: String) { Terminal.out(s + "\n") }

    func context() throws -> SetupContext {
        guard let (home, configHome) = SetupPlan.directories(environment: environment) else {
            throw SetupError(description: "HOME is not set to an absolute path; run setup in your login session")
        }
        // The package's units run /usr/bin/earmuff; --binary asks for units of our own.
        let packaged = options.binary == nil && Self.packagedUnitsInstalled(in: options.packagedUnitDirectory)
        let binary = packaged ? SetupPlan.packagedBinary : options.binary ?? Self.ownBinary()
        let script = (try? String(contentsOfFile: options.pulseScript, encoding: .utf8)).map { (options.pulseScript, $0) }
        let pipewire = (options.pipewireConfig.map { [$0] } ?? SetupPlan.pipewireSystemConfigs).lazy
            .compactMap { path in (try? String(contentsOfFile: path, encoding: .utf8)).map { (path, $0) } }.first
        return SetupContext(
            configHome: configHome, home: home, binary: binary, pulseSystemScript: script,
            pipewireSystemConfig: pipewire, packagedUnits: packaged)
    }

    /// Whether the package installed both user units in `directory`.
    static func packagedUnitsInstalled(in directory: String) -> Bool {
        SetupPlan.unitNames.allSatisfy { unsafe access("\(directory)/\($0)", R_OK) == 0 }
    }

    static func ownBinary() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    // MARK: setup

    func setup() throws -> Int32 {
        let c = try context()
        let server = try options.server ?? detect()
        let files = try SetupPlan.files(c, server: server)
        try refuseForeign(c, server: server, files: files)
        // Ours, for the other server (a session that switched servers): removed.
        let stale = SetupPlan.allPaths(c).filter { path in !files.contains { $0.path == path } && ownedByUs(path) }

        say(
            "earmuff setup: the session's server is \(server.displayName); Earmuff goes on $XDG_RUNTIME_DIR/\(SetupPlan.sessionSocket), \(server.displayName) moves to $XDG_RUNTIME_DIR/\(SetupPlan.upstreamSocket)"
        )
        if c.packagedUnits {
            say("using the packaged units \(options.packagedUnitDirectory)/earmuff.socket and earmuff.service (they run \(SetupPlan.packagedBinary))")
        }
        if c.binary.contains("/.build/") {
            say(
                "note: the service will run \(c.binary), a build directory; install earmuff first (scripts/install) and run setup again with that binary, or a clean build breaks the session's sound"
            )
        }
        var changed = false
        // The directories setup made before, as its files record them, and those it makes now.
        var made = Set(SetupPlan.allPaths(c).filter(ownedByUs).flatMap(madeDirectories))
        let staleMade = Set(stale.flatMap(madeDirectories))
        for f in files {
            let current = try? String(contentsOfFile: f.path, encoding: .utf8)
            if let current, SetupPlan.withoutRecord(current) == f.contents {
                say("unchanged \(f.path)")
                continue
            }
            changed = true
            if options.dryRun {
                say("would write \(f.path):")
                say(f.contents.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n"))
            } else {
                made.formUnion(SetupPlan.ancestors(of: f.path).filter { !exists($0) })
                try write(SetupFile(path: f.path, contents: SetupPlan.recording(f, made: made)))
                say("wrote \(f.path)")
            }
        }
        for path in stale {
            changed = true
            if options.dryRun { say("would remove \(path)") } else { try remove(path); say("removed \(path)") }
        }
        if !options.dryRun { removeEmpty(staleMade) }
        if !options.dryRun && !changed { say("nothing to change: the session is already set up") }
        if server == .pipewire && changed {
            say(
                "PipeWire holds each native client (pipewire-0) until Earmuff has identified it; pipewire must be restarted to load that (systemctl --user restart pipewire.service, below)"
            )
        }
        try systemctl(SetupPlan.takeoverCommands(server, filesChanged: changed))
        if server == .pulseaudio {
            say(Self.x11Note)
            if x11PublishLoaded() { say("module-x11-publish is loaded in this session now: run the first two commands above") }
        }
        if !options.dryRun {
            say("check with: earmuff status   (undo with: earmuff setup --undo)")
        }
        return 0
    }

    static let x11Note = """
        note: in an X11 session, start-pulseaudio-x11 loads module-x11-publish, which
        writes the real server's socket into the root window property PULSE_SERVER;
        apps prefer that to the default socket and would bypass Earmuff. To stop it:
            pactl unload-module module-x11-publish; xprop -root -remove PULSE_SERVER
        and, to keep it from coming back at the next login, hide its autostart entry:
            printf '[Desktop Entry]\\nHidden=true\\n' > ~/.config/autostart/pulseaudio.desktop
        (this also drops module-x11-cork-request and module-x11-xsmp).
        """

    /// Whether the running server has module-x11-publish loaded (pactl, as the user runs it).
    func x11PublishLoaded() -> Bool {
        var env = environment
        env["LC_ALL"] = "C"
        env["PULSE_BINARY"] = "/bin/false"
        guard let out = Subprocess.run("pactl", ["list", "short", "modules"], environment: env), out.status == 0 else { return false }
        return out.stdout.split(separator: "\n").contains { $0.split(separator: "\t").dropFirst().first == "module-x11-publish" }
    }

    // MARK: undo

    func undo() throws -> Int32 {
        let c = try context()
        let ours = SetupPlan.allPaths(c).filter(ownedByUs)
        let foreign = SetupPlan.allPaths(c).filter { exists($0) && !ownedByUs($0) }
        let server: SessionServer? =
            ours.contains(SetupPlan.socketDropIn(c, .pipewire))
            ? .pipewire
            : ours.contains(SetupPlan.socketDropIn(c, .pulseaudio)) ? .pulseaudio : nil
        if ours.isEmpty {
            say("earmuff setup --undo: nothing to remove (no file written by earmuff setup under \(c.configHome))")
        }
        let (before, after) = SetupPlan.undoCommands(server)
        if !ours.isEmpty { try systemctl(before) }
        let made = Set(ours.flatMap(madeDirectories))
        for path in ours {
            if options.dryRun { say("would remove \(path)") } else { try remove(path); say("removed \(path)") }
        }
        if options.dryRun {
            for dir in made.sorted() { say("would remove \(dir) if nothing else is in it (made by earmuff setup)") }
        } else {
            removeEmpty(made)
        }
        for path in foreign { say("left \(path): not written by earmuff setup") }
        if !ours.isEmpty {
            try systemctl(after)
            if !options.dryRun, let server {
                say("\(server.displayName) is back on $XDG_RUNTIME_DIR/\(SetupPlan.sessionSocket)")
            }
            if server == .pulseaudio {
                say("if you hid PulseAudio's X11 autostart entry for Earmuff, remove ~/.config/autostart/pulseaudio.desktop to bring module-x11-publish back")
            }
        }
        return 0
    }

    // MARK: checks

    /// Refuses configuration setup did not write that it would overwrite or
    /// that would fight it: names the file and the fix; nothing is written.
    func refuseForeign(_ c: SetupContext, server: SessionServer, files: [SetupFile]) throws {
        for f in files where exists(f.path) && !ownedByUs(f.path) {
            throw SetupError(
                description:
                    "\(f.path) exists and was not written by earmuff setup; move it aside (mv '\(f.path)' '\(f.path).orig'), run setup again, then merge what you need from it"
            )
        }
        let units = SetupPlan.unitDirectory(c)
        for unit in ["earmuff.socket", "earmuff.service"] {
            try refuseDropIns(in: "\(units)/\(unit).d", settings: ["ListenStream", "ExecStart"])
        }
        if exists("\(units)/\(server.socketUnit)") {
            throw SetupError(
                description:
                    "\(units)/\(server.socketUnit) replaces the system's \(server.socketUnit); setup cannot move its socket safely; remove it (or move it aside) and run setup again"
            )
        }
        try refuseDropIns(in: "\(units)/\(server.socketUnit).d", settings: ["ListenStream"])
        if server == .pulseaudio, exists(SetupPlan.legacyPulseScript(c)) {
            let legacy = SetupPlan.legacyPulseScript(c)
            throw SetupError(
                description:
                    "\(legacy) exists, and PulseAudio reads it before \(SetupPlan.pulseScript(c)); move it aside (mv '\(legacy)' '\(legacy).orig') and run setup again"
            )
        }
        if server == .pipewire {
            try refuseDropIns(in: "\(c.configHome)/pipewire/pipewire-pulse.conf.d", settings: ["server.address"])
        }
    }

    /// Throws when a file in `dir` other than ours sets one of `settings`.
    func refuseDropIns(in dir: String, settings: [String]) throws {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".conf") }.sorted()
        for name in names where name != "earmuff.conf" {
            let path = "\(dir)/\(name)"
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let t = line.trimmingCharacters(in: .whitespaces)
                if t.hasPrefix("#") || t.hasPrefix(";") { continue }
                if let s = settings.first(where: { t.hasPrefix($0) }) {
                    throw SetupError(
                        description: "\(path):\(n + 1) sets \(s), which earmuff setup must own; remove that line (or the file) and run setup again")
                }
            }
        }
    }

    func detect() throws -> SessionServer {
        var notes: [String] = []
        // PULSE_SERVER is honoured: through Earmuff, pactl still names the real server.
        var env = environment
        env["LC_ALL"] = "C"
        env["PULSE_BINARY"] = "/bin/false" // never autospawn a server just to ask
        if let out = Subprocess.run("pactl", ["info"], environment: env) {
            if out.status == 0, let line = out.stdout.split(separator: "\n").first(where: { $0.hasPrefix("Server Name: ") }) {
                let name = line.dropFirst("Server Name: ".count)
                if name.contains("PipeWire") { return .pipewire }
                if name.lowercased().contains("pulseaudio") { return .pulseaudio }
                notes.append("pactl info names an unknown server \"\(name)\"")
            } else {
                let why = out.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: "; ")
                notes.append("pactl info found no server (\(why))")
            }
        } else {
            notes.append("pactl is not installed")
        }
        if let manager = userManager() {
            for server in SessionServer.allCases {
                if let out = Subprocess.run("systemctl", ["--user", "is-enabled", server.socketUnit], environment: environment),
                    out.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "enabled"
                {
                    return server
                }
            }
            notes.append("no pipewire-pulse.socket or pulseaudio.socket is enabled in \(manager)")
        } else {
            notes.append("no systemd user manager to ask")
        }
        throw SetupError(
            description:
                "no sound server found: \(notes.joined(separator: "; ")); start your sound server (systemctl --user start pipewire-pulse.socket, or pulseaudio.socket) or name it with --server pipewire|pulseaudio"
        )
    }

    /// The user manager's private socket when one runs, else nil.
    func userManager() -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return nil }
        let socket = "\(runtime)/systemd/private"
        return exists(socket) ? "the systemd user manager" : nil
    }

    /// Runs (or prints) `systemctl --user` commands in order; stops at the first failure.
    func systemctl(_ commands: [[String]]) throws {
        if commands.isEmpty { return }
        let lines = commands.map { "systemctl --user " + $0.joined(separator: " ") }
        if options.dryRun {
            for l in lines { say("would run: \(l)") }
            return
        }
        if options.noSystemctl || userManager() == nil {
            let why = options.noSystemctl ? "--no-systemctl" : "no systemd user manager runs here ($XDG_RUNTIME_DIR/systemd/private is missing)"
            say("not running systemctl (\(why)); in your desktop session, run:")
            for l in lines { say("    \(l)") }
            return
        }
        for (command, line) in zip(commands, lines) {
            say("running: \(line)")
            guard let out = Subprocess.run("systemctl", ["--user"] + command, environment: environment) else {
                throw SetupError(description: "systemctl not found; install systemd, or rerun with --no-systemctl and run the commands yourself")
            }
            guard out.status == 0 else {
                throw SetupError(
                    description:
                        "\(line) failed (status \(out.status)): \(out.stderr.trimmingCharacters(in: .whitespacesAndNewlines)); the files are written, fix the cause and run setup again"
                )
            }
        }
    }

    // MARK: files

    func exists(_ path: String) -> Bool { unsafe access(path, F_OK) == 0 }

    func ownedByUs(_ path: String) -> Bool {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return false }
        return text.hasPrefix(SetupPlan.marker + "\n")
    }

    func write(_ f: SetupFile) throws {
        let dir = (f.path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try f.contents.write(toFile: f.path, atomically: true, encoding: .utf8)
    }

    func remove(_ path: String) throws {
        try FileManager.default.removeItem(atPath: path)
    }

    /// The directories the file setup wrote at `path` records as made by setup.
    func madeDirectories(_ path: String) -> [String] {
        (try? String(contentsOfFile: path, encoding: .utf8)).map(SetupPlan.madeDirectories) ?? []
    }

    /// Removes each of `made` (directories setup made) that is empty, innermost first, so that
    /// a parent emptied by its child goes too. One that holds anything else stays: rmdir(2)
    /// removes only an empty directory, and decides that itself.
    func removeEmpty(_ made: Set<String>) {
        let deepestFirst = made.sorted { a, b in
            let (da, db) = (a.split(separator: "/").count, b.split(separator: "/").count)
            return da != db ? da > db : a < b
        }
        for dir in deepestFirst where unsafe rmdir(dir) == 0 {
            say("removed \(dir) (made by earmuff setup, now empty)")
        }
    }
}

/// A finished helper command.
struct SubprocessResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

enum Subprocess {
    /// Runs `name` (found in PATH) to completion; nil when it cannot be started.
    static func run(_ name: String, _ arguments: [String], environment: [String: String]) -> SubprocessResult? {
        let path = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/\(name)" }.first { (candidate: String) in unsafe access(candidate, X_OK) == 0 }
        guard let path else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.environment = environment
        // Standard error goes to an unlinked temporary file, read after the exit: with only one
        // pipe to drain, a chatty child cannot stall on a full one, and no second reader is needed.
        var template = Array("\(NSTemporaryDirectory())/earmuff-setup-XXXXXX".utf8CString)
        let errFD = unsafe mkstemp(&template)
        guard errFD >= 0 else { return nil }
        unsafe unlink(String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
        let err = FileHandle(fileDescriptor: errFD, closeOnDealloc: true)
        let out = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return nil }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        lseek(errFD, 0, SEEK_SET)
        let errData = err.readDataToEndOfFile()
        return SubprocessResult(
            status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }
}
