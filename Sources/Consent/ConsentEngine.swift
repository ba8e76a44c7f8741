// The consent engine: who may hear the microphone, decided without I/O.
//
// Events flow in (client connected, record stream requested/started/ended,
// agent connected, prompt answered, timer fired, CLI decision); each call
// updates the engine's state and returns `ConsentAction`s for the proxy to
// carry out (flip a stream's atomic access flag, deliver a prompt, persist a
// decision, start a timer, run the prompt command, close a connection, emit
// an event for `earmuff watch`). Clocks come in as `now` (seconds since 1970).
//
// Rules:
// - Decisions are per app key and capture kind (`Capability`: microphone,
//   system-audio, app-audio); a grant of one says nothing about the others.
//   A stream's kind comes from what it records (the proxy classifies its
//   source); until the kind is known the stream is silent, and a stream moved
//   to another source is decided again under the new source's kind.
// - Per app key and kind, the effective state is the apps.d policy (`decision =`
//   for the microphone, `system-audio-decision =`, `app-audio-decision =`; reason
//   admin-policy) if any, else the stored decision, else undetermined.
//   Policy wins over the user: `setDecision` on a policy app fails with
//   `.governedByPolicy`, and no prompt is ever raised for it.
// - A stream is real when the app is granted its kind, or undetermined and its
//   client holds a "once" answer for that kind; otherwise silent from its first frame.
//   A kind switched off (`setAccess`, the master switch) is silent for every app,
//   apps.d grants included, until it is on again; decisions and prompts go on.
// - The first record stream of an undetermined app and kind raises one prompt per
//   app and kind (coalesced across its clients and streams); stream creation never waits.
// - A prompt goes to every connected agent, and to agents that connect later;
//   with no agent, the prompt command runs when configured. First answer wins.
// - allow/deny are stored (reason user, or prompt-command); once makes the
//   app's currently connected clients real until each disconnects and is
//   stored only as reason user-once with the state left undetermined.
// - Lifespans (Model.swift, `Lifespan`): a decision "always" is the app's
//   lasting one; one for this session or until a time lies over it, and a
//   "once" answer lies over both for the clients connected when it was made.
//   When a temporary decision ends, the lasting one is in force again.
//   `expire(now:)` drops what has lapsed (and, with `auto-reset-days`, puts
//   grants unused that long back to undetermined); the proxy calls it at
//   start and again by `nextDeadline(now:)`. See ConsentEngine+Lifespans.swift.
// - A prompt nobody answers within the timeout closes as timed out; the app
//   stays undetermined and its next record stream raises a new prompt.
// - An undetermined app that asks to record without a purpose (from the
//   launcher, apps.d, or `application.capture.purpose`, in that order) is
//   disconnected, denied, or prompted anyway, per `missing-purpose`.

/// The consent state machine (see the file comment).
public struct ConsentEngine: Sendable {
    struct ClientState: Sendable {
        var identity: ClientIdentity
        var launcherPurpose: String?
        /// The command it was started as, when that is a link to its executable (display only).
        var commandName: String?
        var applicationName: String?
        var processBinary: String?
        var propertyPurpose: String?
        /// The purpose of the client's latest permission request (EarmuffKit), if it gave one.
        var requestPurpose: String?
        var connectedAt: Double
        /// "Once" decisions over the app's (granted or denied), by kind, until this client disconnects.
        var once: [Capability: PermissionState] = [:]
        var streams: [StreamID: StreamState] = [:]
    }

    struct StreamState: Sendable {
        var source: String
        var kind: Capability?
        var real: Bool
        var startedAt: Double
    }

    /// Decisions and prompts are per app and kind.
    struct Subject: Hashable, Sendable {
        var app: AppKey
        var kind: Capability
    }

    struct PendingPrompt: Sendable {
        var prompt: Prompt
        var commandStarted: Bool
        /// The uid of the client it was raised for (prompts are capped per uid).
        var uid: UInt32 = 0
        /// Where that client runs (`ClientIdentity.origin`; prompts are shared out per origin).
        var origin: String?
    }

