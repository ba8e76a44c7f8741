import Consent
@testable import ConsentStore
import Testing

extension StoreTests {
    /// Decisions are stored per app and capture kind: an existing microphone decision stays
    /// the microphone's, and the other kinds are rows of their own.
    @Test func eachCaptureKindIsARowOfItsOwn() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let obs = AppKey(kind: "exe", value: "/usr/bin/obs")
        var store = try PermissionStore(path: path)
        // What a store written before capture kinds holds: a decision without a kind given.
        try store.setDecision(Decision(appKey: obs, state: .granted, reason: .user, purpose: "Streaming"))
        store.close()

        store = try PermissionStore(path: path)
        defer { store.close() }
        #expect(try store.decision(for: obs)?.capability == .microphone)
        try store.setDecision(Decision(appKey: obs, capability: .systemAudio, state: .denied, reason: .user))
        try store.setDecision(Decision(appKey: obs, capability: .appAudio, state: .granted, reason: .user))
        let all = try store.allDecisions().filter { $0.appKey == obs }
        #expect(all.map(\.capability) == [.appAudio, .microphone, .systemAudio], "ordered by app key, then kind")
        #expect(try store.decision(for: obs, capability: .microphone)?.state == .granted)
        #expect(try store.decision(for: obs, capability: .microphone)?.purpose == "Streaming")
        #expect(try store.decision(for: obs, capability: .systemAudio)?.state == .denied)
        try store.resetDecision(obs, capability: .systemAudio, at: 9)
        #expect(try store.decision(for: obs, capability: .systemAudio)?.state == .undetermined)
        #expect(try store.decision(for: obs, capability: .appAudio)?.state == .granted)
    }
}

extension StoreTests {
    /// The master switch is stored per kind and read back by a new store on the same file.
    @Test func theAccessSwitchSurvivesAReopen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let store = try PermissionStore(path: path)
        #expect(try store.accessOff().isEmpty)
        try store.setAccess(.microphone, enabled: false, at: 10)
        try store.setAccess(.appAudio, enabled: false, at: 11)
        try store.setAccess(.appAudio, enabled: true, at: 12)
        store.close()
        let again = try PermissionStore(path: path)
        defer { again.close() }
        #expect(try again.accessOff() == [.microphone])
    }
}
