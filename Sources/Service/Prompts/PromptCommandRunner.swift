// `prompt-command`, one process at a time.
//
// Prompts that want the command wait in order; the runner's own event loop
// (a thread that does nothing else) starts the command for the first, waits
// for it, and reports its exit status. When a
// prompt is resolved elsewhere (an agent, the desktop, the CLI) or times out,
// `cancel` drops it from the queue or, if its command is running, signals the
// command's process group (SIGTERM, then SIGKILL after a grace period), so a
// dialog the command opened goes away with the prompt.
//
// The command's standard output is a pipe: the first line it printed (read
// once it has exited, at most `maximumOutput` bytes) goes with its exit
// status, so that it can say how long its answer lasts.
import Glibc
import LinuxSystem
import Runtime

final class PromptCommandRunner: Sendable {
    struct Job: Sendable {
        var prompt: UInt64
        var environment: [String: String]
    }

    private struct State {
        var queue: [Job] = []
        /// The prompt whose command runs; pid 0 while it is being started.
        var running: (prompt: UInt64, pid: pid_t)?
        /// Whether the running command was cancelled.
        var cancelled = false
        var stopping = false
    }

    private let command: String
    private let timers: DeadlineTimers
    private let finished: @Sendable (_ prompt: UInt64, _ status: Int32, _ cancelled: Bool, _ output: String) -> Void
    private let state = Locked(State())
    /// Runs the commands, one task at a time (each waits for its command to exit).
    private let loop: EventLoop
    /// Seconds between SIGTERM and SIGKILL for a cancelled command.
    static let killGrace = 2.0

    /// The most of a command's output that is read.
    static let maximumOutput = 4096

    /// `finished` runs on the runner's thread after each command exits, with the first line it printed.
    init(
        command: String, timers: DeadlineTimers,
        finished: @escaping @Sendable (_ prompt: UInt64, _ status: Int32, _ cancelled: Bool, _ output: String) -> Void
    )
        throws(SystemError)
    {
        self.command = command
        self.timers = timers
        self.finished = finished
        loop = try EventLoop(name: "prompt-command")
    }

    func start() {
        // Orphans of a command (its script once `sh -c` is killed) become our children,
        // so `endGroup` can wait for them.
        do throws(Errno) {
            try ThisProcess.becomeSubreaper()
        } catch {
            Log.warn("prompt-command: cannot become a subreaper")
        }
        loop.start()
    }

    /// Kills a running command and stops the thread.
    func stopAndJoin() {
        let running = state.withLock { s -> pid_t? in
            s.stopping = true
            s.queue.removeAll()
            return s.running?.pid
        }
        if let pid = running { kill(-pid, SIGKILL) }
        loop.stopAndJoin()
    }

    /// Queues the command for `job.prompt` (once per prompt).
    func enqueue(_ job: Job) {
        let added = state.withLock { s -> Bool in
            guard !s.stopping, s.running?.prompt != job.prompt, !s.queue.contains(where: { $0.prompt == job.prompt })
            else { return false }
            s.queue.append(job)
            return true
        }
        if added { loop.post { [self] in runQueued() } }
    }

    /// The prompt is closed: forget its job, or end its running command.
    func cancel(prompt: UInt64) {
        let pid = state.withLock { s -> pid_t? in
            s.queue.removeAll { $0.prompt == prompt }
            guard let r = s.running, r.prompt == prompt else { return nil }
            s.cancelled = true
            return r.pid
        }
        // pid 0: still starting; runOne sees `cancelled` once it has the pid.
        guard let pid, pid > 0 else { return }
        terminate(pid, prompt: prompt)
    }

    private func terminate(_ pid: pid_t, prompt: UInt64) {
        kill(-pid, SIGTERM)
        timers.schedule(key: Self.killTimerKey(prompt), after: Self.killGrace) { [state] in
            // Still the same process (pid not yet reaped, so not reused): make sure it goes.
            if state.withLock({ $0.running?.pid }) == pid { kill(-pid, SIGKILL) }
        }
    }

    /// How many commands are running (0 or 1).
    var runningCount: Int { state.withLock { $0.running == nil ? 0 : 1 } }

    private static func killTimerKey(_ prompt: UInt64) -> UInt64 { prompt | (1 << 63) }

    /// Ends what the command left running in its process group (the script `sh -c` ran,
    /// a dialog put in the background), so the next command starts alone: SIGTERM, then
    /// SIGKILL after the grace period. The daemon is their subreaper (see `start`), so
    /// they are reaped here; gives up (with a warning) on any that cannot be.
    private func endGroup(_ pgid: pid_t) {
        while waitpid(-pgid, nil, WNOHANG) > 0 {}
        guard kill(-pgid, 0) == 0 else { return }
        kill(-pgid, SIGTERM)
        let start = DeadlineTimers.now()
        var killed = false
        while true {
            while waitpid(-pgid, nil, WNOHANG) > 0 {}
            guard kill(-pgid, 0) == 0 else { return }
            let waited = DeadlineTimers.now() - start
            if waited > Self.killGrace && !killed {
                kill(-pgid, SIGKILL)
                killed = true
            } else if waited > 3 * Self.killGrace {
                Log.warn("prompt-command: processes of group \(pgid) remain after SIGKILL (unreaped); going on")
                return
            }
            usleep(10_000)
        }
    }

