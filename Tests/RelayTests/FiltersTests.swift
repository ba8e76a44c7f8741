// The two direction filters, with a fake observer and a session of their own:
// what each packet and memblock turns into, without sockets.
import Basics
@testable import Relay
import PulseWire
import StreamState
import Testing

/// Records what the filters report; grants streams when `grant` is set, refuses LOAD_MODULE.
final class FakeObserver: SessionObserver, @unchecked Sendable {
    // @unchecked Sendable: used from one test thread only.
    var started: [RecordStream] = []
    var ended: [RecordStream] = []
    var moved: [RecordStream] = []
    var grant = false
    var closeOnRecord: String?
    /// Where a held stream says it records from; nil: every request is forwarded.
    var hold: HeldPlacement?
    func holdPlacement(_ session: SessionState, request: CreateRecordStreamRequest) -> HeldPlacement? { hold }
    /// The server's source-outputs that are concealed recordings.
    var concealed: Set<UInt32> = []
    func conceals(sourceOutput index: UInt32) -> Bool { concealed.contains(index) }
    /// (tag, error code) of every refused request.
    var refused: [(UInt32, UInt32)] = []

    func sessionOpened(_ session: SessionState) {}
    func sessionClosed(_ session: SessionState) {}
    func clientPropertiesChanged(_ session: SessionState) {}
    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? { closeOnRecord }
    func recordStreamStarted(_ session: SessionState, stream: RecordStream) {
        started.append(stream)
        stream.setReal(grant)
    }
    func recordStreamEnded(_ session: SessionState, stream: RecordStream) { ended.append(stream) }
    func recordStreamMoved(_ session: SessionState, stream: RecordStream) { moved.append(stream) }
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? {
        command == .loadModule ? "not allowed" : nil
    }
    private(set) var permissionCalls: [(tag: UInt32, call: PermissionCall)] = []
    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? {
        permissionCalls.append((tag, call))
        return nil
    }
}

/// What the record table asks of the session's halves.
final class FakeOutlet: RecordOutlet {
    var toClient: [[UInt8]] = []
    var upstreamCalls = 0
    var ticks: [Double] = []
    func toClient(_ packet: [UInt8]) { toClient.append(packet) }
    func upstreamQueued() { upstreamCalls += 1 }
    func tick(after period: Double) { ticks.append(period) }
}

/// A packet payload: command, tag, then whatever `body` writes.
func payload(_ command: UInt32, tag: UInt32, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
    var w = TagStructWriter()
    PacketHeader(command: command, tag: tag).encode(into: &w)
    body(&w)
    return w.bytes
}

func payload(_ command: Command, tag: UInt32, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
    payload(command.rawValue, tag: tag, body)
}

struct Pair {
    let state: SessionState
    let conversation: Conversation
    let observer = FakeObserver()
    let c2s: ClientToServerFilter
    let s2c: ServerToClientFilter

    init() {
        let identity = ClientIdentity(
            pid: 1, uid: 1000, gid: 1000, appKey: AppKey(kind: "exe", value: "/usr/bin/app"),
            method: .executable)
        let state = SessionState(id: 1, identity: identity, launcherAppID: nil, connectedAt: 0)
        let conversation = Conversation(state)
        self.state = state
        self.conversation = conversation
        let observer = self.observer
        var next: UInt64 = 0
        let records = RecordChannels(
            conversation: conversation, observer: observer,
            newStreamID: {
                next += 1; return next
            },
            post: { $0() })
        records.outlet = outlet
        c2s = ClientToServerFilter(conversation: conversation, observer: observer, channels: records) { tag, code in
            observer.refused.append((tag, code))
        }
        s2c = ServerToClientFilter(conversation: conversation, observer: observer, channels: records)
    }

    let outlet = FakeOutlet()

    func s2cMemblock(length: UInt32, channel: UInt32) throws -> (FrameDisposition, UInt32) {
        var d = FrameDescriptor(length: length, channel: channel)
        let disposition = try s2c.memblock(&d)
        return (disposition, d.channel)
    }

