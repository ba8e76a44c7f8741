import Testing
@testable import Consent

private let recorder = AppKey(kind: "exe", value: "/usr/bin/arecord")
private let notes = AppKey(kind: "launcher", value: "org.example.Notes")

private func makeIdentity(_ app: AppKey, pid: Int32 = 100) -> ClientIdentity {
    ClientIdentity(
        pid: pid, uid: 1000, gid: 1000, appKey: app,
        method: app.kind == "launcher" ? .launcher : .executable,
        executable: app.kind == "exe" ? app.value : "/usr/bin/notes")
}

private let c1 = ClientID(1), c2 = ClientID(2), c3 = ClientID(3)
private let s1 = StreamID(1), s2 = StreamID(2)
private let a1 = AgentID(1), a2 = AgentID(2)

/// An engine whose clients declare a purpose unless told otherwise.
private func engine(_ policy: ConsentPolicy = ConsentPolicy(), decisions: [Decision] = []) -> ConsentEngine {
    ConsentEngine(policy: policy, decisions: decisions)
}

extension ConsentEngine {
    /// Connects `c` as `app` with a launcher purpose (or none).
    mutating func connect(_ c: ClientID, _ app: AppKey, purpose: String? = "Dictation", now: Double = 0) {
        _ = clientConnected(c, identity: makeIdentity(app, pid: Int32(c.rawValue) + 100), launcherPurpose: purpose, now: now)
    }

    /// Requests and starts a record stream; returns (admitted, real, actions of both steps).
    mutating func record(_ c: ClientID, _ s: StreamID, now: Double = 1) -> (admitted: Bool, real: Bool, actions: [ConsentAction]) {
        let admission = recordStreamRequested(c, now: now)
        guard admission.proceed else { return (false, false, admission.actions) }
        let started = recordStreamStarted(c, stream: s, source: "alsa_input.pci-0000_00_1f.3.analog-stereo", kind: .microphone, now: now)
        return (true, started.real, admission.actions + started.actions)
    }
}

func prompts(in actions: [ConsentAction]) -> [Prompt] {
    actions.compactMap { if case let .emit(.promptRaised(p)) = $0 { p } else { nil } }
}

private func deliveries(in actions: [ConsentAction]) -> [(PromptID, [AgentID])] {
    actions.compactMap { if case let .deliverPrompt(p, to) = $0 { (p.id, to) } else { nil } }
}

private func flips(in actions: [ConsentAction]) -> [ConsentAction] {
    actions.filter { if case .setStreamAccess = $0 { true } else { false } }
}

private func persisted(in actions: [ConsentAction]) -> [Decision] {
    actions.compactMap { if case let .persistDecision(d) = $0 { d } else { nil } }
}

private func closed(in actions: [ConsentAction]) -> [(PromptID, PromptOutcome, [AgentID])] {
    actions.compactMap { if case let .closePrompt(p, o, agents) = $0 { (p.id, o, agents) } else { nil } }
}

@Suite struct FirstRecording {
    @Test func undeterminedStartsSilentAndRaisesOnePrompt() throws {
        var e = engine(ConsentPolicy(promptTimeout: 45))
        _ = e.agentConnected(a1)
        _ = e.agentConnected(a2)
        e.connect(c1, recorder, now: 10)
        _ = e.clientPropertiesChanged(
            c1, applicationName: "Voice \u{1b}[31mRecorder\u{202e}", processBinary: "arecord",
            capturePurpose: nil, now: 10)
        let r = e.record(c1, s1, now: 11)
        #expect(r.admitted && !r.real)
        let raised = prompts(in: r.actions)
        #expect(raised.count == 1)
        let p = try #require(raised.first)
        #expect(p.appKey == recorder && p.method == .executable && p.pid == 101)
        #expect(p.displayName == "Voice  [31mRecorder")
        #expect(p.purpose == "Dictation")
        #expect(p.source == "alsa_input.pci-0000_00_1f.3.analog-stereo")
        #expect(p.raisedAt == 11)
        #expect(p.executable == "/usr/bin/arecord")
        #expect(deliveries(in: r.actions).map(\.1) == [[a1, a2]])
        #expect(r.actions.contains(.schedulePromptTimeout(p.id, after: 45)))
        #expect(r.actions.contains(.emit(.streamStarted(c1, s1, recorder, source: p.source, real: false))))
        #expect(r.actions.contains(.startUsage(c1, s1, UsageRecord(appKey: recorder, source: p.source, startedAt: 11))))
        #expect(persisted(in: r.actions).map(\.lastUsedAt) == [11])
        #expect(e.isStreamReal(c1, s1) == false)
        #expect(e.pendingPrompts == [p])
        #expect(e.effectiveDecision(for: recorder) == EffectiveDecision(state: .undetermined, reason: .none))
    }

