// How decisions end by themselves: timed decisions whose time has passed, and
// lasting grants unused for `auto-reset-days` (as Android resets the
// permissions of apps not used for months).
//
// The engine reads no clock: the proxy calls `expire(now:)` when the daemon
// starts and again at `nextDeadline(now:)`, and the engine also drops lapsed
// timed decisions before it decides a new stream, so a late timer never lets
// a stream start on a decision that has ended. Whatever ends reaches live
// streams through the usual `setStreamAccess` actions, on their next frame.

extension ConsentEngine {
    /// Drops timed decisions whose time is `now` or earlier and resets lasting grants unused
    /// for the policy's `autoResetAfter`; returns what to store, emit and flip.
    public mutating func expire(now: Double) -> [ConsentAction] {
        expireTemporary(now: now) + autoReset(now: now)
    }

    /// When `expire(now:)` next has something to do (seconds since 1970), or nil when nothing
    /// will end by itself. May be in the past.
    public func nextDeadline(now: Double) -> Double? {
        var next = temporary.values.compactMap(\.lifespan.expiresAt).min()
        if let after = policy.autoResetAfter {
            for d in decisions.values {
                guard let used = autoResetCandidate(d) else { continue }
                next = min(next ?? .infinity, used + after)
            }
        }
        return next
    }

    /// Ends timed decisions whose time has come; the lasting decision under each is in force again.
    mutating func expireTemporary(now: Double) -> [ConsentAction] {
        var actions: [ConsentAction] = []
        for (subject, d) in temporary.sorted(by: { ($0.key.app, $0.key.kind) < ($1.key.app, $1.key.kind) }) {
            guard let t = d.lifespan.expiresAt, t <= now else { continue }
            temporary[subject] = nil
            let after =
                decisions[subject]
                ?? Decision(appKey: subject.app, capability: subject.kind, state: .undetermined, reason: .none)
            actions += [.removeTimedDecision(subject.app, subject.kind), .emit(.decisionExpired(d, now: after))]
            actions += refreshStreams(of: subject.app)
        }
        return actions
    }

    /// Puts lasting grants unused for `autoResetAfter` back to undetermined (reason auto-reset).
    /// An app recording now is in use and keeps its grant; apps.d policy is never reset.
    mutating func autoReset(now: Double) -> [ConsentAction] {
        guard let after = policy.autoResetAfter else { return [] }
        var actions: [ConsentAction] = []
        for subject in decisions.keys.sorted(by: { ($0.app, $0.kind) < ($1.app, $1.kind) }) {
            guard var d = decisions[subject], let used = autoResetCandidate(d), now - used >= after else { continue }
            d.state = .undetermined
            d.reason = .autoReset
            d.decidedAt = now
            decisions[subject] = d
            actions += [.persistDecision(d), .emit(.decisionAutoReset(d, lastUsed: used))]
            actions += refreshStreams(of: subject.app)
        }
        return actions
    }

    /// The last use of a lasting grant that auto-reset may end (the later of its last capture
    /// and the grant itself); nil for anything else.
    private func autoResetCandidate(_ d: Decision) -> Double? {
        guard d.state == .granted, policyDecision(d.appKey, d.capability) == nil,
            !clientIDs(of: d.appKey).contains(where: { clients[$0]?.streams.values.contains { $0.kind == d.capability } == true })
        else { return nil }
        let times = [d.lastUsedAt, d.decidedAt].compactMap { $0 }
        return times.max()
    }
}
