// `earmuff run --sandbox`: runs a command under bubblewrap with Earmuff as its
// only sound path (see SandboxPlan.swift for what the sandbox holds).
//
// This process asks the daemon for a launcher socket (`launcher:ID`, admitted
// only to this process's tree: the sandbox and this launcher), starts
// bubblewrap as its child, and stays to supervise it:
//   - bubblewrap runs in a process group of its own, and the app in a session of
//     its own inside, so the terminal's Ctrl-C reaches only this process, which
//     forwards SIGINT (and SIGTERM, SIGHUP, SIGQUIT) to the app's process group;
//   - bubblewrap's pid 1 ignores forwarded signals (it has no handlers, and the
//     kernel protects a namespace's init), so only the app and its children get them;
//     a signal that comes before bubblewrap exists waits for it, and none is sent
//     after it exited (its pid may be another process's by then);
//   - the exit status is the app's (bubblewrap passes it on, 128+N for a
//     signal N); if this process dies, bubblewrap and the sandbox die with it
//     (--die-with-parent), and the daemon removes the launcher socket when
//     this process is gone.
import Consent
import ControlProtocol
import Dispatch
import EarmuffClient
import Foundation
import Glibc
import LinuxSystem

enum SandboxRun {
    /// The signals passed on to the app.
    static let forwarded: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func run(_ o: RunOptions, sandbox: SandboxOptions) -> Int32 {
        let env = ClientCommands.environment
        guard let bwrap = AppNameResolver.lookUp("bwrap", searchPath: env["PATH"], files: HostFiles()) else {
            return ClientCommands.fail("--sandbox needs bubblewrap, and no 'bwrap' is on PATH; install it (apt-get install bubblewrap)")
        }
        let appID = o.appID ?? SandboxPlan.defaultAppID(command: o.command[0])
        var plan = SandboxPlan(
            options: sandbox, launcherSocket: "", privateHome: privateHome(appID: appID, environment: env),
            purpose: o.purpose, environment: env, uid: getuid(),
            workingDirectory: FileManager.default.currentDirectoryPath, command: o.command,
            lookup: lookup)
        if sandbox.dryRun {
            // Where the daemon would open this run's socket (its launcher directory, this pid).
            plan.launcherSocket = ClientPaths.runtimeDirectory(environment: env, uid: getuid()) + "/earmuff/app/\(appID)@\(getpid())"
            do {
                Terminal.out(SandboxPlan.shellLine([bwrap] + (try plan.arguments())) + "\n")
                return 0
            } catch {
                return ClientCommands.fail(error.message)
            }
        }
        if let problem = prepareHome(plan) { return ClientCommands.fail(problem) }
        do {
            // Every mistake in the plan is found before the daemon is asked for anything.
            _ = try plan.arguments()
        } catch {
            return ClientCommands.fail(error.message)
        }
        do {
            let client = try ClientCommands.connect(o.controlPath)
            guard case .launcher(let l) = try client.request(.registerLauncher(appID: appID, purpose: o.purpose)) else {
                return ClientCommands.unexpected("register-launcher")
            }
            plan.launcherSocket = l.socketPath
            client.close()
        } catch {
            return ClientCommands.fail(error.message)
        }
        let arguments: [String]
        do {
            arguments = try plan.arguments()
        } catch {
            return ClientCommands.fail(error.message)
        }
        return supervise(bwrap, arguments)
    }

