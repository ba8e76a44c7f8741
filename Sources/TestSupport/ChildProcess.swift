// Child processes for tests: posix_spawn with output sent to files (no pipes,
// so no reader can deadlock), an explicit environment, signals reset to their
// defaults, inherited descriptors closed, and a watchdog so that no child
// outlives the test process.
//
// The watchdog is a small `sh` wrapper: it forks a poller into the background
// and then `exec`s the real program, so the pid we hold is the program's own
// pid and signals reach it directly. The poller checks every second that the
// test process is still alive and that the hard lifetime cap has not passed;
// otherwise it sends SIGTERM, then SIGKILL after a grace period, and (only when
// the test process is gone) removes the child's private directory.

import Foundation
import Glibc
import Synchronization

/// A running (or finished) child process whose stdout and stderr go to files.
public final class ChildProcess: Sendable {
    /// The process id of the program itself (the watchdog wrapper `exec`s it).
    public let pid: pid_t
    /// The file that receives the program's stdout.
    public let stdoutPath: String
    /// The file that receives the program's stderr.
    public let stderrPath: String
    /// The program that was started (for diagnostics).
    public let command: [String]

    /// Exit status once the process has been reaped: the exit code, or 128 + signal number.
    private let reaped = Mutex<Int32?>(nil)

    private init(pid: pid_t, stdoutPath: String, stderrPath: String, command: [String]) {
        self.pid = pid
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
        self.command = command
    }

    /// Starts `executable` with exactly `environment`, stdin from /dev/null and
    /// stdout/stderr to the given files, under a watchdog that ends it when the
    /// test process dies or after `maxLifetime` seconds. When the test process
    /// is gone the watchdog also removes `cleanupDirectory` (if given).
    public static func spawn(
        executable: String,
        arguments: [String],
        environment: [String: String],
        stdoutPath: String,
        stderrPath: String,
        maxLifetime: Int,
        cleanupDirectory: String? = nil
    ) throws -> ChildProcess {
        let argv =
            [
                "/bin/sh", "-c", watchdogScript, "earmuff-watchdog",
                String(getpid()), String(max(1, maxLifetime)), cleanupDirectory ?? "",
                executable,
            ] + arguments
        let env = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }

        var actions = unsafe posix_spawn_file_actions_t()
        unsafe posix_spawn_file_actions_init(&actions)
        defer { unsafe posix_spawn_file_actions_destroy(&actions) }
        unsafe posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        unsafe posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o644)
        if stderrPath == stdoutPath {
            unsafe posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            unsafe posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o644)
        }
        // Close everything else the test process has open (sockets of proxies
        // under test, pipes of the test runner) so a long-lived child cannot
        // keep them alive.
        if let closeFrom = unsafe closeFromAction {
            _ = unsafe closeFrom(&actions, 3)
        }

        var attr = posix_spawnattr_t()
        unsafe posix_spawnattr_init(&attr)
        defer { unsafe posix_spawnattr_destroy(&attr) }
        var emptyMask = sigset_t()
        unsafe sigemptyset(&emptyMask)
        unsafe posix_spawnattr_setsigmask(&attr, &emptyMask)
        var defaults = sigset_t()
        unsafe sigemptyset(&defaults)
        for sig in [SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            unsafe sigaddset(&defaults, sig)
        }
        unsafe posix_spawnattr_setsigdefault(&attr, &defaults)
        unsafe posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var pid: pid_t = 0
        let rc = unsafe withCStrings(argv) { cArgv in
            unsafe withCStrings(env) { cEnv in
                unsafe posix_spawn(&pid, "/bin/sh", &actions, &attr, cArgv, cEnv)
            }
        }
        guard rc == 0 else {
            throw TestSupportError("posix_spawn of \(executable) failed: errno \(rc)")
        }
        return ChildProcess(
            pid: pid, stdoutPath: stdoutPath, stderrPath: stderrPath,
            command: [executable] + arguments)
    }

    /// The exit status if the process has finished (reaping it), else nil.
    /// The status is the exit code, or 128 + the signal number that ended it.
    public func poll() -> Int32? {
        reaped.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let r = unsafe waitpid(pid, &raw, WNOHANG)
            if r == pid {
                let sig = raw & 0x7f
                status = sig == 0 ? (raw >> 8) & 0xff : 128 + sig
            } else if r < 0 && errno == ECHILD {
                status = -1 // reaped elsewhere; should not happen
            }
            return status
        }
    }

    /// Whether the process is still running.
    public var isRunning: Bool { poll() == nil }

    /// Waits up to `timeout` seconds for the process to finish; returns its status or nil.
    @discardableResult
    public func wait(timeout: Double) -> Int32? {
        var status: Int32?
        _ = Wait.untilBlocking(timeout: timeout, interval: 0.01) {
            status = poll()
            return status != nil
        }
        return status
    }

    /// Sends `signal` (if the process is still running).
    public func send(_ signal: Int32) {
        if poll() == nil { kill(pid, signal) }
    }

    /// Sends `signal`, waits `grace` seconds, then SIGKILLs; always reaps. Returns the status.
    @discardableResult
    public func terminate(signal: Int32 = SIGTERM, grace: Double = 5) -> Int32 {
        if let status = poll() { return status }
        kill(pid, signal)
        if let status = wait(timeout: grace) { return status }
        kill(pid, SIGKILL)
        return wait(timeout: 30) ?? -1
    }

    /// Waits up to `timeout` seconds for the process to exit (SIGKILLing it after
    /// that) and returns its status and output.
    public func finish(timeout: Double) -> ToolResult {
        var status = wait(timeout: timeout)
        let timedOut = status == nil
        if timedOut { status = terminate(signal: SIGKILL, grace: 10) }
        return ToolResult(
            status: status ?? -1, timedOut: timedOut, stdout: stdoutData(),
            stderr: stderrText(), command: command)
    }

    /// What the process wrote to stdout so far.
    public func stdoutData() -> Data {
        (try? Data(contentsOf: URL(fileURLWithPath: stdoutPath))) ?? Data()
    }

    /// What the process wrote to stderr so far.
    public func stderrText() -> String {
        let data = (try? Data(contentsOf: URL(fileURLWithPath: stderrPath))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    deinit {
        // Never leave a zombie or a running child behind an object nobody holds.
        if poll() == nil {
            kill(pid, SIGKILL)
            _ = wait(timeout: 10)
        }
    }
}

/// The watchdog wrapper. Arguments: parent pid, lifetime cap in seconds,
/// directory to remove if the parent died ("" for none), then the command.
private let watchdogScript = #"""
    parent=$1; cap=$2; dir=$3; shift 3
    me=$$
    (
      trap '' INT TERM HUP
      n=0
      while kill -0 "$me" 2>/dev/null; do
        if ! kill -0 "$parent" 2>/dev/null || [ "$n" -ge "$cap" ]; then
          kill -TERM "$me" 2>/dev/null
          i=0
          while [ "$i" -lt 5 ] && kill -0 "$me" 2>/dev/null; do sleep 1; i=$((i+1)); done
          kill -KILL "$me" 2>/dev/null
          if [ -n "$dir" ] && ! kill -0 "$parent" 2>/dev/null; then rm -rf -- "$dir"; fi
          exit 0
        fi
        sleep 1
        n=$((n+1))
      done
    ) </dev/null >/dev/null 2>&1 &
    exec "$@"
    """#

private typealias CloseFromFunction = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

/// glibc ≥ 2.34 has posix_spawn_file_actions_addclosefrom_np, but the Glibc
/// module does not import it (it is a GNU extension), so look it up at run time.
private let closeFromAction: CloseFromFunction? = {
    // RTLD_DEFAULT is the null handle in glibc.
    guard let sym = unsafe dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
        return nil
    }
    // The type above is glibc's prototype: (posix_spawn_file_actions_t *, int) -> int.
    return unsafe unsafeBitCast(sym, to: CloseFromFunction.self)
}()

/// Calls `body` with a NULL-terminated C array of copies of `strings`.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = unsafe strings.map { unsafe strdup($0) }
    unsafe pointers.append(nil)
    defer { unsafe pointers.forEach { unsafe free($0) } }
    return unsafe body(pointers)
}

/// Looks up an executable by name in `$PATH` (and the usual system directories).
public func findExecutable(_ name: String) -> String? {
    if name.contains("/") { return unsafe access(name, X_OK) == 0 ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let dirs = path.split(separator: ":").map(String.init) + ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    for dir in dirs where !dir.isEmpty {
        let candidate = "\(dir)/\(name)"
        if unsafe access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}