    @Test func grantedStartsRealWithoutPrompt() {
        var e = engine(decisions: [Decision(appKey: recorder, state: .granted, reason: .user, decidedAt: 1)])
        e.connect(c1, recorder)
        let r = e.record(c1, s1)
        #expect(r.real)
        #expect(prompts(in: r.actions).isEmpty)
        #expect(e.pendingPrompts.isEmpty)
    }

    /// The first time an app hears the microphone (at start, or when a grant reaches a live
    /// stream), one notice; none for its other streams and clients, none for silence, none
    /// for system audio, and none again once it was noticed.
    @Test func anAppIsNoticedOnceWhenItFirstHearsTheMicrophone() throws {
        func notices(_ actions: [ConsentAction]) -> [AppKey] {
            actions.compactMap { if case let .noticeUse(app, _, _) = $0 { app } else { nil } }
        }
        var e = engine(decisions: [Decision(appKey: recorder, state: .granted, reason: .user, decidedAt: 1)])
        e.connect(c1, recorder)
        e.connect(c2, recorder)
        e.connect(c3, notes)
        #expect(notices(e.record(c1, s1).actions) == [recorder])
        #expect(notices(e.record(c1, s2).actions).isEmpty && notices(e.record(c2, s1).actions).isEmpty)
        #expect(notices(e.record(c3, s1).actions).isEmpty) // undetermined: silent
        _ = e.recordStreamStarted(c3, stream: s2, source: "out.monitor", kind: .systemAudio, now: 2)
        let granted = try e.setDecision(notes, kind: .systemAudio, .granted, reason: .user, now: 3).get()
        #expect(notices(granted).isEmpty) // system audio
        let grantedMic = try e.setDecision(notes, .granted, reason: .user, now: 4).get()
        #expect(notices(grantedMic) == [notes])
        _ = try e.setDecision(notes, .denied, reason: .user, now: 5).get()
        #expect(notices(try e.setDecision(notes, .granted, reason: .user, now: 6).get()).isEmpty)
    }

    @Test func deniedStartsSilentWithoutPrompt() {
        var e = engine(decisions: [Decision(appKey: recorder, state: .denied, reason: .user)])
        e.connect(c1, recorder)
        let r = e.record(c1, s1)
        #expect(r.admitted && !r.real)
        #expect(prompts(in: r.actions).isEmpty)
    }

    @Test func coalescedPerAppAcrossClientsAndStreams() {
        var e = engine()
        _ = e.agentConnected(a1)
        e.connect(c1, recorder)
        e.connect(c2, recorder)
        e.connect(c3, notes)
        #expect(prompts(in: e.record(c1, s1).actions).count == 1)
        #expect(prompts(in: e.record(c1, s2).actions).isEmpty)
        #expect(prompts(in: e.record(c2, s1).actions).isEmpty)
        #expect(prompts(in: e.record(c3, s1).actions).count == 1) // another app
        #expect(e.pendingPrompts.map(\.appKey) == [recorder, notes])
        #expect(e.pendingPrompts.map(\.id) == [PromptID(1), PromptID(2)])
    }

    @Test func noAgentNoCommandStillSchedulesTimeout() {
        var e = engine()
        e.connect(c1, recorder)
        let r = e.record(c1, s1)
        #expect(deliveries(in: r.actions).isEmpty)
        #expect(!r.actions.contains { if case .runPromptCommand = $0 { true } else { false } })
        #expect(r.actions.contains(.schedulePromptTimeout(PromptID(1), after: 30)))
    }

    @Test func unknownClientIsRefused() {
        var e = engine()
        let a = e.recordStreamRequested(c1, now: 0)
        #expect(!a.proceed)
        #expect(e.recordStreamStarted(c1, stream: s1, source: "", kind: .microphone, now: 0).real == false)
        #expect(e.recordStreamEnded(c1, stream: s1, now: 0).isEmpty)
        #expect(e.clientDisconnected(c1, now: 0).isEmpty)
    }
}