    /// The settings in force.
    public private(set) var policy: ConsentPolicy
    /// Capture kinds switched off altogether (the master switch): every stream of them is
    /// silent whatever is decided; decisions are kept for when it is on again.
    public internal(set) var accessOff: Set<Capability> = []
    /// The lasting ("always") decision per app and kind.
    var decisions: [Subject: Decision] = [:]
    /// A decision for this session or until a time, over the lasting one.
    var temporary: [Subject: Decision] = [:]
    var clients: [ClientID: ClientState] = [:]
    var pending: [PromptID: PendingPrompt] = [:]
    var pendingByApp: [Subject: PromptID] = [:]
    /// Captures over the prompt caps, waiting (silent) for a prompt; see ConsentEngine+PromptQueue.swift.
    var waiting: [Subject: WaitingCapture] = [:]
    var agents: Set<AgentID> = []
    /// What is known of each app besides its decisions (as the store keeps it; see ConsentEngine+Apps.swift).
    var apps: [AppKey: AppRecord] = [:]
    private var nextPrompt: UInt64 = 1
    /// Apps that have heard the microphone since the engine started (`noticeUse` once each).
    var heardMicrophone: Set<AppKey> = []
    /// Permission requests waiting for their prompt (ConsentEngine+Permissions.swift).
    var permissionWaiters: [PermissionWaiter] = []
    /// Clients subscribed to their own permission, with the states they were last told.
    var permissionSubscribers: [ClientID: [Capability: PermissionState]] = [:]

    /// Longest display name kept from a client's claims.
    public static let maximumNameLength = 128
    /// Longest purpose string kept.
    public static let maximumPurposeLength = 512

    /// An engine with the given settings and what was loaded from the store: the decisions (lasting
    /// ones, and timed ones over them; call `expire(now:)` next to drop lapsed ones) and the apps seen.
    public init(policy: ConsentPolicy, decisions: [Decision], apps: [AppRecord] = [], accessOff: Set<Capability> = []) {
        self.policy = policy
        self.accessOff = accessOff
        for r in apps { remember(r) }
        for d in decisions {
            let subject = Subject(app: d.appKey, kind: d.capability)
            switch d.lifespan {
            case .always: self.decisions[subject] = d
            case .until: self.temporary[subject] = d
            case .once, .session: break // never stored
            }
        }
    }

    // MARK: Clients

    /// A client was accepted and identified. `launcherPurpose` comes from `earmuff run --purpose`;
    /// `commandName` is the command it was started as when that is a link to its executable
    /// (`ProcessInspector.linkName`), for the name it is shown by.
    public mutating func clientConnected(
        _ c: ClientID, identity: ClientIdentity, launcherPurpose: String?,
        commandName: String? = nil, now: Double
    ) -> [ConsentAction] {
        let command = Self.clean(commandName, limit: Self.maximumNameLength)
        clients[c] = ClientState(
            identity: identity,
            launcherPurpose: Self.clean(launcherPurpose, limit: Self.maximumPurposeLength),
            commandName: command, connectedAt: now)
        return [
            remember(
                AppRecord(
                    appKey: identity.appKey, displayName: nil, executable: identity.executable,
                    method: identity.method, firstSeenAt: now, lastSeenAt: now, commandName: command)),
            .emit(.clientConnected(c, identity)),
        ]
    }

    /// The client set or updated its properties (SET_CLIENT_NAME, UPDATE_CLIENT_PROPLIST):
    /// `application.name`, `application.process.binary`, `application.capture.purpose`.
    /// Nil leaves a property unchanged. These claims are shown, never trusted for identity.
    public mutating func clientPropertiesChanged(
        _ c: ClientID, applicationName: String?, processBinary: String?,
        capturePurpose: String?, now: Double
    ) -> [ConsentAction] {
        guard var s = clients[c] else { return [] }
        let before = displayName(of: s)
        if let v = applicationName { s.applicationName = Self.clean(v, limit: Self.maximumNameLength) }
        if let v = processBinary { s.processBinary = Self.clean(v, limit: Self.maximumNameLength) }
        if let v = capturePurpose { s.propertyPurpose = Self.clean(v, limit: Self.maximumPurposeLength) }
        clients[c] = s
        let after = displayName(of: s)
        guard after != before else { return [] }
        let id = s.identity
        return [
            remember(
                AppRecord(
                    appKey: id.appKey, displayName: after, executable: id.executable,
                    method: id.method, firstSeenAt: s.connectedAt, lastSeenAt: now))
        ]
    }

