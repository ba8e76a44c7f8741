// Capture kinds in the pure engine: decisions per app and kind, prompts per
// app and kind, streams silent until their kind is known, and moves decided
// again; and the classification of sources from the server's records.
import PulseWire
import Testing
@testable import Consent

private let app = AppKey(kind: "exe", value: "/usr/bin/obs")
private let client = ClientID(7), other = ClientID(8)
private let mic = StreamID(1), monitor = StreamID(2)

private func connected(_ decisions: [Decision] = [], policy: ConsentPolicy = ConsentPolicy()) -> ConsentEngine {
    var e = ConsentEngine(policy: policy, decisions: decisions)
    for c in [client, other] {
        _ = e.clientConnected(
            c,
            identity: ClientIdentity(
                pid: Int32(c.rawValue), uid: 1000, gid: 1000, appKey: app,
                method: .executable, executable: app.value),
            launcherPurpose: "Streaming", now: 0)
    }
    return e
}

private func raised(_ actions: [ConsentAction]) -> [Prompt] {
    actions.compactMap { if case let .emit(.promptRaised(p)) = $0 { p } else { nil } }
}

private func accessFlips(_ actions: [ConsentAction]) -> [ConsentAction] {
    actions.filter { if case .setStreamAccess = $0 { true } else { false } }
}

@Suite struct CaptureKindEngine {
    @Test func aMicrophoneGrantSaysNothingOfTheOtherKinds() {
        var e = connected([Decision(appKey: app, capability: .microphone, state: .granted, reason: .user)])
        #expect(e.recordStreamStarted(client, stream: mic, source: "mic", kind: .microphone, now: 1).real)
        let sys = e.recordStreamStarted(client, stream: monitor, source: "out.monitor", kind: .systemAudio, now: 1)
        #expect(!sys.real)
        #expect(raised(sys.actions).map(\.kind) == [.systemAudio])
        let other = e.recordStreamStarted(other, stream: mic, source: "out.monitor", kind: .appAudio, now: 1)
        #expect(!other.real)
        #expect(raised(other.actions).map(\.kind) == [.appAudio], "one prompt per app and kind")
        #expect(e.effectiveDecision(for: app, kind: .systemAudio).state == .undetermined)
        #expect(e.effectiveDecision(for: app, kind: .appAudio).state == .undetermined)
    }

    @Test func grantingAKindFlipsOnlyStreamsOfThatKind() throws {
        var e = connected()
        _ = e.recordStreamStarted(client, stream: mic, source: "mic", kind: .microphone, now: 1)
        _ = e.recordStreamStarted(client, stream: monitor, source: "out.monitor", kind: .systemAudio, now: 1)
        let actions = try e.setDecision(app, kind: .systemAudio, .granted, reason: .user, now: 2).get()
        #expect(accessFlips(actions) == [.setStreamAccess(client, monitor, real: true)])
        #expect(e.isStreamReal(client, mic) == false && e.isStreamReal(client, monitor) == true)
        // The system-audio prompt closed as superseded; the microphone one is still pending.
        #expect(e.pendingPrompts.map(\.kind) == [.microphone])
        let stored = e.storedDecisions.filter { $0.state == .granted }
        #expect(stored.map(\.capability) == [.systemAudio])
    }

    @Test func onceAndDenyCoverTheKindAsked() throws {
        var e = connected()
        let started = e.recordStreamStarted(client, stream: monitor, source: "out.monitor", kind: .systemAudio, now: 1)
        let prompt = try #require(raised(started.actions).first)
        let answered = try e.answer(prompt.id, .once, by: nil, now: 2).get()
        #expect(accessFlips(answered) == [.setStreamAccess(client, monitor, real: true)])
        // A microphone stream of the same client is not covered by a system-audio "once".
        #expect(!e.recordStreamStarted(client, stream: mic, source: "mic", kind: .microphone, now: 3).real)
        #expect(e.clientSnapshots.first { $0.id == client }?.once == [.systemAudio: .granted])
        _ = try e.setDecision(app, kind: .systemAudio, .denied, reason: .user, now: 4).get()
        #expect(e.isStreamReal(client, monitor) == false)
    }

    @Test func aStreamOfUnknownKindIsSilentAndNeverPromptsUntilItIsKnown() {
        var e = connected(Capability.allCases.map { Decision(appKey: app, capability: $0, state: .granted, reason: .user) })
        let started = e.recordStreamStarted(client, stream: mic, source: "new-device", kind: nil, now: 1)
        #expect(!started.real)
        #expect(raised(started.actions).isEmpty)
        #expect(started.actions.contains(.startUsage(client, mic, UsageRecord(appKey: app, kind: "unknown", source: "new-device", startedAt: 1))))
        // A grant reaches no stream whose kind is not known.
        #expect(accessFlips((try? e.setDecision(app, .granted, reason: .user, now: 2).get()) ?? []).isEmpty)
        let known = e.recordStreamMoved(client, stream: mic, source: "new-device", kind: .microphone, now: 3)
        #expect(known.real)
        #expect(e.streamKind(client, mic) == .some(.microphone))
    }