@Suite struct Answers {
    private func pendingEngine() -> ConsentEngine {
        var e = engine()
        _ = e.agentConnected(a1)
        _ = e.agentConnected(a2)
        e.connect(c1, recorder)
        e.connect(c2, recorder)
        e.connect(c3, notes)
        _ = e.record(c1, s1)
        _ = e.record(c1, s2)
        _ = e.record(c2, s1)
        _ = e.record(c3, s1)
        return e
    }

    @Test func allowPersistsAndFlipsEveryLiveStreamOfTheApp() throws {
        var e = pendingEngine()
        let actions = try e.answer(PromptID(1), .allow, by: a2, now: 50).get()
        #expect(
            flips(in: actions) == [
                .setStreamAccess(c1, s1, real: true), .setStreamAccess(c1, s2, real: true),
                .setStreamAccess(c2, s1, real: true),
            ])
        let d = try #require(persisted(in: actions).first)
        #expect(d.appKey == recorder && d.state == .granted && d.reason == .user && d.decidedAt == 50)
        #expect(d.purpose == "Dictation")
        #expect(closed(in: actions).count == 1)
        #expect(closed(in: actions).first?.1 == .answered(.allow, by: a2))
        #expect(closed(in: actions).first?.2 == [a1, a2])
        #expect(actions.contains(.emit(.decisionChanged(d))))
        #expect(e.isStreamReal(c3, s1) == false) // the other app is untouched
        #expect(e.effectiveDecision(for: recorder) == EffectiveDecision(state: .granted, reason: .user))
        // New clients and streams of the app start real.
        e.connect(ClientID(9), recorder)
        #expect(e.record(ClientID(9), s1).real)
    }

    @Test func firstAnswerWins() throws {
        var e = pendingEngine()
        _ = try e.answer(PromptID(1), .deny, by: a1, now: 5).get()
        #expect(e.answer(PromptID(1), .allow, by: a2, now: 6) == .failure(.alreadyResolved(PromptID(1))))
        #expect(e.answer(PromptID(99), .allow, by: a2, now: 6) == .failure(.unknownPrompt(PromptID(99))))
        #expect(e.answer(PromptID(0), .allow, by: a2, now: 6) == .failure(.unknownPrompt(PromptID(0))))
        #expect(e.effectiveDecision(for: recorder) == EffectiveDecision(state: .denied, reason: .user))
        #expect(e.isStreamReal(c1, s1) == false)
        #expect(e.pendingPrompts.map(\.appKey) == [notes])
    }

    @Test func denyPersistsAndStaysSilent() throws {
        var e = pendingEngine()
        let actions = try e.answer(PromptID(1), .deny, by: nil, now: 5).get()
        #expect(flips(in: actions).isEmpty)
        #expect(persisted(in: actions).map(\.state) == [.denied])
        // No second prompt for a denied app.
        e.connect(ClientID(7), recorder)
        #expect(prompts(in: e.record(ClientID(7), s1).actions).isEmpty)
    }

    @Test func onceCoversClientsConnectedNowUntilTheyDisconnect() throws {
        var e = pendingEngine()
        let actions = try e.answer(PromptID(1), .once, by: a1, now: 5).get()
        #expect(flips(in: actions).count == 3)
        let stored = persisted(in: actions)
        #expect(stored.map(\.state) == [.undetermined])
        #expect(stored.map(\.reason) == [.userOnce])
        #expect(e.effectiveDecision(for: recorder).state == .undetermined)
        // A new stream of a covered client is real and raises nothing.
        let again = e.record(c1, StreamID(3))
        #expect(again.real && prompts(in: again.actions).isEmpty)
        // A client that connects later is not covered: silent, and prompts again.
        e.connect(ClientID(8), recorder)
        let late = e.record(ClientID(8), s1)
        #expect(!late.real)
        #expect(prompts(in: late.actions).count == 1)
        // c2 stays real while c1 disconnects; a reconnect of the same process is a new client.
        _ = e.clientDisconnected(c1, now: 9)
        #expect(e.isStreamReal(c2, s1) == true)
        e.connect(c1, recorder)
        #expect(e.record(c1, s1).real == false)
    }

    @Test func onceIsRevokedByDenyAndReset() throws {
        var e = pendingEngine()
        _ = try e.answer(PromptID(1), .once, by: a1, now: 5).get()
        let reset = try e.setDecision(recorder, .undetermined, reason: .reset, now: 6).get()
        #expect(
            flips(in: reset) == [
                .setStreamAccess(c1, s1, real: false), .setStreamAccess(c1, s2, real: false),
                .setStreamAccess(c2, s1, real: false),
            ])
        #expect(e.clientSnapshots.filter(\.grantedOnce).isEmpty)
    }

    @Test func answerClosesForEveryAgentAndLogsEvent() throws {
        var e = pendingEngine()
        let actions = try e.answer(PromptID(2), .allow, by: a1, now: 5).get()
        #expect(actions.contains { if case .emit(.promptResolved(let p, .answered(.allow, by: a1))) = $0 { p.appKey == notes } else { false } })
    }
}

