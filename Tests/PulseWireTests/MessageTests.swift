import Testing
import PulseWire

/// Encodes `message` at `version`, decodes it back, and checks the strict
/// properties every decoder must have: exact re-encoding, rejection of a
/// trailing byte, and rejection of every truncation.
func roundTrip<M: PacketMessage>(_ message: M, version: UInt32) throws -> M {
    let payload = message.packet(tag: 77, version: version)
    let (tag, decoded) = try M.decodePacket(payload, version: version)
    #expect(tag == 77)
    #expect(decoded.packet(tag: 77, version: version) == payload, "v\(version)")
    #expect(
        wireError { _ = try M.decodePacket(payload + [0x30], version: version) }
            == .trailingBytes(count: 1, at: payload.count), "v\(version)")
    for cut in 0..<payload.count {
        #expect(wireError { _ = try M.decodePacket(Array(payload.prefix(cut)), version: version) } != nil, "cut \(cut) v\(version)")
    }
    return decoded
}

let pcmFormat = FormatInfo(encoding: .pcm, properties: Proplist([(key: "format.rate", value: Array("48000".utf8) + [0])]))

@Suite struct ConnectionMessageTests {
    @Test func auth() throws {
        let request = AuthRequest(versionWord: 0xC000_0023, cookie: (0..<256).map { UInt8($0 & 0xFF) })
        #expect(try roundTrip(request, version: 8) == request)
        #expect(AuthRequest(versionWord: 35).cookie == [UInt8](repeating: 0, count: 256))
        #expect(try roundTrip(AuthReply(versionWord: 0xC000_0023), version: 35).versionWord == 0xC000_0023)
    }

    @Test func authCookieMustBe256Bytes() {
        let short = AuthRequest(versionWord: 35, cookie: [1, 2, 3]).packet(tag: 0, version: 35)
        #expect(wireError { _ = try AuthRequest.decodePacket(short, version: 35) } == .invalidCookieLength(3))
    }

    @Test func wrongCommandIsRejected() {
        let error = ErrorReply(code: .access).packet(tag: 3, version: 35)
        #expect(wireError { _ = try AuthReply.decodePacket(error, version: 35) } == .unexpectedCommand(expected: 2, found: 0))
        #expect(WireError.unexpectedCommand(expected: 2, found: 0).description == "expected command REPLY (2), found ERROR (0)")
        #expect(wireError { _ = try Reply.decode(error) } == .unexpectedCommand(expected: 2, found: 0))
    }

    @Test func setClientNameAcrossVersions() throws {
        var proplist = Proplist()
        proplist.set("application.name", string: "firefox")
        proplist.set("application.process.id", string: "4242")
        let message = SetClientName(proplist: proplist)
        for version: UInt32 in [13, 21, 22, 35] {
            #expect(try roundTrip(message, version: version) == message)
        }
        // Before v13 only the name travels.
        let v12 = try roundTrip(message, version: 12)
        #expect(v12.name == "firefox" && v12.proplist.count == 1)
        #expect(message.packet(tag: 1, version: 12) == packet(9) { $0.writeString("firefox") })
        #expect(try roundTrip(SetClientName(proplist: Proplist()), version: 8).name == nil)

        for version: UInt32 in [13, 35] {
            #expect(try roundTrip(SetClientNameReply(clientIndex: 26), version: version).clientIndex == 26)
        }
        #expect(try roundTrip(SetClientNameReply(clientIndex: 26), version: 12).clientIndex == nil)
        #expect(SetClientNameReply(clientIndex: nil).packet(tag: 1, version: 8).count == PacketHeader.encodedSize)
    }

    @Test func replyAndError() throws {
        let empty = Reply(tag: 4).packet
        #expect(empty == packet(2, tag: 4))
        let (reply, reader) = try Reply.decode(empty)
        #expect(reply.tag == 4 && reader.isAtEnd)
        let (_, body) = try Reply.decode(packet(2, tag: 5) { $0.writeU32(9) })
        #expect(body.position == PacketHeader.encodedSize)

        for code in ErrorCode.allCases {
            #expect(try roundTrip(ErrorReply(code: code), version: 35).errorCode == code)
        }
        #expect(try roundTrip(ErrorReply(code: 999), version: 35).errorCode == nil)
    }
}