    @Test func aMoveIsDecidedUnderTheNewKindAndSplitsTheUsageRow() throws {
        var e = connected([Decision(appKey: app, capability: .microphone, state: .granted, reason: .user)])
        #expect(e.recordStreamStarted(client, stream: mic, source: "mic", kind: .microphone, now: 1).real)
        let away = e.recordStreamMoved(client, stream: mic, source: "out.monitor", kind: .systemAudio, now: 5)
        #expect(!away.real)
        #expect(away.actions.first == .setStreamAccess(client, mic, real: false), "the flag first, before anything slow")
        #expect(
            away.actions.contains(
                .splitUsage(
                    client, mic,
                    UsageRecord(
                        appKey: app, kind: "system-audio",
                        source: "out.monitor", startedAt: 5))))
        #expect(raised(away.actions).map(\.kind) == [.systemAudio])
        #expect(away.actions.contains(.emit(.streamMoved(client, mic, app, source: "out.monitor", kind: .systemAudio, real: false))))
        let back = e.recordStreamMoved(client, stream: mic, source: "mic", kind: .microphone, now: 6)
        #expect(back.real)
        // Nothing changed: nothing to do.
        #expect(e.recordStreamMoved(client, stream: mic, source: "mic", kind: .microphone, now: 7).actions.isEmpty)
    }

    @Test func missingPurposeAppliesToTheKindRequested() {
        var e = ConsentEngine(
            policy: ConsentPolicy(missingPurpose: .deny),
            decisions: [Decision(appKey: app, capability: .microphone, state: .granted, reason: .user)])
        _ = e.clientConnected(
            client, identity: ClientIdentity(pid: 7, uid: 1000, gid: 1000, appKey: app, method: .executable),
            launcherPurpose: nil, now: 0)
        #expect(e.recordStreamRequested(client, kind: .microphone, now: 1).actions.isEmpty, "granted: no purpose needed")
        let denied = e.recordStreamRequested(client, kind: .systemAudio, now: 1)
        #expect(denied.proceed)
        #expect(e.effectiveDecision(for: app, kind: .systemAudio) == EffectiveDecision(state: .denied, reason: .missingPurpose))
        #expect(e.effectiveDecision(for: app, kind: .microphone).state == .granted)
    }

    @Test func storedDecisionsOfEveryKindLoadAndPolicyFixesOnlyTheMicrophone() {
        let policy = ConsentPolicy(declarations: [app: AppDeclaration(decision: .denied)])
        let e = ConsentEngine(
            policy: policy,
            decisions: [
                Decision(appKey: app, capability: .systemAudio, state: .granted, reason: .user),
                Decision(appKey: app, capability: .appAudio, state: .denied, reason: .user),
            ])
        #expect(e.effectiveDecision(for: app, kind: .microphone) == EffectiveDecision(state: .denied, reason: .adminPolicy))
        #expect(e.effectiveDecision(for: app, kind: .systemAudio).state == .granted)
        #expect(e.effectiveDecision(for: app, kind: .appAudio).state == .denied)
    }
}

@Suite struct CaptureKindPolicy {
    @Test func appsDDecidesEachKindOnItsOwnLine() throws {
        let text = """
            [exe:/usr/bin/obs]
            decision = granted
            system-audio-decision = granted
            app-audio-decision = denied
            [exe:/usr/bin/arecord]
            system-audio-decision = denied
            """
        let d = try AppDeclaration.parse(text: text, file: "/etc/earmuff/apps.d/site.conf")
        #expect(d[app]?.decisions == [.microphone: .granted, .systemAudio: .granted, .appAudio: .denied])
        let arecord = AppKey(kind: "exe", value: "/usr/bin/arecord")
        #expect(d[arecord]?.decision == nil && d[arecord]?.decisions == [.systemAudio: .denied])
        var e = ConsentEngine(policy: ConsentPolicy(declarations: d), decisions: [])
        #expect(e.effectiveDecision(for: arecord, kind: .systemAudio) == EffectiveDecision(state: .denied, reason: .adminPolicy))
        #expect(e.effectiveDecision(for: arecord, kind: .microphone).state == .undetermined)
        #expect(throws: ConsentError.governedByPolicy(arecord, .denied)) {
            try e.setDecision(arecord, kind: .systemAudio, .granted, reason: .user, now: 1).get()
        }
        #expect((try? e.setDecision(arecord, kind: .microphone, .granted, reason: .user, now: 1).get()) != nil)
    }

    @Test func aBadKindDecisionNamesFileLineAndFix() {
        #expect(throws: ConfigError.self) { try AppDeclaration.parse(text: "[exe:/usr/bin/obs]\nsystem-audio-decision = ask\n", file: "x.conf") }
        do {
            _ = try AppDeclaration.parse(text: "[exe:/usr/bin/obs]\nsystem-audio-decision = ask\n", file: "x.conf")
        } catch {
            #expect(error.description == #"x.conf:2: system-audio-decision must be granted or denied, not "ask" (remove the line to let the user decide)"#)
        }
    }

    @Test func mergingKeepsEachKindOfTheLaterFile() throws {
        let admin = try AppDeclaration.parse(text: "[exe:/usr/bin/obs]\ndecision = denied\nsystem-audio-decision = denied\n", file: "a.conf")
        let user = try AppDeclaration.parse(text: "[exe:/usr/bin/obs]\nsystem-audio-decision = granted\n", file: "b.conf")
        let merged = try #require(admin[app]).merging(try #require(user[app]))
        #expect(merged.decisions == [.microphone: .denied, .systemAudio: .granted])
    }
}

