// Carries out what the pure ConsentEngine decides. Every engine call goes
// through `withEngine`: the engine runs under its lock for microseconds and
// returns actions; stream access flips (ANDed with snapd's say) and
// permission replies are applied while that lock is held, so each stream and
// each client sees its changes in decision order; everything else is handed
// off after it: SQLite writes to the store writer, prompts to the prompt
// channels, events and prompts to control connections, closings to the relay.
// Called on any thread (loops, control, prompt threads, the desktop); it
// never blocks on I/O. The audio path only ever loads each RecordStream's
// atomic flag.
import Consent
import ControlProtocol
import LinuxSystem
import PulseWire
import Runtime
import StreamState
import Wording

final class Decisions: Sendable {
    /// The engine; mutated only here (other parts only read it under its lock).
    let engine: Locked<ConsentEngine>
    private let registry: StreamRegistry
    private let views: ConsentViews
    private let usage: UsageRows
    private let records: any ConsentRecords
    private let prompts: any PromptChannels
    private let timers: any Timers
    private let desktop: any DesktopSwitches
    private let clients: any ClientLink
    private let control: any ControlOutput
    private let snap: (any SnapAccess)?
    private let answeredVia: AnswerChannels
    private let configuration: Configuration
    /// Captures deferred under the prompt caps: a storm would log one line each.
    private let deferredLog = RateLimitedLog()

    init(
        engine: Locked<ConsentEngine>, registry: StreamRegistry, views: ConsentViews, records: any ConsentRecords,
        prompts: any PromptChannels, timers: any Timers, desktop: any DesktopSwitches, clients: any ClientLink,
        control: any ControlOutput, snap: (any SnapAccess)?, answeredVia: AnswerChannels, configuration: Configuration
    ) {
        self.engine = engine
        self.registry = registry
        self.views = views
        usage = UsageRows(registry: registry, records: records)
        self.records = records
        self.prompts = prompts
        self.timers = timers
        self.desktop = desktop
        self.clients = clients
        self.control = control
        self.snap = snap
        self.answeredVia = answeredVia
        self.configuration = configuration
    }

    /// Runs `body` on the engine; applies stream flips, permission replies and usage rows under the
    /// lock (in the engine's order), the rest after.
    func withEngine<R>(_ body: (inout ConsentEngine) -> (R, [ConsentAction])) -> R {
        let (result, deferred) = engine.withLock { e -> (R, [ConsentAction]) in
            var (r, actions) = body(&e)
            actions += e.settlePermissions()
            for a in actions {
                switch a {
                case let .setStreamAccess(c, s, real):
                    registry.stream(s.rawValue)?.setReal(real && snapAllows(c.rawValue))
                case let .answerPermission(c, tag, kind, state):
                    answerPermission(c, tag: tag, kind: kind, state)
                // In the engine's order: another thread's rows for the same stream come before or after.
                case let .startUsage(_, s, u):
                    usage.start(s, u, engine: e)
                case let .finishUsage(c, s, endedAt):
                    usage.finish(c, s, stream: registry.stream(s.rawValue), endedAt: endedAt, engine: e)
                case let .splitUsage(c, s, u):
                    usage.finish(c, s, stream: registry.stream(s.rawValue), endedAt: u.startedAt, engine: e)
                    usage.start(s, u, engine: e)
                case let .notifyPermission(c, kind, state):
                    if let watch = registry.session(c.rawValue)?.grantWatch {
                        watch(kind, state == .granted)
                    } else {
                        clients.inject(sessionID: c.rawValue, packet: PermissionEvent(kind: kind.rawValue, state: state.rawValue).packet)
                    }
                default:
                    break
                }
            }
            return (r, actions) // flips are also logged by perform()
        }
        perform(deferred)
        return result
    }

    /// A decision made on the desktop (a switch, a notice's Stop); the engine's refusal, if any.
    func setDecision(
        _ app: AppKey, _ state: PermissionState, reason: DecisionReason,
        lifespan: Lifespan = .always
    ) -> ConsentError? {
        withEngine { e -> (ConsentError?, [ConsentAction]) in
            switch e.setDecision(app, state, reason: reason, lifespan: lifespan, now: wallClockNow()) {
            case .success(let actions): return (nil, actions)
            case .failure(let err): return (err, [])
            }
        }
    }

    /// Whether snapd lets `session`'s streams be real (anything but an unconfirmed snap).
    func snapAllows(_ session: UInt64) -> Bool { snap?.allows(session) ?? true }

