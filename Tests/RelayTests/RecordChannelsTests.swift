// Held record streams, without sockets: a stream that may not record is answered by Earmuff
// and gets silence on its own clock; a decision gives it a stream on the server or takes that
// away, and the app's channel, indexes and replies stay its own throughout.
import Basics
@testable import Relay
import PulseWire
import Runtime
import StreamState
import Testing

@Suite struct RecordChannelsTests {
    static let version = Limits.protocolVersion
    static let held = RecordChannels.firstHeldNumber

    /// An s16le mono request at 48 kHz, as parecord sends it.
    static func request(corked: Bool = false) -> CreateRecordStreamRequest {
        var r = CreateRecordStreamRequest()
        r.sampleSpec = SampleSpec(format: .s16le, channels: 1, rate: 48000)
        r.channelMap = .mono
        r.volume = CVolume(channels: 1, volume: CVolume.norm)
        r.fixRate = true
        r.corked = corked
        return r
    }

    /// A pair whose record requests are held on `mic` (index 1); the held stream's reply.
    static func holding(corked: Bool = false) throws -> (Pair, CreateRecordStreamReply) {
        let p = Pair()
        try p.authenticate()
        p.observer.hold = HeldPlacement(sourceName: "mic", sourceIndex: 1)
        var create = request(corked: corked).packet(tag: 2, version: version)
        #expect(try p.c2s.packet(&create) == .drop, "a held request is not forwarded")
        #expect(p.conversation.tagProblem(2) == nil, "nothing waits for a server reply")
        #expect(p.outlet.toClient.count == 1)
        let reply = try CreateRecordStreamReply.decodePacket(try #require(p.outlet.toClient.first), version: version)
        #expect(reply.tag == 2)
        p.outlet.toClient.removeAll()
        return (p, reply.message)
    }

    /// The memblocks of what `dueSilence` returned.
    static func memblocks(_ bytes: [UInt8]) -> [(descriptor: FrameDescriptor, payload: ArraySlice<UInt8>)] {
        var out: [(FrameDescriptor, ArraySlice<UInt8>)] = []
        var at = 0
        while at + Limits.descriptorSize <= bytes.count {
            let d = unsafe bytes[at..<(at + Limits.descriptorSize)].withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
            let end = min(bytes.count, at + Limits.descriptorSize + Int(d.length))
            out.append((d, bytes[(at + Limits.descriptorSize)..<end]))
            at = end
        }
        return out
    }

    /// The request Earmuff queued for the server (its tag and packet).
    static func upstream(_ p: Pair) throws -> (tag: UInt32, packet: [UInt8]) {
        let queued = p.c2s.channels.takeUpstream()
        #expect(queued.count == 1)
        let packet = try #require(queued.first)
        var r = TagStructReader(packet)
        return (try PacketHeader.decode(from: &r).tag, packet)
    }

    @Test("a held stream is answered here, as the server would answer it, and gets silence on its own clock")
    func heldStreamIsAnsweredHere() throws {
        let (p, reply) = try Self.holding()
        #expect(reply.channel == Self.held && reply.sourceOutputIndex == Self.held)
        #expect(reply.sampleSpec == SampleSpec(format: .s16le, channels: 1, rate: 48000) && reply.channelMap == .mono)
        #expect(reply.maxLength == RecordChannels.maximumLength && reply.fragSize == 192_000, "2 s of audio by default")
        #expect(reply.sourceName == "mic" && reply.sourceIndex == 1)
        let stream = try #require(p.observer.started.first)
        #expect(stream.channel == Self.held && !stream.isReal && p.s2c.records[Self.held] === stream)
        #expect(p.c2s.channels.takeUpstream().isEmpty, "nothing is asked of the server")
        #expect(p.state.ownSourceOutputs.withLock { $0 }.isEmpty && !p.conversation.holdsNothing)
        #expect(p.outlet.ticks == [RecordChannels.tickBounds.high])

        // Whole pieces of one tick (0.1 s: 9600 bytes): two of the quarter second due.
        let frames = Self.memblocks(p.s2c.channels.dueSilence(now: monotonicNow() + 0.25, room: 1 << 20))
        #expect(frames.map(\.descriptor.length) == [9600, 9600], "\(frames.map(\.descriptor))")
        for (d, payload) in frames {
            #expect(d.channel == Self.held && payload.allSatisfy { $0 == 0 })
        }
        #expect(stream.bytesSilenced.load(ordering: .relaxed) == 19_200)
        #expect(p.s2c.channels.dueSilence(now: monotonicNow() + 0.5, room: 9000).isEmpty, "no more than the ring takes")
        #expect(Self.memblocks(p.s2c.channels.dueSilence(now: monotonicNow() + 0.5, room: 10_000)).count == 1)

        var latency = payload(.getRecordLatency, tag: 3) {
            $0.writeU32(Self.held)
            $0.writeTimeval(Timeval(seconds: 7, microseconds: 8))
        }
        #expect(try p.c2s.packet(&latency) == .drop)
        let answer = try RecordLatencyReply.decodePacket(try #require(p.outlet.toClient.last), version: Self.version)
        #expect(answer.tag == 3 && answer.message.running && answer.message.requestTime == Timeval(seconds: 7, microseconds: 8))
        #expect(answer.message.readIndex == Int64(stream.bytesSilenced.load(ordering: .relaxed)))

        var cork = CorkRecordStream(channel: Self.held, corked: true).packet(tag: 4, version: Self.version)
        #expect(try p.c2s.packet(&cork) == .drop)
        #expect(try Reply.decode(try #require(p.outlet.toClient.last)).reply.tag == 4)
        #expect(p.s2c.channels.dueSilence(now: monotonicNow() + 1, room: 1 << 20).isEmpty, "a corked stream gets nothing")

        var info = payload(.getSourceOutputInfo, tag: 5) { $0.writeU32(Self.held) }
        #expect(try p.c2s.packet(&info) == .drop)
        #expect(
            try ErrorReply.decodePacket(try #require(p.outlet.toClient.last), version: Self.version).message.errorCode == .noEntity,
            "the server has no source output for it")

        var delete = DeleteRecordStream(channel: Self.held).packet(tag: 6, version: Self.version)
        #expect(try p.c2s.packet(&delete) == .drop)
        #expect(p.observer.ended.map(\.channel) == [Self.held] && p.conversation.holdsNothing)
    }

    @Test("granted, a held stream gets a stream on the server with what the app was given; its audio comes under the app's channel")
    func grantGivesAHeldStreamAServerStream() throws {
        let (p, _) = try Self.holding()
        let stream = try #require(p.observer.started.first)
        _ = p.s2c.channels.dueSilence(now: monotonicNow() + 0.1, room: 1 << 20)
        stream.placement.withLock { $0.kind = .microphone }
        stream.setReal(true)
        let (tag, packet) = try Self.upstream(p)
        #expect(tag >= RecordChannels.firstOwnTag && p.conversation.tagProblem(tag) != nil)
        let asked = try CreateRecordStreamRequest.decodePacket(packet, version: Self.version).message
        #expect(asked.sampleSpec == SampleSpec(format: .s16le, channels: 1, rate: 48000) && !asked.fixRate)
        #expect(asked.fragSize == 192_000 && asked.maxLength == RecordChannels.maximumLength && !asked.corked)

        // Its reply is Earmuff's, never the app's.
        var created = CreateRecordStreamReply()
        created.channel = 5
        created.sourceOutputIndex = 77
        created.sampleSpec = asked.sampleSpec
        created.channelMap = .mono
        created.sourceIndex = 1
        created.sourceName = "mic"
        var reply = created.packet(tag: tag, version: Self.version)
        #expect(try p.s2c.packet(&reply) == .drop)
        #expect(p.state.ownSourceOutputs.withLock { $0 } == [77] && stream.serverOutput.load(ordering: .relaxed) == 77)
        #expect(p.s2c.channels.dueSilence(now: monotonicNow() + 1, room: 1 << 20).isEmpty, "no clock once attached")
        let (disposition, channel) = try p.s2cMemblock(length: 64, channel: 5)
        #expect(disposition == .pass && channel == Self.held, "the server's audio, under the app's channel")

        // The app's requests name its channel and index; the server's go upstream.
        var latency = payload(.getRecordLatency, tag: 8) {
            $0.writeU32(Self.held)
            $0.writeTimeval(Timeval(seconds: 1, microseconds: 0))
        }
        #expect(try p.c2s.packet(&latency) == .pass)
        var r = TagStructReader(latency, from: PacketHeader.encodedSize)
        #expect(try r.readU32() == 5)
        var served = RecordLatencyReply()
        served.writeIndex = 100
        served.readIndex = 90
        var latencyReply = served.packet(tag: 8, version: Self.version)
        #expect(try p.s2c.packet(&latencyReply) == .pass)
        let shifted = try RecordLatencyReply.decodePacket(latencyReply, version: Self.version).message
        let before = Int64(stream.bytesSilenced.load(ordering: .relaxed))
        // 10 bytes queued at the server, which the held stream did not have: taken off, once.
        #expect(
            before > 0 && shifted.writeIndex == 90 + before && shifted.readIndex == 80 + before,
            "the indexes count what the app had before the server stream, and its clock does not leap")
        var second = payload(.getRecordLatency, tag: 8) {
            $0.writeU32(Self.held)
            $0.writeTimeval(Timeval(seconds: 2, microseconds: 0))
        }
        #expect(try p.c2s.packet(&second) == .pass)
        served.writeIndex = 300
        var later = served.packet(tag: 8, version: Self.version)
        #expect(try p.s2c.packet(&later) == .pass)
        #expect(try RecordLatencyReply.decodePacket(later, version: Self.version).message.writeIndex == 290 + before)
        var volume = payload(.setSourceOutputVolume, tag: 9) {
            $0.writeU32(Self.held)
            $0.writeCVolume(CVolume(channels: 1, volume: CVolume.norm))
        }
        #expect(try p.c2s.packet(&volume) == .pass)
        var v = TagStructReader(volume, from: PacketHeader.encodedSize)
        #expect(try v.readU32() == 77)
        var moved = RecordStreamMoved(channel: 5, sourceIndex: 1, sourceName: "mic", suspended: true)
            .packet(tag: invalidIndex, version: Self.version)
        #expect(try p.s2c.packet(&moved) == .pass)
        #expect(try RecordStreamMoved.decodePacket(moved, version: Self.version).message.channel == Self.held)
    }

    @Test("denied, a stream loses its server stream and is held; what the server still sends of it goes nowhere")
    func denyReleasesTheServerStream() throws {
        let p = Pair()
        try p.authenticate()
        try p.createRecord(tag: 2, channel: 3, format: .s16le)
        let stream = try #require(p.observer.started.first)
        stream.placement.withLock { $0.kind = .microphone }
        stream.setReal(true)
        #expect(p.c2s.channels.takeUpstream().isEmpty, "an attached stream that may record keeps its server stream")
        stream.setReal(false)
        let (tag, packet) = try Self.upstream(p)
        #expect(try DeleteRecordStream.decodePacket(packet, version: Self.version).message.channel == 3)
        #expect(p.state.ownSourceOutputs.withLock { $0 }.isEmpty && p.s2c.records[3] === stream)
        #expect(try p.s2cMemblock(length: 64, channel: 3).0 == .drop)
        var killed = RecordStreamKilled(channel: 3).packet(tag: invalidIndex, version: Self.version)
        #expect(try p.s2c.packet(&killed) == .drop, "the app's stream lives on")
        var deleted = Reply(tag: tag).packet
        #expect(try p.s2c.packet(&deleted) == .drop)
        #expect(p.observer.ended.isEmpty)
        #expect(!p.s2c.channels.dueSilence(now: monotonicNow() + 0.1, room: 1 << 20).isEmpty, "held: its clock runs")

        // pipewire-pulse gives channel 3 to the next stream: the app gets another number for it.
        try p.createRecord(tag: 4, channel: 3, format: .s16le)
        let second = try #require(p.observer.started.last)
        #expect(second !== stream && second.channel == Self.held && p.s2c.records[3] === stream)
        #expect(try p.s2cMemblock(length: 64, channel: 3).1 == Self.held)
    }

    @Test("what a held stream's app changes is asked of its server stream, volume-control claims renamed")
    func heldChangesReachTheServerStream() throws {
        let (p, _) = try Self.holding()
        let stream = try #require(p.observer.started.first)
        var update = payload(.updateRecordStreamProplist, tag: 3) {
            $0.writeU32(Self.held)
            $0.writeU32(2)
            var props = Proplist()
            props.set("application.id", string: "org.PulseAudio.pavucontrol")
            props.set("media.role", string: "phone")
            $0.writeProplist(props)
        }
        #expect(try p.c2s.packet(&update) == .drop)
        var cork = CorkRecordStream(channel: Self.held, corked: true).packet(tag: 4, version: Self.version)
        #expect(try p.c2s.packet(&cork) == .drop)
        stream.placement.withLock { $0.kind = .microphone }
        stream.setReal(true)
        let asked = try CreateRecordStreamRequest.decodePacket(try Self.upstream(p).packet, version: Self.version).message
        #expect(asked.corked && asked.proplist["media.role"] == "phone")
        #expect(asked.proplist["application.id"] == nil && asked.proplist["earmuff.app.id"] == "org.PulseAudio.pavucontrol")
    }

    @Test("a server that refuses Earmuff's CREATE leaves the stream held; the refusal is not the app's")
    func refusedPromotionStaysHeld() throws {
        let (p, _) = try Self.holding()
        let stream = try #require(p.observer.started.first)
        stream.placement.withLock { $0.kind = .microphone }
        stream.setReal(true)
        let (tag, _) = try Self.upstream(p)
        var error = ErrorReply(code: .noEntity).packet(tag: tag, version: Self.version)
        #expect(try p.s2c.packet(&error) == .drop)
        #expect(p.conversation.tagProblem(tag) == nil)
        #expect(!p.s2c.channels.dueSilence(now: monotonicNow() + 0.1, room: 1 << 20).isEmpty)
    }
}
