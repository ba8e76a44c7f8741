// Lifespans in the pure engine, on a clock the tests pass in: once, this
// session, for a duration, always (granted and denied), expiry while a stream
// is live, a restart from what was stored, and auto-reset of unused grants.
import Testing
@testable import Consent

private let app = AppKey(kind: "exe", value: "/usr/bin/arecord")
private let other = AppKey(kind: "launcher", value: "org.example.Notes")
private let c1 = ClientID(1), c2 = ClientID(2)
private let s1 = StreamID(1)
private let day = 86_400.0

private func flips(_ actions: [ConsentAction]) -> [ConsentAction] {
    actions.filter { if case .setStreamAccess = $0 { true } else { false } }
}

private func stored(_ actions: [ConsentAction]) -> [Decision] {
    actions.compactMap { if case let .persistDecision(d) = $0 { d } else { nil } }
}

private func raisedPrompts(_ actions: [ConsentAction]) -> Int {
    actions.count { if case .emit(.promptRaised) = $0 { true } else { false } }
}

/// An engine with `app`'s client c1 recording on s1 (silent, prompt pending) at time 1.
private func recording(_ decisions: [Decision] = [], autoReset: Double? = nil) -> ConsentEngine {
    var e = ConsentEngine(policy: ConsentPolicy(autoResetAfter: autoReset), decisions: decisions)
    e.connect(c1, app)
    _ = e.record(c1, s1, now: 1)
    return e
}

