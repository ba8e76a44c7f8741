import Testing
@testable import PulseWire

@Suite struct FrameDescriptorTests {
    @Test func decodesAndEncodesBigEndian() {
        let raw: [UInt8] = [0, 0, 0x7D, 0xE0, 0, 0, 0, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 2]
        let descriptor = unsafe raw.withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
        #expect(descriptor == FrameDescriptor(length: 32224, channel: 3, offsetHi: 0xFFFF_FFFF, offsetLo: 0xFFFF_FFFE, flags: 2))
        #expect(descriptor.offset == -2)
        #expect(descriptor.seekMode == 2)
        #expect(!descriptor.isPacket)
        #expect(descriptor.bytes == raw)
        var out = [UInt8](repeating: 0xAA, count: 20)
        unsafe out.withUnsafeMutableBytes { unsafe descriptor.encode(into: $0) }
        #expect(out == raw)
    }

    @Test func offsetSetterSplitsIntoHalves() {
        var descriptor = FrameDescriptor(length: 1, channel: 0, offsetHi: 0, offsetLo: 0, flags: 0)
        descriptor.offset = 0x1_0000_0002
        #expect(descriptor.offsetHi == 1 && descriptor.offsetLo == 2)
        descriptor.offset = -1
        #expect(descriptor.offsetHi == 0xFFFF_FFFF && descriptor.offsetLo == 0xFFFF_FFFF)
    }

    @Test func packetDescriptor() {
        let descriptor = FrameDescriptor.packet(length: 15)
        #expect(descriptor.isPacket)
        #expect(descriptor.bytes == bytes(hex: "0000000fffffffff000000000000000000000000"))
        #expect(wireError { try descriptor.validate() } == nil)
    }

    @Test func goldenMemblockDescriptors() throws {
        let s16 = unsafe bytes(hex: Golden.recordMemblockDescriptor).withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
        #expect(s16 == FrameDescriptor(length: 24916, channel: 0, offsetHi: 0, offsetLo: 0, flags: 0))
        #expect(wireError { try s16.validate() } == nil)
        let u8 = unsafe bytes(hex: Golden.u8MemblockDescriptor).withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
        #expect(u8.length == 7606 && u8.channel == 0 && u8.seekMode == 0)
        #expect(wireError { try u8.validate() } == nil)
    }

    // One test per receiver check of protocol doc §1.2.

