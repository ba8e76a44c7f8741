// What the consent service does about time and the desktop: decisions that
// end by themselves (the expiry timer, lifespans of requests and of the prompt
// command's answers), and the desktop's microphone switches of Flatpak apps.
import Consent
import ControlProtocol
import Wording

extension ConsentService {
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
        delivery.timers.schedule(key: Self.expiryTimerKey, after: wait) { [weak self] in self?.expireLapsed() }
    }

    /// A timed decision was made: the timer may have to fire sooner.
    func timedDecisionMade() {
        let now = wallClockNow()
        scheduleExpiry(next: engine.withLock { $0.nextDeadline(now: now) }, now: now)
    }

    /// How long a prompt command's answer lasts, from the first line it printed: `once`,
    /// `session`, `always` or a duration (`2h`); nil (always) for nothing or anything else.
    static func commandLifespan(_ output: String, now: Double) -> Lifespan? {
        guard !output.isEmpty else { return nil }
        guard let requested = RequestedLifespan(text: output) else {
            Log.warn("prompt-command printed \"\(TextFormat.cell(output, max: 60))\"; a lifespan is once, session, always "
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

    // MARK: the desktop's switches

    /// The desktop switched a Flatpak app's microphone: a lasting decision (reason desktop).
    func decideFromDesktop(_ appID: String, _ state: PermissionState) {
        guard let key = AppKey(parsing: "flatpak:\(appID)"), key.value == appID else {
            Log.warn("desktop permission store: ignored app id \"\(appID)\" (not a Flatpak app id)")
            return
        }
        let refused = withEngine { e -> (ConsentError?, [ConsentAction]) in
            switch e.setDecision(key, state, reason: state == .undetermined ? .reset : .desktop, now: wallClockNow()) {
            case .success(let actions): return (nil, actions)
            case .failure(let err): return (err, [])
            }
        }
        if let refused {
            Log.warn("desktop permission store: \(refused)")
            // Show the decision in force on the switch again.
            if case let .governedByPolicy(_, fixed) = refused { desktopPermissions.mirror(appID: appID, fixed) }
            return
        }
        writer.logEvent(kind: "desktop-permission", app: key, detail: "the desktop's microphone switch set \(state.rawValue)",
                        at: wallClockNow())
    }

    /// Lasting microphone decisions of Flatpak apps (apps.d policy over stored ones), by app id.
    func lastingFlatpakDecisions() -> [String: PermissionState] {
        engine.withLock { e in
            var out: [String: PermissionState] = [:]
            for d in e.storedDecisions where d.appKey.kind == "flatpak" && d.capability == .microphone {
                out[d.appKey.value] = d.state
            }
            for (key, decl) in e.policy.declarations where key.kind == "flatpak" {
                if let fixed = decl.decision { out[key.value] = fixed }
            }
            return out
        }
    }

    /// Logs (daemon log and the store's events) that a decision ended by itself; `now` is the one in force.
    func decisionEnded(_ now: Decision, event: String, _ detail: String) -> ControlEvent {
        Log.info("decision for \(now.appKey): \(detail)")
        writer.logEvent(kind: event, app: now.appKey, detail: detail, at: wallClockNow())
        return .decisionChanged(decisionInfo(now))
    }
}
