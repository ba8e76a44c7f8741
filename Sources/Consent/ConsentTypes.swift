// The values the consent engine takes and gives: ids, prompts, events, the
// actions it asks the proxy to carry out, its errors and settings, and the
// snapshots `earmuff status` shows. Pure, like the engine (ConsentEngine.swift).

/// A connected application client (one PulseAudio connection).
public struct ClientID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "client#\(rawValue)" }
}

/// A record stream, unique within its client (e.g. the stream's channel).
public struct StreamID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "stream#\(rawValue)" }
}

/// A connected prompt agent.
public struct AgentID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "agent#\(rawValue)" }
}

/// A prompt, numbered from 1 by the engine.
public struct PromptID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "prompt#\(rawValue)" }
}

/// An agent's (or the prompt command's) answer.
public enum PromptAnswer: String, Sendable, Equatable, CaseIterable, Codable {
    /// Grant and remember.
    case allow
    /// Real audio for the app's clients connected now, until each disconnects; not remembered.
    case once
    /// Deny and remember.
    case deny
}

/// What a prompt shows.
public struct Prompt: Sendable, Equatable {
    public var id: PromptID
    public var appKey: AppKey
    public var method: IdentificationMethod
    /// How much the identity can be relied on, and why it is weaker than its method suggests.
    public var strength: IdentityStrength = .weak
    public var caveat: String?
    /// The client's claimed name (sanitised), for display only.
    public var displayName: String
    public var executable: String?
    public var pid: Int32
    /// The declared purpose; nil when the app gave none.
    public var purpose: String?
    /// The source the app records from (a source name, or empty for the default).
    public var source: String
    public var raisedAt: Double
    /// What the app wants to capture; the answer applies to this kind only.
    public var kind: Capability = .microphone
    /// The command the client was started as, when that is a link to its executable.
    public var commandName: String?
}

/// How a prompt was closed.
public enum PromptOutcome: Sendable, Equatable {
    /// An agent (or a caller without agent identity) answered.
    case answered(PromptAnswer, by: AgentID?)
    /// The prompt command exited 0 (allow) or 1 (deny).
    case commandAnswered(PromptAnswer)
    /// Nobody answered within the prompt timeout; the app stays undetermined.
    case timedOut
    /// The person closed the prompt without answering ("not now"): the app stays
    /// undetermined and is asked again at its next capture.
    case dismissed
    /// A decision made elsewhere (the CLI, missing-purpose) settled the app.
    case superseded(PermissionState)
    /// Closed to make room under the prompt caps: the app no longer records anything of its
    /// kind, and another app that does waited for a prompt. The app stays undetermined.
    case withdrawn

    /// The answer, when there was one.
    public var answer: PromptAnswer? {
        switch self {
        case let .answered(a, _), let .commandAnswered(a): a
        case .timedOut, .dismissed, .superseded, .withdrawn: nil
        }
    }
}

/// Something `earmuff watch` shows.
public enum ConsentEvent: Sendable, Equatable {
    case clientConnected(ClientID, ClientIdentity)
    case clientDisconnected(ClientID, AppKey)
    /// The client is being disconnected for the reason given (missing purpose).
    case clientRefused(ClientID, AppKey, reason: String)
    case streamStarted(ClientID, StreamID, AppKey, source: String, real: Bool)
    case streamAccessChanged(ClientID, StreamID, AppKey, real: Bool)
    /// The stream records from another source now (kind nil: not known yet, so silent).
    case streamMoved(ClientID, StreamID, AppKey, source: String, kind: Capability?, real: Bool)
    case streamEnded(ClientID, StreamID, AppKey)
    case promptRaised(Prompt)
    case promptResolved(Prompt, PromptOutcome)
    /// The prompt command exited with neither 0 nor 1; the prompt stays pending.
    case promptCommandGaveNoAnswer(PromptID, exitStatus: Int32)
    /// A capture of an undetermined app waits for a prompt: `pending` prompts are open, as
    /// many as max-pending-prompts (`perUID`: max-pending-prompts-per-uid) allows.
    case promptDeferred(AppKey, Capability, pending: Int, perUID: Bool)
    case decisionChanged(Decision)
    /// A temporary decision ended by itself (its time passed); `now` is the decision in force after it.
    case decisionExpired(Decision, now: Decision)
    /// A grant unused since `lastUsed` went back to undetermined (`auto-reset-days`).
    case decisionAutoReset(Decision, lastUsed: Double)
    /// A capture kind was switched on or off for every app (the master switch).
    case accessChanged(Capability, enabled: Bool)
}