    @Test func rejectsShmDataFlag() {
        let d = FrameDescriptor(length: 16, channel: 0, offsetHi: 0, offsetLo: 0, flags: 0x8000_0000)
        #expect(wireError { try d.validate() } == .shmFlags(flags: 0x8000_0000))
        #expect(
            WireError.shmFlags(flags: 0x8000_0000).description
                == "SHM bit set in flags 0x80000000 on a connection without SHM")
    }

    @Test func rejectsMemfdShmReference() {
        let d = FrameDescriptor(length: 16, channel: 0, offsetHi: 0, offsetLo: 0, flags: 0xA080_0000)
        #expect(wireError { try d.validate() } == .shmFlags(flags: 0xA080_0000))
    }

    @Test func rejectsShmReleaseEvenWithZeroLength() {
        let d = FrameDescriptor(length: 0, channel: FrameDescriptor.controlChannel, offsetHi: 1, offsetLo: 0, flags: 0x4000_0000)
        #expect(wireError { try d.validate() } == .shmFlags(flags: 0x4000_0000))
    }

    @Test func rejectsShmRevoke() {
        let d = FrameDescriptor(length: 0, channel: FrameDescriptor.controlChannel, offsetHi: 1, offsetLo: 0, flags: 0xC000_0000)
        #expect(wireError { try d.validate() } == .shmFlags(flags: 0xC000_0000))
    }

    @Test func rejectsAnyTopByteBit() {
        for bit in 24..<32 {
            let flags = UInt32(1) << UInt32(bit)
            let d = FrameDescriptor(length: 4, channel: 1, offsetHi: 0, offsetLo: 0, flags: flags)
            #expect(wireError { try d.validate() } == .shmFlags(flags: flags))
        }
    }

    @Test func rejectsZeroLength() {
        #expect(wireError { try FrameDescriptor(length: 0, channel: 0).validate() } == .zeroLength)
        #expect(wireError { try FrameDescriptor.packet(length: 0).validate() } == .zeroLength)
        #expect(WireError.zeroLength.description == "frame length 0")
    }

    @Test func rejectsLengthAboveSixteenMiB() {
        let max = Limits.maxFrameLength
        #expect(wireError { try FrameDescriptor(length: max, channel: 0).validate() } == nil)
        #expect(wireError { try FrameDescriptor(length: max + 1, channel: 0).validate() } == .frameTooLong(length: max + 1))
        #expect(wireError { try FrameDescriptor(length: .max, channel: 0).validate() } == .frameTooLong(length: .max))
    }

    @Test func rejectsPacketWithFlags() {
        let d = FrameDescriptor(length: 10, channel: FrameDescriptor.controlChannel, offsetHi: 0, offsetLo: 0, flags: 1)
        #expect(wireError { try d.validate() } == .packetFlags(flags: 1))
        let writable = FrameDescriptor(length: 10, channel: FrameDescriptor.controlChannel, offsetHi: 0, offsetLo: 0, flags: 0x0080_0000)
        #expect(wireError { try writable.validate() } == .packetFlags(flags: 0x0080_0000))
    }

    @Test func rejectsSeekModeAboveThree() {
        for mode: UInt32 in 0...3 {
            #expect(wireError { try FrameDescriptor(length: 4, channel: 2, flags: mode).validate() } == nil)
        }
        #expect(wireError { try FrameDescriptor(length: 4, channel: 2, flags: 4).validate() } == .invalidSeekMode(4))
        #expect(wireError { try FrameDescriptor(length: 4, channel: 2, flags: 0xFF).validate() } == .invalidSeekMode(0xFF))
    }

    @Test func rejectsPacketOfEightBytesOrLess() {
        for length: UInt32 in 1...8 {
            #expect(wireError { try FrameDescriptor.packet(length: length).validate() } == .packetTooShort(length: length))
        }
        #expect(wireError { try FrameDescriptor.packet(length: 9).validate() } == nil)
        // Memblocks may be tiny: one u8 sample is a whole frame.
        #expect(wireError { try FrameDescriptor(length: 1, channel: 0).validate() } == nil)
    }
}

@Suite struct FrameParserTests {
    /// A mixed stream: the real S→C start of a recording plus synthetic frames.
    static let stream: [UInt8] = {
        var stream = bytes(hex: Golden.peakServerStream)
        Frame(packet: RecordStreamSuspended(channel: 0, suspended: true).packet(tag: PacketTag.none, version: 35))
            .append(to: &stream)
        Frame(descriptor: FrameDescriptor(length: 3, channel: 7, offsetHi: 0, offsetLo: 9, flags: 1), payload: [1, 2, 3])
            .append(to: &stream)
        return stream
    }()

    static func frameByFrame(_ stream: [UInt8]) throws -> [Frame] {
        var parser = FrameParser()
        var frames: [Frame] = []
        var index = 0
        while index < stream.count {
            let length = Int(loadBigEndian(stream, at: index))
            let end = index + Limits.descriptorSize + length
            unsafe stream[index..<end].withUnsafeBytes { unsafe parser.append($0) }
            guard let frame = try parser.next() else { Issue.record("frame not complete"); break }
            #expect(try parser.next() == nil)
            frames.append(frame)
            index = end
        }
        return frames
    }