    /// `$XDG_DATA_HOME/earmuff/sandboxes/ID`: the app's own home, kept between runs.
    static func privateHome(appID: String, environment: [String: String]) -> String {
        let data =
            environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? "/") + "/.local/share"
        return data + "/earmuff/sandboxes/" + appID
    }

    /// Makes the private home (mode 0700) or checks the chosen one; a message when it cannot be used.
    static func prepareHome(_ plan: SandboxPlan) -> String? {
        switch plan.options.home {
        case .privatePerApp:
            do {
                try FileManager.default.createDirectory(
                    atPath: plan.privateHome, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                return "cannot make the sandbox's home \(plan.privateHome) (\(error.localizedDescription)); check that directory, or pass --home DIR"
            }
        case .directory(let dir):
            guard lookup(dir) == .directory else {
                return "--home \(dir) is not a directory; create it (mkdir -p '\(dir)') or choose another"
            }
        case .shared:
            guard lookup(plan.home) == .directory else {
                return "--share-home: the home \(plan.home) is not a directory; set HOME or pass --home DIR"
            }
        }
        return nil
    }

    /// What is at a host path, without following a final link.
    static func lookup(_ path: String) -> SandboxPlan.Entry? {
        var st = stat()
        guard unsafe lstat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            return .directory
        case S_IFLNK:
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = unsafe readlink(path, &buf, buf.count - 1)
            guard n > 0 else { return .other }
            let target = String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // A link to a directory is shown as the same link; any other is treated as a file.
            var to = stat()
            return unsafe stat(path, &to) == 0 && to.st_mode & S_IFMT == S_IFDIR ? .symlink(target: target) : .other
        default:
            return .other
        }
    }

    // MARK: supervision

    /// Where forwarded signals go: nothing yet (they wait), bubblewrap's pid, or nowhere
    /// once it has exited (so a recycled pid never gets one).
    enum Target {
        case starting(pending: [Int32])
        case running(pid_t)
        case exited
    }

    /// Starts bubblewrap in its own process group, forwards signals to the app, and
    /// returns its exit status (128+N when it was killed by signal N).
    static func supervise(_ bwrap: String, _ arguments: [String]) -> Int32 {
        // Handled here from now on (before the child exists, so none is lost); the
        // child gets the default actions back.
        let target = Locked(Target.starting(pending: []))
        var sources: [any DispatchSourceSignal] = []
        for s in forwarded {
            signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
            source.setEventHandler {
                target.withLock { t in
                    switch t {
                    case .starting(let pending): t = .starting(pending: pending + [s])
                    case .running(let pid): forward(s, sandbox: pid)
                    case .exited: break
                    }
                }
            }
            source.resume()
            sources.append(source)
        }
        defer { for s in sources { s.cancel() } }
        var attr = posix_spawnattr_t()
        unsafe posix_spawnattr_init(&attr)
        defer { unsafe posix_spawnattr_destroy(&attr) }
        var defaults = sigset_t()
        unsafe sigemptyset(&defaults)
        for s in forwarded { unsafe sigaddset(&defaults, s) }
        var empty = sigset_t()
        unsafe sigemptyset(&empty)
        unsafe posix_spawnattr_setsigdefault(&attr, &defaults)
        unsafe posix_spawnattr_setsigmask(&attr, &empty)
        unsafe posix_spawnattr_setpgroup(&attr, 0)
        unsafe posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        var pid: pid_t = 0
        let argv = unsafe ([bwrap] + arguments).map { unsafe strdup($0) } + [nil]
        defer { unsafe argv.forEach { unsafe free($0) } }
        let rc = unsafe posix_spawn(&pid, bwrap, nil, &attr, argv, environ)
        guard rc == 0 else {
            target.withLock { $0 = .exited }
            return ClientCommands.fail("cannot start \(bwrap) (\(Errno(rawValue: rc))); reinstall bubblewrap")
        }
        target.withLock { t in
            if case .starting(let pending) = t { for s in pending { forward(s, sandbox: pid) } }
            t = .running(pid)
        }
        // Wait without reaping, stop forwarding, then reap: the pid stays bubblewrap's
        // until no signal can be sent to it any more.
        var info = unsafe siginfo_t()
        while unsafe waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 {
            guard errno == EINTR else {
                return ClientCommands.fail("lost track of bubblewrap (pid \(pid)): \(Errno.current)")
            }
        }
        target.withLock { $0 = .exited }
        var status: Int32 = 0
        while unsafe waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = status & 0x7f
        return code == 0 ? (status >> 8) & 0xff : 128 + code
    }

    /// Sends `signal` to the app's process group (led by bubblewrap's child, which
    /// started the session the app runs in); to bubblewrap itself before that exists.
    static func forward(_ signal: Int32, sandbox bwrap: pid_t) {
        for child in children(of: bwrap) where killpg(child, signal) == 0 { return }
        kill(bwrap, signal)
    }

    /// The child pids of `pid` (/proc/PID/task/PID/children).
    static func children(of pid: pid_t) -> [pid_t] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8) else { return [] }
        return text.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}
