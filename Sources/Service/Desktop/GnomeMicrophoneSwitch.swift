// GNOME's own microphone switch: `org.gnome.desktop.privacy disable-microphone`
// (gsettings-desktop-schemas), the Microphone switch of GNOME Settings' Privacy
// page, which greys every app's switch when it is off. Where the key exists it
// is Earmuff's master switch for the microphone: set → every microphone capture
// is silent at once (as `earmuff access off --kind microphone`); unset →
// decisions as before. `earmuff access` and the settings window's switch write
// it, so GNOME Settings, the CLI and the window show one state.
//
// Read and written with GLib's own `gsettings` tool, so whatever backend and
// lockdown the session has apply; followed by a `gsettings monitor` child,
// whose lines are cues to read the key again. At start the two are merged fail-closed:
// off when either says off, and both are made to say so (GNOME's switch flipped
// while Earmuff was not running counts). Echoes: `known` is the key's value as
// last read, written or announced; only an announced value that differs from it
// is a change, so Earmuff's own writes never come back as the desktop's.
//
// Without `gsettings` or without the schema (no GNOME), nothing is done and
// `earmuff access` works alone. A `gsettings monitor` that exits is started again
// (after 1 s, doubling to a minute), and the key read again.
//
// An event loop of its own ("gnome-privacy") owns the child and its pipe;
// others post to it.
import Glibc
import LinuxSystem
import Runtime

final class GnomeMicrophoneSwitch: LoopHandler, @unchecked Sendable {
    // @unchecked Sendable: `loop` is thread-safe; everything else belongs to the loop, whose
    // entry points check so. Other threads only post to the loop.
    static let schema = "org.gnome.desktop.privacy"
    static let key = "disable-microphone"

    struct Handlers: Sendable {
        /// GNOME's switch says the microphone is off (true) or on (false), and Earmuff's does not.
        var changed: @Sendable (_ disabled: Bool) -> Void
        /// Whether Earmuff's master switch for the microphone is off now.
        var accessOff: @Sendable () -> Bool
    }

    private let handlers: Handlers
    private let loop: EventLoop

    // The loop's own.
    private var available = false
    private var stopping = false
    private var known: Bool?
    private var monitor: (pid: pid_t, fd: Int32, token: UInt64)?
    private var pending: [UInt8] = []
    private var restartDelay = 1.0

    init(handlers: Handlers) throws(SystemError) {
        self.handlers = handlers
        loop = try EventLoop(name: "gnome-privacy")
    }

    func start() {
        loop.start()
        loop.post { [self] in setUp() }
    }

    func stopAndJoin() {
        loop.post { [self] in
            stopping = true
            endMonitor()
        }
        loop.stopAndJoin()
    }

    /// Earmuff's master switch for the microphone was set (from any thread): the key follows.
    func mirror(accessEnabled: Bool) {
        loop.post { [self] in write(disabled: !accessEnabled) }
    }

    // MARK: the loop

    private func setUp() {
        loop.assertInLoop()
        guard Self.run(["range", Self.schema, Self.key]).status == 0 else {
            Log.debug("gnome privacy: no \(Self.schema) \(Self.key) here; earmuff access is the microphone's only switch")
            return
        }
        available = true
        startMonitor()
        merge()
    }

    /// Reads the key. The first time, brings the two switches together: off when either says
    /// off. After the monitor was restarted, a value other than the last known is GNOME's change.
    private func merge() {
        guard let value = read() else { return }
        if let before = known {
            known = value
            if value != before { handlers.changed(value) }
            return
        }
        known = value
        if value != handlers.accessOff() {
            if value { handlers.changed(true) } else { write(disabled: true) }
        }
    }

    private func read() -> Bool? {
        let result = Self.run(["get", Self.schema, Self.key])
        guard result.status == 0, let value = Self.parse(result.output) else {
            Log.warn("gnome privacy: cannot read \(Self.schema) \(Self.key) (gsettings exit \(result.status): \(result.output))")
            return nil
        }
        return value
    }

