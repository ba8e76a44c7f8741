// The master switch in the pure engine: a kind switched off silences every
// app's streams of it, granted or fixed by apps.d, and on gives each back
// what it was decided; other kinds and the decisions themselves stay.
import Testing
@testable import Consent

private let app = AppKey(kind: "exe", value: "/usr/bin/arecord")
private let other = AppKey(kind: "launcher", value: "org.example.Notes")
private let c1 = ClientID(1), c2 = ClientID(2)
private let s1 = StreamID(1)

private func flips(_ actions: [ConsentAction]) -> [ConsentAction] {
    actions.filter { if case .setStreamAccess = $0 { true } else { false } }
}

@Suite struct MasterSwitch {
    /// Two granted apps recording: off silences both and is stored; on makes both real again.
    @Test func offSilencesEveryAppOnRestoresThem() throws {
        var e = ConsentEngine(
            policy: ConsentPolicy(),
            decisions: [
                Decision(appKey: app, state: .granted, reason: .user, decidedAt: 0),
                Decision(appKey: other, state: .granted, reason: .user, decidedAt: 0),
            ])
        e.connect(c1, app)
        e.connect(c2, other)
        _ = e.record(c1, s1, now: 1)
        _ = e.record(c2, s1, now: 1)
        #expect(e.isStreamReal(c1, s1) == true && e.isStreamReal(c2, s1) == true)

        let off = e.setAccess(.microphone, enabled: false)
        #expect(flips(off) == [.setStreamAccess(c1, s1, real: false), .setStreamAccess(c2, s1, real: false)])
        #expect(off.contains(.persistAccess(.microphone, enabled: false)))
        #expect(off.contains(.emit(.accessChanged(.microphone, enabled: false))))
        #expect(e.setAccess(.microphone, enabled: false).isEmpty, "switching off twice did something")
        #expect(e.effectiveDecision(for: app).state == .granted, "the decision was not kept")
        // A new stream while off starts silent too.
        e.connect(ClientID(3), app)
        _ = e.record(ClientID(3), s1, now: 2)
        #expect(e.isStreamReal(ClientID(3), s1) == false)

        let on = e.setAccess(.microphone, enabled: true)
        #expect(
            flips(on) == [
                .setStreamAccess(c1, s1, real: true), .setStreamAccess(ClientID(3), s1, real: true),
                .setStreamAccess(c2, s1, real: true),
            ])
        #expect(on.contains(.persistAccess(.microphone, enabled: true)))
    }

    /// apps.d's grant does not override the switch; another kind is untouched; the state
    /// comes back from the store.
    @Test func policyGrantsAndOtherKindsAndRestart() throws {
        let policy = ConsentPolicy(declarations: [app: AppDeclaration(decisions: [.microphone: .granted])])
        var e = ConsentEngine(policy: policy, decisions: [], accessOff: [.microphone])
        e.connect(c1, app)
        _ = e.record(c1, s1, now: 1)
        #expect(e.isStreamReal(c1, s1) == false)
        #expect(e.accessEnabled(.systemAudio) && !e.accessEnabled(.microphone))
        #expect(e.setAccess(.systemAudio, enabled: false).filter { if case .setStreamAccess = $0 { true } else { false } }.isEmpty)
        #expect(flips(e.setAccess(.microphone, enabled: true)) == [.setStreamAccess(c1, s1, real: true)])
    }
}
