// Each part of the consent service on its own, over fakes (ConsentFakes.swift):
// a real engine, real session and stream objects as the halves report them,
// and fakes for the store writer, the prompt threads, control connections,
// the relay, the desktop and snapd. What is checked is what each part does to
// the streams' access flags and what it asks of its collaborators.
import Consent
import ControlProtocol
import Dispatch
import PulseWire
@testable import Relay
import Runtime
import Testing
@testable import Service

private let recorder = AppKey(kind: "exe", value: "/usr/bin/parecord")
private let other = AppKey(kind: "exe", value: "/usr/bin/arecord")

@Suite struct DecisionsTests {
    @Test func aGrantFlipsEveryLiveStreamOfThatAppAndKindOnly() {
        let f = PartsFixture()
        let first = f.connect(recorder, id: 1)
        let second = f.connect(recorder, id: 2)
        let stranger = f.connect(other, id: 3)
        let mics = [f.startStream(first, on: 1, name: "mic"), f.startStream(second, on: 1, name: "mic")]
        let monitor = f.startStream(second, on: 2, name: "out.monitor")
        let otherMic = f.startStream(stranger, on: 1, name: "mic")
        #expect(!mics.contains { $0.isReal } && !monitor.isReal && !otherMic.isReal)

        f.decide(recorder, .granted)
        #expect(mics.allSatisfy { $0.isReal }, "every live stream of the app and kind")
        #expect(!monitor.isReal && !otherMic.isReal, "not another kind, not another app")
        #expect(
            f.records.saved.withLock { $0.last.map { ($0.appKey, $0.capability, $0.state) } } ?? (other, .systemAudio, .denied)
                == (recorder, .microphone, .granted))
        #expect(f.control.broadcasts.withLock { $0 }.contains { if case .decisionChanged(let a) = $0 { a.key == recorder.description } else { false } })

        f.decide(recorder, .denied)
        #expect(!mics.contains { $0.isReal })
    }

    @Test func aSnapStaysSilentUntilSnapdSaysItsPlugIsConnected() {
        let f = PartsFixture()
        let snap = AppKey(kind: "snap", value: "recorder")
        let session = f.connect(snap, id: 1, method: .snap)
        let stream = f.startStream(session, on: 1, name: "mic")
        f.decide(snap, .granted)
        #expect(!stream.isReal, "granted, but snapd has not said yes")
        f.snap.connect(session.id)
        #expect(stream.isReal)
    }

    @Test func aTimedDecisionSetsTheExpiryTimerAndLapses() {
        let f = PartsFixture()
        let stream = f.startStream(f.connect(recorder, id: 1), on: 1, name: "mic")
        f.decide(recorder, .granted, lifespan: .until(wallClockNow() + 3600))
        #expect(stream.isReal)
        let wait = f.prompts.timers.withLock { $0[UInt64.max] }
        #expect(wait == Decisions.maximumExpiryWait, "an hour away: looked at again within a minute")
        f.decide(recorder, .granted, lifespan: .until(wallClockNow() + 0.05))
        #expect((f.prompts.timers.withLock { $0[UInt64.max] } ?? .infinity) <= 0.05)
        let deadline = monotonicNow() + 5
        while stream.isReal && monotonicNow() < deadline {
            f.parts.decisions.expireLapsed() // as the timer does when it fires
        }
        #expect(!stream.isReal, "the grant lapsed")
        #expect(f.records.events.withLock { $0.map(\.kind) }.contains("decision-expired"))
    }

    @Test func aLastingMicrophoneDecisionOfAFlatpakIsMirroredToTheDesktop() {
        let f = PartsFixture()
        let app = AppKey(kind: "flatpak", value: "org.example.Notes")
        f.decide(app, .denied)
        f.decide(app, .granted, .systemAudio)
        f.decide(app, .granted, lifespan: .session)
        #expect(f.desktop.mirrored.withLock { $0 } == ["org.example.Notes": .denied], "lasting microphone decisions only")
    }

    @Test func aClosedClientGoesToTheRelayAndTheEventLog() {
        var c = Configuration()
        c.missingPurpose = .disconnect
        let f = PartsFixture(configuration: c)
        let session = f.connect(recorder, id: 1)
        var request = CreateRecordStreamRequest()
        request.sourceIndex = 1
        let reason = f.parts.observer.recordStreamRequested(session, request: request)
        #expect(reason != nil)
        #expect(f.relay.closed.withLock { $0.map(\.0) } == [1])
        #expect(f.records.events.withLock { $0.map(\.kind) } == ["disconnect"])
    }
}

