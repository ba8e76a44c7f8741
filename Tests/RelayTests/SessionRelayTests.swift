// The relay's two event loops and rings, in process, against the synthetic
// flood server: every byte of every stream arrives, in order, real or silenced
// as the observer says, through rings small enough to wrap and park all the
// time. Run under the thread sanitizer in CI.
import Basics
import Foundation
@testable import Relay
import PulseWire
import Runtime
import StreamState
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
    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? { "no permission extension here" }
}

/// A new directory for one relay's sockets.
private func relayDirectory(_ name: String) throws -> String {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("earmuff-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// A started relay listening at `dir`/native in front of `dir`/upstream; every client is one app.
private func startRelay(in dir: String, options: RelayOptions, observer: SessionObserver) throws -> Daemon {
    let daemon = try Daemon(
        listenPath: dir + "/native", upstream: .unix(dir + "/upstream"), options: options,
        observer: observer
    ) { pid, uid, gid, _ in
        ClientIdentity(pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "exe", value: "relay-test"), method: .executable)
    }
    try daemon.start()
    return daemon
}

@Suite(.serialized) struct SessionRelayTests {
    @Test("flooded record streams arrive whole and in order through small rings, real or silenced per stream")
    func floodThroughSmallRings() throws {
        let dir = try relayDirectory("relay")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Odd payload size: frames straddle the ring's wrap point at ever-changing offsets.
        let flood = try FloodServer(socketPath: dir + "/upstream", payloadBytes: 1_003)
        defer { flood.stop() }
        var options = RelayOptions()
        options.ringCapacity = 4096
        let daemon = try startRelay(in: dir, options: options, observer: AlternatingObserver())
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
                    command == Command.reply.rawValue
                else { throw TestSupportError("no CREATE_RECORD_STREAM reply") }
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

/// Grants every stream.
private final class GrantingObserver: SessionObserver {
    func sessionOpened(_ session: SessionState) {}
    func sessionClosed(_ session: SessionState) {}
    func clientPropertiesChanged(_ session: SessionState) {}
    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? { nil }
    func recordStreamStarted(_ session: SessionState, stream: RecordStream) { stream.setReal(true) }
    func recordStreamMoved(_ session: SessionState, stream: RecordStream) {}
    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {}
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? { nil }
    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? { "no permission extension here" }
}

@Suite(.serialized) struct CoalescingTests {
    /// Streams at audio rate (20 ms memblocks, each stream at its own phase,
    /// the flood server sending every 2 ms: about one memblock at a time)
    /// through one loop: with an 8 ms batching window the loop handles several
    /// memblocks per wake-up (without one, about one each), every byte still
    /// arrives in order, and a request made meanwhile is answered. Audio never
    /// makes the loop poll for a flood's next bytes.
    @Test func audioRateStreamsShareWakeUps() throws {
        let dir = try relayDirectory("coalesce")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let chunk = 3840 // 20 ms of float32 mono 48 kHz
        let flood = try FloodServer(
            socketPath: dir + "/upstream", pacing: .paced(bytesPerSecond: 192_000, chunkBytes: chunk),
            payloadBytes: chunk)
        defer { flood.stop() }
        var options = RelayOptions()
        options.loops = 1
        options.coalesceWindow = 0.008
        let daemon = try startRelay(in: dir, options: options, observer: GrantingObserver())
        defer { daemon.stop() }

        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for i in 0..<10 {
            let c = try RawClient(path: dir + "/native")
            try c.handshake(name: "coalesce-\(i)")
            guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                command == Command.reply.rawValue
            else { throw TestSupportError("client \(i): no CREATE_RECORD_STREAM reply") }
            clients.append(c)
        }
        // Every client's frames, read in turn until each has `wanted` memblocks.
        let wanted = 100 // 2 s of audio per stream
        var frames = [Int](repeating: 0, count: clients.count)
        let loop = daemon.loops[0]
        let wakeUpsBefore = loop.wakeUps.load(ordering: .relaxed)
        let counters = daemon.tunings[0].counters
        let deadline = Wait.now() + 120
        while frames.contains(where: { $0 < wanted }) && Wait.now() < deadline {
            for (i, c) in clients.enumerated() where frames[i] < wanted {
                guard let f = try c.readFrame(timeout: 0.001), !f.descriptor.isPacket else { continue }
                #expect(
                    f.payload.count == chunk && f.payload.allSatisfy { $0 == FloodServer.payloadByte },
                    "client \(i): a memblock of \(f.payload.count) bytes arrived changed")
                frames[i] += 1
            }
        }
        let wakeUps = loop.wakeUps.load(ordering: .relaxed) - wakeUpsBefore
        let moved = frames.reduce(0, +)
        #expect(!frames.contains(where: { $0 < wanted }), "memblocks per client: \(frames)")
        // Unbatched, each memblock costs about one wake-up (1,000 here).
        #expect(wakeUps * 2 < moved, "\(wakeUps) wake-ups for \(moved) memblocks")
        let flowPolls = counters.flowPollsFound.load(ordering: .relaxed) + counters.flowPollsRanOut.load(ordering: .relaxed)
        #expect(flowPolls == 0, "\(flowPolls) polls for a flood's bytes, with audio only")

        // A request is answered while the streams run.
        let asker = try RawClient(path: dir + "/native")
        defer { asker.close() }
        try asker.handshake(name: "asker")
        let info = try asker.request(RawClient.packet(.getServerInfo, tag: 3), tag: 3)
        #expect(info?.command == Command.reply.rawValue)
    }
}

extension CoalescingTests {
    /// One stream faster than audio (the flood server sending as fast as the socket
    /// takes it) is not held back: the loop does not sleep to let it gather. A relay
    /// faster than its server reads such a stream in small pieces; judged by the
    /// size of a wake-up's reads, the loop slept after every other read. Between its
    /// turns the loop polls for the flood's next bytes rather than sleep, and its
    /// polls find them.
    @Test func aFloodingStreamIsNotBatched() throws {
        let dir = try relayDirectory("flood")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let flood = try FloodServer(socketPath: dir + "/upstream")
        defer { flood.stop() }
        var options = RelayOptions()
        options.loops = 1
        options.coalesceWindow = 0.002
        let daemon = try startRelay(in: dir, options: options, observer: GrantingObserver())
        defer { daemon.stop() }
        let c = try RawClient(path: dir + "/native")
        defer { c.close() }
        try c.handshake(name: "flood")
        guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
            command == Command.reply.rawValue
        else { throw TestSupportError("no CREATE_RECORD_STREAM reply") }

        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { unsafe buffer.deallocate() }
        /// Reads `bytes` of the flood (or what comes within 30 s); returns how many came.
        func read(_ bytes: Int) -> Int {
            var received = 0
            let start = Wait.now()
            while received < bytes && Wait.now() - start < 30 {
                var pfd = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
                guard unsafe poll(&pfd, 1, 5000) > 0 else { break }
                let n = unsafe recv(c.fd, buffer.baseAddress, buffer.count, 0)
                guard n > 0 else { break }
                received += n
            }
            return received
        }
        // The first 20 ms period tells the loop the stream is fast; count after it.
        #expect(read(32 << 20) >= 32 << 20, "the flood stopped")
        let counters = daemon.tunings[0].counters
        let sleepsBefore = counters.batchingSleeps.load(ordering: .relaxed)
        let foundBefore = counters.flowPollsFound.load(ordering: .relaxed)
        let start = Wait.now()
        let received = read(256 << 20)
        let elapsed = Wait.now() - start
        let sleeps = counters.batchingSleeps.load(ordering: .relaxed) - sleepsBefore
        #expect(received >= 256 << 20, "the flood stopped after \(received) bytes")
        // Asleep, the loop lets the flood server's socket fill and stop it.
        let asleep = Double(sleeps) * options.coalesceWindow
        #expect(
            asleep < 0.05 * elapsed,
            "\(sleeps) batching sleeps of 2 ms in \(elapsed) s, for \(received >> 20) MiB")
        let found = counters.flowPollsFound.load(ordering: .relaxed) - foundBefore
        #expect(found > 0, "no poll found the flood's next bytes in \(received >> 20) MiB")
    }
}

@Suite(.serialized) struct ReplyWaitTests {
    /// One loop's counts over some round trips.
    struct Polls {
        var found = 0, ranOut = 0, batchingSleeps = 0
        /// Polls for the app's next request.
        var requestFound = 0, requestRanOut = 0

        static func - (a: Polls, b: Polls) -> Polls {
            Polls(
                found: a.found - b.found, ranOut: a.ranOut - b.ranOut, batchingSleeps: a.batchingSleeps - b.batchingSleeps,
                requestFound: a.requestFound - b.requestFound, requestRanOut: a.requestRanOut - b.requestRanOut)
        }
    }

    /// A fresh one-loop relay in front of a flood server, and a client handshaken through it.
    private final class Rig {
        let dir: String
        let flood: FloodServer
        let daemon: Daemon
        let client: RawClient
        private var tag: UInt32 = 10

        init(coalesceWindow: Double) throws {
            dir = try relayDirectory("replies")
            flood = try FloodServer(socketPath: dir + "/upstream")
            var options = RelayOptions()
            options.loops = 1
            options.coalesceWindow = coalesceWindow
            daemon = try startRelay(in: dir, options: options, observer: GrantingObserver())
            client = try RawClient(path: dir + "/native")
            try client.handshake(name: "replies")
        }

        /// `count` GET_SERVER_INFO round trips, `pause` seconds apart; the loop's counts over them.
        func roundTrips(_ count: Int, pause: Double = 0) throws -> Polls {
            let loop = daemon.tunings[0].counters
            func now() -> Polls {
                Polls(
                    found: loop.pollsFound.load(ordering: .relaxed), ranOut: loop.pollsRanOut.load(ordering: .relaxed),
                    batchingSleeps: loop.batchingSleeps.load(ordering: .relaxed),
                    requestFound: loop.requestPollsFound.load(ordering: .relaxed),
                    requestRanOut: loop.requestPollsRanOut.load(ordering: .relaxed))
            }
            let before = now()
            for _ in 0..<count {
                if pause > 0 { usleep(useconds_t(pause * 1e6)) }
                tag += 1
                let answer = try client.request(RawClient.packet(.getServerInfo, tag: tag), tag: tag)
                #expect(answer?.command == Command.reply.rawValue, "round trip \(tag)")
            }
            return now() - before
        }

        func stop() {
            client.close()
            daemon.stop()
            flood.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// Once a loop's reply polls keep running out (a server slower than the window), it
    /// sleeps at once and probes once in `probeInterval` requests; once a probe catches a
    /// reply, it polls again. (When
    /// a reply comes is up to the scheduler: only the count of polls is checked, and the
    /// fast server is given as many round trips as a probe needs to catch a reply.)
    @Test func aLoopPollsForRepliesWhilePollingFindsThem() throws {
        let rig = try Rig(coalesceWindow: 0)
        defer { rig.stop() }
        rig.flood.serverInfoDelayMicroseconds.store(2_000, ordering: .relaxed)
        let learning = try rig.roundTrips(20)
        #expect(learning.ranOut >= 1 && learning.ranOut + learning.found <= 8, "halving from 200 µs to nothing: \(learning)")
        // Six probes, and room for one that catches another event than its reply (a posted
        // task, on a slow machine: seen under the thread sanitizer): it brings the longest
        // window back, which four more polls halve to nothing.
        let slow = try rig.roundTrips(6 * ReplyPoll.probeInterval)
        #expect(
            slow.ranOut >= 1 && slow.ranOut + slow.found <= 8 + 5,
            "\(slow.ranOut + slow.found) polls in \(6 * ReplyPoll.probeInterval) slow round trips: \(slow)")

        rig.flood.serverInfoDelayMicroseconds.store(0, ordering: .relaxed)
        var found = 0
        for _ in 0..<40 where found == 0 {
            found += try rig.roundTrips(ReplyPoll.probeInterval / 2).found
        }
        #expect(found > 0, "no reply poll found its reply in \(20 * ReplyPoll.probeInterval) fast round trips")
    }

    /// After the last reply an app waited for, the loop polls for the app's next request,
    /// learned apart from the reply polls: for an app that thinks longer than the window
    /// between requests the polls run out and stop (but for a probe once in
    /// `probeInterval` replies); for one that sends its next request at once they find it.
    /// (When the app runs is up to the scheduler: only the count of polls is checked.)
    @Test func aLoopPollsForAnAppsNextRequestWhilePollingFindsIt() throws {
        let rig = try Rig(coalesceWindow: 0)
        defer { rig.stop() }
        let thinking = try rig.roundTrips(8 * ReplyPoll.probeInterval, pause: 0.002)
        #expect(
            thinking.requestRanOut >= 1 && thinking.requestRanOut + thinking.requestFound <= 14,
            "\(thinking.requestRanOut + thinking.requestFound) request polls in \(8 * ReplyPoll.probeInterval) round trips 2 ms apart: \(thinking)")
        var found = 0
        for _ in 0..<40 where found == 0 {
            found += try rig.roundTrips(ReplyPoll.probeInterval / 2).requestFound
        }
        #expect(found > 0, "no request poll found the next request in \(20 * ReplyPoll.probeInterval) back-to-back round trips")
    }

    /// A server that cannot run until the loop stops polling (both real-time and pinned to
    /// one CPU, the loop above the server, as a server the sync hint queued behind the loop
    /// is) answers right after each window runs out: the loop sleeps at once from the first
    /// such poll on, rather than halving its window over four round trips, each of which
    /// the server waits out. (Under the thread sanitizer the server takes longer than
    /// `ReplyPoll.peerWaited` to answer once it runs.)
    @Test(.enabled(if: getuid() == 0 && !threadSanitizerIsRunning)) func aServerKeptWaitingByThePollTurnsItOffAtOnce() throws {
        // An interrupt, the host taking the vCPU, or a server whose first answer runs
        // cold (page faults, caches) for more than `ReplyPoll.peerWaited` (50 µs) makes
        // the server look slow rather than kept waiting, and costs one halving: two
        // ran-out polls. So each attempt has a fresh relay, and one of ten must show at
        // most two. A loop that halved its window instead would run out four times
        // (200, 100, 50 and 25 µs) in every attempt.
        var attempts: [Polls] = []
        for _ in 0..<10 {
            let rig = try Rig(coalesceWindow: 0)
            defer { rig.stop() }
            let loop = rig.daemon.loops[0].kernelThreadID.load(ordering: .acquiring)
            let server = rig.flood.kernelThreadID.load(ordering: .acquiring)
            try #require(loop != 0 && server != 0)
            try ThreadScheduling.set(server, fifo: 1)
            try ThreadScheduling.set(loop, fifo: 2)
            defer {
                try? ThreadScheduling.set(loop, fifo: nil)
                try? ThreadScheduling.set(server, fifo: nil)
            }
            let polls = try rig.roundTrips(ReplyPoll.probeInterval - 1)
            attempts.append(polls)
            if (1...2).contains(polls.ranOut) && polls.found == 0 { break }
        }
        #expect(
            attempts.contains { (1...2).contains($0.ranOut) && $0.found == 0 },
            "reply polls while the server waits behind them, in each attempt: \(attempts)")
    }

    /// The wake-up that brings a reply is not followed by a wait for record audio to
    /// gather: the app's next request would wait behind it.
    /// Whether the loop polled for the reply or slept until it came.
    @Test func noBatchingAfterAReply() throws {
        let rig = try Rig(coalesceWindow: 0.008)
        defer { rig.stop() }
        let polled = try rig.roundTrips(200)
        #expect(polled.batchingSleeps == 0, "polling: \(polled.batchingSleeps) batching sleeps in 200 round trips")
        rig.flood.serverInfoDelayMicroseconds.store(1_000, ordering: .relaxed)
        _ = try rig.roundTrips(20)
        let slept = try rig.roundTrips(100)
        #expect(slept.found + slept.ranOut <= 100 / ReplyPoll.probeInterval + 1, "still polling: \(slept)")
        #expect(slept.batchingSleeps == 0, "sleeping: \(slept.batchingSleeps) batching sleeps in 100 round trips")
    }
}