    /// The client's connection is gone; its streams end and any "once" answer with it.
    public mutating func clientDisconnected(_ c: ClientID, now: Double) -> [ConsentAction] {
        guard let s = clients.removeValue(forKey: c) else { return [] }
        permissionWaiters.removeAll { $0.client == c }
        permissionSubscribers[c] = nil
        var actions: [ConsentAction] = []
        for id in s.streams.keys.sorted() {
            actions.append(.finishUsage(c, id, endedAt: now))
            actions.append(.emit(.streamEnded(c, id, s.identity.appKey)))
        }
        actions.append(.emit(.clientDisconnected(c, s.identity.appKey)))
        return actions
    }

    // MARK: Record streams

    /// A CREATE_RECORD_STREAM request arrived, before it is forwarded. Applies `missing-purpose`
    /// to the kind the request is expected to capture (its source is only sure from the reply).
    public mutating func recordStreamRequested(
        _ c: ClientID, kind: Capability = .microphone,
        now: Double
    ) -> RecordAdmission {
        guard let s = clients[c] else {
            return RecordAdmission(proceed: false, actions: [.disconnectClient(c, reason: "client was never registered")])
        }
        let (proceed, actions) = applyMissingPurpose(c, s, kind: kind, asking: "to record", now: now)
        return RecordAdmission(proceed: proceed, actions: actions)
    }

    /// Whether a stream of client `c` that captures `kind` would hear real samples now.
    public func wouldRecord(_ c: ClientID, kind: Capability) -> Bool {
        clients[c].map { isReal($0, kind) } ?? false
    }

    /// `missing-purpose` for a client of an undetermined app that asks for `kind` without a
    /// purpose (nothing to do otherwise): whether to go on (prompt, or denied without asking),
    /// and the actions (the denial, or the refusal that closes the client).
    mutating func applyMissingPurpose(
        _ c: ClientID, _ s: ClientState, kind: Capability, asking: String,
        now: Double
    ) -> (proceed: Bool, actions: [ConsentAction]) {
        let app = s.identity.appKey
        guard effectiveDecision(for: app, kind: kind).state == .undetermined, s.once[kind] == nil,
            purpose(of: s) == nil
        else {
            return (true, [])
        }
        switch policy.missingPurpose {
        case .prompt:
            return (true, [])
        case .deny:
            return (true, applyDecision(Subject(app: app, kind: kind), .denied, reason: .missingPurpose, purpose: nil, now: now))
        case .disconnect:
            let reason =
                "missing-purpose: \(app) asked \(asking) without a purpose string; set the client property "
                + "application.capture.purpose, run it with `earmuff run --purpose TEXT`, or declare a purpose in apps.d"
            return (
                false,
                [
                    .emit(.clientRefused(c, app, reason: reason)),
                    .disconnectClient(c, reason: reason),
                ]
            )
        }
    }

    /// The server created the record stream. `kind` is what its source captures (nil: not known
    /// yet, so silent until `recordStreamMoved` tells it). Returns whether it starts real (else
    /// silent from its first frame), and actions (usage, events, possibly a new prompt).
    public mutating func recordStreamStarted(
        _ c: ClientID, stream: StreamID, source: String, kind: Capability?,
        now: Double
    ) -> (real: Bool, actions: [ConsentAction]) {
        guard clients[c] != nil else { return (false, []) }
        // A timed decision that lapsed while its timer was late ends before this stream starts.
        let lapsed = expireTemporary(now: now)
        guard var s = clients[c] else { return (false, lapsed) }
        let app = s.identity.appKey
        let real = isReal(s, kind)
        s.streams[stream] = StreamState(source: source, kind: kind, real: real, startedAt: now)
        clients[c] = s
        var actions: [ConsentAction] =
            lapsed + [
                .startUsage(
                    c, stream,
                    UsageRecord(
                        appKey: app, kind: kind?.rawValue ?? Self.unknownKind,
                        source: source, startedAt: now))
            ]
        actions += noteUse(s, kind, now: now)
        actions.append(.emit(.streamStarted(c, stream, app, source: source, real: real)))
        if real { actions += firstHearing(s, kind) }
        actions += promptIfUndetermined(s, kind, source: source, now: now)
        return (real, actions)
    }