@Suite struct Agents {
    @Test func laterAgentGetsPendingPrompts() {
        var e = engine()
        e.connect(c1, recorder)
        e.connect(c2, notes)
        _ = e.record(c1, s1)
        _ = e.record(c2, s1)
        let actions = e.agentConnected(a1)
        #expect(deliveries(in: actions).map(\.0) == [PromptID(1), PromptID(2)])
        #expect(deliveries(in: actions).allSatisfy { $0.1 == [a1] })
        #expect(e.connectedAgents == [a1])
        // Disconnected agents no longer receive prompts.
        _ = e.agentDisconnected(a1)
        e.connect(c3, AppKey(kind: "exe", value: "/usr/bin/parecord"))
        #expect(deliveries(in: e.record(c3, s1).actions).isEmpty)
    }

    @Test func resolvedPromptsAreNotRedelivered() throws {
        var e = engine()
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        _ = try e.answer(PromptID(1), .deny, by: nil, now: 2).get()
        #expect(e.agentConnected(a1).isEmpty)
    }
}

@Suite struct PromptCommand {
    private let policy = ConsentPolicy(hasPromptCommand: true)

    @Test func runsWhenNoAgent() throws {
        var e = engine(policy)
        e.connect(c1, recorder)
        let r = e.record(c1, s1)
        let p = try #require(prompts(in: r.actions).first)
        #expect(r.actions.contains(.runPromptCommand(p)))
        #expect(deliveries(in: r.actions).isEmpty)
    }

    @Test func notRunWhenAnAgentIsConnected() {
        var e = engine(policy)
        _ = e.agentConnected(a1)
        e.connect(c1, recorder)
        let r = e.record(c1, s1)
        #expect(!r.actions.contains { if case .runPromptCommand = $0 { true } else { false } })
    }

    @Test func exitZeroAllowsExitOneDenies() throws {
        var e = engine(policy)
        e.connect(c1, recorder)
        e.connect(c2, notes)
        _ = e.record(c1, s1)
        _ = e.record(c2, s1)
        let allow = e.promptCommandFinished(PromptID(1), exitStatus: 0, now: 3)
        #expect(persisted(in: allow).map(\.state) == [.granted])
        #expect(persisted(in: allow).map(\.reason) == [.promptCommand])
        #expect(flips(in: allow) == [.setStreamAccess(c1, s1, real: true)])
        #expect(closed(in: allow).first?.1 == .commandAnswered(.allow))
        let deny = e.promptCommandFinished(PromptID(2), exitStatus: 1, now: 3)
        #expect(persisted(in: deny).map(\.state) == [.denied])
        // A late exit for a closed prompt is ignored.
        #expect(e.promptCommandFinished(PromptID(1), exitStatus: 1, now: 4).isEmpty)
        #expect(e.effectiveDecision(for: recorder).state == .granted)
    }

    @Test func otherExitLeavesThePromptPending() throws {
        var e = engine(policy)
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        #expect(
            e.promptCommandFinished(PromptID(1), exitStatus: 127, now: 3)
                == [.emit(.promptCommandGaveNoAnswer(PromptID(1), exitStatus: 127))])
        #expect(e.pendingPrompts.count == 1)
        // An agent can still answer it.
        #expect(deliveries(in: e.agentConnected(a1)).count == 1)
        #expect(try flips(in: e.answer(PromptID(1), .allow, by: a1, now: 4).get()).count == 1)
    }

    @Test func lastAgentLeavingHandsPendingPromptsToTheCommand() throws {
        var e = engine(policy)
        _ = e.agentConnected(a1)
        _ = e.agentConnected(a2)
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        #expect(e.agentDisconnected(a1).isEmpty)
        let actions = e.agentDisconnected(a2)
        #expect(actions.count == 1)
        guard case let .runPromptCommand(p) = try #require(actions.first) else {
            Issue.record("expected runPromptCommand")
            return
        }
        #expect(p.id == PromptID(1))
        // Not started twice.
        _ = e.agentConnected(a1)
        #expect(e.agentDisconnected(a1).isEmpty)
    }

    @Test func withoutCommandAgentLeavingDoesNothing() {
        var e = engine()
        _ = e.agentConnected(a1)
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        #expect(e.agentDisconnected(a1).isEmpty)
        #expect(e.agentDisconnected(a2).isEmpty)
    }
}