@Suite struct Lifespans {
    @Test func aGrantForADurationEndsAtItsTimeEvenWhileLive() throws {
        var e = recording()
        #expect(e.isStreamReal(c1, s1) == false)
        let granted = try e.setDecision(app, .granted, reason: .user, lifespan: .until(100), now: 10).get()
        #expect(flips(granted) == [.setStreamAccess(c1, s1, real: true)])
        #expect(stored(granted).map(\.lifespan) == [.until(100)])
        #expect(e.pendingPrompts.isEmpty) // the prompt is settled
        #expect(
            e.effectiveDecision(for: app)
                == EffectiveDecision(
                    state: .granted, reason: .user, lifespan: .until(100),
                    afterwards: .undetermined))
        #expect(e.nextDeadline(now: 10) == 100)
        #expect(e.expire(now: 99.9).isEmpty)
        let ended = e.expire(now: 100)
        #expect(flips(ended) == [.setStreamAccess(c1, s1, real: false)])
        #expect(ended.contains(.removeTimedDecision(app, .microphone)))
        #expect(
            ended.contains {
                if case .emit(.decisionExpired(let d, let after)) = $0 {
                    d.lifespan == .until(100) && after.state == .undetermined
                } else {
                    false
                }
            })
        #expect(e.effectiveDecision(for: app) == EffectiveDecision(state: .undetermined, reason: .none))
        #expect(e.nextDeadline(now: 100) == nil)
        // Undetermined again: the next stream prompts.
        e.connect(c2, app)
        #expect(raisedPrompts(e.record(c2, s1, now: 101).actions) == 1)
    }

    @Test func aTemporaryDenialOverAnAlwaysGrantGivesTheGrantBack() throws {
        var e = recording([Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0)])
        #expect(e.isStreamReal(c1, s1) == true)
        let denied = try e.setDecision(app, .denied, reason: .user, lifespan: .until(50), now: 2).get()
        #expect(flips(denied) == [.setStreamAccess(c1, s1, real: false)])
        #expect(e.effectiveDecision(for: app).afterwards == .granted)
        #expect(e.storedDecisions.map(\.state) == [.granted]) // the lasting one is untouched
        #expect(flips(e.expire(now: 50)) == [.setStreamAccess(c1, s1, real: true)])
        #expect(e.effectiveDecision(for: app) == EffectiveDecision(state: .granted, reason: .user))
    }

    @Test func aSessionDecisionIsNeitherStoredNorTimed() throws {
        var e = recording([Decision(appKey: app, state: .denied, reason: .user, decidedAt: 0)])
        let granted = try e.setDecision(app, .granted, reason: .user, lifespan: .session, now: 5).get()
        #expect(stored(granted).isEmpty)
        #expect(flips(granted) == [.setStreamAccess(c1, s1, real: true)])
        #expect(e.effectiveDecision(for: app).lifespan == .session)
        #expect(e.nextDeadline(now: 5) == nil)
        #expect(e.expire(now: 1e12).isEmpty)
        #expect(e.isStreamReal(c1, s1) == true)
        // A restart starts from what was stored: the lasting denial.
        var restarted = ConsentEngine(policy: ConsentPolicy(), decisions: e.storedDecisions)
        restarted.connect(c1, app)
        #expect(restarted.record(c1, s1, now: 6).real == false)
    }

    @Test func anAlwaysDecisionReplacesATemporaryOne() throws {
        var e = recording()
        _ = try e.setDecision(app, .granted, reason: .user, lifespan: .until(100), now: 2).get()
        let denied = try e.setDecision(app, .denied, reason: .user, now: 3).get()
        #expect(denied.contains(.removeTimedDecision(app, .microphone)))
        #expect(stored(denied).map(\.lifespan) == [.always])
        #expect(e.temporaryDecisions.isEmpty)
        #expect(e.expire(now: 200).isEmpty)
        #expect(e.effectiveDecision(for: app) == EffectiveDecision(state: .denied, reason: .user))
        // A session decision replacing a timed one removes the stored timed row too.
        _ = try e.setDecision(app, .granted, reason: .user, lifespan: .until(300), now: 4).get()
        let session = try e.setDecision(app, .granted, reason: .user, lifespan: .session, now: 5).get()
        #expect(session.contains(.removeTimedDecision(app, .microphone)))
    }

    @Test func onceCoversTheClientsConnectedNowGrantedOrDenied() throws {
        var e = recording([Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0)])
        let denied = try e.setDecision(app, .denied, reason: .user, lifespan: .once, now: 2).get()
        #expect(flips(denied) == [.setStreamAccess(c1, s1, real: false)])
        #expect(stored(denied).isEmpty)
        #expect(e.clientSnapshots.first { $0.id == c1 }?.once[.microphone] == .denied)
        // A client that connects later is not covered: the app's grant applies.
        e.connect(c2, app)
        #expect(e.record(c2, s1, now: 3).real)
        _ = e.clientDisconnected(c1, now: 4)
        e.connect(c1, app)
        #expect(e.record(c1, s1, now: 5).real)
        // Once for an app with no client is refused.
        #expect(e.setDecision(other, .granted, reason: .user, lifespan: .once, now: 6) == .failure(.noClientForOnce(other)))
        // A later decision of any lifespan ends the once answers.
        _ = try e.setDecision(app, .denied, reason: .user, lifespan: .once, now: 7).get()
        _ = try e.setDecision(app, .granted, reason: .user, lifespan: .session, now: 8).get()
        #expect(e.isStreamReal(c1, s1) == true && e.isStreamReal(c2, s1) == true)
    }

    @Test func promptAnswersTakeALifespan() throws {
        var e = recording()
        let answered = try e.answer(PromptID(1), .allow, lifespan: .until(60), by: nil, now: 2).get()
        #expect(flips(answered) == [.setStreamAccess(c1, s1, real: true)])
        #expect(stored(answered).map(\.lifespan) == [.until(60)])
        #expect(flips(e.expire(now: 60)) == [.setStreamAccess(c1, s1, real: false)])

        var d = recording()
        _ = try d.answer(PromptID(1), .deny, lifespan: .session, by: nil, now: 2).get()
        #expect(
            d.effectiveDecision(for: app)
                == EffectiveDecision(
                    state: .denied, reason: .user, lifespan: .session,
                    afterwards: .undetermined))
        var o = recording()
        _ = try o.answer(PromptID(1), .allow, lifespan: .once, by: nil, now: 2).get()
        #expect(o.isStreamReal(c1, s1) == true && o.effectiveDecision(for: app).reason == .userOnce)
        // A lapsed expiry is refused, and the prompt stays pending.
        var p = recording()
        #expect(p.answer(PromptID(1), .allow, lifespan: .until(2), by: nil, now: 2) == .failure(.expiryInThePast(app)))
        #expect(p.pendingPrompts.count == 1)
        #expect(p.setDecision(app, .granted, reason: .user, lifespan: .until(1), now: 2) == .failure(.expiryInThePast(app)))
    }

    @Test func aTimedDecisionLapsedBeforeANewStreamDoesNotApplyToIt() throws {
        // The timer may be late; the engine still decides the new stream on the time it is given.
        var e = ConsentEngine(
            policy: ConsentPolicy(),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0, lifespan: .until(10))
            ])
        e.connect(c1, app)
        #expect(e.record(c1, s1, now: 9).real)
        e.connect(c2, app)
        let late = e.record(c2, s1, now: 11)
        #expect(!late.real)
        #expect(late.actions.contains(.removeTimedDecision(app, .microphone)))
        #expect(e.isStreamReal(c1, s1) == false)
    }

    @Test func aRestartKeepsAlwaysAndUnexpiredDurationsOnly() {
        let loaded = [
            Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0),
            Decision(appKey: other, state: .denied, reason: .user, decidedAt: 0, lifespan: .until(500)),
            Decision(
                appKey: AppKey(kind: "exe", value: "/usr/bin/old"), state: .granted, reason: .user,
                decidedAt: 0, lifespan: .until(50)),
        ]
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: loaded)
        let started = e.expire(now: 100)
        #expect(started.contains(.removeTimedDecision(AppKey(kind: "exe", value: "/usr/bin/old"), .microphone)))
        #expect(e.effectiveDecision(for: app).state == .granted)
        #expect(
            e.effectiveDecision(for: other)
                == EffectiveDecision(
                    state: .denied, reason: .user, lifespan: .until(500),
                    afterwards: .undetermined))
        #expect(e.effectiveDecision(for: AppKey(kind: "exe", value: "/usr/bin/old")).state == .undetermined)
        #expect(e.nextDeadline(now: 100) == 500)
    }
}