    /// The stream records from another source now (RECORD_STREAM_MOVED, or its source became
    /// known). It is decided again under the new kind; its usage row ends and a new one starts
    /// when source or kind changed. Returns whether it is real now.
    public mutating func recordStreamMoved(
        _ c: ClientID, stream: StreamID, source: String, kind: Capability?,
        now: Double
    ) -> (real: Bool, actions: [ConsentAction]) {
        guard var s = clients[c], var st = s.streams[stream] else { return (false, []) }
        guard st.source != source || st.kind != kind else { return (st.real, []) }
        let app = s.identity.appKey
        st.source = source
        st.kind = kind
        st.real = isReal(s, kind)
        s.streams[stream] = st
        clients[c] = s
        var actions: [ConsentAction] = [
            .setStreamAccess(c, stream, real: st.real),
            .splitUsage(
                c, stream,
                UsageRecord(
                    appKey: app, kind: kind?.rawValue ?? Self.unknownKind,
                    source: source, startedAt: now)),
        ]
        actions += noteUse(s, kind, now: now)
        actions.append(.emit(.streamMoved(c, stream, app, source: source, kind: kind, real: st.real)))
        if st.real { actions += firstHearing(s, kind) }
        actions += promptIfUndetermined(s, kind, source: source, now: now)
        return (st.real, actions)
    }

    /// What usage rows say of a stream whose source is not known yet.
    public static let unknownKind = "unknown"

    /// The record stream was deleted or failed.
    public mutating func recordStreamEnded(_ c: ClientID, stream: StreamID, now: Double) -> [ConsentAction] {
        guard let app = clients[c]?.identity.appKey,
            clients[c]?.streams.removeValue(forKey: stream) != nil
        else { return [] }
        return [.finishUsage(c, stream, endedAt: now), .emit(.streamEnded(c, stream, app))]
    }

    /// `noticeUse` the first time since the engine started that `s`'s app hears the microphone.
    private mutating func firstHearing(_ s: ClientState, _ kind: Capability?) -> [ConsentAction] {
        guard kind == .microphone, heardMicrophone.insert(s.identity.appKey).inserted else { return [] }
        return [.noticeUse(s.identity.appKey, executable: s.identity.executable, commandName: s.commandName)]
    }

    /// Marks the app's decision for `kind` as used now (kept even while undetermined, with the
    /// first purpose the app gave, so `apps` can show them).
    private mutating func noteUse(_ s: ClientState, _ kind: Capability?, now: Double) -> [ConsentAction] {
        guard let kind else { return [] }
        let subject = Subject(app: s.identity.appKey, kind: kind)
        var d = decisions[subject] ?? Decision(appKey: subject.app, capability: kind, state: .undetermined, reason: .none)
        d.lastUsedAt = now
        // Until a prompt shows one, keep the first purpose the app gave.
        if d.purpose == nil { d.purpose = purpose(of: s) }
        decisions[subject] = d
        return [.persistDecision(d)]
    }

    /// Raises a prompt for the app and kind unless one is pending, or it is decided, or
    /// a "once" answer covers it, or the client cannot be inspected.
    private mutating func promptIfUndetermined(
        _ s: ClientState, _ kind: Capability?, source: String,
        now: Double
    ) -> [ConsentAction] {
        guard let kind else { return [] }
        let subject = Subject(app: s.identity.appKey, kind: kind)
        guard effectiveDecision(for: subject.app, kind: kind).state == .undetermined, s.once[kind] == nil,
            pendingByApp[subject] == nil, !s.identity.isUninspectable
        else { return [] }
        return promptOrWait(s, kind: kind, source: source, now: now)
    }

    // MARK: Agents and prompts

    /// A prompt agent connected: it gets every pending prompt.
    public mutating func agentConnected(_ a: AgentID) -> [ConsentAction] {
        agents.insert(a)
        return pending.keys.sorted().compactMap { id in pending[id].map { .deliverPrompt($0.prompt, to: [a]) } }
    }

    /// A prompt agent left. When it was the last one, the prompt command takes over pending prompts.
    public mutating func agentDisconnected(_ a: AgentID) -> [ConsentAction] {
        guard agents.remove(a) != nil, agents.isEmpty, policy.hasPromptCommand else { return [] }
        var actions: [ConsentAction] = []
        for id in pending.keys.sorted() where pending[id]?.commandStarted == false {
            pending[id]?.commandStarted = true
            if let p = pending[id]?.prompt { actions.append(.runPromptCommand(p)) }
        }
        return actions
    }

