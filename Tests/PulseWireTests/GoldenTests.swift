import Testing
import PulseWire

/// Decodes a golden packet as `M`, checks that it re-encodes byte for byte, and returns it.
func golden<M: PacketMessage>(_ type: M.Type, _ hex: String, version: UInt32, tag: UInt32? = nil) throws -> M {
    let frame = try goldenFrame(hex)
    #expect(frame.descriptor == .packet(length: UInt32(frame.payload.count)))
    let decoded = try M.decodePacket(frame.payload, version: version)
    if let tag { #expect(decoded.tag == tag) }
    #expect(decoded.message.packet(tag: decoded.tag, version: version) == frame.payload)
    #expect(Frame(packet: decoded.message.packet(tag: decoded.tag, version: version)).bytes == bytes(hex: hex))
    return decoded.message
}

let s16Stereo = SampleSpec(format: .s16le, channels: 2, rate: 44100)

@Suite struct GoldenConnectionTests {
    @Test func auth() throws {
        let request = try golden(AuthRequest.self, Golden.authRequest, version: 8, tag: 0)
        #expect(request.versionWord == 0x4000_0023)
        #expect(request.cookie.count == 256)
        #expect(ProtocolVersion.stripTransportFlags(request.versionWord) == 35)
        let reply = try golden(AuthReply.self, Golden.authReply, version: 35, tag: 0)
        #expect(reply.versionWord == 35)
        // The rewrite the proxy does keeps the length and changes only the version word.
        var stripped = request
        stripped.versionWord = ProtocolVersion.stripTransportFlags(request.versionWord)
        let original = try goldenPayload(Golden.authRequest)
        let rewritten = stripped.packet(tag: 0, version: 35)
        #expect(rewritten.count == original.count)
        #expect(Array(rewritten[11..<15]) == [0, 0, 0, 0x23])
        #expect(Array(rewritten[15...]) == Array(original[15...]))
    }

    @Test func setClientName() throws {
        let request = try golden(SetClientName.self, Golden.setClientName, version: 35, tag: 1)
        #expect(request.name == "parecord")
        #expect(request.proplist.count == 9)
        #expect(request.proplist["application.process.binary"] == "pacat")
        #expect(try golden(SetClientNameReply.self, Golden.setClientNameReply, version: 35, tag: 1).clientIndex == 1)

        let v13 = try golden(SetClientName.self, Golden.setClientNameV13, version: 13, tag: 1)
        #expect(v13.name == "earmuff-capture" && v13.proplist.count == 1)
        #expect(try golden(SetClientNameReply.self, Golden.setClientNameV13Reply, version: 13).clientIndex == 26)

        let v12 = try golden(SetClientName.self, Golden.setClientNameV12, version: 12, tag: 1)
        #expect(v12.name == "earmuff-capture")
        #expect(try golden(SetClientNameReply.self, Golden.setClientNameV12Reply, version: 12).clientIndex == nil)
    }

    @Test func errors() throws {
        let modInit = try golden(ErrorReply.self, Golden.errorModInitFailed, version: 35, tag: 2)
        #expect(modInit.errorCode == .moduleInitFailed)
        #expect(try golden(ErrorReply.self, Golden.errorNoEntity, version: 35, tag: 2).code == 5)
        #expect(ErrorReply(code: .access).packet(tag: 9, version: 35) == packet(0, tag: 9) { $0.writeU32(1) })
    }

    @Test func loadModuleArguments() throws {
        var reader = TagStructReader(try goldenPayload(Golden.loadModule))
        #expect(try PacketHeader.decode(from: &reader) == PacketHeader(command: .loadModule, tag: 2))
        #expect(try reader.readString() == "module-does-not-exist")
        #expect(try reader.readString() == nil)
        #expect(wireError { try reader.expectEnd() } == nil)
    }
}

@Suite struct GoldenRecordTests {
    @Test func parecordDefault() throws {
        let request = try golden(CreateRecordStreamRequest.self, Golden.createRecordDefault, version: 35, tag: 2)
        #expect(request.sampleSpec == s16Stereo)
        #expect(request.channelMap == .stereo)
        #expect(request.sourceIndex == invalidIndex && request.sourceName == nil)
        #expect(request.maxLength == .max && request.fragSize == 3528 && !request.corked)
        #expect(!request.peakDetect && request.adjustLatency)
        #expect(request.proplist["media.name"] == "/tmp/pwcap/rec1.wav")
        #expect(request.directOnInput == invalidIndex)
        #expect(request.formats.isEmpty)
        #expect(request.volume == CVolume(channels: 2, volume: CVolume.norm))
        #expect(!request.muted && !request.volumeSet && !request.passthrough)

        let reply = try golden(CreateRecordStreamReply.self, Golden.createRecordDefaultReply, version: 35, tag: 2)
        #expect(reply.channel == 0 && reply.sourceOutputIndex == 0)
        #expect(reply.maxLength == 4_194_304 && reply.fragSize == 352_800)
        #expect(reply.sampleSpec == s16Stereo && reply.channelMap == .stereo)
        #expect(reply.sourceIndex == 1 && reply.sourceName == "mic" && !reply.suspended)
        #expect(reply.sourceLatencyUsec == 2_000_000)
        #expect(reply.format.isPCM)
        #expect(reply.format.properties["format.sample_format"] == "\"s16le\"")
    }

    @Test func mono() throws {
        let request = try golden(CreateRecordStreamRequest.self, Golden.createRecordMono, version: 35, tag: 2)
        #expect(request.sampleSpec == SampleSpec(format: .s16le, channels: 1, rate: 44100))
        #expect(request.channelMap == .mono)
        let reply = try golden(CreateRecordStreamReply.self, Golden.createRecordMonoReply, version: 35, tag: 2)
        #expect(reply.channel == 0 && reply.sourceOutputIndex == 1 && reply.fragSize == 176_400)
    }

    @Test func u8() throws {
        let request = try golden(CreateRecordStreamRequest.self, Golden.createRecordU8, version: 35, tag: 2)
        #expect(request.sampleSpec == SampleSpec(format: .u8, channels: 1, rate: 44100))
        #expect(request.fragSize == 882)
        #expect(request.proplist["application.name"] == "pacat")
        let reply = try golden(CreateRecordStreamReply.self, Golden.createRecordU8Reply, version: 35, tag: 2)
        #expect(reply.sampleSpec.format == .u8 && reply.sampleSpec.silenceByte == 0x80)
        #expect(reply.format.properties["format.sample_format"] == "\"u8\"")
    }

    @Test func peakDetect() throws {
        let request = try golden(CreateRecordStreamRequest.self, Golden.createRecordPeak, version: 35, tag: 2)
        #expect(request.peakDetect && !request.adjustLatency)
        #expect(request.sampleSpec == SampleSpec(format: .float32le, channels: 1, rate: 25))
        #expect(request.sourceName == "mic")
        let reply = try golden(CreateRecordStreamReply.self, Golden.createRecordPeakReply, version: 35, tag: 2)
        #expect(reply.sampleSpec == SampleSpec(format: .float32le, channels: 1, rate: 25))
        #expect(reply.sampleSpec.silenceByte == 0)
        #expect(reply.sourceName == "mic")
    }

    @Test func olderVersions() throws {
        let v8 = try golden(CreateRecordStreamRequest.self, Golden.createRecordV8, version: 8, tag: 2)
        #expect(v8.name == "rec" && v8.sourceName == "mic" && v8.fragSize == 4096)
        let v8Reply = try golden(CreateRecordStreamReply.self, Golden.createRecordV8Reply, version: 8, tag: 2)
        #expect(v8Reply.channel == 0 && v8Reply.sourceOutputIndex == 8)
        let v9Reply = try golden(CreateRecordStreamReply.self, Golden.createRecordV9Reply, version: 9, tag: 2)
        #expect(v9Reply.maxLength == 4_194_304 && v9Reply.fragSize == 4096)

        let v12 = try golden(CreateRecordStreamRequest.self, Golden.createRecordV12, version: 12, tag: 2)
        #expect(v12.name == "rec" && !v12.dontMove)
        let v12Reply = try golden(CreateRecordStreamReply.self, Golden.createRecordV12Reply, version: 12, tag: 2)
        #expect(v12Reply.sampleSpec == s16Stereo && v12Reply.sourceIndex == 5 && v12Reply.sourceName == "mic")

        let v13 = try golden(CreateRecordStreamRequest.self, Golden.createRecordV13, version: 13, tag: 2)
        #expect(v13.name == nil && v13.proplist["media.name"] == "rec")
        let v13Reply = try golden(CreateRecordStreamReply.self, Golden.createRecordV13Reply, version: 13, tag: 2)
        #expect(v13Reply.sourceOutputIndex == 5 && v13Reply.sourceLatencyUsec == 0)

        // A packet read with the wrong version is rejected, never misread.
        #expect(
            wireError { _ = try CreateRecordStreamReply.decodePacket(try goldenPayload(Golden.createRecordV13Reply), version: 35) }
                == .unexpectedEnd(expected: WireTag.formatInfo, at: 61))
        #expect(
            wireError { _ = try CreateRecordStreamReply.decodePacket(try goldenPayload(Golden.createRecordDefaultReply), version: 13) }
                == .trailingBytes(count: 158, at: 61))
    }

    @Test func streamEvents() throws {
        #expect(
            try golden(RecordStreamSuspended.self, Golden.recordSuspended, version: 35, tag: PacketTag.none)
                == RecordStreamSuspended(channel: 0, suspended: true))
        #expect(
            try golden(RecordStreamSuspended.self, Golden.recordResumed, version: 35)
                == RecordStreamSuspended(channel: 0, suspended: false))
        #expect(
            try golden(RecordStreamMoved.self, Golden.recordMovedToMonitor, version: 35, tag: PacketTag.none)
                == RecordStreamMoved(
                    channel: 0, sourceIndex: 0, sourceName: "out.monitor", suspended: false,
                    maxLength: 4_194_304, fragSize: 3528, sourceLatencyUsec: 20000))
        #expect(
            try golden(RecordStreamMoved.self, Golden.recordMovedToMic, version: 35)
                == RecordStreamMoved(
                    channel: 0, sourceIndex: 1, sourceName: "mic", suspended: false,
                    maxLength: 4_194_304, fragSize: 3528, sourceLatencyUsec: 20000))
        #expect(
            try golden(RecordStreamKilled.self, Golden.recordKilled, version: 35, tag: PacketTag.none)
                == RecordStreamKilled(channel: 0))
    }

    @Test func serverStreamOfAPeakRecording() throws {
        let frames = try parseAll(bytes(hex: Golden.peakServerStream))
        #expect(frames.count == 6)
        #expect(try AuthReply.decodePacket(frames[0].payload, version: 35).message.versionWord == 35)
        #expect(try SetClientNameReply.decodePacket(frames[1].payload, version: 35).message.clientIndex == 32)
        let reply = try CreateRecordStreamReply.decodePacket(frames[2].payload, version: 35).message
        #expect(reply.sampleSpec == SampleSpec(format: .float32le, channels: 1, rate: 25) && reply.fragSize == 16)
        for data in frames[3...] {
            #expect(!data.descriptor.isPacket)
            #expect(data.descriptor.channel == reply.channel)
            #expect(data.descriptor.offset == 0 && data.descriptor.seekMode == 0)
            #expect(data.payload.count % reply.sampleSpec.frameSize == 0)
            #expect(data.payload.count <= Int(reply.fragSize))
            // Little-endian float peaks of the sine: 0x3EFFFFFC, just under 0.5.
            #expect(data.payload.prefix(4).elementsEqual([0xFC, 0xFF, 0xFF, 0x3E]))
        }
        #expect(frames[3...].map(\.payload.count) == [8, 16, 16])
    }
}

