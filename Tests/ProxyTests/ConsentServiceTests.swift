// The consent service as the relay's session observer, without a relay: real
// session and stream objects as the halves report them, a source catalog that
// is a table the test edits, and decisions set through the control requests.
// What is checked is each stream's access flag, the one thing the audio path reads.
import Consent
import ConsentStore
import ControlProtocol
import Glibc
import PulseWire
import Synchronization
import Testing
import TestSupport
@testable import Proxy

@Suite struct ConsentServiceTests {
    /// A catalog whose table the test sets; counts its wake-ups.
    final class EditableSources: SourceDirectory {
        let table = Mutex(SourceTable())
        let wakes = Atomic<Int>(0)
        var snapshot: SourceTable { table.withLock { $0 } }
        func wake() { wakes.add(1, ordering: .relaxed) }
    }

    final class Fixture {
        let controls: ControlRequestsTests.Fixture
        let sources = EditableSources()
        var consent: ConsentService { controls.consent }
        let app = AppKey(kind: "exe", value: "/usr/bin/parecord")
        let session: SessionState

        init() throws {
            controls = try ControlRequestsTests.Fixture()
            controls.consent.catalog = sources
            sources.table.withLock { t in
                t.update(SourceInfo(index: 1, name: "mic"))
                t.update(SourceInfo(index: 2, name: "out.monitor", monitorOfSink: 0, monitorOfSinkName: "out"))
            }
            let identity = ClientIdentity(pid: getpid(), uid: getuid(), gid: getgid(), appKey: app, method: .executable,
                                          executable: app.value)
            session = SessionState(id: 1, identity: identity, launcherAppID: nil, connectedAt: wallClockNow())
            consent.sessionOpened(session)
        }

        /// A record stream on source `index`, started as the upstream half reports it.
        func startStream(id: UInt64 = 1, on index: UInt32, name: String) -> RecordStream {
            let stream = RecordStream(sessionID: session.id, streamID: id, channel: UInt32(id), sourceOutputIndex: 40 + UInt32(id),
                                      sampleSpec: SampleSpec(format: .s16le, channels: 2, rate: 44100), source: name,
                                      sourceIndex: index, real: false, startedAt: wallClockNow())
            consent.recordStreamStarted(session, stream: stream)
            return stream
        }

        func decide(_ state: DecisionState, _ kind: Capability = .microphone) {
            _ = controls.ask(.setDecision(app: app.description, state: state, reason: nil, kind: kind))
        }
    }

    @Test func anUndeterminedAppRecordsSilenceAndIsPromptedOncePerKind() throws {
        let f = try Fixture()
        #expect(f.sources.wakes.load(ordering: .relaxed) == 1, "a client's arrival wakes a waiting catalog")
        let a = f.startStream(id: 1, on: 1, name: "mic")
        let b = f.startStream(id: 2, on: 1, name: "mic")
        #expect(!a.isReal && !b.isReal)
        let status = f.consent.status()
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
        f.consent.recordStreamMoved(f.session, stream: stream)
        #expect(!stream.isReal, "a microphone grant is not one for system audio")
        #expect(f.consent.status().streams.first?.kind == .systemAudio)
        // The catalog's answer about a source output asked before the move is older than the move.
        f.consent.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: 0)
        #expect(stream.placement.withLock { $0.sourceIndex } == 2)
        f.consent.sourceOutputChanged(index: stream.sourceOutputIndex, source: 1, askedAt: monotonicNow() + 1)
        #expect(stream.isReal, "seen back on the microphone by the catalog")
    }

    @Test func aSourceLearnedLaterDecidesTheStreamThen() throws {
        let f = try Fixture()
        f.decide(.granted)
        let stream = f.startStream(on: 3, name: "usb-mic")
        #expect(!stream.isReal, "a source the catalog does not know stays silent")
        f.sources.table.withLock { $0.update(SourceInfo(index: 3, name: "usb-mic")) }
        f.consent.sourcesChanged()
        #expect(stream.isReal)
        #expect(f.consent.hasRecordStreams)
        f.consent.recordStreamEnded(f.session, stream: stream)
        f.consent.sessionClosed(f.session)
        let status = f.consent.status()
        #expect(status.clients.isEmpty && status.streams.isEmpty)
    }
}

/// The permission extension on an app's own connection, with a relay that only
/// records what the service sends and closes.
@Suite struct PermissionCallTests {
    final class FakeRelay: RelayLink {
        let sent = Mutex<[(UInt64, [UInt8])]>([])
        let closed = Mutex<[(UInt64, String)]>([])
        let startedAt = 0.0
        let activatedListener: Int32? = nil
        let upstream = UpstreamAddress.unix("/nonexistent/pulse/native")
        func inject(sessionID: UInt64, packet: [UInt8]) { sent.withLock { $0.append((sessionID, packet)) } }
        func disconnect(sessionID: UInt64, reason: String) { closed.withLock { $0.append((sessionID, reason)) } }
        func loopThreadIDs() -> [pid_t] { [] }

        /// The permission state in each status reply sent so far, by tag (SUBSCRIBE's reply is empty).
        func replies(version: UInt32) -> [UInt32: String] {
            var out: [UInt32: String] = [:]
            for (_, packet) in sent.withLock({ $0 }) {
                if let (tag, status) = try? PermissionStatus.decodePacket(packet, version: version) { out[tag] = status.state }
            }
            return out
        }

        var events: [PermissionEvent] { sent.withLock { $0 }.compactMap { try? PermissionEvent.decode($0.1) } }
    }

    @Test func aRequestWaitsForItsDecisionAndSubscribersHearOfChanges() throws {
        let f = try ConsentServiceTests.Fixture()
        let relay = FakeRelay()
        f.consent.relay = relay
        let version = f.session.protocolVersion
        #expect(f.consent.permissionCall(f.session, tag: 1, call: .get(kind: "microphone")) == nil)
        #expect(f.consent.permissionCall(f.session, tag: 2, call: .subscribe(true)) == nil)
        #expect(f.consent.permissionCall(f.session, tag: 3, call: .request(kind: "microphone", purpose: "dictation")) == nil)
        #expect(relay.replies(version: version) == [1: "undetermined"], "the request waits for its prompt")
        #expect(f.consent.status().prompts.first?.purpose == "dictation")
        f.decide(.granted)
        #expect(relay.replies(version: version)[3] == "granted")
        #expect(relay.sent.withLock { $0.count } == 4, "GET, SUBSCRIBE and REQUEST replies, and one event")
        #expect(relay.events == [PermissionEvent(kind: "microphone", state: "granted")])
        #expect(relay.closed.withLock { $0.isEmpty })
    }

    @Test func anUnknownKindIsAnErrorAndTheConnectionStays() throws {
        let f = try ConsentServiceTests.Fixture()
        let relay = FakeRelay()
        f.consent.relay = relay
        #expect(f.consent.permissionCall(f.session, tag: 4, call: .get(kind: "camera")) == nil)
        let (tag, reply) = try #require(relay.sent.withLock { $0.first }.map { try ErrorReply.decodePacket($0.1, version: f.session.protocolVersion) })
        #expect(tag == 4 && reply.code == ErrorCode.invalid.rawValue)
        #expect(relay.closed.withLock { $0.isEmpty })
    }
}
