// One-line log records to stderr, safe from any thread.
import Glibc
import Synchronization

/// Log severity, most severe first.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case error = 0, warn, info, debug

    public init?(name: String) {
        switch name {
        case "error": self = .error
        case "warn", "warning": self = .warn
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    var label: String {
        switch self {
        case .error: "error"
        case .warn: "warn"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// The daemon's logger. Each record is one `write(2)` so lines never interleave.
public enum Log {
    private static let threshold = Atomic<Int>(LogLevel.info.rawValue)

    /// Sets the most verbose level that is printed.
    public static func setLevel(_ level: LogLevel) {
        threshold.store(level.rawValue, ordering: .relaxed)
    }

    /// True when records of `level` are printed.
    public static func enabled(_ level: LogLevel) -> Bool {
        level.rawValue <= threshold.load(ordering: .relaxed)
    }

    public static func error(_ message: @autoclosure () -> String) { write(.error, message()) }
    public static func warn(_ message: @autoclosure () -> String) { write(.warn, message()) }
    public static func info(_ message: @autoclosure () -> String) { write(.info, message()) }
    public static func debug(_ message: @autoclosure () -> String) {
        if enabled(.debug) { write(.debug, message()) }
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
        let line = "\(stamp) earmuff[\(level.label)] \(message)\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buf in
            _ = Glibc.write(2, buf.baseAddress, buf.count)
        }
    }

    private static func format2(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
    private static func format3(_ v: Int) -> String { v < 10 ? "00\(v)" : v < 100 ? "0\(v)" : "\(v)" }
}
