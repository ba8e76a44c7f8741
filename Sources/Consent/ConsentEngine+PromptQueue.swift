// The prompt caps: at most `maxPendingPrompts` prompts pending at once, and at most
// `maxPendingPromptsPerUID` for the clients of one uid, so a storm of apps (or of made-up
// identities) cannot bury the prompt of the app the person is using.
//
// A capture (a record stream, or a permission request of the permission API) that would
// raise one more waits instead: it stays silent (it is undetermined) and is listed in status.
// Room is made at once when a pending prompt belongs to an app that no longer records anything
// of its kind (it connected, recorded and left, as a storm does): that prompt is withdrawn, the
// app stays undetermined.
//
// The slots are shared out fairly among origins (`ClientIdentity.origin`: the cgroup a client
// runs in, which under a desktop is the scope of the app it was started as, and which a process
// cannot leave for a new one of its own making without the user's systemd). A capture whose
// origin holds at least two prompts fewer than the origin holding the most takes the newest
// prompt of that one, which waits again (an app that keeps recording under a hundred made-up
// names still holds one origin, so the prompt of the next app the person starts is raised at
// once). Otherwise the capture waits until a prompt closes (answered, timed out, settled
// elsewhere); waiting captures are then prompted fewest-held origin first, oldest first within
// that, as long as their app still records that kind.

extension ConsentEngine {
    /// A capture over the prompt caps, waiting for a prompt.
    struct WaitingCapture: Sendable {
        var uid: UInt32
        var origin: String?
        var source: String
        var since: Double
    }

    /// Which cap a new prompt for `uid` would go over, if any.
    private func capReached(uid: UInt32) -> (pending: Int, perUID: Bool)? {
        if pending.count >= policy.maxPendingPrompts { return (pending.count, false) }
        let ofUID = pending.values.count { $0.uid == uid }
        if ofUID >= policy.maxPendingPromptsPerUID { return (ofUID, true) }
        return nil
    }

    /// The first client of `subject`'s app that records `subject`'s kind now, or waits for the
    /// answer to a permission request for it.
    private func liveRecorder(of subject: Subject) -> ClientState? {
        for id in clients.keys.sorted() {
            guard let s = clients[id], s.identity.appKey == subject.app else { continue }
            if s.streams.values.contains(where: { $0.kind == subject.kind })
                || permissionWaiters.contains(where: { $0.client == id && $0.kind == subject.kind })
            {
                return s
            }
        }
        return nil
    }

    /// The oldest pending prompt (of `uid`, when given) whose app no longer records its kind.
    private func stalePrompt(uid: UInt32?) -> PromptID? {
        pending.keys.sorted().first { id in
            guard let p = pending[id], uid == nil || p.uid == uid else { return false }
            return liveRecorder(of: Subject(app: p.prompt.appKey, kind: p.prompt.kind)) == nil
        }
    }

    /// Raises a prompt for `s`'s capture of `kind`, withdrawing stale prompts to make room
    /// under the caps; when there is none to withdraw, the capture waits.
    mutating func promptOrWait(_ s: ClientState, kind: Capability, source: String, now: Double) -> [ConsentAction] {
        let subject = Subject(app: s.identity.appKey, kind: kind)
        var actions: [ConsentAction] = []
        while let cap = capReached(uid: s.identity.uid) {
            let among = cap.perUID ? s.identity.uid : nil
            if let stale = stalePrompt(uid: among) {
                actions += resolve(stale, answer: nil, outcome: .withdrawn, reason: .none, now: now)
            } else if let taken = unfairlyHeldPrompt(uid: among, forOrigin: s.identity.origin), let p = pending[taken] {
                // It waits again, as old as its prompt, for its origin's next turn.
                actions += resolve(taken, answer: nil, outcome: .withdrawn, reason: .none, now: now)
                waiting[Subject(app: p.prompt.appKey, kind: p.prompt.kind)] =
                    WaitingCapture(uid: p.uid, origin: p.origin, source: p.prompt.source, since: p.prompt.raisedAt)
            } else {
                if waiting[subject] == nil {
                    waiting[subject] = WaitingCapture(uid: s.identity.uid, origin: s.identity.origin, source: source, since: now)
                    actions.append(.emit(.promptDeferred(subject.app, kind, pending: cap.pending, perUID: cap.perUID)))
                }
                return actions
            }
        }
        waiting[subject] = nil
        return actions + raisePrompt(for: s, kind: kind, source: source, now: now)
    }