@Suite struct AutoReset {
    private let after = 90 * day

    @Test func anUnusedGrantGoesBackToUndetermined() throws {
        let used = 10 * day
        var e = ConsentEngine(
            policy: ConsentPolicy(autoResetAfter: after),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0, lastUsedAt: used),
                Decision(appKey: other, state: .denied, reason: .user, decidedAt: 0),
            ])
        #expect(e.nextDeadline(now: used) == used + after)
        #expect(e.expire(now: used + after - 1).isEmpty)
        let reset = e.expire(now: used + after)
        #expect(stored(reset).map(\.state) == [.undetermined])
        #expect(stored(reset).map(\.reason) == [.autoReset])
        #expect(reset.contains { if case .emit(.decisionAutoReset(let d, let last)) = $0 { d.appKey == app && last == used } else { false } })
        #expect(e.effectiveDecision(for: app) == EffectiveDecision(state: .undetermined, reason: .autoReset))
        #expect(e.effectiveDecision(for: other).state == .denied) // denials stay
        #expect(e.nextDeadline(now: used + after) == nil)
        // It prompts on its next recording.
        e.connect(c1, app)
        #expect(raisedPrompts(e.record(c1, s1, now: used + after + 1).actions) == 1)
    }

    @Test func aGrantNeverUsedCountsFromTheGrantAndAReGrantStartsAgain() throws {
        var e = ConsentEngine(
            policy: ConsentPolicy(autoResetAfter: after),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 5 * day, lastUsedAt: 1 * day)
            ])
        #expect(e.nextDeadline(now: 6 * day) == 95 * day)
        _ = try e.setDecision(app, .granted, reason: .user, now: 50 * day).get()
        #expect(e.nextDeadline(now: 50 * day) == 140 * day)
        #expect(e.expire(now: 100 * day).isEmpty)
    }

    @Test func anAppRecordingNowAndPolicyAreNeverReset() throws {
        var decl = AppDeclaration()
        decl.decision = .granted
        var e = ConsentEngine(
            policy: ConsentPolicy(declarations: [other: decl], autoResetAfter: after),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0),
                Decision(appKey: other, state: .granted, reason: .user, decidedAt: 0),
            ])
        e.connect(c1, app)
        _ = e.record(c1, s1, now: 0)
        #expect(e.expire(now: 200 * day).isEmpty)
        #expect(e.isStreamReal(c1, s1) == true)
        _ = e.recordStreamEnded(c1, stream: s1, now: 200 * day)
        // The stream's start was its last use.
        #expect(stored(e.expire(now: 200 * day)).map(\.appKey) == [app])
    }

    @Test func zeroDaysMeansNever() {
        var e = ConsentEngine(
            policy: ConsentPolicy(),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0)
            ])
        #expect(e.nextDeadline(now: 0) == nil)
        #expect(e.expire(now: 1e12).isEmpty)
        var c = Configuration()
        c.autoResetDays = 0
        #expect(ConsentPolicy(configuration: c, declarations: [:]).autoResetAfter == nil)
        c.autoResetDays = 90
        #expect(ConsentPolicy(configuration: c, declarations: [:]).autoResetAfter == 90 * day)
    }
}
