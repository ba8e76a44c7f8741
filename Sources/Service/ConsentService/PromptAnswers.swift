// Who answers prompts, and how their answers reach the engine: agents (control
// connections that became one, on the control loop), the desktop's dialogs
// and notifications (the desktop prompt loop), the prompt command (the command
// loop) and the prompt's deadline (the timer loop). The engine decides what
// an answer does; this turns each into its engine call.
import Consent
import ControlProtocol
import Runtime
import Wording

final class PromptAnswers: Sendable {
    private let decisions: Decisions
    private let registry: StreamRegistry
    private let answeredVia: AnswerChannels

    init(decisions: Decisions, registry: StreamRegistry, answeredVia: AnswerChannels) {
        self.decisions = decisions
        self.registry = registry
        self.answeredVia = answeredVia
    }

    // MARK: agents (control loop)

    /// A control connection became a prompt agent: pending prompts go to it now.
    func agentConnected(_ agent: AgentID, on connection: ControlConnectionID) {
        registry.addAgent(agent, on: connection)
        decisions.withEngine { e in ((), e.agentConnected(agent)) }
    }

    /// A control connection closed; if it was an agent, its prompts may go elsewhere.
    func connectionGone(_ connection: ControlConnectionID) {
        let agent = AgentID(connection.rawValue)
        guard registry.removeAgent(agent) else { return }
        decisions.withEngine { e in ((), e.agentDisconnected(agent)) }
    }

    /// An agent's (or `earmuff answer`'s) answer; `by`: the agent.
    func answer(
        _ prompt: UInt64, _ answer: Consent.PromptAnswer, lifespan: RequestedLifespan?,
        by agent: AgentID?
    ) -> Result<Void, ConsentError> {
        decisions.withEngine { e -> (Result<Void, ConsentError>, [ConsentAction]) in
            let now = wallClockNow()
            switch e.answer(PromptID(prompt), answer, lifespan: Self.lifespan(lifespan, now: now), by: agent, now: now) {
            case .success(let actions): return (.success(()), actions)
            case .failure(let err): return (.failure(err), [])
            }
        }
    }

    // MARK: the prompt threads

    func answeredOnDesktop(
        _ prompt: UInt64, _ answer: Consent.PromptAnswer, lifespan: RequestedLifespan?,
        via: PromptChannel
    ) {
        answeredVia.note(prompt, via)
        if case .failure = self.answer(prompt, answer, lifespan: lifespan, by: nil) { _ = answeredVia.take(prompt) }
    }

    func timedOut(_ prompt: UInt64) {
        decisions.withEngine { e in ((), e.promptTimedOut(PromptID(prompt), now: wallClockNow())) }
    }

    /// Closed unanswered on the desktop: "not now".
    func dismissed(_ prompt: UInt64, via: PromptChannel) {
        answeredVia.note(prompt, via)
        decisions.withEngine { e in ((), e.promptDismissed(PromptID(prompt), now: wallClockNow())) }
    }

    /// Stop on the notice that `app` hears the microphone: denied until the session ends.
    func stopped(_ app: AppKey) {
        if let refused = decisions.setDecision(app, .denied, reason: .user, lifespan: .session) {
            return Log.warn("Stop on the notice for \(app): \(refused)")
        }
        Log.info("decision for \(app), microphone: denied (user), until the session ends: Stop on its notice")
    }

    /// The prompt command exited with `status`, having printed `output` first.
    func commandExited(_ prompt: UInt64, status: Int32, output: String) {
        let now = wallClockNow()
        let lifespan = Self.commandLifespan(output, now: now)
        decisions.withEngine { e in
            ((), e.promptCommandFinished(PromptID(prompt), exitStatus: status, lifespan: lifespan, now: now))
        }
    }

    // MARK: lifespans

    /// How long a prompt command's answer lasts, from the first line it printed: `once`,
    /// `session`, `always` or a duration (`2h`); nil (always) for nothing or anything else.
    static func commandLifespan(_ output: String, now: Double) -> Lifespan? {
        guard !output.isEmpty else { return nil }
        guard let requested = RequestedLifespan(text: output) else {
            Log.warn(
                "prompt-command printed \"\(TextFormat.cell(output, max: 60))\"; a lifespan is once, session, always "
                    + "or a duration such as 2h; the answer lasts until changed")
            return nil
        }
        return lifespan(requested, now: now)
    }

    /// The lifespan a request asks for, as the engine takes it (durations from now).
    static func lifespan(_ r: RequestedLifespan?, now: Double) -> Lifespan? {
        switch r {
        case nil: nil
        case .once?: .once
        case .session?: .session
        case .always?: .always
        case let .timed(seconds)?: .until(now + seconds)
        }
    }
}

extension PromptDelivery.Handlers {
    /// What the prompt threads report, to `answers` once it is bound.
    init(_ answers: Late<PromptAnswers>) {
        self.init(
            answered: { prompt, answer, lifespan, via in
                answers.value?.answeredOnDesktop(prompt, answer, lifespan: lifespan, via: via)
            },
            timedOut: { prompt in answers.value?.timedOut(prompt) },
            dismissed: { prompt, via in answers.value?.dismissed(prompt, via: via) },
            commandExited: { prompt, status, output in answers.value?.commandExited(prompt, status: status, output: output) },
            stopped: { app in answers.value?.stopped(app) })
    }
}
