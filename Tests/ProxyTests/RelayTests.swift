// The relay's two event loops and rings, in process, against the synthetic
// flood server: every byte of every stream arrives, in order, real or silenced
// as the observer says, through rings small enough to wrap and park all the
// time. Run under the thread sanitizer in CI.
import Consent
import Foundation
@testable import Proxy
import PulseWire
import Synchronization
import TestSupport
import Testing

/// Grants streams whose session id is odd, silences the others.
private final class AlternatingObserver: SessionObserver {
    func sessionOpened(_ session: SessionState) {}
    func sessionClosed(_ session: SessionState) {}
    func clientPropertiesChanged(_ session: SessionState) {}
    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? { nil }
    func recordStreamStarted(_ session: SessionState, stream: RecordStream) { stream.setReal(session.id % 2 == 1) }
    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {}
    func recordStreamMoved(_ session: SessionState, stream: RecordStream) {}
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? { nil }
}

@Suite(.serialized) struct RelayTests {
    @Test("flooded record streams arrive whole and in order through small rings, real or silenced per stream")
    func floodThroughSmallRings() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("earmuff-relay-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Odd payload size: frames straddle the ring's wrap point at ever-changing offsets.
        let flood = try FloodServer(socketPath: dir + "/upstream", payloadBytes: 1_003)
        defer { flood.stop() }
        var options = RelayOptions()
        options.ringCapacity = 4096
        let daemon = try Daemon(listenPath: dir + "/native", upstream: .unix(dir + "/upstream"), options: options,
                                observer: AlternatingObserver()) { pid, uid, gid, _ in
            ClientIdentity(pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "exe", value: "relay-test"), method: .executable)
        }
        try daemon.start()
        defer { daemon.stop() }

        let clients = 4
        let wanted = 512 * 1024
        let failures = Mutex<[String]>([])
        let kinds = Mutex<[UInt8]>([])
        DispatchQueue.concurrentPerform(iterations: clients) { i in
            do {
                let c = try RawClient(path: dir + "/native")
                defer { c.close() }
                try c.handshake(name: "relay-\(i)")
                guard let (command, r) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                      command == Command.reply.rawValue else { throw TestSupportError("no CREATE_RECORD_STREAM reply") }
                var reader = r
                let reply = try CreateRecordStreamReply.decode(from: &reader, version: Limits.protocolVersion)
                var received = 0
                var bytes: Set<UInt8> = []
                while received < wanted {
                    guard let frame = try c.readFrame(timeout: 30) else { throw TestSupportError("stalled after \(received) bytes") }
                    guard !frame.descriptor.isPacket else { continue }
                    #expect(frame.descriptor.channel == reply.channel)
                    #expect(frame.payload.count == 1_003, "frames keep their length")
                    bytes.formUnion(frame.payload)
                    received += frame.payload.count
                }
                // Each client saw only one kind of byte: the flood pattern or silence.
                if bytes.count != 1 || !(bytes.contains(FloodServer.payloadByte) || bytes.contains(0)) {
                    failures.withLock { $0.append("client \(i): bytes \(bytes.sorted())") }
                } else {
                    kinds.withLock { $0.append(bytes.first!) } // exactly one element, checked above
                }
            } catch {
                failures.withLock { $0.append("client \(i): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        // Sessions 1 and 3 are granted, 2 and 4 silenced.
        let seen = kinds.withLock { $0 }.sorted()
        #expect(seen == [0, 0, FloodServer.payloadByte, FloodServer.payloadByte], "\(seen)")
    }
}