@Suite struct Timeouts {
    @Test func timeoutLeavesUndeterminedAndNextStreamRaisesAgain() throws {
        var e = engine()
        _ = e.agentConnected(a1)
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        let t = e.promptTimedOut(PromptID(1), now: 31)
        #expect(closed(in: t).map(\.1) == [.timedOut])
        #expect(flips(in: t).isEmpty)
        let d = try #require(persisted(in: t).first)
        #expect(d.state == .undetermined && d.reason == .promptTimeout && d.decidedAt == 31)
        #expect(e.pendingPrompts.isEmpty)
        #expect(e.isStreamReal(c1, s1) == false)
        // The same live stream does not re-raise; the next stream does.
        #expect(e.answer(PromptID(1), .allow, by: a1, now: 32) == .failure(.alreadyResolved(PromptID(1))))
        let again = e.record(c1, s2, now: 40)
        #expect(prompts(in: again.actions).map(\.id) == [PromptID(2)])
    }

    @Test func staleTimerIsIgnored() throws {
        var e = engine()
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        _ = try e.answer(PromptID(1), .allow, by: nil, now: 2).get()
        #expect(e.promptTimedOut(PromptID(1), now: 31).isEmpty)
        #expect(e.promptTimedOut(PromptID(42), now: 31).isEmpty)
        #expect(e.effectiveDecision(for: recorder).state == .granted)
    }
}

@Suite struct CommandLineDecisions {
    @Test func grantReachesLiveStreamsAndClosesThePrompt() throws {
        var e = engine()
        _ = e.agentConnected(a1)
        e.connect(c1, recorder)
        e.connect(c2, recorder)
        _ = e.record(c1, s1)
        _ = e.record(c2, s2)
        let actions = try e.setDecision(recorder, .granted, reason: .user, now: 7).get()
        #expect(flips(in: actions) == [.setStreamAccess(c1, s1, real: true), .setStreamAccess(c2, s2, real: true)])
        #expect(closed(in: actions).map(\.1) == [.superseded(.granted)])
        #expect(closed(in: actions).map(\.2) == [[a1]])
        #expect(persisted(in: actions).count == 1)
        #expect(e.pendingPrompts.isEmpty)
        #expect(e.answer(PromptID(1), .deny, by: a1, now: 8) == .failure(.alreadyResolved(PromptID(1))))
    }

    @Test func denyThenResetSilencesAndPromptsAgain() throws {
        var e = engine(decisions: [Decision(appKey: recorder, state: .granted, reason: .user)])
        e.connect(c1, recorder)
        #expect(e.record(c1, s1).real)
        let deny = try e.setDecision(recorder, .denied, reason: .user, now: 3).get()
        #expect(flips(in: deny) == [.setStreamAccess(c1, s1, real: false)])
        #expect(deny.contains(.emit(.streamAccessChanged(c1, s1, recorder, real: false))))
        let reset = try e.setDecision(recorder, .undetermined, reason: .reset, now: 4).get()
        #expect(flips(in: reset).isEmpty)
        #expect(persisted(in: reset).map(\.reason) == [.reset])
        #expect(prompts(in: e.record(c1, s2).actions).count == 1)
    }

    @Test func resetKeepsAPendingPrompt() throws {
        var e = engine()
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        let reset = try e.setDecision(recorder, .undetermined, reason: .reset, now: 4).get()
        #expect(closed(in: reset).isEmpty)
        #expect(e.pendingPrompts.count == 1)
    }

    @Test func unseenAppCanBeDecided() throws {
        var e = engine()
        let spy = AppKey(kind: "flatpak", value: "org.example.Spy")
        let actions = try e.setDecision(spy, .denied, reason: .user, now: 1).get()
        #expect(persisted(in: actions).map(\.appKey) == [spy])
        #expect(e.storedDecisions.map(\.appKey) == [spy])
    }
}

@Suite struct AdminPolicy {
    private let policy = ConsentPolicy(declarations: [
        recorder: AppDeclaration(purpose: "Records memos", decision: .granted),
        notes: AppDeclaration(purpose: nil, decision: .denied),
    ])