    /// AUTH (with the SHM and memfd bits) both ways.
    func authenticate() throws {
        var auth = AuthRequest(versionWord: 0xC000_0000 | Limits.protocolVersion).packet(tag: 0, version: 0)
        #expect(try c2s.packet(&auth) == .pass)
        #expect(
            try AuthRequest.decodePacket(auth, version: 0).message.versionWord == Limits.protocolVersion,
            "the client's transport flags are stripped")
        var reply = AuthReply(versionWord: 0x8000_0000 | Limits.protocolVersion).packet(tag: 0, version: 0)
        #expect(try s2c.packet(&reply) == .pass)
        #expect(
            try AuthReply.decodePacket(reply, version: 0).message.versionWord == Limits.protocolVersion,
            "the server's transport flags are stripped")
    }

    /// CREATE_RECORD_STREAM request and reply for `channel` in `format`.
    func createRecord(tag: UInt32, channel: UInt32, format: SampleFormat) throws {
        var req = CreateRecordStreamRequest()
        req.sampleSpec = SampleSpec(format: format, channels: 1, rate: 48000)
        req.channelMap = .mono
        req.volume = CVolume(channels: 1, volume: CVolume.norm)
        var request = req.packet(tag: tag, version: Limits.protocolVersion)
        #expect(try c2s.packet(&request) == .pass)
        var rep = CreateRecordStreamReply()
        rep.channel = channel
        rep.sourceOutputIndex = 40 + channel
        rep.sampleSpec = req.sampleSpec
        rep.channelMap = .mono
        rep.sourceName = "mic"
        var reply = rep.packet(tag: tag, version: Limits.protocolVersion)
        #expect(try s2c.packet(&reply) == .pass)
    }
}