@Suite struct RecordStreamMessageTests {
    /// A request with every field away from its default.
    static var fullRequest: CreateRecordStreamRequest {
        var r = CreateRecordStreamRequest()
        r.name = "capture"
        r.sampleSpec = SampleSpec(format: .float32le, channels: 2, rate: 48000)
        r.channelMap = .stereo
        r.sourceIndex = 3
        r.sourceName = "alsa_input.mic"
        r.maxLength = 65536
        r.corked = true
        r.fragSize = 1920
        r.noRemap = true; r.noRemix = true; r.fixFormat = true; r.fixRate = true
        r.fixChannels = true; r.dontMove = true; r.variableRate = true
        r.peakDetect = true
        r.adjustLatency = true
        r.proplist.set("media.name", string: "Meter")
        r.directOnInput = 12
        r.earlyRequests = true
        r.dontInhibitAutoSuspend = true
        r.failOnSuspend = true
        r.formats = [pcmFormat, FormatInfo(encoding: .ac3)]
        r.volume = CVolume(values: [0x8000, 0x10000])
        r.muted = true; r.volumeSet = true; r.mutedSet = true; r.relativeVolume = true; r.passthrough = true
        return r
    }

    /// What survives encoding at `version`: later fields fall back to their defaults.
    static func expected(_ full: CreateRecordStreamRequest, at version: UInt32) -> CreateRecordStreamRequest {
        var r = full
        let d = CreateRecordStreamRequest()
        if version >= 13 { r.name = nil }
        if version < 12 {
            r.noRemap = d.noRemap; r.noRemix = d.noRemix; r.fixFormat = d.fixFormat; r.fixRate = d.fixRate
            r.fixChannels = d.fixChannels; r.dontMove = d.dontMove; r.variableRate = d.variableRate
        }
        if version < 13 {
            r.peakDetect = d.peakDetect; r.adjustLatency = d.adjustLatency
            r.proplist = d.proplist; r.directOnInput = d.directOnInput
        }
        if version < 14 { r.earlyRequests = d.earlyRequests }
        if version < 15 { r.dontInhibitAutoSuspend = d.dontInhibitAutoSuspend; r.failOnSuspend = d.failOnSuspend }
        if version < 22 {
            r.formats = d.formats; r.volume = d.volume; r.muted = d.muted; r.volumeSet = d.volumeSet
            r.mutedSet = d.mutedSet; r.relativeVolume = d.relativeVolume; r.passthrough = d.passthrough
        }
        return r
    }

    @Test(arguments: [8, 9, 11, 12, 13, 14, 15, 21, 22, 35] as [UInt32])
    func createRequestAtVersion(_ version: UInt32) throws {
        let decoded = try roundTrip(Self.fullRequest, version: version)
        #expect(decoded == Self.expected(Self.fullRequest, at: version))
    }

    @Test func createRequestLayoutGrowsWithVersion() {
        let sizes = ([8, 12, 13, 14, 15, 21, 22] as [UInt32]).map { Self.fullRequest.packet(tag: 2, version: $0).count }
        // v12 adds 7 bools; v13 drops the name but adds bools, proplist, u32; v14 one bool; v15 two; v21 nothing; v22 formats etc.
        #expect(sizes[1] == sizes[0] + 7)
        #expect(sizes[3] == sizes[2] + 1)
        #expect(sizes[4] == sizes[3] + 2)
        #expect(sizes[5] == sizes[4])
        #expect(sizes[6] > sizes[5])
    }

    @Test func createRequestBeforeV13NeedsAName() {
        var request = Self.fullRequest
        request.name = nil
        let payload = request.packet(tag: 2, version: 12)
        #expect(wireError { _ = try CreateRecordStreamRequest.decodePacket(payload, version: 12) } == .nullString(at: 10))
    }

