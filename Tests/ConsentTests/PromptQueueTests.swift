// The prompt caps: a storm of apps never holds more than max-pending-prompts (and
// max-pending-prompts-per-uid) prompts; a prompt of an app that left makes room for one
// that records; the rest wait, silent, and are prompted oldest first as prompts close.
import Testing
@testable import Consent

@Suite struct PromptQueue {
    static func app(_ i: Int) -> AppKey { AppKey(kind: "exe", value: "/tmp/storm/app\(i)/parecord") }

    /// Connects client `i` as app `i` (uid `uid`) and starts a microphone stream; the actions.
    static func record(_ e: inout ConsentEngine, _ i: Int, uid: UInt32 = 1000, now: Double) -> [ConsentAction] {
        let c = ClientID(UInt64(i))
        let identity = ClientIdentity(pid: Int32(1000 + i), uid: uid, gid: uid, appKey: app(i), method: .executable,
                                      executable: app(i).value)
        var actions = e.clientConnected(c, identity: identity, launcherPurpose: "Storm", now: now)
        actions += e.recordStreamRequested(c, now: now).actions
        actions += e.recordStreamStarted(c, stream: StreamID(UInt64(i)), source: "mic", kind: .microphone, now: now).actions
        return actions
    }

    static func raised(_ actions: [ConsentAction]) -> [AppKey] {
        actions.compactMap { if case let .emit(.promptRaised(p)) = $0 { p.appKey } else { nil } }
    }

    static func withdrawn(_ actions: [ConsentAction]) -> [AppKey] {
        actions.compactMap { if case let .closePrompt(p, .withdrawn, _) = $0 { p.appKey } else { nil } }
    }

    static func engine(total: Int = 4, perUID: Int = 3) -> ConsentEngine {
        ConsentEngine(policy: ConsentPolicy(maxPendingPrompts: total, maxPendingPromptsPerUID: perUID), decisions: [])
    }

    @Test func livePromptsAreCappedPerUIDAndTheRestWait() {
        var e = Self.engine()
        var raised: [AppKey] = []
        for i in 1...5 { raised += Self.raised(Self.record(&e, i, now: Double(i))) }
        #expect(raised == [Self.app(1), Self.app(2), Self.app(3)])
        #expect(e.pendingPrompts.count == 3)
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(4), Self.app(5)])
        // Root's clients have a share of their own, up to the total.
        let root = Self.raised(Self.record(&e, 6, uid: 0, now: 6)) + Self.raised(Self.record(&e, 7, uid: 0, now: 7))
        #expect(root == [Self.app(6)] && e.pendingPrompts.count == 4)
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(4), Self.app(5), Self.app(7)])
        // A prompt that times out lets the oldest waiting capture of that uid in.
        let first = e.pendingPrompts[0].id
        let after = e.promptTimedOut(first, now: 40)
        #expect(Self.raised(after) == [Self.app(4)], "\(after)")
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(5), Self.app(7)])
    }

    @Test func aPromptOfAnAppThatLeftMakesRoomAtOnce() {
        var e = Self.engine()
        for i in 1...3 { _ = Self.record(&e, i, now: Double(i)) }
        // Apps 1 and 2 recorded and left (a storm of short-lived identities).
        _ = e.clientDisconnected(ClientID(1), now: 4)
        _ = e.clientDisconnected(ClientID(2), now: 4)
        #expect(e.pendingPrompts.count == 3)
        let real = Self.record(&e, 9, now: 5)
        #expect(Self.withdrawn(real) == [Self.app(1)] && Self.raised(real) == [Self.app(9)], "\(real)")
        #expect(e.pendingPrompts.map(\.appKey) == [Self.app(2), Self.app(3), Self.app(9)])
        // The withdrawn app stays undetermined, with nothing stored for it.
        #expect(e.effectiveDecision(for: Self.app(1)).state == .undetermined)
        #expect(!real.contains { if case let .persistDecision(d) = $0 { d.appKey == Self.app(1) } else { false } })
    }

    @Test func waitingCapturesThatEndOrAreDecidedAreForgotten() {
        var e = Self.engine(total: 2, perUID: 2)
        for i in 1...5 { _ = Self.record(&e, i, now: Double(i)) }
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(3), Self.app(4), Self.app(5)])
        _ = e.clientDisconnected(ClientID(3), now: 6)
        _ = e.setDecision(Self.app(4), .denied, reason: .user, now: 6)
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(5)])
        let after = e.promptTimedOut(e.pendingPrompts[0].id, now: 40)
        #expect(Self.raised(after) == [Self.app(5)], "\(after)")
        #expect(e.waitingCaptures.isEmpty)
    }

    /// 150 identities that record and leave, then the real app: it is prompted at once, and
    /// never more than the cap are pending.
    @Test func aStormNeverBuriesTheRealPrompt() {
        var e = Self.engine(total: 16, perUID: 8)
        for i in 1...150 {
            _ = Self.record(&e, i, now: Double(i))
            _ = e.clientDisconnected(ClientID(UInt64(i)), now: Double(i))
            #expect(e.pendingPrompts.count <= 8)
        }
        let real = Self.record(&e, 1000, now: 200)
        #expect(Self.raised(real) == [Self.app(1000)])
        #expect(e.pendingPrompts.count == 8 && e.pendingPrompts.contains { $0.appKey == Self.app(1000) })
    }

    /// A permission request (the permission API) over the caps waits for its prompt, like a
    /// stream, and is answered once it was prompted and answered.
    @Test func permissionRequestsWaitUnderTheCaps() throws {
        var e = Self.engine(total: 2, perUID: 2)
        for i in 1...2 { _ = Self.record(&e, i, now: Double(i)) }
        let c = ClientID(3)
        _ = e.clientConnected(c, identity: ClientIdentity(pid: 1003, uid: 1000, gid: 1000, appKey: Self.app(3),
                                                          method: .executable, executable: Self.app(3).value),
                              launcherPurpose: nil, now: 3)
        let asked = e.permissionRequested(c, tag: 5, kind: .microphone, purpose: "Notes", now: 3)
        #expect(asked.outcome == .waiting && Self.raised(asked.actions).isEmpty, "\(asked)")
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(3)])
        #expect(!e.settlePermissions().contains { if case .answerPermission = $0 { true } else { false } })
        let promoted = e.promptTimedOut(e.pendingPrompts[0].id, now: 40)
        #expect(Self.raised(promoted) == [Self.app(3)], "\(promoted)")
        let id = try #require(e.pendingPrompts.first { $0.appKey == Self.app(3) }).id
        _ = try e.answer(id, .allow, by: nil, now: 41).get()
        #expect(e.settlePermissions().contains(.answerPermission(c, tag: 5, .microphone, .granted)))
    }
}
