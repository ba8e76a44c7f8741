// One-line log records to stderr, safe from any thread.
import Basics
import Glibc
import LinuxSystem
import Synchronization

/// The daemon's logger. Each record is one `write(2)` so lines never interleave.
public enum Log {
    private static let threshold = Atomic<Int>(LogLevel.info.rank)

    /// Sets the most verbose level that is printed.
    public static func setLevel(_ level: LogLevel) {
        threshold.store(level.rank, ordering: .relaxed)
    }

    /// True when records of `level` are printed.
    public static func enabled(_ level: LogLevel) -> Bool {
        level.rank <= threshold.load(ordering: .relaxed)
    }

    public static func error(_ message: @autoclosure () -> String) { write(.error, message()) }
    public static func warn(_ message: @autoclosure () -> String) { write(.warn, message()) }
    public static func info(_ message: @autoclosure () -> String) { write(.info, message()) }
    public static func debug(_ message: @autoclosure () -> String) {
        if enabled(.debug) { write(.debug, message()) }
    }

    /// Logs `message` at `level`.
    public static func record(_ level: LogLevel, _ message: @autoclosure () -> String) {
        if enabled(level) { write(level, message()) }
    }

    private static func write(_ level: LogLevel, _ message: String) {
        guard enabled(level) else { return }
        var ts = timespec()
        unsafe clock_gettime(CLOCK_REALTIME, &ts)
        var tm = unsafe tm()
        var secs = ts.tv_sec
        unsafe gmtime_r(&secs, &tm)
        let stamp =
            unsafe String(format2(Int(tm.tm_hour))) + ":" + format2(Int(tm.tm_min)) + ":" + format2(Int(tm.tm_sec))
            + "." + format3(ts.tv_nsec / 1_000_000)
        let line = "\(stamp) earmuff[\(level.rawValue)] \(message)\n"
        var bytes = Array(line.utf8)
        unsafe bytes.withUnsafeMutableBytes { buf in
            _ = unsafe Glibc.write(2, buf.baseAddress, buf.count)
        }
    }

    private static func format2(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
    private static func format3(_ v: Int) -> String { v < 10 ? "00\(v)" : v < 100 ? "0\(v)" : "\(v)" }
}

/// Log lines of one kind that a client can cause at will (refusals, timeouts): the first
/// `burst` of each `interval` are written, the rest only counted, and the count is told
/// with the next line written. Safe from any thread.
public final class RateLimitedLog: Sendable {
    public let burst: Int
    public let interval: Double
    private struct Window {
        var start = -Double.infinity
        var written = 0
        var suppressed = 0
    }
    private let window = Locked(Window())

    public init(burst: Int = 5, interval: Double = 10) {
        self.burst = burst
        self.interval = interval
    }

    /// Writes `message` at `level` unless this kind already wrote `burst` lines in the window.
    public func record(
        _ level: LogLevel, _ message: @autoclosure () -> String, now: Double = monotonicNow(),
        to sink: (LogLevel, String) -> Void = { Log.record($0, $1) }
    ) {
        guard Log.enabled(level) else { return }
        let (write, suppressed) = window.withLock { w -> (Bool, Int) in
            if now - w.start >= interval {
                let told = w.suppressed
                w = Window(start: now, written: 1, suppressed: 0)
                return (true, told)
            }
            guard w.written < burst else {
                w.suppressed += 1
                return (false, 0)
            }
            w.written += 1
            return (true, 0)
        }
        guard write else { return }
        let note = suppressed > 0 ? " (\(suppressed) more like this were not logged in the \(Int(interval)) s before)" : ""
        sink(level, message() + note)
    }
}