    @Test func createRequestMatchesProtocolDocBytes() throws {
        // The v35 field order of protocol doc §6.1, written by hand.
        let payload = packet(5, tag: 2) { w in
            w.writeSampleSpec(s16Stereo); w.writeChannelMap(.stereo)
            w.writeU32(invalidIndex); w.writeString(nil); w.writeU32(.max); w.writeBool(false); w.writeU32(.max)
            for _ in 0..<7 { w.writeBool(false) }
            w.writeBool(true) // peak detect
            w.writeBool(false)
            w.writeProplist(Proplist())
            w.writeU32(7) // direct_on_input
            w.writeBool(false); w.writeBool(false); w.writeBool(false)
            w.writeU8(0)
            w.writeCVolume(CVolume(channels: 2, volume: CVolume.norm))
            for _ in 0..<5 { w.writeBool(false) }
        }
        let request = try CreateRecordStreamRequest.decodePacket(payload, version: 35).message
        #expect(request.peakDetect && request.directOnInput == 7)
        #expect(request.packet(tag: 2, version: 35) == payload)
    }

    static var fullReply: CreateRecordStreamReply {
        var r = CreateRecordStreamReply()
        r.channel = 3
        r.sourceOutputIndex = 14
        r.maxLength = 4_194_304
        r.fragSize = 352_800
        r.sampleSpec = SampleSpec(format: .alaw, channels: 1, rate: 8000)
        r.channelMap = .mono
        r.sourceIndex = 1
        r.sourceName = "mic"
        r.suspended = true
        r.sourceLatencyUsec = 2_000_000
        r.format = pcmFormat
        return r
    }

    @Test(arguments: [8, 9, 12, 13, 21, 22, 35] as [UInt32])
    func createReplyAtVersion(_ version: UInt32) throws {
        let decoded = try roundTrip(Self.fullReply, version: version)
        var expected = Self.fullReply
        let d = CreateRecordStreamReply()
        if version < 9 { expected.maxLength = d.maxLength; expected.fragSize = d.fragSize }
        if version < 12 {
            expected.sampleSpec = d.sampleSpec; expected.channelMap = d.channelMap
            expected.sourceIndex = d.sourceIndex; expected.sourceName = d.sourceName; expected.suspended = d.suspended
        }
        if version < 13 { expected.sourceLatencyUsec = d.sourceLatencyUsec }
        // The record reply gets its format only at v22 (the playback reply at v21).
        if version < 22 { expected.format = d.format }
        #expect(decoded == expected)
    }

    @Test(arguments: [8, 12, 13, 21, 22, 35] as [UInt32])
    func eventsAtVersion(_ version: UInt32) throws {
        #expect(try roundTrip(DeleteRecordStream(channel: 5), version: version) == DeleteRecordStream(channel: 5))
        #expect(try roundTrip(RecordStreamKilled(channel: 5), version: version) == RecordStreamKilled(channel: 5))
        let suspended = RecordStreamSuspended(channel: 5, suspended: true)
        #expect(try roundTrip(suspended, version: version) == suspended)
        let moved = RecordStreamMoved(
            channel: 5, sourceIndex: 2, sourceName: "out.monitor", suspended: true,
            maxLength: 100, fragSize: 10, sourceLatencyUsec: 99)
        let decoded = try roundTrip(moved, version: version)
        if version >= 13 {
            #expect(decoded == moved)
        } else {
            #expect(decoded == RecordStreamMoved(channel: 5, sourceIndex: 2, sourceName: "out.monitor", suspended: true))
        }
    }
}

@Suite struct PlaybackStreamMessageTests {
    static var fullRequest: CreatePlaybackStreamRequest {
        var r = CreatePlaybackStreamRequest()
        r.name = "song"
        r.sampleSpec = s16Stereo
        r.channelMap = .stereo
        r.sinkIndex = 0
        r.sinkName = "out"
        r.maxLength = 1; r.corked = true; r.tLength = 2; r.prebuf = 3; r.minReq = 4; r.syncID = 5
        r.volume = CVolume(channels: 2, volume: 0x8000)
        r.noRemap = true; r.noRemix = true; r.fixFormat = true; r.fixRate = true
        r.fixChannels = true; r.dontMove = true; r.variableRate = true
        r.muted = true; r.adjustLatency = true
        r.proplist.set("media.role", string: "music")
        r.volumeSet = true; r.earlyRequests = true
        r.mutedSet = true; r.dontInhibitAutoSuspend = true; r.failOnSuspend = true
        r.relativeVolume = true
        r.passthrough = true
        r.formats = [pcmFormat]
        return r
    }