    /// An agent answered, for `lifespan` (nil: `once` for `.once`, else always). The first
    /// answer wins; later ones get `.alreadyResolved`.
    public mutating func answer(
        _ p: PromptID, _ answer: PromptAnswer, lifespan: Lifespan? = nil, by agent: AgentID?,
        now: Double
    ) -> Result<[ConsentAction], ConsentError> {
        guard pending[p] != nil else {
            return .failure(p.rawValue >= 1 && p.rawValue < nextPrompt ? .alreadyResolved(p) : .unknownPrompt(p))
        }
        if let t = lifespan?.expiresAt, t <= now, let app = pending[p]?.prompt.appKey {
            return .failure(.expiryInThePast(app))
        }
        return .success(
            resolve(
                p, answer: answer, lifespan: lifespan, outcome: .answered(answer, by: agent),
                reason: .user, now: now))
    }

    /// The prompt timer fired. A prompt already closed is ignored.
    public mutating func promptTimedOut(_ p: PromptID, now: Double) -> [ConsentAction] {
        guard pending[p] != nil else { return [] }
        return resolve(p, answer: nil, outcome: .timedOut, reason: .promptTimeout, now: now)
    }

    /// The person closed the prompt without answering: it closes, the app stays undetermined
    /// (silent) and its next capture raises a new prompt. A prompt already closed is ignored.
    public mutating func promptDismissed(_ p: PromptID, now: Double) -> [ConsentAction] {
        guard pending[p] != nil else { return [] }
        return resolve(p, answer: nil, outcome: .dismissed, reason: .user, now: now)
    }

    /// The prompt command exited: 0 allow, 1 deny, anything else no answer (the prompt stays
    /// pending); the answer lasts `lifespan` (nil: always; a time already past: always too).
    public mutating func promptCommandFinished(
        _ p: PromptID, exitStatus: Int32, lifespan: Lifespan? = nil,
        now: Double
    ) -> [ConsentAction] {
        guard pending[p] != nil else { return [] }
        var span = lifespan
        if let t = span?.expiresAt, t <= now { span = nil }
        switch exitStatus {
        case 0: return resolve(p, answer: .allow, lifespan: span, outcome: .commandAnswered(.allow), reason: .promptCommand, now: now)
        case 1: return resolve(p, answer: .deny, lifespan: span, outcome: .commandAnswered(.deny), reason: .promptCommand, now: now)
        default: return [.emit(.promptCommandGaveNoAnswer(p, exitStatus: exitStatus))]
        }
    }

    // MARK: Decisions

    /// Sets an app's state for one kind from the CLI (grant, deny, reset → undetermined) for
    /// `lifespan` (reset is always lasting); reaches its live streams of that kind at once. Fails
    /// for an app whose decision apps.d fixes, "once" for an app without a connected client, and a time past.
    public mutating func setDecision(
        _ app: AppKey, kind: Capability = .microphone, _ state: PermissionState,
        reason: DecisionReason, lifespan: Lifespan = .always,
        now: Double
    ) -> Result<[ConsentAction], ConsentError> {
        if let fixed = policyDecision(app, kind) {
            return .failure(.governedByPolicy(app, fixed))
        }
        if let t = lifespan.expiresAt, t <= now { return .failure(.expiryInThePast(app)) }
        let subject = Subject(app: app, kind: kind)
        if state == .undetermined { return .success(applyDecision(subject, state, reason: reason, purpose: nil, now: now)) }
        if lifespan == .once {
            guard !clientIDs(of: app).isEmpty else { return .failure(.noClientForOnce(app)) }
            return .success(applyOnce(subject, state, reason: reason, purpose: nil, now: now))
        }
        return .success(applyDecision(subject, state, reason: reason, purpose: nil, lifespan: lifespan, now: now))
    }

    // MARK: Internals

    /// What apps.d fixes for an app and kind (`decision =` for the microphone, `system-audio-decision =`, …).
    func policyDecision(_ app: AppKey, _ kind: Capability) -> PermissionState? {
        policy.declarations[app]?.decisions[kind]
    }

    private func isReal(_ s: ClientState, _ kind: Capability?) -> Bool {
        // A source not known yet could be anything; what cannot be inspected cannot be told apart from anything else.
        guard let kind, !s.identity.isUninspectable, !accessOff.contains(kind) else { return false }
        let app = s.identity.appKey
        if let fixed = policyDecision(app, kind) { return fixed == .granted }
        if let once = s.once[kind] { return once == .granted }
        return effectiveDecision(for: app, kind: kind).state == .granted
    }

