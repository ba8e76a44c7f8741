// The permission API in the engine: an app's own state, requests that wait for the
// prompt a first recording would raise (and join it), answers when it settles, the
// purpose a request gives, missing-purpose, and change notifications.
import Testing
@testable import Consent

private let app = AppKey(kind: "exe", value: "/usr/bin/asker")
private let other = AppKey(kind: "exe", value: "/usr/bin/other")
private let c1 = ClientID(1), c2 = ClientID(2), c3 = ClientID(3)

private func answers(in actions: [ConsentAction]) -> [(ClientID, UInt32, Capability, PermissionState)] {
    actions.compactMap { if case let .answerPermission(c, tag, k, s) = $0 { (c, tag, k, s) } else { nil } }
}

private func notices(in actions: [ConsentAction]) -> [(ClientID, Capability, PermissionState)] {
    actions.compactMap { if case let .notifyPermission(c, k, s) = $0 { (c, k, s) } else { nil } }
}

@Suite struct PermissionRequests {
    @Test func anUndeterminedRequestRaisesOnePromptAndWaitsWithTheOnesThatJoin() throws {
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        e.connect(c1, app, purpose: nil)
        e.connect(c2, app, purpose: nil)
        let first = e.permissionRequested(c1, tag: 7, kind: .microphone, purpose: "Voice memos", now: 1)
        #expect(first.outcome == .waiting)
        let raised = prompts(in: first.actions)
        #expect(raised.count == 1 && raised.first?.purpose == "Voice memos" && raised.first?.kind == .microphone)
        // Another client of the app, and a stream of the first, join the same prompt.
        let second = e.permissionRequested(c2, tag: 3, kind: .microphone, purpose: nil, now: 2)
        #expect(second.outcome == .waiting && prompts(in: second.actions).isEmpty)
        #expect(prompts(in: e.record(c1, StreamID(1)).actions).isEmpty)
        #expect(e.settlePermissions().isEmpty, "nothing is settled while the prompt waits")

        _ = try e.answer(raised[0].id, .allow, by: nil, now: 3).get()
        let settled = answers(in: e.settlePermissions())
        #expect(settled.map(\.0) == [c1, c2] && settled.map(\.1) == [7, 3])
        #expect(settled.allSatisfy { $0.3 == .granted })
        #expect(e.settlePermissions().isEmpty, "each request is answered once")

        // Decided now: answered at once, no prompt.
        let again = e.permissionRequested(c1, tag: 8, kind: .microphone, purpose: nil, now: 4)
        #expect(again.outcome == .answered(.granted) && prompts(in: again.actions).isEmpty)
        // Another kind is asked on its own.
        #expect(e.permissionRequested(c1, tag: 9, kind: .systemAudio, purpose: nil, now: 5).outcome == .waiting)
    }

    @Test func aTimedOutPromptAnswersUndeterminedAndAGoneClientGetsNothing() throws {
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        e.connect(c1, app)
        e.connect(c2, app)
        let r = e.permissionRequested(c1, tag: 1, kind: .microphone, purpose: nil, now: 1)
        _ = e.permissionRequested(c2, tag: 2, kind: .microphone, purpose: nil, now: 1)
        _ = e.clientDisconnected(c2, now: 2)
        _ = e.promptTimedOut(prompts(in: r.actions)[0].id, now: 31)
        let settled = answers(in: e.settlePermissions())
        #expect(settled.count == 1 && settled[0].0 == c1 && settled[0].3 == .undetermined)
    }

    @Test func onceAnswersTheClientsConnectedAndADecisionElsewhereSettlesToo() throws {
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        e.connect(c1, app)
        let r = e.permissionRequested(c1, tag: 1, kind: .microphone, purpose: nil, now: 1)
        _ = try e.answer(prompts(in: r.actions)[0].id, .once, by: nil, now: 2).get()
        #expect(answers(in: e.settlePermissions()).map(\.3) == [.granted])
        #expect(e.permission(of: c1, kind: .microphone) == .granted)
        e.connect(c2, app)
        #expect(e.permission(of: c2, kind: .microphone) == .undetermined, "once covers the clients connected then")

        _ = e.permissionRequested(c2, tag: 4, kind: .microphone, purpose: nil, now: 3)
        _ = try e.setDecision(app, .denied, reason: .user, now: 4).get()
        #expect(answers(in: e.settlePermissions()).map(\.3) == [.denied])
    }

