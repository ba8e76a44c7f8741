// Times and app-chosen strings as Earmuff writes them, in the daemon's log, the usage
// log's decisions, prompts and the command line's tables alike.
import Foundation

/// Pure renderings: the same inputs give the same text.
public enum TextFormat {
    /// A UTC-free local timestamp "YYYY-MM-DD HH:MM" for a time since 1970, or "-".
    public static func date(_ seconds: Double?, timeZone: TimeZone = .current) -> String {
        guard let seconds, seconds.isFinite else { return "-" }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = timeZone
        f.dateFormat = "yyyy-MM-dd HH:mm"
        return f.string(from: Date(timeIntervalSince1970: seconds))
    }

    /// Cuts a string to `max` characters, marking the cut with "…", and flattens newlines.
    public static func cell(_ s: String?, max: Int = 60) -> String {
        guard let s, !s.isEmpty else { return "-" }
        let flat = s.map { $0.isNewline || $0 == "\t" ? " " : String($0) }.joined()
        return flat.count > max ? String(flat.prefix(max - 1)) + "…" : flat
    }
}