    @Test(arguments: [8, 12, 13, 14, 15, 17, 18, 21, 22, 35] as [UInt32])
    func createRequestAtVersion(_ version: UInt32) throws {
        let decoded = try roundTrip(Self.fullRequest, version: version)
        #expect(decoded.volume == Self.fullRequest.volume && decoded.syncID == 5)
        #expect(decoded.name == (version < 13 ? "song" : nil))
        #expect(decoded.variableRate == (version >= 12))
        #expect(decoded.proplist.isEmpty == (version < 13))
        #expect(decoded.earlyRequests == (version >= 14))
        #expect(decoded.failOnSuspend == (version >= 15))
        #expect(decoded.relativeVolume == (version >= 17))
        #expect(decoded.passthrough == (version >= 18))
        #expect(decoded.formats.count == (version >= 21 ? 1 : 0))
    }

    @Test(arguments: [8, 9, 12, 13, 21, 22, 35] as [UInt32])
    func createReplyAtVersion(_ version: UInt32) throws {
        var reply = CreatePlaybackStreamReply()
        reply.channel = 0; reply.sinkInputIndex = 7; reply.requestedBytes = 352_800
        reply.maxLength = 1; reply.tLength = 2; reply.prebuf = 3; reply.minReq = 4
        reply.sampleSpec = s16Stereo; reply.channelMap = .stereo; reply.sinkIndex = 0; reply.sinkName = "out"
        reply.suspended = true; reply.sinkLatencyUsec = 1_960_000; reply.format = pcmFormat
        let decoded = try roundTrip(reply, version: version)
        #expect(decoded.sinkInputIndex == 7 && decoded.requestedBytes == 352_800)
        #expect(decoded.minReq == (version >= 9 ? 4 : 0))
        #expect(decoded.sinkName == (version >= 12 ? "out" : nil))
        #expect(decoded.sinkLatencyUsec == (version >= 13 ? 1_960_000 : 0))
        #expect((decoded.format == pcmFormat) == (version >= 21))
    }
}

@Suite struct MutationTests {
    static let goldens = [
        Golden.authRequest, Golden.authReply, Golden.setClientName, Golden.setClientNameReply,
        Golden.createRecordDefault, Golden.createRecordDefaultReply, Golden.createRecordU8, Golden.createRecordU8Reply,
        Golden.createPlayback, Golden.createPlaybackReply, Golden.recordMovedToMonitor, Golden.recordSuspended,
        Golden.recordKilled, Golden.errorNoEntity, Golden.createRecordV12, Golden.createRecordPeakReply,
    ]

    /// Runs every decoder over the payload at several versions; they may throw but never trap.
    static func decodeEverything(_ payload: [UInt8]) -> Int {
        var accepted = 0
        func attempt<M: PacketMessage>(_ type: M.Type, _ version: UInt32) {
            if (try? M.decodePacket(payload, version: version)) != nil { accepted += 1 }
        }
        for version: UInt32 in [8, 12, 13, 21, 22, 35] {
            attempt(AuthRequest.self, version); attempt(AuthReply.self, version)
            attempt(SetClientName.self, version); attempt(SetClientNameReply.self, version)
            attempt(CreateRecordStreamRequest.self, version); attempt(CreateRecordStreamReply.self, version)
            attempt(CreatePlaybackStreamRequest.self, version); attempt(CreatePlaybackStreamReply.self, version)
            attempt(RecordStreamMoved.self, version); attempt(RecordStreamSuspended.self, version)
            attempt(RecordStreamKilled.self, version); attempt(DeleteRecordStream.self, version)
            attempt(ErrorReply.self, version)
        }
        var reader = TagStructReader(payload)
        while (try? reader.skipValue()) != nil {}
        var parser = FrameParser()
        parser.append(contentsOf: payload)
        while (try? parser.next()) ?? nil != nil {}
        return accepted
    }

