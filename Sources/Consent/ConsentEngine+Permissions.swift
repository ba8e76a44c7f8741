// The permission API (EarmuffKit, the `module-earmuff` extension): an app asks for its own
// state, asks for permission before it records, or subscribes to changes of its own state.
//
// - A client's state for a kind is what its streams of that kind would get: apps.d policy,
//   else its "once" answer, else the app's decision in force; an uninspectable client, which
//   never hears real audio, is denied.
// - A request of an undetermined app raises the prompt its first stream would raise (one per
//   app and kind: a request while one is pending joins it), and waits; it is answered once
//   the state is no longer undetermined or the prompt is gone (answered, timed out,
//   superseded), or dropped when the client disconnects. A decided app is answered at once.
//   Over the prompt caps it waits for its prompt like a stream (ConsentEngine+PromptQueue.swift).
// - `missing-purpose` applies to requests as to streams.
// - Subscribers are told of every change of their own state, whatever made it.
// `settlePermissions()` answers and notifies; the proxy calls it after every engine call.

/// A permission request waiting for its prompt.
struct PermissionWaiter: Sendable, Equatable {
    var client: ClientID
    /// The tag the client's request carried; its reply carries it back.
    var tag: UInt32
    var kind: Capability
}

/// What became of a permission request.
public enum PermissionRequestOutcome: Sendable, Equatable {
    /// Decided already: answer at once.
    case answered(PermissionState)
    /// Waiting for the prompt; `answerPermission` comes when it settles.
    case waiting
    /// The client is being disconnected (`missing-purpose = disconnect`); no reply.
    case refused
}

extension ConsentEngine {
    /// The client's state for `kind`; nil for a client not connected.
    public func permission(of c: ClientID, kind: Capability) -> PermissionState? {
        guard let s = clients[c] else { return nil }
        return permission(s, kind)
    }

    /// With the kind's access off (the master switch) it is denied: the app hears nothing of
    /// that kind whatever was decided, so it is not told it may (a request raises no prompt);
    /// once access is on again, subscribers hear of its own state.
    func permission(_ s: ClientState, _ kind: Capability) -> PermissionState {
        if s.identity.isUninspectable || accessOff.contains(kind) { return .denied }
        if let fixed = policyDecision(s.identity.appKey, kind) { return fixed }
        if let once = s.once[kind] { return once }
        return effectiveDecision(for: s.identity.appKey, kind: kind).state
    }

    /// The client asks for `kind` (its request carried `tag`), giving `purpose` or none.
    public mutating func permissionRequested(
        _ c: ClientID, tag: UInt32, kind: Capability, purpose: String?,
        now: Double
    ) -> (outcome: PermissionRequestOutcome, actions: [ConsentAction]) {
        guard var s = clients[c] else { return (.refused, [.disconnectClient(c, reason: "client was never registered")]) }
        if let p = Self.clean(purpose, limit: Self.maximumPurposeLength) {
            s.requestPurpose = p
            clients[c] = s
        }
        let state = permission(s, kind)
        guard state == .undetermined else { return (.answered(state), []) }
        let (proceed, refusal) = applyMissingPurpose(c, s, kind: kind, asking: "for permission", now: now)
        guard proceed else { return (.refused, refusal) }
        // Listed from now on (`apps`), as an app that recorded is.
        let actions = refusal + noteAsked(s, kind)
        guard let after = clients[c], permission(after, kind) == .undetermined else {
            return (.answered(permission(of: c, kind: kind) ?? .denied), actions)
        }
        var raised: [ConsentAction] = []
        permissionWaiters.append(PermissionWaiter(client: c, tag: tag, kind: kind))
        if pendingByApp[Subject(app: s.identity.appKey, kind: kind)] == nil {
            // Under the prompt caps as a stream's prompt is (ConsentEngine+PromptQueue.swift).
            raised = promptOrWait(after, kind: kind, source: "", now: now)
        }
        return (.waiting, actions + raised)
    }

    /// Turns change notifications of the client's own state on (from its state now) or off.
    public mutating func permissionSubscription(_ c: ClientID, enabled: Bool) {
        guard let s = clients[c], enabled else {
            permissionSubscribers[c] = nil
            return
        }
        var known: [Capability: PermissionState] = [:]
        for kind in Capability.allCases { known[kind] = permission(s, kind) }
        permissionSubscribers[c] = known
    }

    /// Answers the requests that are settled and tells subscribers what changed. Cheap when
    /// nothing waits and nobody subscribed.
    public mutating func settlePermissions() -> [ConsentAction] {
        guard !permissionWaiters.isEmpty || !permissionSubscribers.isEmpty else { return [] }
        var actions: [ConsentAction] = []
        var waiting: [PermissionWaiter] = []
        for w in permissionWaiters {
            guard let s = clients[w.client] else { continue }
            let state = permission(s, w.kind)
            let subject = Subject(app: s.identity.appKey, kind: w.kind)
            // A request over the prompt caps waits for its prompt as one being shown does.
            let prompting = pendingByApp[subject] != nil || self.waiting[subject] != nil
            if state == .undetermined && prompting {
                waiting.append(w)
            } else {
                actions.append(.answerPermission(w.client, tag: w.tag, w.kind, state))
            }
        }
        permissionWaiters = waiting
        for c in permissionSubscribers.keys.sorted() {
            guard let s = clients[c] else {
                permissionSubscribers[c] = nil
                continue
            }
            for kind in Capability.allCases {
                let state = permission(s, kind)
                if permissionSubscribers[c]?[kind] != state {
                    permissionSubscribers[c]?[kind] = state
                    actions.append(.notifyPermission(c, kind, state))
                }
            }
        }
        return actions
    }
}