    @Test func anAppAsksOnlyAboutItselfAndTheUninspectableAreDenied() {
        var e = ConsentEngine(
            policy: ConsentPolicy(),
            decisions: [
                Decision(appKey: other, capability: .microphone, state: .granted, reason: .user)
            ])
        e.connect(c1, app)
        #expect(e.permission(of: c1, kind: .microphone) == .undetermined)
        #expect(e.permission(of: ClientID(99), kind: .microphone) == nil)
        let hidden = ClientIdentity(
            pid: 5, uid: 1000, gid: 1000, appKey: AppKey(kind: "uninspectable", value: "5"),
            method: .uninspectable)
        _ = e.clientConnected(c3, identity: hidden, launcherPurpose: "x", now: 0)
        let r = e.permissionRequested(c3, tag: 1, kind: .microphone, purpose: "x", now: 1)
        #expect(r.outcome == .answered(.denied) && prompts(in: r.actions).isEmpty)
    }

    @Test func missingPurposeAppliesToRequests() {
        var strict = ConsentEngine(policy: ConsentPolicy(missingPurpose: .disconnect), decisions: [])
        strict.connect(c1, app, purpose: nil)
        let refused = strict.permissionRequested(c1, tag: 1, kind: .microphone, purpose: nil, now: 1)
        #expect(refused.outcome == .refused)
        #expect(refused.actions.contains { if case .disconnectClient(c1, _) = $0 { true } else { false } })
        // With a purpose in the request it is asked.
        strict.connect(c2, app, purpose: nil)
        #expect(strict.permissionRequested(c2, tag: 1, kind: .microphone, purpose: "Memos", now: 1).outcome == .waiting)

        var denying = ConsentEngine(policy: ConsentPolicy(missingPurpose: .deny), decisions: [])
        denying.connect(c1, app, purpose: nil)
        #expect(denying.permissionRequested(c1, tag: 1, kind: .microphone, purpose: nil, now: 1).outcome == .answered(.denied))
        #expect(denying.effectiveDecision(for: app).reason == .missingPurpose)
    }

    @Test func aDeclaredPurposeComesBeforeTheRequestsAndTheRequestsBeforeTheClientProperty() {
        var declarations: [AppKey: AppDeclaration] = [:]
        declarations[other] = AppDeclaration(purpose: "Declared by the administrator")
        var e = ConsentEngine(policy: ConsentPolicy(declarations: declarations), decisions: [])
        e.connect(c1, other, purpose: nil)
        let declared = e.permissionRequested(c1, tag: 1, kind: .microphone, purpose: "From the app", now: 1)
        #expect(prompts(in: declared.actions).first?.purpose == "Declared by the administrator")

        e.connect(c2, app, purpose: nil)
        _ = e.clientPropertiesChanged(c2, applicationName: nil, processBinary: nil, capturePurpose: "Property", now: 1)
        let asked = e.permissionRequested(c2, tag: 1, kind: .microphone, purpose: "From the request", now: 2)
        #expect(prompts(in: asked.actions).first?.purpose == "From the request")
    }

    @Test func subscribersHearOfEveryChangeOfTheirOwnState() throws {
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        e.connect(c1, app)
        e.connect(c2, other)
        e.permissionSubscription(c1, enabled: true)
        #expect(e.settlePermissions().isEmpty, "no event for the state at subscription")
        _ = try e.setDecision(app, kind: .systemAudio, .granted, reason: .user, now: 1).get()
        _ = try e.setDecision(other, .granted, reason: .user, now: 1).get()
        let first = notices(in: e.settlePermissions())
        #expect(first.count == 1 && first[0] == (c1, .systemAudio, .granted), "only its own state, only what changed")
        _ = try e.setDecision(app, kind: .systemAudio, .undetermined, reason: .reset, now: 2).get()
        #expect(notices(in: e.settlePermissions()).map(\.2) == [.undetermined])
        e.permissionSubscription(c1, enabled: false)
        _ = try e.setDecision(app, .denied, reason: .user, now: 3).get()
        #expect(e.settlePermissions().isEmpty)
    }

    /// Access off (the master switch) silences every app of that kind whatever it was granted:
    /// the API says denied, a request raises no prompt, and subscribers hear of both switches.
    @Test func accessOffIsDeniedForEveryApp() throws {
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        e.connect(c1, app)
        e.connect(c2, other)
        _ = try e.setDecision(app, .granted, reason: .user, now: 1).get()
        e.permissionSubscription(c1, enabled: true)
        #expect(e.permission(of: c1, kind: .microphone) == .granted)
        _ = e.setAccess(.microphone, enabled: false)
        #expect(e.permission(of: c1, kind: .microphone) == .denied)
        #expect(notices(in: e.settlePermissions()).map { [$0.1.rawValue, $0.2.rawValue] } == [["microphone", "denied"]])
        let asked = e.permissionRequested(c2, tag: 4, kind: .microphone, purpose: nil, now: 2)
        #expect(asked.outcome == .answered(.denied) && prompts(in: asked.actions).isEmpty)
        #expect(e.permission(of: c1, kind: .systemAudio) == .undetermined, "only the kind that is off")
        _ = e.setAccess(.microphone, enabled: true)
        #expect(notices(in: e.settlePermissions()).map(\.2) == [.granted])
    }
}
