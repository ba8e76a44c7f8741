// How long a decision lasts, as requests ask for it (`set-decision`,
// `answer-prompt`), and the durations `--for` takes.

/// How long a decision is to last, as `set-decision` and `answer-prompt` ask for it.
/// On the wire: `"lifespan"` is `once`, `session`, `always` or `timed`, and `timed`
/// comes with `"seconds"` (from when the daemon receives it). Absent: the old meaning
/// (`always`; `once` for the answer `once`).
public enum RequestedLifespan: Sendable, Equatable {
    /// Until each client of the app connected now disconnects.
    case once
    /// Until the daemon stops (the user logs out).
    case session
    /// For this many seconds.
    case timed(seconds: Double)
    /// Until changed.
    case always

    /// The wire name.
    public var name: String {
        switch self {
        case .once: "once"
        case .session: "session"
        case .timed: "timed"
        case .always: "always"
        }
    }

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

    /// Reads `lifespan` (and `seconds` for `timed`) from a request; nil when absent.
    static func decode(from c: KeyedDecodingContainer<WireKey>) throws -> RequestedLifespan? {
        guard let name = try c.decodeIfPresent(String.self, forKey: WireKey("lifespan")) else { return nil }
        switch name {
        case "once": return .once
        case "session": return .session
        case "always": return .always
        case "timed":
            let seconds = try c.decode(Double.self, forKey: WireKey("seconds"))
            guard seconds.isFinite, seconds > 0 else {
                throw DecodingError.dataCorruptedError(forKey: WireKey("seconds"), in: c,
                                                       debugDescription: "seconds must be above 0")
            }
            return .timed(seconds: seconds)
        default:
            throw DecodingError.dataCorruptedError(forKey: WireKey("lifespan"), in: c,
                                                   debugDescription: "lifespan must be once, session, timed or always")
        }
    }

    /// Writes `lifespan` (and `seconds`).
    func encode(to c: inout KeyedEncodingContainer<WireKey>) throws {
        try c.encode(name, forKey: WireKey("lifespan"))
        if case let .timed(seconds) = self { try c.encode(seconds, forKey: WireKey("seconds")) }
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
