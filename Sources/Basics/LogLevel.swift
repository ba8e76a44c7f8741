// How much the daemon logs: the configuration names a level, the relay's logger prints by it.

/// How much the daemon logs, most severe first (the one log-level type: the
/// config file, `--log-level` and the logger all use it).
public enum LogLevel: String, Sendable, Equatable, CaseIterable, Comparable {
    case error, warn, info, debug

    /// `error`, `warn` (or `warning`), `info` or `debug`.
    public init?(name: String) {
        if name == "warning" {
            self = .warn
        } else {
            self.init(rawValue: name)
        }
    }

    /// 0 for `error` up to 3 for `debug`.
    public var rank: Int {
        switch self {
        case .error: 0
        case .warn: 1
        case .info: 2
        case .debug: 3
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}