    @Test func policyWinsOverStoredDecisions() {
        var e = engine(
            policy,
            decisions: [
                Decision(appKey: recorder, state: .denied, reason: .user),
                Decision(appKey: notes, state: .granted, reason: .user),
            ])
        e.connect(c1, recorder, purpose: nil)
        e.connect(c2, notes, purpose: nil)
        let rec = e.record(c1, s1)
        #expect(rec.admitted && rec.real)
        let note = e.record(c2, s1)
        #expect(note.admitted && !note.real) // denied apps need no purpose either
        #expect(prompts(in: rec.actions + note.actions).isEmpty)
        #expect(e.effectiveDecision(for: recorder) == EffectiveDecision(state: .granted, reason: .adminPolicy))
        #expect(e.effectiveDecision(for: notes) == EffectiveDecision(state: .denied, reason: .adminPolicy))
    }

    @Test func userCannotOverridePolicy() {
        var e = engine(policy)
        #expect(e.setDecision(recorder, .denied, reason: .user, now: 1) == .failure(.governedByPolicy(recorder, .granted)))
        #expect(ConsentError.governedByPolicy(recorder, .granted).description.contains("apps.d"))
        #expect(e.storedDecisions.isEmpty)
    }

    @Test func declaredPurposeIsUsedBetweenLauncherAndProperty() throws {
        let key = AppKey(kind: "exe", value: "/usr/bin/parecord")
        var e = engine(ConsentPolicy(declarations: [key: AppDeclaration(purpose: "From apps.d")]))
        e.connect(c1, key, purpose: nil)
        _ = e.clientPropertiesChanged(c1, applicationName: nil, processBinary: nil, capturePurpose: "From property", now: 0)
        let p = try #require(prompts(in: e.record(c1, s1).actions).first)
        #expect(p.purpose == "From apps.d")
        e.connect(c2, key, purpose: "From launcher")
        #expect(e.clientSnapshots.first { $0.id == c2 }?.purpose == "From launcher")
    }

    @Test func configurationBuildsPolicy() {
        var c = Configuration()
        c.missingPurpose = .deny
        c.promptTimeout = 12
        c.promptCommand = "  "
        let p = ConsentPolicy(configuration: c, declarations: [:])
        #expect(p.missingPurpose == .deny && p.promptTimeout == 12 && !p.hasPromptCommand)
        c.promptCommand = "zenity --question"
        #expect(ConsentPolicy(configuration: c, declarations: [:]).hasPromptCommand)
    }
}

@Suite struct MissingPurpose {
    @Test func promptByDefault() throws {
        #expect(ConsentPolicy().missingPurpose == .prompt)
        var e = engine()
        e.connect(c1, recorder, purpose: nil)
        let r = e.record(c1, s1)
        #expect(r.admitted && !r.real)
        #expect(try #require(prompts(in: r.actions).first).purpose == nil)
    }

    @Test func disconnectModeRefuses() throws {
        var e = engine(ConsentPolicy(missingPurpose: .disconnect))
        e.connect(c1, recorder, purpose: nil)
        let a = e.recordStreamRequested(c1, now: 1)
        #expect(!a.proceed)
        guard case let .disconnectClient(c, reason) = a.actions.last else {
            Issue.record("expected disconnectClient, got \(a.actions)")
            return
        }
        #expect(c == c1)
        #expect(reason.hasPrefix("missing-purpose: exe:/usr/bin/arecord"))
        #expect(a.actions.contains(.emit(.clientRefused(c1, recorder, reason: reason))))
        #expect(e.pendingPrompts.isEmpty)
        let gone = e.clientDisconnected(c1, now: 2)
        #expect(gone == [.emit(.clientDisconnected(c1, recorder))])
    }

    @Test func propertyPurposeSuffices() {
        var e = engine(ConsentPolicy(missingPurpose: .disconnect))
        e.connect(c1, recorder, purpose: nil)
        _ = e.clientPropertiesChanged(c1, applicationName: "rec", processBinary: nil, capturePurpose: "Voice memos", now: 0)
        #expect(e.recordStreamRequested(c1, now: 1).proceed)
    }

    @Test func blankPurposeCountsAsMissing() {
        var e = engine(ConsentPolicy(missingPurpose: .disconnect))
        e.connect(c1, recorder, purpose: "  \n")
        _ = e.clientPropertiesChanged(c1, applicationName: nil, processBinary: nil, capturePurpose: "\u{7}", now: 0)
        #expect(!e.recordStreamRequested(c1, now: 1).proceed)
    }

