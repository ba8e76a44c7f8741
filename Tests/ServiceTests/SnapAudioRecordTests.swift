// A snap records only if snapd says its audio-record plug is connected: the
// client against a fake snapd on a Unix socket, then the real daemon (both
// loops, the consent service, a flood server upstream) with a connection
// identified as a snap that the user granted.
import ConsentStore
import Consent
import ControlProtocol
import Foundation
@testable import Service
import PulseWire
@testable import Relay
import TestSupport
import Testing

@Suite(.serialized) struct SnapAudioRecordTests {
    private func scratch() throws -> String { try TempDir.make(prefix: "earmuff-snap") }
    /// A client of a fake snapd that does answer: patient, so that a loaded machine is not taken for a silent snapd.
    private func patientClient(_ socketPath: String) -> SnapdClient {
        var c = SnapdClient(socketPath: socketPath)
        c.timeout = 60
        return c
    }

    @Test func answersFromSnapd() throws {
        let dir = try scratch()
        defer { TempDir.remove(dir) }
        let fake = try FakeSnapd(socketPath: "\(dir)/snapd.socket", connected: ["recorder"])
        defer { fake.stop() }
        let client = patientClient(fake.socketPath)
        #expect(client.audioRecordConnected(snap: "recorder") == .connected)
        #expect(client.audioRecordConnected(snap: "other") == .notConnected)
        #expect(fake.requestLines.first == "GET /v2/connections?snap=recorder&interface=audio-record HTTP/1.1")
        fake.setConnected("recorder", false)
        #expect(client.audioRecordConnected(snap: "recorder") == .notConnected)
    }