/// A flood server of 64 KiB memblocks and a one-loop relay in front of it, whose odd
/// sessions are granted and even ones silenced (AlternatingObserver).
private struct SpliceRelay {
    let dir: String
    let flood: FloodServer
    let daemon: Daemon
    var loop: AudioTuning.Counters { daemon.tunings[0].counters }

    init(_ name: String, pacing: FloodServer.Pacing) throws {
        dir = try relayDirectory(name)
        flood = try FloodServer(socketPath: dir + "/upstream", pacing: pacing, payloadBytes: 64 * 1024)
        var options = RelayOptions()
        options.loops = 1
        do {
            daemon = try startRelay(in: dir, options: options, observer: AlternatingObserver())
        } catch {
            flood.stop()
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
    }

    func stop() {
        daemon.stop()
        flood.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

@Suite(.serialized) struct SpliceTests {
    /// Large memblocks whose samples pass go from the server's socket to the app's through
    /// the loop's pipe, unread; silenced ones are read and overwritten as always. Every frame
    /// arrives whole, with the right bytes, also for an app that stopped reading for a while
    /// (its socket and ring full) and then reads again.
    @Test func largePassingPayloadsAreSpliced() throws {
        let payload = 64 * 1024
        // Paced, so that apps which read keep up (apps that do not read keep their sockets full).
        let relay = try SpliceRelay("splice", pacing: .paced(bytesPerSecond: 1 << 20, chunkBytes: payload))
        defer { relay.stop() }
        let (dir, loop) = (relay.dir, relay.loop)

        // Sessions 1 and 3 (clients 0 and 2) are granted, 2 and 4 silenced (AlternatingObserver).
        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for i in 0..<4 {
            let c = try RawClient(path: dir + "/native")
            try c.handshake(name: "splice-\(i)")
            guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                command == Command.reply.rawValue
            else { throw TestSupportError("client \(i): no CREATE_RECORD_STREAM reply") }
            clients.append(c)
        }
        let expected = [FloodServer.payloadByte, 0].map { [UInt8](repeating: $0, count: payload) }
        var grantedBytes = 0
        /// Reads one memblock of client `i` and checks it.
        func read(from i: Int) throws {
            while true {
                guard let f = try clients[i].readFrame(timeout: 30) else { throw TestSupportError("client \(i) stalled") }
                guard !f.descriptor.isPacket else { continue }
                guard f.payload == expected[i % 2] else {
                    throw TestSupportError("client \(i): a memblock of \(f.payload.count) bytes arrived changed")
                }
                if i % 2 == 0 { grantedBytes += payload }
                return
            }
        }
        // The first granted app does not read while the others take 24 memblocks each: more
        // than its socket and its ring hold (about 5).
        for _ in 0..<24 {
            for i in 1..<4 { try read(from: i) }
        }
        for _ in 0..<32 {
            for i in 0..<4 { try read(from: i) }
        }
        // Most granted payload went through the pipe (the rest came with a read that took
        // more than a descriptor, or waited in the ring while an app did not read).
        let spliced = loop.splicedBytes.load(ordering: .relaxed)
        #expect(spliced * 4 > grantedBytes, "\(spliced) of \(grantedBytes) granted bytes spliced")
    }

    /// An app that reads slower than its server sends keeps its socket full. Its large
    /// passing payloads wait in the server's socket until the app's socket takes them, and
    /// are then spliced; they are not read into the ring to be copied twice.
    @Test func payloadsForAFullSocketWaitAndAreSpliced() throws {
        let payload = 64 * 1024
        let relay = try SpliceRelay("splice-wait", pacing: .flood)
        defer { relay.stop() }
        let loop = relay.loop
        // Session 1 is granted.
        let client = try RawClient(path: relay.dir + "/native")
        defer { client.close() }
        try client.handshake(name: "splice-wait")
        guard let (command, _) = try client.request(RawClient.createRecordStream(tag: 2), tag: 2),
            command == Command.reply.rawValue
        else { throw TestSupportError("no CREATE_RECORD_STREAM reply") }
        let expected = [UInt8](repeating: FloodServer.payloadByte, count: payload)
        var received = 0
        while received < 256 * payload {
            guard let f = try client.readFrame(timeout: 30) else { throw TestSupportError("stalled after \(received) bytes") }
            guard !f.descriptor.isPacket else { continue }
            guard f.payload == expected else { throw TestSupportError("a memblock of \(f.payload.count) bytes arrived changed") }
            received += f.payload.count
        }
        // The flood is always ahead of the app: without waiting, most payload would go
        // through the ring (each time the app's socket was full).
        let spliced = loop.splicedBytes.load(ordering: .relaxed)
        #expect(spliced * 10 >= received * 9, "\(spliced) of \(received) bytes spliced")
    }
}
