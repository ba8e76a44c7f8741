// How long a decision lasts, as requests ask for it (`set-decision`,
// `answer-prompt`).

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
                throw DecodingError.dataCorruptedError(
                    forKey: WireKey("seconds"), in: c,
                    debugDescription: "seconds must be above 0")
            }
            return .timed(seconds: seconds)
        default:
            throw DecodingError.dataCorruptedError(
                forKey: WireKey("lifespan"), in: c,
                debugDescription: "lifespan must be once, session, timed or always")
        }
    }

    /// Writes `lifespan` (and `seconds`).
    func encode(to c: inout KeyedEncodingContainer<WireKey>) throws {
        try c.encode(name, forKey: WireKey("lifespan"))
        if case let .timed(seconds) = self { try c.encode(seconds, forKey: WireKey("seconds")) }
    }
}
