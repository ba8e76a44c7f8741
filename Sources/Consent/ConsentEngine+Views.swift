// What the consent engine shows of its state: the decision in force, stored and
// temporary decisions, clients, streams, prompts and agents.

extension ConsentEngine {
    /// The state in force for an app and kind: apps.d policy, else a temporary decision (session,
    /// timed), else the lasting decision, else undetermined. ("Once" decisions are per client.)
    public func effectiveDecision(for app: AppKey, kind: Capability = .microphone) -> EffectiveDecision {
        if let fixed = policyDecision(app, kind) { return EffectiveDecision(state: fixed, reason: .adminPolicy) }
        let subject = Subject(app: app, kind: kind)
        let lasting =
            decisions[subject].map { EffectiveDecision(state: $0.state, reason: $0.reason) }
            ?? EffectiveDecision(state: .undetermined, reason: .none)
        if let t = temporary[subject] {
            return EffectiveDecision(state: t.state, reason: t.reason, lifespan: t.lifespan, afterwards: lasting.state)
        }
        return lasting
    }

    /// Lasting decisions (not apps.d policy), by app key and kind.
    public var storedDecisions: [Decision] { Self.sorted(decisions.values) }

    /// Decisions for this session or until a time, by app key and kind.
    public var temporaryDecisions: [Decision] { Self.sorted(temporary.values) }

    private static func sorted(_ d: some Sequence<Decision>) -> [Decision] {
        d.sorted { ($0.appKey, $0.capability) < ($1.appKey, $1.capability) }
    }

    /// Connected clients, by id.
    public var clientSnapshots: [ClientSnapshot] {
        clients.keys.sorted().compactMap { id in
            clients[id].map {
                ClientSnapshot(
                    id: id, identity: $0.identity, displayName: displayName(of: $0), commandName: $0.commandName,
                    purpose: purpose(of: $0), once: $0.once, connectedAt: $0.connectedAt)
            }
        }
    }

    /// Live record streams, by client and stream id.
    public var streamSnapshots: [StreamSnapshot] {
        clients.keys.sorted().flatMap { c -> [StreamSnapshot] in
            guard let s = clients[c] else { return [] }
            return s.streams.keys.sorted().compactMap { id in
                s.streams[id].map {
                    StreamSnapshot(
                        client: c, stream: id, appKey: s.identity.appKey, source: $0.source,
                        kind: $0.kind, real: $0.real, startedAt: $0.startedAt)
                }
            }
        }
    }

    /// Prompts waiting for an answer, oldest first.
    public var pendingPrompts: [Prompt] { pending.keys.sorted().compactMap { pending[$0]?.prompt } }

    /// Connected agents.
    public var connectedAgents: [AgentID] { agents.sorted() }

    /// Whether a live stream is real; nil when there is no such stream.
    public func isStreamReal(_ c: ClientID, _ s: StreamID) -> Bool? { clients[c]?.streams[s]?.real }

    /// What a live stream captures; `.some(nil)` while its source is not known, nil when there is no such stream.
    public func streamKind(_ c: ClientID, _ s: StreamID) -> Capability?? {
        guard let st = clients[c]?.streams[s] else { return nil }
        return .some(st.kind)
    }

    /// The identity of a connected client.
    public func identity(of c: ClientID) -> ClientIdentity? { clients[c]?.identity }
}