    /// Sets `stream` to `real` (snapd permitting); call inside `withEngine`, so that no later
    /// flip of the stream can come first.
    func setAccess(_ stream: RecordStream, real: Bool) { stream.setReal(real && snapAllows(stream.sessionID)) }

    /// Sets every live stream of `session` to what the engine says, snapd permitting.
    func reapplyAccess(session: UInt64) {
        engine.withLock { e in
            for stream in registry.streams(of: session) {
                setAccess(stream, real: e.isStreamReal(ClientID(session), StreamID(stream.streamID)) ?? false)
            }
        }
    }

    /// Sends the reply to a request that waited for its prompt (under the engine lock).
    private func answerPermission(_ c: ClientID, tag: UInt32, kind: Capability, _ state: PermissionState) {
        guard let session = registry.session(c.rawValue) else { return }
        session.releasePermissionTag(tag)
        Log.info("session \(session.id) (\(session.identity.appKey)): \(kind.rawValue) request answered: \(state.rawValue)")
        clients.inject(
            sessionID: session.id,
            packet: session.permissionStatus(state).packet(tag: tag, version: session.protocolVersion))
    }

    // MARK: actions

    private func perform(_ actions: [ConsentAction]) {
        // Streams that ended in this batch: their `stream-ended` events still name them by channel.
        var ended: [UInt64: RecordStream] = [:]
        for a in actions {
            switch a {
            case let .setStreamAccess(c, s, real):
                if let key = engine.withLock({ $0.identity(of: c)?.appKey }) {
                    Log.info("stream \(s.rawValue) of \(key): now \(real ? "real" : "silenced")")
                }
            case let .deliverPrompt(prompt, agents):
                let info = views.promptInfo(prompt)
                for c in registry.connections(of: agents) { control.send(.prompt(info), to: c) }
            case let .closePrompt(prompt, outcome, _):
                Log.info("prompt \(prompt.id.rawValue) for \(prompt.appKey) resolved: \(outcomeName(outcome))")
                prompts.closed(prompt.id.rawValue)
            case let .runPromptCommand(prompt):
                prompts.wantsCommand(prompt.id.rawValue, environment: prompt.commandEnvironment)
            case let .schedulePromptTimeout(id, seconds):
                prompts.scheduleTimeout(id.rawValue, after: seconds)
            case let .persistDecision(d):
                records.save(d)
                if d.lifespan.expiresAt != nil { timedDecisionMade() }
                // The desktop's switch is the microphone's: lasting microphone decisions of Flatpak apps.
                if d.lifespan == .always, d.capability == .microphone, d.appKey.kind == "flatpak" {
                    desktop.mirror(appID: d.appKey.value, d.state)
                }
            case let .removeTimedDecision(app, capability):
                records.removeTimed(app, capability)
            case let .persistAccess(kind, enabled):
                records.setAccess(kind, enabled: enabled, at: wallClockNow())
                if kind == .microphone { desktop.mirrorMicrophoneAccess(enabled: enabled) }
            case let .recordApp(r):
                records.record(r)
            case let .finishUsage(_, s, _):
                // Its usage row ended under the engine lock.
                ended[s.rawValue] = registry.removeStream(s.rawValue)
            case let .disconnectClient(c, reason):
                Log.warn("closing client \(c.rawValue): \(reason)")
                let key = engine.withLock { $0.identity(of: c)?.appKey }
                records.logEvent(kind: "disconnect", app: key, detail: reason, at: wallClockNow())
                clients.disconnect(sessionID: c.rawValue, reason: reason)
            case let .emit(event):
                if case let .promptRaised(p) = event { prompts.raised(views.promptInfo(p)) }
                note(event)
                let by: PromptChannel? = if case let .promptResolved(p, _) = event { answeredVia.take(p.id.rawValue) } else { nil }
                if let e = views.controlEvent(event, ended: ended, answeredVia: by) { control.broadcast(e) }
            case let .noticeUse(app, executable, commandName):
                guard configuration.useNotices else { break }
                let (name, icon) = views.shownName(app, executable: executable, commandName: commandName)
                prompts.notice(app, name: name, icon: icon)
            case .answerPermission, .notifyPermission, .startUsage, .splitUsage:
                break // done under the engine lock (withEngine)
            }
        }
    }