@Suite struct GoldenPlaybackTests {
    @Test func pacat() throws {
        let request = try golden(CreatePlaybackStreamRequest.self, Golden.createPlayback, version: 35, tag: 2)
        #expect(request.sampleSpec == s16Stereo && request.channelMap == .stereo)
        #expect(request.sinkIndex == invalidIndex && request.sinkName == nil)
        #expect(request.tLength == .max && request.syncID == 0)
        #expect(request.volume == CVolume(channels: 2, volume: CVolume.norm))
        #expect(request.proplist["application.name"] == "pacat")
        #expect(request.formats.isEmpty)

        let reply = try golden(CreatePlaybackStreamReply.self, Golden.createPlaybackReply, version: 35, tag: 2)
        #expect(reply.channel == 0 && reply.sinkInputIndex == 0 && reply.requestedBytes == 352_800)
        #expect(reply.maxLength == 4_194_304 && reply.tLength == 352_800 && reply.prebuf == 349_276 && reply.minReq == 3528)
        #expect(reply.sampleSpec == s16Stereo && reply.sinkIndex == 0 && reply.sinkName == "out" && !reply.suspended)
        #expect(reply.sinkLatencyUsec == 1_960_000 && reply.format.isPCM)
    }

    @Test func playbackEvents() throws {
        var request = TagStructReader(try goldenPayload(Golden.request))
        #expect(try PacketHeader.decode(from: &request) == PacketHeader(command: .request, tag: PacketTag.none))
        #expect(try request.readU32() == 0)
        #expect(try request.readU32() == 20000)
        #expect(request.isAtEnd)

        var underflow = TagStructReader(try goldenPayload(Golden.underflow))
        #expect(try PacketHeader.decode(from: &underflow).knownCommand == .underflow)
        #expect(try underflow.readU32() == 0)
        #expect(try underflow.readS64() == 20000)
        #expect(underflow.isAtEnd)

        let started = try goldenPayload(Golden.started)
        #expect(started == packet(Command.started.rawValue, tag: PacketTag.none) { $0.writeU32(0) })
    }
}