/// A side effect for the proxy to perform, in order.
public enum ConsentAction: Sendable, Equatable {
    /// Set the stream's atomic access flag: real samples or silence from the next frame.
    case setStreamAccess(ClientID, StreamID, real: Bool)
    /// Send the prompt to these agents.
    case deliverPrompt(Prompt, to: [AgentID])
    /// Tell these agents the prompt is closed; cancel its timer and kill its prompt command if running.
    case closePrompt(Prompt, PromptOutcome, agents: [AgentID])
    /// Run the configured prompt command; report its exit with `promptCommandFinished`.
    case runPromptCommand(Prompt)
    /// Call `promptTimedOut` after this many seconds.
    case schedulePromptTimeout(PromptID, after: Double)
    /// Write the decision to the store (upsert by app key, capability and layer:
    /// `always` replaces the lasting one, `until` the timed one over it).
    case persistDecision(Decision)
    /// Store the master switch of a capture kind.
    case persistAccess(Capability, enabled: Bool)
    /// Delete the stored timed decision of this app and capability (it ended or was replaced).
    case removeTimedDecision(AppKey, Capability)
    /// Upsert the app record; the store keeps the earliest `firstSeenAt` and a known display name.
    case recordApp(AppRecord)
    /// A capture session began; the proxy counts its bytes.
    case startUsage(ClientID, StreamID, UsageRecord)
    /// The capture session ended; the proxy writes it with its byte counts.
    case finishUsage(ClientID, StreamID, endedAt: Double)
    /// The stream goes on under another source or kind: end its usage row when this one starts, and start it.
    case splitUsage(ClientID, StreamID, UsageRecord)
    /// Close this client's connection (then call `clientDisconnected`).
    case disconnectClient(ClientID, reason: String)
    /// Publish an event to subscribers and the log.
    case emit(ConsentEvent)
    /// The app hears the microphone for the first time since Earmuff started: tell the person
    /// (a desktop notice, when `use-notices` is on), naming it as `AppNameResolver.shownName` does.
    case noticeUse(AppKey, executable: String?, commandName: String?)
    /// Answer the client's permission request that carried `tag`: its state for the kind now.
    case answerPermission(ClientID, tag: UInt32, Capability, PermissionState)
    /// Tell a subscribed client that its own state for the kind is now this.
    case notifyPermission(ClientID, Capability, PermissionState)
}

/// Whether a CREATE_RECORD_STREAM may be forwarded, plus what to do.
public struct RecordAdmission: Sendable, Equatable {
    /// False: do not forward; `actions` disconnect the client.
    public var proceed: Bool
    public var actions: [ConsentAction]
}

/// Why a request to the engine failed.
public enum ConsentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No prompt with this id was ever raised.
    case unknownPrompt(PromptID)
    /// The prompt was already answered, timed out or superseded.
    case alreadyResolved(PromptID)
    /// apps.d sets this app's decision; the store cannot override it.
    case governedByPolicy(AppKey, PermissionState)
    /// A "once" decision covers connected clients, and the app has none.
    case noClientForOnce(AppKey)
    /// A decision "until" a time that has already passed.
    case expiryInThePast(AppKey)

    public var description: String {
        switch self {
        case let .unknownPrompt(p): "no prompt \(p.rawValue); list pending prompts with `earmuff status`"
        case let .alreadyResolved(p): "prompt \(p.rawValue) is already resolved"
        case let .governedByPolicy(app, state):
            "\(app) is \(state.rawValue) by an apps.d declaration (admin policy); change its decision line there"
        case let .noClientForOnce(app):
            "\(app) has no connected client for a decision \"once\" (it covers clients connected now); use --session or --for"
        case let .expiryInThePast(app):
            "the decision for \(app) would end before it starts; give a duration above 0, e.g. --for 30m"
        }
    }
}

