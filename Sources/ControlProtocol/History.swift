// The usage log as the control protocol carries it (`log` → `usage`), and how
// `earmuff log` reads its `--since` argument.
import Foundation

/// One capture session: who recorded what, when, and what it got.
public struct UsageInfo: Codable, Sendable, Equatable {
    public var appKey: String
    /// `microphone` (what was captured).
    public var kind: String
    /// The source the stream recorded from.
    public var source: String
    /// Seconds since 1970.
    public var startedAt: Double
    /// Seconds since 1970; nil while the stream is live.
    public var endedAt: Double?
    /// Seconds of real audio the app got (nil when the stream's rate is unknown).
    public var realSeconds: Double?
    /// Seconds of silence it got instead.
    public var silencedSeconds: Double?
    /// The decision in force: `granted (user)`, `undetermined`, `once`, or `A → B` when it changed.
    public var decision: String?

    public init(appKey: String, kind: String, source: String, startedAt: Double, endedAt: Double? = nil,
                realSeconds: Double? = nil, silencedSeconds: Double? = nil, decision: String? = nil) {
        self.appKey = appKey
        self.kind = kind
        self.source = source
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.realSeconds = realSeconds
        self.silencedSeconds = silencedSeconds
        self.decision = decision
    }
}

/// `--since` values: a duration back from now (`90s`, `30m`, `2h`, `7d`) or a local
/// date (`2026-11-30`) or date and time (`2026-11-30 14:05`, `2026-11-30T14:05`).
public enum SinceTime {
    /// Seconds since 1970 for `text`, relative to `now`; nil when it is neither form.
    public static func parse(_ text: String, now: Double, timeZone: TimeZone = .current) -> Double? {
        if let unit = text.last, let n = Double(text.dropLast()), n >= 0, n.isFinite,
           let scale = DurationText.unitSeconds(unit) {
            return now - n * scale
        }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = timeZone
        for format in ["yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd"] {
            f.dateFormat = format
            if let d = f.date(from: text) { return d.timeIntervalSince1970 }
        }
        return nil
    }

    /// What `--since` accepts, for error messages.
    public static let help = "a duration back from now (90s, 30m, 2h, 7d) or a date (2026-11-30, or 2026-11-30 14:05)"
}