    private func write(disabled: Bool) {
        loop.assertInLoop()
        guard available, known != disabled else { return }
        let result = Self.run(["set", Self.schema, Self.key, disabled ? "true" : "false"])
        // Read back: gsettings says nothing of a write its backend dropped (no session bus for dconf).
        known = read()
        if known != disabled {
            Log.info(
                "gnome privacy: \(Self.schema) \(Self.key) stays \(known.map(String.init) ?? "unread"), not \(disabled) "
                    + "(gsettings exit \(result.status): \(result.output)); GNOME's switch shows otherwise")
        }
    }

    private func startMonitor() {
        guard !stopping else { return }
        do {
            let output = try Pipe(size: 4096)
            let pid = try spawnShell(
                "exec gsettings monitor \(Self.schema) \(Self.key)", extraEnvironment: [:],
                stdout: output.writeEnd.rawValue)
            // The read end outlives the pipe value (its ends close with it); the monitor's own.
            let fd = fcntl(output.readEnd.rawValue, F_DUPFD_CLOEXEC, 0)
            guard fd >= 0 else {
                kill(pid, SIGTERM)
                throw Errno.current
            }
            do {
                monitor = (pid, fd, try loop.register(fd, events: PollEvents.input, handler: self))
            } catch {
                close(fd)
                kill(pid, SIGTERM)
                throw error
            }
        } catch {
            Log.warn("gnome privacy: cannot follow GNOME's switch (\(error))")
        }
    }

    private func endMonitor() {
        guard let m = monitor else { return }
        monitor = nil
        loop.remove(m.fd, token: m.token)
        close(m.fd)
        kill(m.pid, SIGTERM)
        waitForExit(m.pid)
        pending = []
    }

    func handleEvents(_ events: UInt32) {
        loop.assertInLoop()
        guard let m = monitor else { return }
        var chunk = [UInt8](repeating: 0, count: 512)
        while true {
            let n = unsafe chunk.withUnsafeMutableBytes { unsafe Glibc.read(m.fd, $0.baseAddress!, $0.count) } // non-empty buffer
            if n > 0 {
                pending += chunk[..<n]
                restartDelay = 1.0
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { break }
            // The monitor ended: started again later, and the key read again then.
            endMonitor()
            Log.warn("gnome privacy: gsettings monitor ended; following GNOME's switch again in \(Int(restartDelay)) s")
            _ = loop.schedule(after: restartDelay) { [self] in
                startMonitor()
                merge()
            }
            restartDelay = min(restartDelay * 2, 60)
            return
        }
        // A line says the key changed; what it is now is read again (a process of its own reads
        // the settings fresh, wherever the monitor's view of them stands).
        var cue = false
        while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
            cue = cue || pending[..<end].starts(with: (Self.key + ":").utf8)
            pending.removeSubrange(...end)
        }
        guard cue, let value = read(), value != known else { return }
        known = value
        handlers.changed(value)
    }

    /// "true" or "false", as gsettings prints a boolean.
    static func parse(_ text: String) -> Bool? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0.isNewline })
        guard words.count == 1 else { return nil }
        switch words[0] {
        case "true": return true
        case "false": return false
        default: return nil
        }
    }

    /// Runs `gsettings ARGS` and waits for it; its exit status and first line of output.
    private static func run(_ arguments: [String]) -> (status: Int32, output: String) {
        // The arguments are this file's own words: nothing to quote.
        let command = (["exec", "gsettings"] + arguments).joined(separator: " ") + " 2>&1"
        let output: Pipe
        do { output = try Pipe(size: 4096) } catch { return (-1, "pipe: \(error)") }
        let pid: pid_t
        do { pid = try spawnShell(command, extraEnvironment: [:], stdout: output.writeEnd.rawValue) } catch {
            return (-1, "\(error)")
        }
        let status = waitForExit(pid)
        return (status, PromptCommandRunner.firstLine(of: output.readEnd.rawValue))
    }
}