    /// What the daemon log and the store's event log say of an engine event.
    private func note(_ event: ConsentEvent) {
        switch event {
        case let .clientRefused(c, app, reason):
            Log.warn("client \(c.rawValue) (\(app)) refused: \(reason)")
        case let .promptRaised(p):
            Log.info("prompt \(p.id.rawValue) raised for \(p.appKey) (\(p.displayName)), purpose: \(p.purpose ?? "none")")
        case let .promptCommandGaveNoAnswer(p, status):
            Log.warn("prompt-command for prompt \(p.rawValue) exited with \(status): no answer")
        case let .promptDeferred(app, kind, pending, perUID):
            let limit =
                perUID
                ? "max-pending-prompts-per-uid (\(configuration.maxPendingPromptsPerUID))"
                : "max-pending-prompts (\(configuration.maxPendingPrompts))"
            deferredLog.record(
                .info,
                "\(app) records \(kind.rawValue) silenced and waits for a prompt: \(pending) prompts "
                    + "are pending, as many as \(limit) allows; it is prompted when one closes, or decide it "
                    + "with 'earmuff grant' or 'earmuff deny'")
        case let .accessChanged(kind, enabled):
            Log.info("\(kind.rawValue) access switched \(enabled ? "on" : "off") for every app")
        case let .decisionExpired(old, after):
            decisionEnded(
                after, event: "decision-expired",
                "the \(old.state.rawValue) decision until \(TextFormat.date(old.lifespan.expiresAt)) ended; "
                    + "now \(after.state.rawValue) (\(after.reason.rawValue))")
        case let .decisionAutoReset(d, lastUsed):
            decisionEnded(
                d, event: "auto-reset",
                "granted, unused since \(TextFormat.date(lastUsed)) (auto-reset-days = "
                    + "\(configuration.autoResetDays)); now undetermined (auto-reset): it prompts on its next recording")
        default:
            break
        }
    }

    /// Logs (daemon log and the store's events) that a decision ended by itself; `now` is the one in force.
    private func decisionEnded(_ now: Decision, event: String, _ detail: String) {
        Log.info("decision for \(now.appKey): \(detail)")
        records.logEvent(kind: event, app: now.appKey, detail: detail, at: wallClockNow())
    }

    // MARK: lifespans

    /// The timer key of `expireLapsed` (prompt ids count up from 1 and never reach it).
    private static let expiryTimerKey = UInt64.max
    /// The longest wait between two looks at what has lapsed: the timer runs on the monotonic
    /// clock, expiry times are wall-clock times, and a suspended machine stops only the former.
    static let maximumExpiryWait = 60.0

    /// Ends what has lapsed (timed decisions, grants unused for auto-reset-days) and sets the
    /// timer for the next time something will.
    func expireLapsed() {
        let now = wallClockNow()
        let next = withEngine { e in
            let actions = e.expire(now: now)
            return (e.nextDeadline(now: now), actions)
        }
        scheduleExpiry(next: next, now: now)
    }

    private func scheduleExpiry(next: Double?, now: Double) {
        let wait = min(max((next ?? .infinity) - now, 0.01), Self.maximumExpiryWait)
        timers.schedule(key: Self.expiryTimerKey, after: wait) { [weak self] in self?.expireLapsed() }
    }

    /// A timed decision was made: the timer may have to fire sooner.
    private func timedDecisionMade() {
        let now = wallClockNow()
        scheduleExpiry(next: engine.withLock { $0.nextDeadline(now: now) }, now: now)
    }
}

extension SessionState {
    /// What a permission reply says of this client in `state`.
    func permissionStatus(_ state: PermissionState) -> PermissionStatus {
        PermissionStatus(
            state: state.rawValue, appKey: identity.appKey.description, identifiedBy: identity.method.rawValue,
            strength: identity.strength.rawValue)
    }
}

extension Prompt {
    /// The environment `prompt-command` runs with for this prompt.
    var commandEnvironment: [String: String] {
        [
            "EARMUFF_APP_KEY": appKey.description,
            "EARMUFF_APP_NAME": displayName,
            "EARMUFF_PURPOSE": purpose ?? "",
            "EARMUFF_PID": String(pid),
            "EARMUFF_SOURCE": source,
            "EARMUFF_KIND": kind.rawValue,
            "EARMUFF_IDENTIFIED_BY": method.rawValue,
        ]
    }
}

/// The desktop channel that answered each prompt, for the `by` of its resolution.
final class AnswerChannels: Sendable {
    private let byPrompt = Locked([UInt64: PromptChannel]())
    init() {}
    func note(_ prompt: UInt64, _ via: PromptChannel) { byPrompt.withLock { $0[prompt] = via } }
    /// The channel noted for `prompt`, forgotten.
    func take(_ prompt: UInt64) -> PromptChannel? { byPrompt.withLock { $0.removeValue(forKey: prompt) } }
}