    @Test func denyModePersistsDenied() throws {
        var e = engine(ConsentPolicy(missingPurpose: .deny))
        _ = e.agentConnected(a1)
        e.connect(c1, recorder, purpose: nil)
        let r = e.record(c1, s1, now: 3)
        #expect(r.admitted && !r.real)
        let d = try #require(persisted(in: r.actions).first)
        #expect(d.state == .denied && d.reason == .missingPurpose && d.decidedAt == 3)
        #expect(prompts(in: r.actions).isEmpty)
        #expect(e.effectiveDecision(for: recorder) == EffectiveDecision(state: .denied, reason: .missingPurpose))
    }

    @Test func promptModePromptsWithoutPurpose() throws {
        var e = engine(ConsentPolicy(missingPurpose: .prompt))
        e.connect(c1, recorder, purpose: nil)
        let r = e.record(c1, s1)
        #expect(r.admitted && !r.real)
        #expect(try #require(prompts(in: r.actions).first).purpose == nil)
    }

    @Test func decidedAppsRecordRegardlessOfPurpose() {
        var e = engine(decisions: [
            Decision(appKey: recorder, state: .granted, reason: .user),
            Decision(appKey: notes, state: .denied, reason: .user),
        ])
        e.connect(c1, recorder, purpose: nil)
        e.connect(c2, notes, purpose: nil)
        #expect(e.record(c1, s1).real)
        let n = e.record(c2, s1)
        #expect(n.admitted && !n.real)
    }

    @Test func onceCoveredClientNeedsNoPurpose() throws {
        var e = engine()
        e.connect(c1, recorder, purpose: "Dictation")
        _ = e.record(c1, s1)
        _ = try e.answer(PromptID(1), .once, by: nil, now: 2).get()
        // Only c1 is covered, and a purpose cannot be withdrawn from c1 anyway; check the rule directly.
        _ = e.clientPropertiesChanged(c1, applicationName: nil, processBinary: nil, capturePurpose: nil, now: 2)
        #expect(e.recordStreamRequested(c1, now: 3).proceed)
    }
}

@Suite struct Lifecycle {
    @Test func disconnectEndsStreamsAndUsage() {
        var e = engine()
        e.connect(c1, recorder)
        _ = e.record(c1, s2)
        _ = e.record(c1, s1)
        let actions = e.clientDisconnected(c1, now: 9)
        #expect(
            actions == [
                .finishUsage(c1, s1, endedAt: 9), .emit(.streamEnded(c1, s1, recorder)),
                .finishUsage(c1, s2, endedAt: 9), .emit(.streamEnded(c1, s2, recorder)),
                .emit(.clientDisconnected(c1, recorder)),
            ])
        #expect(e.streamSnapshots.isEmpty && e.clientSnapshots.isEmpty)
        // The prompt outlives the client; its answer is stored for next time.
        #expect(e.pendingPrompts.count == 1)
    }

    @Test func streamEnd() {
        var e = engine()
        e.connect(c1, recorder)
        _ = e.record(c1, s1)
        #expect(
            e.recordStreamEnded(c1, stream: s1, now: 4) == [
                .finishUsage(c1, s1, endedAt: 4),
                .emit(.streamEnded(c1, s1, recorder)),
            ])
        #expect(e.recordStreamEnded(c1, stream: s1, now: 4).isEmpty)
        #expect(e.isStreamReal(c1, s1) == nil)
    }

    @Test func connectRecordsAppAndEvent() {
        var e = engine()
        let id = makeIdentity(recorder)
        let actions = e.clientConnected(c1, identity: id, launcherPurpose: nil, now: 5)
        #expect(
            actions == [
                .recordApp(
                    AppRecord(
                        appKey: recorder, displayName: nil, executable: "/usr/bin/arecord",
                        method: .executable, firstSeenAt: 5, lastSeenAt: 5)),
                .emit(.clientConnected(c1, id)),
            ])
        #expect(e.identity(of: c1) == id)
    }

    @Test func displayNameUpdatesRecordTheApp() {
        var e = engine()
        e.connect(c1, recorder, now: 1)
        #expect(e.clientSnapshots.first?.displayName == "arecord")
        let a = e.clientPropertiesChanged(c1, applicationName: "Sound Recorder", processBinary: nil, capturePurpose: nil, now: 2)
        #expect(
            a == [
                .recordApp(
                    AppRecord(
                        appKey: recorder, displayName: "Sound Recorder", executable: "/usr/bin/arecord",
                        method: .executable, firstSeenAt: 1, lastSeenAt: 2))
            ])
        #expect(e.clientPropertiesChanged(c1, applicationName: "Sound Recorder", processBinary: nil, capturePurpose: nil, now: 3).isEmpty)
        #expect(e.clientPropertiesChanged(ClientID(77), applicationName: "x", processBinary: nil, capturePurpose: nil, now: 3).isEmpty)
    }

    @Test func snapshots() throws {
        var e = engine(decisions: [Decision(appKey: notes, state: .granted, reason: .user)])
        e.connect(c2, notes, now: 1)
        e.connect(c1, recorder, now: 2)
        _ = e.record(c2, s1, now: 3)
        _ = e.record(c1, s1, now: 4)
        #expect(e.clientSnapshots.map(\.id) == [c1, c2])
        #expect(e.streamSnapshots.map(\.real) == [false, true])
        #expect(e.streamSnapshots.map(\.appKey) == [recorder, notes])
        #expect(e.storedDecisions.map(\.appKey) == [recorder, notes]) // sorted; recorder has lastUsed only
        #expect(e.storedDecisions.first?.state == .undetermined)
    }

    @Test func cleanCapsAndStrips() {
        #expect(ConsentEngine.clean("  a\u{0}b\nc  ", limit: 10) == "a b c")
        #expect(ConsentEngine.clean(String(repeating: "x", count: 20), limit: 5) == "xxxxx…")
        #expect(ConsentEngine.clean("\u{200b}", limit: 5) == nil)
        #expect(ConsentEngine.clean(nil, limit: 5) == nil)
    }
}