    @Test func chunkedAnswersAndErrors() throws {
        let dir = try scratch()
        defer { TempDir.remove(dir) }
        let chunked = try FakeSnapd(socketPath: "\(dir)/chunked.socket", connected: ["recorder"], mode: .chunked)
        defer { chunked.stop() }
        #expect(patientClient(chunked.socketPath).audioRecordConnected(snap: "recorder") == .connected)
        let failing = try FakeSnapd(socketPath: "\(dir)/failing.socket", connected: ["recorder"], mode: .failing)
        defer { failing.stop() }
        #expect(
            patientClient(failing.socketPath).audioRecordConnected(snap: "recorder")
                == .unavailable("snapd: cannot read state"))
        if case .unavailable(let why) = SnapdClient(socketPath: "\(dir)/absent.socket").audioRecordConnected(snap: "recorder") {
            #expect(why.contains("cannot connect to \(dir)/absent.socket"))
        } else {
            Issue.record("an absent snapd was taken for an answer")
        }
        #expect(SnapdClient(socketPath: chunked.socketPath).audioRecordConnected(snap: "a/../b") == .unavailable("\"a/../b\" is not a snap name"))
    }

    /// A daemon whose every client is identified as `snap:recorder`, granted,
    /// with `snapd` as snapd's socket. Reads one record stream until at least
    /// `wanted` payload bytes arrived and `until` holds for the set of byte
    /// values seen (and the daemon's snapd gate), and returns that set.
    private func recordThroughDaemon(
        dir: String, snapd: String, wanted: Int, until: (Set<UInt8>, SnapRecordGate) -> Bool
    ) throws -> Set<UInt8> {
        let flood = try FloodServer(socketPath: "\(dir)/upstream", payloadBytes: 1_000)
        defer { flood.stop() }
        // Not closed here: the service's store queue may still be writing when the daemon stops.
        let store = try PermissionStore(path: "\(dir)/permissions.sqlite")
        let paths = DaemonPaths(
            listen: "\(dir)/native", control: "\(dir)/control", store: "\(dir)/permissions.sqlite",
            launcherDirectory: "\(dir)/app")
        // The flood server's one source, a microphone.
        var sources = SourceTable()
        sources.update(SourceInfo(index: 1, name: "flood"))
        let clients = Late<any ClientLink>()
        let gate = try SnapRecordGate(snapd: patientClient(snapd))
        let service = try ConsentService(
            configuration: Configuration(), declarations: [:], store: store, paths: paths,
            clients: clients, control: FakeControl(), catalog: FixedSources(sources),
            snapGate: gate)
        let daemon = try Daemon(
            listenPath: paths.listen, upstream: .unix("\(dir)/upstream"), options: RelayOptions(),
            observer: service.parts.observer
        ) { pid, uid, gid, _ in
            ClientIdentity(pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "snap", value: "recorder"), method: .snap)
        }
        clients.bind(daemon)
        let requests = ControlRequests(
            parts: service.parts, records: service.writer, store: store,
            launchers: service.launchers, host: daemon)
        let granted = requests.handle(
            .setDecision(app: "snap:recorder", state: .granted, reason: "test"),
            from: ControlConnectionID(rawValue: 1))
        guard case .app = granted else { throw TestSupportError("grant failed: \(granted)") }
        try daemon.start()
        defer { daemon.stop() }

        let c = try RawClient(path: paths.listen)
        defer { c.close() }
        try c.handshake(name: "snap-recorder")
        guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2), command == Command.reply.rawValue else {
            throw TestSupportError("no CREATE_RECORD_STREAM reply")
        }
        var seen: Set<UInt8> = []
        var received = 0
        while received < wanted || !until(seen, gate) {
            guard let frame = try c.readFrame(timeout: 30) else { throw TestSupportError("stalled after \(received) bytes") }
            guard !frame.descriptor.isPacket else { continue }
            seen.formUnion(frame.payload)
            received += frame.payload.count
            if received > 64 << 20 { break }
        }
        return seen
    }

    @Test func aSnapWithoutAudioRecordGetsSilenceWhateverIsGranted() throws {
        let dir = try scratch()
        defer { TempDir.remove(dir) }
        let fake = try FakeSnapd(socketPath: "\(dir)/snapd.socket", connected: [])
        defer { fake.stop() }
        // Read until snapd was asked and its answer taken, then 50 frames more (a wrong answer
        // lets the flood's bytes through at once): all of it silence.
        var framesSinceAnswer: Int?
        let seen = try recordThroughDaemon(dir: dir, snapd: fake.socketPath, wanted: 0) { bytes, gate in
            if framesSinceAnswer == nil, !fake.requestLines.isEmpty, !gate.isAsking { framesSinceAnswer = 0 }
            if framesSinceAnswer != nil { framesSinceAnswer! += 1 }
            return (framesSinceAnswer ?? 0) > 50 || bytes.contains(FloodServer.payloadByte)
        }
        #expect(fake.requestLines == ["GET /v2/connections?snap=recorder&interface=audio-record HTTP/1.1"])
        #expect(seen == [0], "a snap without audio-record heard \(seen.sorted())")
    }

    @Test func aSnapWithAudioRecordGetsWhatIsGranted() throws {
        let dir = try scratch()
        defer { TempDir.remove(dir) }
        let fake = try FakeSnapd(socketPath: "\(dir)/snapd.socket", connected: ["recorder"])
        defer { fake.stop() }
        let seen = try recordThroughDaemon(dir: dir, snapd: fake.socketPath, wanted: 0) { bytes, _ in bytes.contains(FloodServer.payloadByte) }
        #expect(seen.contains(FloodServer.payloadByte))
        #expect(fake.requestLines.count == 1)
    }

    @Test func withoutSnapdNothingIsAsked() throws {
        let dir = try scratch()
        defer { TempDir.remove(dir) }
        let seen = try recordThroughDaemon(dir: dir, snapd: "\(dir)/no-snapd.socket", wanted: 0) { bytes, _ in bytes.contains(FloodServer.payloadByte) }
        #expect(seen.contains(FloodServer.payloadByte))
    }
}
