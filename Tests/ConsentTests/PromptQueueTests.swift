// The prompt caps: a storm of apps never holds more than max-pending-prompts (and
// max-pending-prompts-per-uid) prompts; a prompt of an app that left makes room for one
// that records; the slots are shared out among origins (cgroups); the rest wait, silent,
// and are prompted as prompts close, the origin holding fewest first, oldest first within.
import Testing
@testable import Consent

@Suite struct PromptQueue {
    static func app(_ i: Int) -> AppKey { AppKey(kind: "exe", value: "/tmp/storm/app\(i)/parecord") }

    /// Connects client `i` as app `i` (uid `uid`) and starts a microphone stream; the actions.
    static func record(
        _ e: inout ConsentEngine, _ i: Int, uid: UInt32 = 1000, origin: String? = nil,
        now: Double
    ) -> [ConsentAction] {
        let c = ClientID(UInt64(i))
        let identity = ClientIdentity(
            pid: Int32(1000 + i), uid: uid, gid: uid, appKey: app(i), method: .executable,
            executable: app(i).value, origin: origin)
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

    static let stormUnit = "/user.slice/user-1000.slice/user@1000.service/app.slice/storm.service"
    static func appScope(_ n: Int) -> String { "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-rec\(n)-\(n).scope" }

    /// One app that keeps recording under 24 made-up names holds every slot of its uid; the
    /// next app the person starts, in a scope of its own, is prompted at once, and the storm's
    /// newest prompt waits again, first in line for the next free slot.
    @Test func anOriginThatKeepsRecordingUnderManyNamesCannotHoldTheNextAppsPrompt() {
        var e = Self.engine(total: 16, perUID: 8)
        for i in 1...24 { _ = Self.record(&e, i, origin: Self.stormUnit, now: Double(i)) }
        #expect(e.pendingPrompts.map(\.appKey) == (1...8).map(Self.app))
        #expect(e.waitingCaptures.count == 16)
        let person = Self.record(&e, 100, origin: Self.appScope(1), now: 30)
        #expect(Self.raised(person) == [Self.app(100)] && Self.withdrawn(person) == [Self.app(8)], "\(person)")
        #expect(e.pendingPrompts.count == 8)
        #expect(e.waitingCaptures.first?.appKey == Self.app(8) && e.waitingCaptures.count == 17)
        // The storm cannot take the slot back: its own origin holds seven already.
        let more = Self.record(&e, 25, origin: Self.stormUnit, now: 31)
        #expect(Self.raised(more).isEmpty && Self.withdrawn(more).isEmpty, "\(more)")
        // The person answers: the freed slot goes back to the storm, its oldest waiting first.
        let id = e.pendingPrompts.first { $0.appKey == Self.app(100) }!.id
        let answered = (try? e.answer(id, .deny, by: nil, now: 32).get()) ?? []
        #expect(Self.raised(answered) == [Self.app(8)], "\(answered)")
    }

    /// Freed slots go to the origin that holds the fewest prompts, oldest capture first within.
    @Test func freedSlotsGoToTheOriginHoldingFewest() {
        var e = Self.engine(total: 3, perUID: 3)
        for i in 1...5 { _ = Self.record(&e, i, origin: Self.appScope(1), now: Double(i)) }
        let second = Self.record(&e, 6, origin: Self.appScope(2), now: 6)
        #expect(Self.raised(second) == [Self.app(6)] && Self.withdrawn(second) == [Self.app(3)], "\(second)")
        // 2 against 1: no more taking; it waits.
        #expect(Self.raised(Self.record(&e, 7, origin: Self.appScope(2), now: 7)).isEmpty)
        #expect(e.waitingCaptures.map(\.appKey) == [Self.app(3), Self.app(4), Self.app(5), Self.app(7)])
        // 1 against 1 after a timeout: the oldest, app 3; then 2 against 0: the second origin's
        // app 7, before the older apps 4 and 5 of the first.
        let first = e.promptTimedOut(e.pendingPrompts.first { $0.appKey == Self.app(1) }!.id, now: 40)
        #expect(Self.raised(first) == [Self.app(3)], "\(first)")
        let next = e.promptTimedOut(e.pendingPrompts.first { $0.appKey == Self.app(6) }!.id, now: 41)
        #expect(Self.raised(next) == [Self.app(7)], "\(next)")
    }

    /// A permission request (the permission API) over the caps waits for its prompt, like a
    /// stream, and is answered once it was prompted and answered.
    @Test func permissionRequestsWaitUnderTheCaps() throws {
        var e = Self.engine(total: 2, perUID: 2)
        for i in 1...2 { _ = Self.record(&e, i, now: Double(i)) }
        let c = ClientID(3)
        _ = e.clientConnected(
            c,
            identity: ClientIdentity(
                pid: 1003, uid: 1000, gid: 1000, appKey: Self.app(3),
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