@Suite struct PromptAnswersTests {
    @Test func anUndeterminedFirstCaptureQueuesOnePromptPerKind() {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        _ = f.startStream(session, on: 1, name: "mic")
        _ = f.startStream(session, on: 1, name: "mic")
        #expect(f.prompts.shown.withLock { $0.map(\.kind) } == [.microphone], "one prompt for two streams")
        #expect(f.prompts.timeouts.withLock { $0.count } == 1)
        #expect(f.control.raised.map(\.kind) == [.microphone])
        _ = f.startStream(session, on: 2, name: "out.monitor")
        #expect(f.prompts.shown.withLock { $0.map(\.kind) } == [.microphone, .systemAudio])
    }

    @Test func anAgentGetsPendingPromptsAndItsAnswerFlipsTheStream() throws {
        let f = PartsFixture()
        let stream = f.startStream(f.connect(recorder, id: 1), on: 1, name: "mic")
        let connection = ControlConnectionID(rawValue: 9)
        f.parts.prompts.agentConnected(AgentID(connection.rawValue), on: connection)
        let (message, to) = try #require(f.control.sent.withLock { $0.first })
        guard case let .prompt(info) = message else {
            Issue.record("not a prompt: \(message)")
            return
        }
        #expect(to == connection && info.appKey == recorder.description)
        let answered = f.parts.prompts.answer(info.id, .allow, lifespan: nil, by: AgentID(connection.rawValue))
        #expect((try? answered.get()) != nil)
        #expect(stream.isReal)
        #expect(f.prompts.closedPrompts.withLock { $0 } == [info.id])
        #expect(f.control.resolutions.map(\.by) == ["agent"])
        #expect((try? f.parts.prompts.answer(info.id, .deny, lifespan: nil, by: nil).get()) == nil, "a prompt answered once")
    }

    @Test func desktopAnswersAreResolvedByTheirChannel() throws {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        let mic = f.startStream(session, on: 1, name: "mic")
        let micPrompt = try #require(f.prompts.shown.withLock { $0.first })
        f.parts.prompts.dismissed(micPrompt.id, via: .notification)
        #expect(!mic.isReal && f.control.resolutions.map(\.by) == ["notification"])
        _ = f.startStream(session, on: 1, name: "mic")
        let again = try #require(f.prompts.shown.withLock { $0.last })
        #expect(again.id != micPrompt.id, "a dismissed prompt is asked again at the next capture")
        f.parts.prompts.answeredOnDesktop(again.id, .allow, lifespan: .session, via: .portal)
        #expect(mic.isReal && f.control.resolutions.map(\.by) == ["notification", "portal"])
    }

    @Test func theCommandsExitStatusAndTimeoutsAnswer() throws {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        let mic = f.startStream(session, on: 1, name: "mic")
        let monitor = f.startStream(session, on: 2, name: "out.monitor")
        let shown = f.prompts.shown.withLock { $0 }
        let (micPrompt, monitorPrompt) = (try #require(shown.first), try #require(shown.last))
        f.parts.prompts.commandExited(micPrompt.id, status: 2, output: "")
        #expect(f.control.resolutions.isEmpty, "status 2 is no answer: the prompt stays")
        f.parts.prompts.commandExited(micPrompt.id, status: 0, output: "2h")
        #expect(mic.isReal)
        let granted = try #require(f.records.saved.withLock { $0.last })
        #expect(granted.reason == .promptCommand && granted.lifespan.expiresAt != nil, "the first line printed says how long")
        f.parts.prompts.timedOut(monitorPrompt.id)
        #expect(!monitor.isReal && f.control.resolutions.map(\.by) == ["prompt-command", "timeout"])
    }
}

@Suite struct CaptureKindsTests {
    @Test func aSourceMoveToAMonitorChangesTheKind() {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        let stream = f.startStream(session, on: 1, name: "mic")
        f.decide(recorder, .granted)
        #expect(stream.isReal && stream.placement.withLock { $0.kind } == .microphone)
        stream.placement.withLock { p in // as the upstream half records RECORD_STREAM_MOVED
            p.sourceIndex = 2
            p.source = "out.monitor"
            p.movedAt = monotonicNow()
        }
        f.parts.observer.recordStreamMoved(session, stream: stream)
        #expect(!stream.isReal, "a microphone grant is not one for system audio")
        #expect(stream.placement.withLock { $0.kind } == .systemAudio)
        #expect(f.prompts.shown.withLock { $0.map(\.kind) } == [.microphone, .systemAudio])
    }