    /// Runs the queued commands one after another (on the runner's loop).
    private func runQueued() {
        while let job = state.withLock({ s -> Job? in
            guard !s.stopping, !s.queue.isEmpty else { return nil }
            let next = s.queue.removeFirst()
            s.running = (next.prompt, 0)
            s.cancelled = false
            return next
        }) {
            runOne(job)
        }
    }

    private func runOne(_ job: Job) {
        let pid: pid_t
        var output: [Int32] = [-1, -1]
        if unsafe pipe(&output) == 0 {
            // Only the command's stdout gets the write end (posix_spawn dup2s it there).
            for fd in output { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        } else {
            output = [-1, -1]
        }
        defer { if output[0] >= 0 { _ = Glibc.close(output[0]) } }
        do {
            defer { if output[1] >= 0 { _ = Glibc.close(output[1]) } }
            pid = try spawnShell(command, extraEnvironment: job.environment, stdout: output[1] >= 0 ? output[1] : nil)
        } catch {
            Log.error("prompt-command: \(error)")
            state.withLock { $0.running = nil }
            finished(job.prompt, 127, false, "")
            return
        }
        let (stopping, cancelledWhileStarting) = state.withLock { s in
            s.running = (job.prompt, pid)
            return (s.stopping, s.cancelled)
        }
        if stopping {
            kill(-pid, SIGKILL)
        } else if cancelledWhileStarting {
            terminate(pid, prompt: job.prompt)
        }
        let code = waitForExit(pid)
        endGroup(pid)
        let cancelled = state.withLock { s in
            s.running = nil
            return s.cancelled
        }
        timers.cancel(key: Self.killTimerKey(job.prompt))
        finished(job.prompt, code, cancelled, Self.firstLine(of: output[0]))
    }
}

extension PromptCommandRunner {
    /// The first line waiting in pipe `fd`, trimmed; never blocks (what the command's own
    /// children may still write is not waited for).
    static func firstLine(of fd: Int32) -> String {
        guard fd >= 0 else { return "" }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var bytes = [UInt8](repeating: 0, count: maximumOutput)
        var count = 0
        while count < bytes.count {
            let n = unsafe bytes.withUnsafeMutableBytes { unsafe read(fd, $0.baseAddress! + count, $0.count - count) } // non-empty buffer
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            count += n
        }
        let line = bytes[..<count].prefix { $0 != UInt8(ascii: "\n") }
        let blank: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r")]
        return String(
            decoding: line.drop { blank.contains($0) }.reversed().drop { blank.contains($0) }.reversed(),
            as: UTF8.self)
    }
}

/// Waits for child `pid` to end; its exit status as a shell reports it (128 + the signal that ended it).
@discardableResult
func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while unsafe waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// Starts `/bin/sh -c command` in a new process group (so a cancel reaches what
/// it starts), its standard output on `stdout` when given, and returns its pid.
func spawnShell(_ command: String, extraEnvironment: [String: String], stdout: Int32? = nil) throws -> pid_t {
    var env = currentEnvironment()
    for (k, v) in extraEnvironment { env[k] = v }
    let argv: [String] = ["/bin/sh", "-c", command]
    var cArgs = unsafe argv.map { unsafe strdup($0) } + [nil]
    var cEnv = unsafe env.map { unsafe strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        unsafe cArgs.forEach { unsafe free($0) }
        unsafe cEnv.forEach { unsafe free($0) }
    }
    var attr = posix_spawnattr_t()
    unsafe posix_spawnattr_init(&attr)
    defer { unsafe posix_spawnattr_destroy(&attr) }
    unsafe posix_spawnattr_setpgroup(&attr, 0)
    // The daemon blocks SIGTERM and SIGINT in every thread (the main thread
    // waits for them); the command must not inherit that, or it could not be
    // stopped with its prompt.
    var none = sigset_t()
    unsafe sigemptyset(&none)
    unsafe posix_spawnattr_setsigmask(&attr, &none)
    var stopSignals = sigset_t()
    unsafe sigemptyset(&stopSignals)
    unsafe sigaddset(&stopSignals, SIGTERM)
    unsafe sigaddset(&stopSignals, SIGINT)
    unsafe posix_spawnattr_setsigdefault(&attr, &stopSignals)
    unsafe posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var actions = unsafe posix_spawn_file_actions_t()
    unsafe posix_spawn_file_actions_init(&actions)
    defer { unsafe posix_spawn_file_actions_destroy(&actions) }
    if let stdout { unsafe posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
    var pid: pid_t = 0
    let rc = unsafe posix_spawn(&pid, "/bin/sh", &actions, &attr, &cArgs, &cEnv)
    guard rc == 0 else { throw PromptCommandError(message: "cannot start /bin/sh: \(Errno(rawValue: rc))") }
    return pid
}

struct PromptCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