/// `earmuff apps` lists apps that recorded, asked or have a decision; tools that only connect
/// (pactl, pw-cli, pw-metadata) are known, never listed.
@Suite struct ListedApps {
    private let pactl = AppKey(kind: "exe", value: "/usr/bin/pactl")
    private let asker = AppKey(kind: "exe", value: "/usr/bin/asker")
    private let declared = AppKey(kind: "exe", value: "/usr/bin/declared")
    private let described = AppKey(kind: "exe", value: "/usr/bin/described")

    @Test func onlyAppsThatRecordedAskedOrAreDecidedAreListed() throws {
        let policy = ConsentPolicy(declarations: [
            declared: AppDeclaration(decisions: [.systemAudio: .denied]),
            described: AppDeclaration(purpose: "Only a purpose"),
        ])
        var e = engine(policy, decisions: [Decision(appKey: notes, state: .granted, reason: .user)])
        e.connect(c1, pactl)
        #expect(e.knownApp(pactl) != nil, "a client that connected is known")
        #expect(e.listedApps == [ListedApp(app: declared, kind: .systemAudio), ListedApp(app: notes, kind: .microphone)])

        // A capture from a source not known yet lists the app as soon as it starts.
        e.connect(c2, recorder)
        _ = e.recordStreamStarted(c2, stream: s1, source: "usb-mic", kind: nil, now: 2)
        #expect(e.listedApps.map(\.app).contains(recorder))
        _ = e.recordStreamMoved(c2, stream: s1, source: "mic", kind: .microphone, now: 3)
        _ = e.clientDisconnected(c2, now: 4)
        #expect(e.listedApps.contains(ListedApp(app: recorder, kind: .microphone)), "it recorded: kept")

        // Asking through the permission API lists the app, and keeps it for the next start.
        e.connect(c3, asker, purpose: nil)
        let asked = e.permissionRequested(c3, tag: 1, kind: .appAudio, purpose: "Meeting notes", now: 5)
        let kept = try #require(persisted(in: asked.actions).first)
        #expect(kept.appKey == asker && kept.capability == .appAudio && kept.state == .undetermined && kept.purpose == "Meeting notes")
        _ = e.promptTimedOut(try #require(prompts(in: asked.actions).first).id, now: 40)
        _ = e.clientDisconnected(c3, now: 41)
        #expect(e.listedApps.contains(ListedApp(app: asker, kind: .appAudio)))
        let restarted = ConsentEngine(policy: policy, decisions: e.storedDecisions)
        #expect(restarted.listedApps.contains(ListedApp(app: asker, kind: .appAudio)))

        #expect(!e.listedApps.contains { $0.app == pactl || $0.app == described }, "\(e.listedApps)")
    }
}