    func purpose(of s: ClientState) -> String? {
        s.launcherPurpose
            ?? Self.clean(policy.declarations[s.identity.appKey]?.purpose, limit: Self.maximumPurposeLength)
            ?? s.requestPurpose
            ?? s.propertyPurpose
    }

    func displayName(of s: ClientState) -> String {
        s.applicationName ?? s.processBinary
            ?? s.identity.executable.flatMap { $0.split(separator: "/").last.map(String.init) }
            ?? s.identity.appKey.description
    }

    func clientIDs(of app: AppKey) -> [ClientID] {
        clients.keys.filter { clients[$0]?.identity.appKey == app }.sorted()
    }

    mutating func raisePrompt(
        for s: ClientState, kind: Capability, source: String,
        now: Double
    ) -> [ConsentAction] {
        let id = PromptID(nextPrompt)
        nextPrompt += 1
        let prompt = Prompt(
            id: id, appKey: s.identity.appKey, method: s.identity.method,
            strength: s.identity.strength, caveat: s.identity.caveat,
            displayName: displayName(of: s), executable: s.identity.executable,
            pid: s.identity.pid, purpose: purpose(of: s), source: source, raisedAt: now, kind: kind,
            commandName: s.commandName)
        var actions: [ConsentAction] = [.emit(.promptRaised(prompt))]
        var commandStarted = false
        if !agents.isEmpty {
            actions.append(.deliverPrompt(prompt, to: agents.sorted()))
        } else if policy.hasPromptCommand {
            actions.append(.runPromptCommand(prompt))
            commandStarted = true
        }
        actions.append(.schedulePromptTimeout(id, after: policy.promptTimeout))
        pending[id] = PendingPrompt(
            prompt: prompt, commandStarted: commandStarted, uid: s.identity.uid,
            origin: s.identity.origin)
        pendingByApp[Subject(app: prompt.appKey, kind: kind)] = id
        return actions
    }

    /// Closes a pending prompt and applies its answer (nil: timed out) to its app and kind for
    /// `lifespan` (nil: always).
    mutating func resolve(
        _ id: PromptID, answer: PromptAnswer?, lifespan: Lifespan? = nil,
        outcome: PromptOutcome, reason: DecisionReason, now: Double
    ) -> [ConsentAction] {
        guard let prompt = pending.removeValue(forKey: id)?.prompt else { return [] }
        let subject = Subject(app: prompt.appKey, kind: prompt.kind)
        if pendingByApp[subject] == id { pendingByApp[subject] = nil }
        var actions: [ConsentAction] = [
            .closePrompt(prompt, outcome, agents: agents.sorted()),
            .emit(.promptResolved(prompt, outcome)),
        ]
        switch (answer, lifespan ?? .always) {
        case (.once, _), (.allow, .once):
            actions += applyOnce(subject, .granted, reason: reason, purpose: prompt.purpose, now: now)
        case (.deny, .once):
            actions += applyOnce(subject, .denied, reason: reason, purpose: prompt.purpose, now: now)
        case let (.allow, span):
            actions += applyDecision(subject, .granted, reason: reason, purpose: prompt.purpose, lifespan: span, now: now)
        case let (.deny, span):
            actions += applyDecision(subject, .denied, reason: reason, purpose: prompt.purpose, lifespan: span, now: now)
        case (nil, _):
            // Superseded: the decision that settled the app is recorded by whoever made it.
            if outcome == .timedOut {
                actions += recordUndetermined(subject, reason: .promptTimeout, purpose: prompt.purpose, now: now)
            }
        }
        // A prompt withdrawn to make room is replaced by the capture that asked for it.
        if outcome != .withdrawn { actions += promoteWaiting(now: now) }
        return actions
    }

    /// Makes the app's connected clients real (granted) or silent (denied) until each disconnects,
    /// over its other decisions; records reason user-once when the app is otherwise undetermined.
    private mutating func applyOnce(
        _ subject: Subject, _ state: PermissionState, reason: DecisionReason, purpose: String?,
        now: Double
    ) -> [ConsentAction] {
        for c in clientIDs(of: subject.app) { clients[c]?.once[subject.kind] = state }
        var actions: [ConsentAction] = []
        if effectiveDecision(for: subject.app, kind: subject.kind).state == .undetermined {
            actions += recordUndetermined(subject, reason: .userOnce, purpose: purpose, now: now)
        }
        if let id = pendingByApp[subject] {
            actions += resolve(id, answer: nil, outcome: .superseded(state), reason: reason, now: now)
        }
        return actions + refreshStreams(of: subject.app)
    }