    @Test func sameFramesForEveryChunking() throws {
        let stream = Self.stream
        let allAtOnce = try parseAll(stream)
        #expect(allAtOnce.count == 8)
        #expect(allAtOnce.map(\.descriptor.length) == [15, 15, 201, 8, 16, 16, 16, 3])

        var parser = FrameParser()
        var byteByByte: [Frame] = []
        for byte in stream {
            parser.append(contentsOf: [byte])
            while let frame = try parser.next() { byteByByte.append(frame) }
        }
        #expect(byteByByte == allAtOnce)
        #expect(parser.bufferedByteCount == 0)

        #expect(try Self.frameByFrame(stream) == allAtOnce)

        var rng = SplitMix64(state: 42)
        for _ in 0..<20 {
            var odd = FrameParser()
            var frames: [Frame] = []
            var index = 0
            while index < stream.count {
                let end = min(stream.count, index + Int.random(in: 1...60, using: &rng))
                odd.append(contentsOf: stream[index..<end])
                while let frame = try odd.next() { frames.append(frame) }
                index = end
            }
            #expect(frames == allAtOnce)
        }
    }

    @Test func framesReencodeToTheStream() throws {
        var out: [UInt8] = []
        for frame in try parseAll(Self.stream) { frame.append(to: &out) }
        #expect(out == Self.stream)
    }

    @Test func incompleteConsumesNothing() throws {
        let frame = bytes(hex: Golden.authReply)
        var parser = FrameParser()
        parser.append(contentsOf: frame.prefix(19))
        #expect(try parser.next() == nil)
        #expect(parser.peekDescriptor() == nil)
        #expect(parser.bufferedByteCount == 19)
        parser.append(contentsOf: frame[19..<34])
        #expect(parser.peekDescriptor() == .packet(length: 15))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 34)
        parser.append(contentsOf: frame[34...])
        #expect(try parser.next()?.payload == Array(frame[20...]))
        #expect(parser.bufferedByteCount == 0)
    }

    @Test func badDescriptorThrowsBeforeItsPayloadArrives() {
        var parser = FrameParser()
        parser.append(contentsOf: FrameDescriptor(length: 0x7FFF_FFFF, channel: 0).bytes)
        #expect(wireError { _ = try parser.next() } == .frameTooLong(length: 0x7FFF_FFFF))
        // The parser stays on the bad frame.
        #expect(wireError { _ = try parser.next() } == .frameTooLong(length: 0x7FFF_FFFF))
    }

    @Test func rejectsShmFrameInStream() {
        var parser = FrameParser()
        parser.append(contentsOf: bytes(hex: Golden.authReply))
        parser.append(contentsOf: bytes(hex: "00000000ffffffff000000010000000040000000"))
        #expect(wireError { _ = try parser.next() } == nil)
        #expect(wireError { _ = try parser.next() } == .shmFlags(flags: 0x4000_0000))
    }

    @Test func reusedPayloadBuffer() throws {
        var parser = FrameParser()
        parser.append(contentsOf: Self.stream)
        var payload: [UInt8] = []
        var lengths: [UInt32] = []
        while let descriptor = try parser.next(reusing: &payload) {
            #expect(payload.count == Int(descriptor.length))
            lengths.append(descriptor.length)
        }
        #expect(lengths == [15, 15, 201, 8, 16, 16, 16, 3])
        #expect(payload == [1, 2, 3])
    }

    @Test func compactsLongStreams() throws {
        // Far more bytes than the compaction threshold, fed in chunks that split frames.
        let frame = Frame(descriptor: FrameDescriptor(length: 1000, channel: 0), payload: (0..<1000).map { UInt8($0 & 0xFF) })
        var stream: [UInt8] = []
        for _ in 0..<300 { frame.append(to: &stream) }
        var parser = FrameParser()
        var count = 0
        var index = 0
        while index < stream.count {
            let end = min(stream.count, index + 4099)
            unsafe stream[index..<end].withUnsafeBytes { unsafe parser.append($0) }
            while let next = try parser.next() {
                #expect(next == frame)
                count += 1
            }
            #expect(parser.bufferedByteCount < 1020 + 4099)
            index = end
        }
        #expect(count == 300)
        #expect(parser.bufferedByteCount == 0)
    }
}