@Suite struct SourceClassification {
    /// What PulseAudio 16.1 lists for the test server: a sine source and a null sink's monitor.
    static let pulseAudio: [SourceInfo] = [
        SourceInfo(index: 0, name: "out.monitor", monitorOfSink: 0, monitorOfSinkName: "out"),
        SourceInfo(index: 1, name: "mic"),
    ]
    /// What pipewire-pulse 0.3.65 lists: a monitor takes its sink's index.
    static let pipeWire: [SourceInfo] = [
        SourceInfo(index: 27, name: "out.monitor", monitorOfSink: 27, monitorOfSinkName: "out"),
        SourceInfo(index: 31, name: "mic"),
    ]

    static func table(_ infos: [SourceInfo], default name: String? = nil) -> SourceTable {
        var t = SourceTable()
        t.replaceAll(infos)
        t.defaultSourceName = name
        return t
    }

    @Test(arguments: [(pulseAudio, UInt32(0), UInt32(1)), (pipeWire, UInt32(27), UInt32(31))])
    func monitorsAreSystemAudioAndOtherSourcesMicrophones(infos: [SourceInfo], monitorIndex: UInt32, micIndex: UInt32) {
        let t = Self.table(infos)
        #expect(t.kind(sourceIndex: micIndex, sourceName: "mic") == .microphone)
        #expect(t.kind(sourceIndex: monitorIndex, sourceName: "out.monitor") == .systemAudio)
        #expect(t.kind(sourceIndex: invalidIndex, sourceName: "out.monitor") == .systemAudio)
        #expect(t.kind(sourceIndex: micIndex, sourceName: nil) == .microphone)
        // direct_on_input is app audio whatever monitor the server puts it on.
        #expect(t.kind(sourceIndex: monitorIndex, sourceName: "out.monitor", directOnInput: true) == .appAudio)
    }

    @Test func whatTheTableDoesNotKnowHasNoKind() {
        var t = Self.table(Self.pulseAudio)
        #expect(t.kind(sourceIndex: 9, sourceName: "usb-mic") == nil)
        #expect(t.kind(sourceIndex: invalidIndex, sourceName: nil) == nil)
        // An index the table holds under another name: the table is behind the server.
        #expect(t.kind(sourceIndex: 1, sourceName: "usb-mic") == nil)
        t.update(SourceInfo(index: 9, name: "usb-mic"))
        #expect(t.kind(sourceIndex: 9, sourceName: "usb-mic") == .microphone)
        t.remove(index: 9)
        #expect(t.kind(sourceIndex: 9, sourceName: "usb-mic") == nil)
    }

    @Test func theExpectedKindFollowsTheDefaultSourceWhichMayBeAMonitor() {
        let t = Self.table(Self.pulseAudio, default: "out.monitor")
        #expect(t.expectedKind(sourceIndex: invalidIndex, sourceName: nil, directOnInput: false) == .systemAudio)
        #expect(t.expectedKind(sourceIndex: invalidIndex, sourceName: "@DEFAULT_SOURCE@", directOnInput: false) == .systemAudio)
        #expect(t.expectedKind(sourceIndex: invalidIndex, sourceName: "@DEFAULT_MONITOR@", directOnInput: false) == .systemAudio)
        #expect(t.expectedKind(sourceIndex: invalidIndex, sourceName: "mic", directOnInput: false) == .microphone)
        #expect(t.expectedKind(sourceIndex: invalidIndex, sourceName: "mic", directOnInput: true) == .appAudio)
        #expect(
            Self.table(Self.pulseAudio, default: "mic").expectedKind(
                sourceIndex: invalidIndex, sourceName: nil,
                directOnInput: false) == .microphone)
        #expect(SourceTable().expectedKind(sourceIndex: 4, sourceName: nil, directOnInput: false) == .microphone)
    }

    @Test func sourceRecordsReadBackAsWrittenAndClassify() throws {
        // A v13 GET_SOURCE_INFO_LIST reply as a server writes it, read the way the catalog reads it.
        var infos = Self.pulseAudio
        infos[1].description = "Test tone"
        infos[1].proplist.set("device.class", string: "abstract")
        var w = TagStructWriter()
        SourceInfoReply(records: infos).encode(into: &w, version: introspectionVersion)
        var r = TagStructReader(w.bytes)
        let read = try SourceInfoReply.decode(from: &r, version: introspectionVersion).records
        #expect(read == infos)
        #expect(Self.table(read).kind(sourceIndex: 0, sourceName: "out.monitor") == .systemAudio)
        var r2 = TagStructReader(w.bytes)
        #expect(throws: WireError.self) { try SourceInfoReply.decode(from: &r2, version: 16) }
    }
}