    /// A move the loop reports and the source the catalog finds are decided on two threads: the
    /// usage rows they end and start must not cross (a row started after the end meant for it
    /// would never end). Each row the log gets ends before the next one starts.
    @Test func movesDecidedOnTwoThreadsEndEachRowBeforeTheNextStarts() {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        let stream = f.startStream(session, on: 1, name: "mic")
        f.decide(recorder, .granted)
        let (observer, kinds) = (f.parts.observer, f.parts.kinds)
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for i in 0..<2_000 {
                if thread == 0 {
                    stream.placement.withLock { p in // as the upstream half records RECORD_STREAM_MOVED
                        p.sourceIndex = i % 2 == 0 ? 2 : 1
                        p.source = i % 2 == 0 ? "out.monitor" : "mic"
                        p.movedAt = monotonicNow()
                    }
                    observer.recordStreamMoved(session, stream: stream)
                } else {
                    kinds.sourceOutputChanged(
                        index: stream.sourceOutputIndex, source: i % 2 == 0 ? 1 : 2, askedAt: monotonicNow() + 1)
                }
            }
        }
        f.parts.observer.recordStreamEnded(session, stream: stream)
        let calls = f.records.usageCalls.withLock { $0 }
        let crossed = zip(calls, calls.dropFirst()).filter { $0 == $1 }.count
        #expect(calls.count > 2 && calls.first == true && calls.last == false && crossed == 0, "\(crossed) rows crossed in \(calls.count) calls")
    }

    @Test func theCatalogsAnswerIsIgnoredWhenOlderThanTheMove() {
        let f = PartsFixture()
        let stream = f.startStream(f.connect(recorder, id: 1), on: 2, name: "out.monitor")
        f.decide(recorder, .granted)
        stream.placement.withLock { $0.movedAt = monotonicNow() }
        f.parts.kinds.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: 0)
        #expect(stream.placement.withLock { $0.sourceIndex } == 2 && !stream.isReal)
        f.parts.kinds.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: monotonicNow() + 1)
        #expect(stream.placement.withLock { ($0.sourceIndex, $0.source, $0.kind) } == (1, "mic", .microphone))
        #expect(stream.isReal, "seen on the microphone by the catalog")
    }

    @Test func anUnknownSourceIsSilentAndUnpromptedUntilTheCatalogLearnsIt() {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        #expect(f.sources.wakes.load(ordering: .relaxed) == 1, "a client's arrival wakes a waiting catalog")
        let stream = f.startStream(session, on: 7, name: "usb-mic")
        #expect(f.sources.wakes.load(ordering: .relaxed) == 2, "so does a stream")
        #expect(!stream.isReal && f.prompts.shown.withLock { $0.isEmpty })
        #expect(f.parts.kinds.hasRecordStreams)
        f.sources.table.withLock { $0.update(SourceInfo(index: 7, name: "usb-mic")) }
        f.parts.kinds.sourcesChanged()
        #expect(f.prompts.shown.withLock { $0.map(\.kind) } == [.microphone])
        f.parts.observer.recordStreamEnded(session, stream: stream)
        #expect(!f.parts.kinds.hasRecordStreams)
        #expect(
            f.records.usageFinished.withLock { $0.map(\.stream) } == [stream.streamID, stream.streamID],
            "a row while its source was not known, one since")
    }
}

@Suite struct ConsentViewsTests {
    @Test func appsListWhatTheEngineHolds() {
        let f = PartsFixture(
            decisions: [
                Decision(appKey: recorder, state: .granted, reason: .user, decidedAt: 5),
                Decision(appKey: recorder, capability: .systemAudio, state: .denied, reason: .user),
                Decision(appKey: other, state: .undetermined, reason: .none, lastUsedAt: 3),
            ],
            apps: [
                AppRecord(
                    appKey: other, displayName: "Arecord", executable: other.value, method: .executable,
                    firstSeenAt: 1, lastSeenAt: 2)
            ])
        let rows = f.parts.views.apps()
        #expect(rows.map(\.key) == [other.description, recorder.description, recorder.description])
        #expect(rows.map(\.kind) == [.microphone, .microphone, .systemAudio])
        #expect(rows.map(\.state) == [.undetermined, .granted, .denied])
        #expect(rows.first?.displayName == "Arecord" && rows[1].decidedAt == 5)
    }