@Suite struct FiltersTests {
    @Test("client to server: AUTH first and once, no server-only or unknown opcodes, no audio before AUTH")
    func clientToServerOrder() throws {
        let p = Pair()
        var early = payload(.getServerInfo, tag: 1)
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&early) }
        #expect(throws: ProtocolViolation.self) {
            try {
                var d = FrameDescriptor(length: 4, channel: 0); return try Pair().c2s.memblock(&d)
            }()
        }
        try p.authenticate()
        var second = AuthRequest(versionWord: Limits.protocolVersion).packet(tag: 2, version: 0)
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&second) }
        var serverOnly = payload(.request, tag: 3)
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&serverOnly) }
        var unknown = payload(0xFFF0, tag: 4)
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&unknown) }
        var srb = payload(.registerMemfdShmid, tag: 5)
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&srb) }
        if case .pass = try {
            var d = FrameDescriptor(length: 4, channel: 0); return try p.c2s.memblock(&d)
        }() {
        } else {
            Issue.record("playback data after AUTH passes")
        }
    }

    @Test("requests to module-earmuff go to the observer, never to the server; other extensions to the policy")
    func permissionExtension() throws {
        let p = Pair()
        try p.authenticate()
        var request = PermissionCall.request(kind: "microphone", purpose: "Memos").packet(tag: 7)
        #expect(try p.c2s.packet(&request) == .drop)
        #expect(p.observer.permissionCalls.map(\.tag) == [7])
        #expect(p.observer.permissionCalls.first?.call == .request(kind: "microphone", purpose: "Memos"))
        #expect(p.conversation.tagProblem(7) == nil, "the tag waits for no server reply")
        var restore = payload(.extension, tag: 8) {
            $0.writeU32(invalidIndex)
            $0.writeString("module-stream-restore")
            $0.writeU32(1)
        }
        #expect(try p.c2s.packet(&restore) == .pass)
        #expect(p.observer.permissionCalls.count == 1)
        var malformed = PermissionCall.get(kind: "microphone").packet(tag: 9) + [0x4C, 0, 0, 0, 1]
        #expect(throws: ProtocolViolation.self) { try p.c2s.packet(&malformed) }
    }

    @Test("a refused request is dropped and answered with ERROR(ACCESS) under its tag")
    func refusedRequest() throws {
        let p = Pair()
        try p.authenticate()
        var load = payload(.loadModule, tag: 9) {
            $0.writeString("module-null-sink"); $0.writeString("")
        }
        #expect(try p.c2s.packet(&load) == .drop)
        let refused = p.observer.refused
        #expect(refused.count == 1 && refused[0].0 == 9 && refused[0].1 == ErrorCode.access.rawValue)
        var info = payload(.getServerInfo, tag: 10)
        #expect(try p.c2s.packet(&info) == .pass)
    }

    @Test("a missing purpose closes the connection before the request is forwarded")
    func recordRequestRefused() throws {
        let p = Pair()
        try p.authenticate()
        p.observer.closeOnRecord = "missing-purpose"
        #expect(throws: ProtocolViolation("missing-purpose")) {
            try p.createRecord(tag: 2, channel: 0, format: .s16le)
        }
    }

    @Test("record streams: silence of their format until granted, dropped once ended or unknown")
    func recordStreams() throws {
        let p = Pair()
        try p.authenticate()
        try p.createRecord(tag: 2, channel: 3, format: .u8)
        #expect(p.observer.started.count == 1)
        let stream = try #require(p.observer.started.first)
        #expect(stream.channel == 3 && stream.sampleSpec.format == .u8 && stream.sourceName == "mic")
        #expect(p.state.ownSourceOutputs.withLock { $0 } == [43])
        guard case .silence(0x80) = try p.s2cMemblock(length: 64, channel: 3).0, p.s2c.records[3] === stream else {
            Issue.record("an ungranted u8 stream is silenced with 0x80")
            return
        }
        stream.setReal(true)
        guard case .pass = try p.s2cMemblock(length: 64, channel: 3).0, p.s2c.records[3] === stream else {
            Issue.record("a granted stream passes")
            return
        }
        if case .drop = try p.s2cMemblock(length: 64, channel: 4).0 {
        } else {
            Issue.record("a memblock on an unknown channel is dropped")
        }
        var killed = RecordStreamKilled(channel: 3).packet(tag: 0xFFFF_FFFF, version: Limits.protocolVersion)
        #expect(try p.s2c.packet(&killed) == .pass)
        #expect(p.observer.ended.map(\.channel) == [3])
        #expect(p.state.ownSourceOutputs.withLock { $0 }.isEmpty)
        if case .drop = try p.s2cMemblock(length: 64, channel: 3).0 {
        } else {
            Issue.record("a memblock of a killed stream is dropped")
        }
    }

    @Test("RECORD_STREAM_MOVED: the stream's placement is the new source, and it is decided again before its next frame")
    func recordStreamMoved() throws {
        let p = Pair()
        try p.authenticate()
        try p.createRecord(tag: 2, channel: 3, format: .s16le)
        let stream = try #require(p.observer.started.first)
        #expect(!stream.directOnInput && stream.placement.withLock { $0.kind } == nil)
        var moved = RecordStreamMoved(channel: 3, sourceIndex: 0, sourceName: "out.monitor", suspended: false)
            .packet(tag: 0xFFFF_FFFF, version: Limits.protocolVersion)
        #expect(try p.s2c.packet(&moved) == .pass)
        #expect(p.observer.moved.map { $0 === stream } == [true])
        let placement = stream.placement.withLock { $0 }
        #expect(placement.source == "out.monitor" && placement.sourceIndex == 0 && placement.movedAt > 0)
        // A move of a channel that is not a record stream of this session is forwarded and otherwise ignored.
        var other = RecordStreamMoved(channel: 9, sourceIndex: 1, sourceName: "mic", suspended: false)
            .packet(tag: 0xFFFF_FFFF, version: Limits.protocolVersion)
        #expect(try p.s2c.packet(&other) == .pass)
        #expect(p.observer.moved.count == 1)
    }

    @Test("a reused channel ends the stale stream; endAll ends the rest")
    func reusedChannelAndEndAll() throws {
        let p = Pair()
        try p.authenticate()
        try p.createRecord(tag: 2, channel: 1, format: .s16le)
        try p.createRecord(tag: 3, channel: 1, format: .float32le)
        try p.createRecord(tag: 4, channel: 2, format: .s16le)
        #expect(p.observer.ended.count == 1 && p.observer.ended[0] === p.observer.started[0])
        p.s2c.endAll()
        #expect(p.observer.ended.count == 3)
    }

    @Test("a server setting up shared memory is a protocol violation")
    func serverSharedMemory() throws {
        let p = Pair()
        try p.authenticate()
        var srb = payload(.enableSrbchannel, tag: 0xFFFF_FFFF)
        #expect(throws: ProtocolViolation.self) { try p.s2c.packet(&srb) }
    }
}

@Suite struct OwnNodeFilterTests {
    /// A source record reply (or list) of a v35 server under `tag`.
    private func sources(_ names: [String], tag: UInt32) -> [UInt8] {
        payload(.reply, tag: tag) { w in
            SourceInfoReply(records: names.enumerated().map { SourceInfo(index: UInt32($0.offset), name: $0.element) })
                .encode(into: &w, version: Limits.protocolVersion)
        }
    }