    /// How many prompts (of `uid`, when given) each origin holds.
    private func promptsHeld(uid: UInt32?) -> [String?: Int] {
        var held: [String?: Int] = [:]
        for p in pending.values where uid == nil || p.uid == uid { held[p.origin, default: 0] += 1 }
        return held
    }

    /// The newest prompt (of `uid`, when given) of the origin that holds the most, when it holds
    /// at least two more than `origin`: taking it for `origin` leaves the shares closer.
    private func unfairlyHeldPrompt(uid: UInt32?, forOrigin origin: String?) -> PromptID? {
        let held = promptsHeld(uid: uid)
        guard let most = held.max(by: { ($0.value, $1.key ?? "") < ($1.value, $0.key ?? "") }),
            most.value >= held[origin, default: 0] + 2
        else { return nil }
        return pending.filter { (uid == nil || $0.value.uid == uid) && $0.value.origin == most.key }.keys.max()
    }

    /// After a prompt closed: prompts the waiting captures that fit under the caps, those of
    /// the origin holding the fewest prompts first, oldest first within an origin; forgets those
    /// whose app was decided or no longer records that kind.
    mutating func promoteWaiting(now: Double) -> [ConsentAction] {
        var actions: [ConsentAction] = []
        for (subject, _) in waiting {
            guard let s = liveRecorder(of: subject),
                effectiveDecision(for: subject.app, kind: subject.kind).state == .undetermined,
                s.once[subject.kind] == nil, pendingByApp[subject] == nil
            else {
                waiting[subject] = nil
                continue
            }
        }
        // One at a time: each prompt raised changes what its origin holds.
        while true {
            let held = promptsHeld(uid: nil)
            let next = waiting.filter { capReached(uid: $0.value.uid) == nil }.min { a, b in
                (held[a.value.origin, default: 0], a.value.since, a.key.app, a.key.kind)
                    < (held[b.value.origin, default: 0], b.value.since, b.key.app, b.key.kind)
            }
            guard let (subject, w) = next, let s = liveRecorder(of: subject) else { return actions }
            waiting[subject] = nil
            let source = s.streams.values.first { $0.kind == subject.kind }?.source ?? w.source
            actions += raisePrompt(for: s, kind: subject.kind, source: source, now: now)
        }
    }

    /// Captures waiting for a prompt whose app still records that kind, oldest first.
    public var waitingCaptures: [WaitingCaptureSnapshot] {
        waiting.sorted { ($0.value.since, $0.key.app, $0.key.kind) < ($1.value.since, $1.key.app, $1.key.kind) }
            .compactMap { subject, w in
                guard let s = liveRecorder(of: subject),
                    effectiveDecision(for: subject.app, kind: subject.kind).state == .undetermined
                else { return nil }
                return WaitingCaptureSnapshot(
                    appKey: subject.app, kind: subject.kind, displayName: displayName(of: s),
                    uid: w.uid, source: w.source, since: w.since,
                    executable: s.identity.executable, commandName: s.commandName)
            }
    }
}

/// A capture waiting for a prompt (status).
public struct WaitingCaptureSnapshot: Sendable, Equatable {
    public var appKey: AppKey
    public var kind: Capability
    public var displayName: String
    public var uid: UInt32
    public var source: String
    public var since: Double
    /// What the app's name is shown from (`AppNameResolver.shownName`).
    public var executable: String?
    public var commandName: String?
}