    /// Tools that only connect (pactl, pw-cli, pw-metadata) are not listed; an app is once it records.
    @Test func appsThatOnlyConnectedAreNotListed() {
        let pactl = AppKey(kind: "exe", value: "/usr/bin/pactl")
        let f = PartsFixture(apps: [
            AppRecord(
                appKey: pactl, displayName: "pactl", executable: pactl.value, method: .executable,
                firstSeenAt: 1, lastSeenAt: 2)
        ])
        f.connect(pactl, id: 1)
        let session = f.connect(recorder, id: 2)
        #expect(f.parts.views.apps().isEmpty)
        #expect(f.parts.views.status(relay: nil).clients.count == 2, "both are still shown as clients")
        let stream = f.startStream(session, on: 1, name: "mic")
        #expect(f.parts.views.apps().map(\.key) == [recorder.description])
        f.parts.observer.recordStreamEnded(session, stream: stream)
        f.parts.observer.sessionClosed(session)
        #expect(f.parts.views.apps().map(\.key) == [recorder.description], "it recorded: still listed")
    }

    @Test func statusListsTheClientsStreamsAndPromptsTheEngineHolds() {
        let f = PartsFixture()
        let session = f.connect(recorder, id: 1)
        let stream = f.startStream(session, on: 1, name: "mic")
        f.decide(recorder, .granted, .systemAudio)
        let status = f.parts.views.status(relay: f.relay)
        #expect(status.clients.map(\.id) == [1] && status.clients.first?.appKey == recorder.description)
        #expect(status.streams.map(\.stream) == [stream.channel])
        #expect(status.streams.first.map { ($0.kind, $0.audio, $0.source) } ?? (nil, .real, "") == (.microphone, .silenced, "mic"))
        #expect(status.prompts.map(\.kind) == [.microphone])
        #expect(status.upstream.server == f.relay.upstream.description && !status.upstream.reachable)
        #expect(status.daemon.promptChannels?.agents == 0)
        f.parts.observer.sessionClosed(session)
        #expect(f.parts.views.status(relay: nil).clients.isEmpty)
    }
}

@Suite struct DesktopDecisionsTests {
    @Test func theDesktopsSwitchDecidesAFlatpaksMicrophone() {
        let f = PartsFixture()
        let app = AppKey(kind: "flatpak", value: "org.example.Notes")
        let stream = f.startStream(f.connect(app, id: 1, method: .flatpak), on: 1, name: "mic")
        f.parts.desktopDecisions.decide("org.example.Notes", .granted)
        #expect(stream.isReal)
        #expect(f.records.saved.withLock { $0.last?.reason } == .desktop)
        #expect(f.records.events.withLock { $0.map(\.kind) } == ["desktop-permission"])
        #expect(f.parts.desktopDecisions.current() == ["org.example.Notes": .granted])
        let saved = f.records.saved.withLock { $0.count }
        f.parts.desktopDecisions.decide("", .granted)
        #expect(f.records.saved.withLock { $0.count } == saved, "no app id: ignored")
    }

    @Test func aSwitchThePolicyFixesIsSetBack() {
        let app = AppKey(kind: "flatpak", value: "org.example.Locked")
        let f = PartsFixture(declarations: [app: AppDeclaration(decision: .denied)])
        #expect(f.parts.desktopDecisions.current() == ["org.example.Locked": .denied])
        f.parts.desktopDecisions.decide("org.example.Locked", .granted)
        #expect(f.desktop.mirrored.withLock { $0 } == ["org.example.Locked": .denied])
        #expect(f.records.saved.withLock { $0.isEmpty })
    }
}

@Suite struct LateTests {
    @Test func aLateSinkForwardsOnceBoundAndHoldsItsTargetWeakly() {
        let late = Late<any ClientLink>()
        late.inject(sessionID: 1, packet: [1]) // nothing bound yet: dropped
        var relay: FakeRelay? = FakeRelay()
        late.bind(relay!)
        late.inject(sessionID: 2, packet: [2])
        late.disconnect(sessionID: 2, reason: "test")
        #expect(relay?.sent.withLock { $0.map(\.0) } == [2] && relay?.closed.withLock { $0.map(\.0) } == [2])
        relay = nil
        #expect(late.value == nil, "the target's owner keeps it, not the sink")
    }
}