    @Test("Earmuff's own nodes: left out of source lists, and a source that does not exist when asked for")
    func ownNodesAreNoOnesSource() throws {
        let p = Pair()
        try p.authenticate()
        var list = payload(.getSourceInfoList, tag: 1)
        #expect(try p.c2s.packet(&list) == .pass)
        var listed = sources(["mic", "earmuff.silence", "earmuff.valve.3", "out.monitor"], tag: 1)
        #expect(try p.s2c.packet(&listed) == .pass)
        var r = TagStructReader(listed, from: PacketHeader.encodedSize)
        #expect(try SourceInfoReply.decode(from: &r, version: Limits.protocolVersion).records.map(\.name) == ["mic", "out.monitor"])

        // By index: the server's reply becomes ERROR(NOENTITY) under the request's tag.
        var byIndex = GetSourceInfo(index: 1).packet(tag: 2, version: Limits.protocolVersion)
        #expect(try p.c2s.packet(&byIndex) == .pass)
        var one = sources(["earmuff.silence"], tag: 2)
        #expect(try p.s2c.packet(&one) == .pass)
        let error = try ErrorReply.decodePacket(one, version: Limits.protocolVersion)
        #expect(error.tag == 2 && error.message.errorCode == .noEntity)
        // Another source's reply passes as it came.
        var mic = GetSourceInfo(index: 0).packet(tag: 3, version: Limits.protocolVersion)
        #expect(try p.c2s.packet(&mic) == .pass)
        var micReply = sources(["mic"], tag: 3)
        let sent = micReply
        #expect(try p.s2c.packet(&micReply) == .pass && micReply == sent)

        // By name, and recording from one: refused before the server hears of it.
        var byName = GetSourceInfo(name: "earmuff.silence").packet(tag: 4, version: Limits.protocolVersion)
        #expect(try p.c2s.packet(&byName) == .drop)
        var request = CreateRecordStreamRequest()
        request.sourceName = "earmuff.valve.1"
        var record = request.packet(tag: 5, version: Limits.protocolVersion)
        #expect(try p.c2s.packet(&record) == .drop)
        #expect(p.observer.refused.map { [$0.0, $0.1] } == [[4, ErrorCode.noEntity.rawValue], [5, ErrorCode.noEntity.rawValue]])
    }

    /// A source-output record reply (or list) of a v35 server under `tag`.
    private func sourceOutputs(_ indexes: [UInt32], tag: UInt32) -> [UInt8] {
        payload(.reply, tag: tag) { w in
            SourceOutputInfoReply(records: indexes.map { SourceOutputInfo(index: $0, source: 1) })
                .encode(into: &w, version: Limits.protocolVersion)
        }
    }

    @Test("A concealed recording: left out of source-output lists, no such entity when asked for, never announced")
    func concealedRecordingsAreNoRecordings() throws {
        let p = Pair()
        try p.authenticate()
        p.observer.concealed = [49]
        var list = payload(.getSourceOutputInfoList, tag: 1)
        #expect(try p.c2s.packet(&list) == .pass)
        var listed = sourceOutputs([48, 49, 50], tag: 1)
        #expect(try p.s2c.packet(&listed) == .pass)
        var r = TagStructReader(listed, from: PacketHeader.encodedSize)
        #expect(try SourceOutputInfoReply.decode(from: &r, version: Limits.protocolVersion).records.map(\.index) == [48, 50])

        var byIndex = GetSourceOutputInfo(index: 49).packet(tag: 2, version: Limits.protocolVersion)
        #expect(try p.c2s.packet(&byIndex) == .pass)
        var one = sourceOutputs([49], tag: 2)
        #expect(try p.s2c.packet(&one) == .pass)
        let error = try ErrorReply.decodePacket(one, version: Limits.protocolVersion)
        #expect(error.tag == 2 && error.message.errorCode == .noEntity)

        // Its birth and changes are not announced; its removal is, and another's events are.
        for (index, operation, passes) in [
            (49, SubscribeEvent.Operation.new, false), (49, .change, false), (49, .remove, true),
            (48, .new, true),
        ] as [(UInt32, SubscribeEvent.Operation, Bool)] {
            var event = SubscribeEvent(.sourceOutput, operation, index: index).packet(tag: invalidIndex, version: Limits.protocolVersion)
            #expect(try p.s2c.packet(&event) == (passes ? .pass : .drop), "\(operation) of \(index)")
        }
        var sink = SubscribeEvent(.sinkInput, .new, index: 49).packet(tag: invalidIndex, version: Limits.protocolVersion)
        #expect(try p.s2c.packet(&sink) == .pass)
    }
}
