// One-line log records to stderr, safe from any thread.
import Consent
import Glibc
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
        clock_gettime(CLOCK_REALTIME, &ts)
        var tm = tm()
        var secs = ts.tv_sec
        gmtime_r(&secs, &tm)
        let stamp = String(format2(Int(tm.tm_hour))) + ":" + format2(Int(tm.tm_min)) + ":" + format2(Int(tm.tm_sec))
            + "." + format3(ts.tv_nsec / 1_000_000)
        let line = "\(stamp) earmuff[\(level.rawValue)] \(message)\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buf in
            _ = Glibc.write(2, buf.baseAddress, buf.count)
        }
    }

    private static func format2(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
    private static func format3(_ v: Int) -> String { v < 10 ? "00\(v)" : v < 100 ? "0\(v)" : "\(v)" }
}