    /// Stores an answer that leaves the app undetermined (once, timeout), unless a decision exists.
    private mutating func recordUndetermined(
        _ subject: Subject, reason: DecisionReason, purpose: String?,
        now: Double
    ) -> [ConsentAction] {
        var d =
            decisions[subject]
            ?? Decision(appKey: subject.app, capability: subject.kind, state: .undetermined, reason: .none)
        guard d.state == .undetermined else { return [] }
        d.reason = reason
        d.decidedAt = now
        if let purpose { d.purpose = purpose }
        decisions[subject] = d
        return [.persistDecision(d), .emit(.decisionChanged(d))]
    }

    /// Stores a state for `lifespan` (always, session or until a time; reset is always), clears
    /// the layers over it, closes a pending prompt it settles, and flips live streams.
    private mutating func applyDecision(
        _ subject: Subject, _ state: PermissionState, reason: DecisionReason,
        purpose: String?, lifespan: Lifespan = .always, now: Double
    ) -> [ConsentAction] {
        var actions: [ConsentAction] = []
        // The newest decision wins: "once" answers of the app's clients for this kind end with it.
        for c in clientIDs(of: subject.app) { clients[c]?.once[subject.kind] = nil }
        if lifespan == .always || state == .undetermined {
            if temporary.removeValue(forKey: subject)?.lifespan.expiresAt != nil {
                actions.append(.removeTimedDecision(subject.app, subject.kind))
            }
            var d =
                decisions[subject]
                ?? Decision(appKey: subject.app, capability: subject.kind, state: state, reason: reason)
            d.state = state
            d.reason = reason
            d.decidedAt = now
            if let purpose { d.purpose = purpose }
            decisions[subject] = d
            actions += [.persistDecision(d), .emit(.decisionChanged(d))]
        } else {
            let d = Decision(
                appKey: subject.app, capability: subject.kind, state: state, reason: reason,
                purpose: purpose ?? decisions[subject]?.purpose, decidedAt: now, lifespan: lifespan)
            if temporary.updateValue(d, forKey: subject)?.lifespan.expiresAt != nil, lifespan.expiresAt == nil {
                actions.append(.removeTimedDecision(subject.app, subject.kind))
            }
            if lifespan.expiresAt != nil { actions.append(.persistDecision(d)) }
            actions.append(.emit(.decisionChanged(d)))
        }
        if state != .undetermined, let id = pendingByApp[subject] {
            // The app is no longer undetermined, so closing records nothing more.
            actions += resolve(id, answer: nil, outcome: .superseded(state), reason: reason, now: now)
        }
        actions += refreshStreams(of: subject.app)
        return actions
    }

    /// Recomputes every live stream of `app`; returns the flips.
    mutating func refreshStreams(of app: AppKey) -> [ConsentAction] {
        var actions: [ConsentAction] = []
        for c in clientIDs(of: app) {
            guard var s = clients[c] else { continue }
            for id in s.streams.keys.sorted() {
                guard let kind = s.streams[id]?.kind else { continue }
                let real = isReal(s, kind)
                guard s.streams[id]?.real != real else { continue }
                s.streams[id]?.real = real
                actions.append(.setStreamAccess(c, id, real: real))
                actions.append(.emit(.streamAccessChanged(c, id, app, real: real)))
                if real { actions += firstHearing(s, kind) }
            }
            clients[c] = s
        }
        return actions
    }

    /// Trims a claimed string, drops control and format characters (terminal escapes,
    /// bidi overrides) and caps its length; nil when nothing is left.
    static func clean(_ text: String?, limit: Int) -> String? {
        guard let text else { return nil }
        var out = String.UnicodeScalarView()
        for u in text.unicodeScalars {
            switch u.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator:
                out.append(" ")
            default:
                out.append(u)
            }
        }
        let trimmed = String(out).trimmingWhitespace()
        guard !trimmed.isEmpty else { return nil }
        return trimmed.count > limit ? String(trimmed.prefix(limit)) + "…" : trimmed
    }
}
