// The times `earmuff log --since` takes.
import Foundation
import Wording

/// `--since` values: a duration back from now (`90s`, `30m`, `2h`, `7d`) or a local
/// date (`2026-11-30`) or date and time (`2026-11-30 14:05`, `2026-11-30T14:05`).
public enum SinceTime {
    /// Seconds since 1970 for `text`, relative to `now`; nil when it is neither form.
    public static func parse(_ text: String, now: Double, timeZone: TimeZone = .current) -> Double? {
        if let unit = text.last, let n = Double(text.dropLast()), n >= 0, n.isFinite,
            let scale = DurationText.unitSeconds(unit)
        {
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
