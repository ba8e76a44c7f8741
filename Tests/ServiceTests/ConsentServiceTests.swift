// The consent service as the relay's session observer, without a relay: real
// session and stream objects as the halves report them, a source catalog that
// is a table the test edits, and decisions set through the control requests.
// What is checked is each stream's access flag, the one thing the audio path reads.
import Consent
import ConsentStore
import ControlProtocol
import Glibc
import PulseWire
@testable import Relay
import Runtime
import StreamState
import Synchronization
import Testing
import TestSupport
@testable import Service

@Suite struct ConsentServiceTests {
    final class Fixture {
        let controls: ControlRequestsTests.Fixture
        var sources: EditableSources { controls.sources }
        var relay: FakeRelay { controls.host }
        var parts: ConsentParts { controls.parts }
        let app = AppKey(kind: "exe", value: "/usr/bin/parecord")
        let session: SessionState

        init() throws {
            controls = try ControlRequestsTests.Fixture()
            let identity = ClientIdentity(
                pid: getpid(), uid: getuid(), gid: getgid(), appKey: app, method: .executable,
                executable: app.value)
            session = SessionState(id: 1, identity: identity, launcherAppID: nil, connectedAt: wallClockNow())
            parts.observer.sessionOpened(session)
        }

        /// A record stream on source `index`, started as the upstream half reports it.
        func startStream(id: UInt64 = 1, on index: UInt32, name: String) -> RecordStream {
            let stream = RecordStream(
                sessionID: session.id, streamID: id, channel: UInt32(id), sourceOutputIndex: 40 + UInt32(id),
                sampleSpec: SampleSpec(format: .s16le, channels: 2, rate: 44100), source: name,
                sourceIndex: index, real: false, startedAt: wallClockNow())
            parts.observer.recordStreamStarted(session, stream: stream)
            return stream
        }

        func decide(_ state: DecisionState, _ kind: Capability = .microphone) {
            _ = controls.ask(.setDecision(app: app.description, state: state, reason: nil, kind: kind))
        }

        func status() -> StatusPayload { parts.views.status(relay: relay) }
    }

    @Test func anUndeterminedAppRecordsSilenceAndIsPromptedOncePerKind() throws {
        let f = try Fixture()
        #expect(f.sources.wakes.load(ordering: .relaxed) == 1, "a client's arrival wakes a waiting catalog")
        let a = f.startStream(id: 1, on: 1, name: "mic")
        let b = f.startStream(id: 2, on: 1, name: "mic")
        #expect(!a.isReal && !b.isReal)
        let status = f.status()
        #expect(status.prompts.map(\.kind) == [.microphone])
        #expect(status.streams.map(\.kind) == [.microphone, .microphone] && status.streams.allSatisfy { $0.audio == .silenced })
    }

    @Test func decisionsFlipLiveStreamsOfTheirKindOnly() throws {
        let f = try Fixture()
        let mic = f.startStream(id: 1, on: 1, name: "mic")
        let monitor = f.startStream(id: 2, on: 2, name: "out.monitor")
        f.decide(.granted)
        #expect(mic.isReal && !monitor.isReal)
        f.decide(.granted, .systemAudio)
        #expect(monitor.isReal)
        _ = f.controls.ask(.setAccess(kind: .microphone, enabled: false))
        #expect(!mic.isReal && monitor.isReal, "the master switch silences its kind, whatever is granted")
        _ = f.controls.ask(.setAccess(kind: .microphone, enabled: true))
        f.decide(.denied)
        #expect(!mic.isReal)
    }

    @Test func aStreamMovedToAMonitorIsDecidedAsSystemAudio() throws {
        let f = try Fixture()
        let stream = f.startStream(on: 1, name: "mic")
        f.decide(.granted)
        #expect(stream.isReal)
        stream.placement.withLock { p in // as the upstream half records RECORD_STREAM_MOVED
            p.sourceIndex = 2
            p.source = "out.monitor"
            p.movedAt = monotonicNow()
        }
        f.parts.observer.recordStreamMoved(f.session, stream: stream)
        #expect(!stream.isReal, "a microphone grant is not one for system audio")
        #expect(f.status().streams.first?.kind == .systemAudio)
        // The catalog's answer about a source output asked before the move is older than the move.
        f.parts.kinds.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: 0)
        #expect(stream.placement.withLock { $0.sourceIndex } == 2)
        f.parts.kinds.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: monotonicNow() + 1)
        #expect(stream.isReal, "seen back on the microphone by the catalog")
    }

    @Test func aSourceLearnedLaterDecidesTheStreamThen() throws {
        let f = try Fixture()
        f.decide(.granted)
        let stream = f.startStream(on: 3, name: "usb-mic")
        #expect(!stream.isReal, "a source the catalog does not know stays silent")
        f.sources.table.withLock { $0.update(SourceInfo(index: 3, name: "usb-mic")) }
        f.parts.kinds.sourcesChanged()
        #expect(stream.isReal)
        #expect(f.parts.kinds.hasRecordStreams)
        f.parts.observer.recordStreamEnded(f.session, stream: stream)
        f.parts.observer.sessionClosed(f.session)
        let status = f.status()
        #expect(status.clients.isEmpty && status.streams.isEmpty)
    }
}

/// The permission extension on an app's own connection, with a relay that only
/// records what the service sends and closes.
@Suite struct PermissionCallTests {
    @Test func aRequestWaitsForItsDecisionAndSubscribersHearOfChanges() throws {
        let f = try ConsentServiceTests.Fixture()
        let relay = f.relay
        let version = f.session.protocolVersion
        #expect(f.parts.observer.permissionCall(f.session, tag: 1, call: .get(kind: "microphone")) == nil)
        #expect(f.parts.observer.permissionCall(f.session, tag: 2, call: .subscribe(true)) == nil)
        #expect(f.parts.observer.permissionCall(f.session, tag: 3, call: .request(kind: "microphone", purpose: "dictation")) == nil)
        #expect(relay.replies(version: version) == [1: "undetermined"], "the request waits for its prompt")
        #expect(f.status().prompts.first?.purpose == "dictation")
        f.decide(.granted)
        #expect(relay.replies(version: version)[3] == "granted")
        #expect(relay.sent.withLock { $0.count } == 4, "GET, SUBSCRIBE and REQUEST replies, and one event")
        #expect(relay.events == [PermissionEvent(kind: "microphone", state: "granted")])
        #expect(relay.closed.withLock { $0.isEmpty })
    }

    @Test func anUnknownKindIsAnErrorAndTheConnectionStays() throws {
        let f = try ConsentServiceTests.Fixture()
        let relay = f.relay
        #expect(f.parts.observer.permissionCall(f.session, tag: 4, call: .get(kind: "camera")) == nil)
        let (tag, reply) = try #require(relay.sent.withLock { $0.first }.map { try ErrorReply.decodePacket($0.1, version: f.session.protocolVersion) })
        #expect(tag == 4 && reply.code == ErrorCode.invalid.rawValue)
        #expect(relay.closed.withLock { $0.isEmpty })
    }
}
