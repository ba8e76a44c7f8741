// Times and durations in the window's words: "5 minutes ago", "14:05", "12 s".
import Foundation

public enum TimeText {
    /// How long ago `t` was, from `now` (seconds since 1970).
    public static func ago(_ t: Double, now: Double) -> String {
        let s = max(0, now - t)
        switch s {
        case ..<60: return "just now"
        case ..<3600: return plural(Int(s / 60), "minute") + " ago"
        case ..<86400: return plural(Int(s / 3600), "hour") + " ago"
        default: return plural(Int(s / 86400), "day") + " ago"
        }
    }

    /// `t` as the local time of day, with the date when it is not today.
    public static func clock(_ t: Double) -> String {
        let date = Date(timeIntervalSince1970: t)
        let f = DateFormatter()
        f.dateFormat = Calendar.current.isDateInToday(date) ? "HH:mm:ss" : "yyyy-MM-dd HH:mm"
        return f.string(from: date)
    }

    /// A duration: "12 s", "3 min 5 s", "2 h 10 min".
    public static func seconds(_ s: Double) -> String {
        let n = Int(s.rounded())
        if n < 60 { return "\(n) s" }
        if n < 3600 { return n % 60 == 0 ? "\(n / 60) min" : "\(n / 60) min \(n % 60) s" }
        return "\(n / 3600) h \(n % 3600 / 60) min"
    }

    static func plural(_ n: Int, _ unit: String) -> String { n == 1 ? "1 \(unit)" : "\(n) \(unit)s" }
}
