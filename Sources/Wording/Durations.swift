// Lifespans and durations as people write them: `--for 2h` on the command line, the
// first line a prompt command prints, the lifespan a desktop dialog's choice names.
import ControlProtocol

extension RequestedLifespan {
    /// `once`, `session`, `always`, or a duration (`2h`: timed, see `DurationText`); nil for
    /// anything else.
    public init?(text: String) {
        switch text {
        case "once": self = .once
        case "session": self = .session
        case "always": self = .always
        default:
            guard let seconds = DurationText.parse(text) else { return nil }
            self = .timed(seconds: seconds)
        }
    }
}

/// Durations as `--for` takes them: a positive number and a unit, `90s`, `30m`, `2h`, `1d`, `1w`,
/// or several in a row, `1h30m`.
public enum DurationText {
    /// What `--for` accepts, for error messages.
    public static let help = "a duration such as 90s, 30m, 2h, 1h30m, 1d or 1w"

    /// The longest duration accepted (ten years), so that an expiry stays a sane time.
    public static let maximumSeconds: Double = 10 * 365 * 86_400

    /// Seconds for `text`; nil when it is not a duration above 0 and at most `maximumSeconds`.
    public static func parse(_ text: String) -> Double? {
        var total = 0.0
        var number = ""
        var sawUnit = false
        for ch in text {
            if ch.isASCII && (ch.isNumber || ch == ".") {
                number.append(ch)
                continue
            }
            guard let scale = unitSeconds(ch), let n = Double(number), n.isFinite else { return nil }
            total += n * scale
            number = ""
            sawUnit = true
        }
        guard sawUnit, number.isEmpty, total > 0, total <= maximumSeconds else { return nil }
        return total
    }

    /// Seconds in one `unit` (s, m, h, d, w); nil for any other character.
    public static func unitSeconds(_ unit: Character) -> Double? {
        switch unit {
        case "s": 1
        case "m": 60
        case "h": 3600
        case "d": 86_400
        case "w": 7 * 86_400
        default: nil
        }
    }
}
