// What a record stream captures: the kinds consent is decided for.

/// What a record stream captures; each kind is decided separately, per app.
public enum Capability: String, Sendable, Codable, CaseIterable, Comparable {
    /// A source that is not the monitor of a sink: a microphone, a line-in, a virtual source.
    case microphone
    /// The monitor source of a sink: everything that sink plays.
    case systemAudio = "system-audio"
    /// One other app's stream (`direct_on_input`, a sink input's own output).
    case appAudio = "app-audio"

    /// How prompts and messages name it: "the microphone", "system audio", "another app's audio".
    public var phrase: String {
        switch self {
        case .microphone: "the microphone"
        case .systemAudio: "system audio (everything the speakers play)"
        case .appAudio: "another app's audio"
        }
    }

    public static func < (a: Capability, b: Capability) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! // both are cases of allCases
    }
}
