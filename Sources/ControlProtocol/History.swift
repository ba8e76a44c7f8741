// The usage log as the control protocol carries it (`log` → `usage`).

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

    public init(
        appKey: String, kind: String, source: String, startedAt: Double, endedAt: Double? = nil,
        realSeconds: Double? = nil, silencedSeconds: Double? = nil, decision: String? = nil
    ) {
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