    @Test func mutatedGoldensNeverTrap() throws {
        var rng = SplitMix64(state: 0x5EED)
        var accepted = 0
        for hex in Self.goldens {
            let original = try goldenPayload(hex)
            #expect(Self.decodeEverything(original) > 0)
            for _ in 0..<150 {
                var mutated = original
                for _ in 0...Int.random(in: 0...3, using: &rng) {
                    let index = Int.random(in: 0..<mutated.count, using: &rng)
                    switch Int.random(in: 0...3, using: &rng) {
                    case 0: mutated[index] = UInt8.random(in: 0...255, using: &rng)
                    case 1: mutated[index] ^= 0x80
                    case 2: mutated.removeSubrange(index...)
                    default: mutated.insert(UInt8.random(in: 0...255, using: &rng), at: index)
                    }
                    if mutated.isEmpty { break }
                }
                accepted += Self.decodeEverything(mutated)
            }
        }
        // Some mutations (inside cookies, names, proplist values) stay decodable.
        #expect(accepted > 0)
    }
}

/// Source records at every layout a client may negotiate, and a reply with some left out.
@Suite struct SourceRecordTests {
    static func record(_ index: UInt32, _ name: String) -> SourceInfo {
        var s = SourceInfo(index: index, name: name)
        s.state = 2
        s.card = 3
        var port = SourceInfo.DevicePort(name: "analog-input-mic", description: "Microphone")
        port.priority = 8700
        port.available = 2
        port.availabilityGroup = "Legacy 1"
        port.type = 4
        s.ports = [port, SourceInfo.DevicePort(name: "analog-input-linein")]
        s.activePort = "analog-input-mic"
        s.formats = [FormatInfo(encoding: 1)]
        return s
    }

    /// What a server of `version` would have sent of `s` (the fields it knows).
    static func asSent(_ s: SourceInfo, version: UInt32) throws -> SourceInfo {
        var w = TagStructWriter()
        s.write(into: &w, version: version)
        var r = TagStructReader(w.bytes)
        let read = try SourceInfo.read(from: &r, version: version)
        #expect(r.isAtEnd, "v\(version): bytes left after the record")
        return read
    }

    @Test func everyLayoutRoundTrips() throws {
        let s = Self.record(7, "mic")
        for version: UInt32 in [8, 12, 13, 15, 16, 22, 24, 34, 35] {
            let read = try Self.asSent(s, version: version)
            #expect(read.name == "mic" && read.index == 7, "v\(version)")
            #expect(read.ports.count == (version >= 16 ? 2 : 0), "v\(version)")
            #expect(read.formats.count == (version >= 22 ? 1 : 0), "v\(version)")
            #expect(read.ports.first?.available == (version >= 24 ? 2 : version >= 16 ? 0 : nil), "v\(version)")
            #expect(read.ports.first?.availabilityGroup == (version >= 34 ? "Legacy 1" : nil), "v\(version)")
        }
        #expect(try Self.asSent(s, version: 35) == s)
    }

    /// The records `leaving(out:)` picks go; every other byte of the packet stays as it was.
    @Test func aReplyWithRecordsLeftOut() throws {
        let version: UInt32 = 35
        func packet(_ records: [SourceInfo]) -> [UInt8] {
            var w = TagStructWriter()
            PacketHeader(command: .reply, tag: 9).encode(into: &w)
            SourceInfoReply(records: records).encode(into: &w, version: version)
            return w.bytes
        }
        let mic = Self.record(1, "mic"), silence = Self.record(2, "earmuff.silence"), monitor = Self.record(3, "out.monitor")
        let full = packet([mic, silence, monitor])
        let left = try #require(
            try SourceInfoReply.leaving(
                out: { $0.name == "earmuff.silence" }, of: full,
                recordsAt: PacketHeader.encodedSize, version: version))
        #expect(left.kept == 2)
        #expect(left.packet == packet([mic, monitor]))
        #expect(
            try SourceInfoReply.leaving(
                out: { $0.name == "nothing" }, of: full, recordsAt: PacketHeader.encodedSize,
                version: version) == nil)
        let only = try #require(
            try SourceInfoReply.leaving(
                out: { _ in true }, of: packet([silence]),
                recordsAt: PacketHeader.encodedSize, version: version))
        #expect(only.kept == 0 && only.packet == packet([]))
        // A record cut short is an error, not a shorter list.
        #expect(throws: WireError.self) {
            try SourceInfoReply.leaving(out: { _ in true }, of: Array(full.dropLast(3)), recordsAt: PacketHeader.encodedSize, version: version)
        }
    }
}