/// The engine's settings.
public struct ConsentPolicy: Sendable, Equatable {
    public var missingPurpose: MissingPurposeMode
    /// Seconds before an unanswered prompt closes.
    public var promptTimeout: Double
    /// Whether `prompt-command` is configured.
    public var hasPromptCommand: Bool
    /// apps.d declarations by app key.
    public var declarations: [AppKey: AppDeclaration]
    /// Seconds after which an unused lasting grant goes back to undetermined; nil: never.
    public var autoResetAfter: Double?
    /// Prompts pending at once, in all and for the clients of one uid.
    public var maxPendingPrompts: Int
    public var maxPendingPromptsPerUID: Int

    public init(
        missingPurpose: MissingPurposeMode = .prompt, promptTimeout: Double = 30,
        hasPromptCommand: Bool = false, declarations: [AppKey: AppDeclaration] = [:],
        autoResetAfter: Double? = nil, maxPendingPrompts: Int = Configuration().maxPendingPrompts,
        maxPendingPromptsPerUID: Int = Configuration().maxPendingPromptsPerUID
    ) {
        self.missingPurpose = missingPurpose
        self.promptTimeout = promptTimeout
        self.hasPromptCommand = hasPromptCommand
        self.declarations = declarations
        self.autoResetAfter = autoResetAfter
        self.maxPendingPrompts = maxPendingPrompts
        self.maxPendingPromptsPerUID = maxPendingPromptsPerUID
    }

    /// The policy a configuration and its declarations describe.
    public init(configuration c: Configuration, declarations: [AppKey: AppDeclaration]) {
        self.init(
            missingPurpose: c.missingPurpose, promptTimeout: c.promptTimeout,
            hasPromptCommand: !c.promptCommand.trimmingWhitespace().isEmpty && c.promptVia.contains(.command),
            declarations: declarations,
            autoResetAfter: c.autoResetDays > 0 ? Double(c.autoResetDays) * 86_400 : nil,
            maxPendingPrompts: c.maxPendingPrompts, maxPendingPromptsPerUID: c.maxPendingPromptsPerUID)
    }
}

/// A state and why.
public struct EffectiveDecision: Sendable, Equatable {
    public var state: PermissionState
    public var reason: DecisionReason
    /// How long it lasts (`always` for policy, lasting and absent decisions).
    public var lifespan: Lifespan
    /// The state in force once a temporary decision ends; nil for a lasting one.
    public var afterwards: PermissionState?

    public init(
        state: PermissionState, reason: DecisionReason, lifespan: Lifespan = .always,
        afterwards: PermissionState? = nil
    ) {
        self.state = state
        self.reason = reason
        self.lifespan = lifespan
        self.afterwards = afterwards
    }
}

/// A connected client, for `earmuff status`.
public struct ClientSnapshot: Sendable, Equatable {
    public var id: ClientID
    public var identity: ClientIdentity
    public var displayName: String
    /// The command it was started as, when that is a link to its executable.
    public var commandName: String?
    public var purpose: String?
    /// "Once" decisions covering this client (granted or denied), by kind.
    public var once: [Capability: PermissionState]
    public var connectedAt: Double

    /// Whether a "once" grant covers this client (for any kind).
    public var grantedOnce: Bool { once.values.contains(.granted) }
}

/// A live record stream, for `earmuff status`.
public struct StreamSnapshot: Sendable, Equatable {
    public var client: ClientID
    public var stream: StreamID
    public var appKey: AppKey
    public var source: String
    /// What the stream captures; nil while its source is not known (then it is silent).
    public var kind: Capability?
    public var real: Bool
    public var startedAt: Double
}
