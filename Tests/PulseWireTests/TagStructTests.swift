import Testing
import PulseWire

@Suite struct TagStructRoundTripTests {
    static let proplist = Proplist([
        (key: "application.name", value: Array("parecord".utf8) + [0]),
        (key: "raw", value: [0, 1, 2, 0xFF]),
        (key: "empty", value: []),
    ])

    @Test func everyTagRoundTrips() throws {
        var w = TagStructWriter()
        w.writeU32(0xDEAD_BEEF)
        w.writeU8(0xAB)
        w.writeU64(0x0102_0304_0506_0708)
        w.writeS64(-20000)
        w.writeBool(true)
        w.writeBool(false)
        w.writeString("mic")
        w.writeString(nil)
        w.writeString("")
        w.writeString("héllo")
        w.writeArbitrary([9, 8, 7])
        w.writeArbitrary([])
        w.writeSampleSpec(SampleSpec(format: .float32le, channels: 2, rate: 48000))
        w.writeSampleSpec(SampleSpec(formatByte: 0x42, channels: 0, rate: 0))
        w.writeChannelMap(.stereo)
        w.writeCVolume(CVolume(values: [0x10000, 0]))
        w.writeVolume(0x8000)
        w.writeUsec(2_000_000)
        w.writeTimeval(Timeval(seconds: 17, microseconds: 999_999))
        w.writeProplist(Self.proplist)
        w.writeProplist(Proplist())
        w.writeFormatInfo(FormatInfo(encoding: .pcm, properties: Self.proplist))

        var r = TagStructReader(w.bytes)
        #expect(try r.readU32() == 0xDEAD_BEEF)
        #expect(try r.readU8() == 0xAB)
        #expect(try r.readU64() == 0x0102_0304_0506_0708)
        #expect(try r.readS64() == -20000)
        #expect(try r.readBool() == true)
        #expect(try r.readBool() == false)
        #expect(try r.readString() == "mic")
        #expect(try r.readString() == nil)
        #expect(try r.readString() == "")
        #expect(try r.readNonNullString() == "héllo")
        #expect(try r.readArbitrary() == [9, 8, 7])
        #expect(try r.readArbitrary() == [])
        #expect(try r.readSampleSpec() == SampleSpec(format: .float32le, channels: 2, rate: 48000))
        let odd = try r.readSampleSpec()
        #expect(odd.formatByte == 0x42 && odd.format == .invalid && !odd.isValid)
        #expect(try r.readChannelMap() == .stereo)
        #expect(try r.readCVolume() == CVolume(values: [0x10000, 0]))
        #expect(try r.readVolume() == 0x8000)
        #expect(try r.readUsec() == 2_000_000)
        #expect(try r.readTimeval() == Timeval(seconds: 17, microseconds: 999_999))
        #expect(try r.readProplist() == Self.proplist)
        #expect(try r.readProplist() == Proplist())
        #expect(try r.readFormatInfo() == FormatInfo(encoding: 1, properties: Self.proplist))
        #expect(r.isAtEnd)
        #expect(wireError { try r.expectEnd() } == nil)

        // skipValue walks the same bytes value by value.
        var s = TagStructReader(w.bytes)
        var count = 0
        while !s.isAtEnd {
            try s.skipValue()
            count += 1
        }
        #expect(count == 22)
    }

    @Test func exactBytesOfEachTag() {
        var w = TagStructWriter()
        w.writeU32(1); w.writeU8(2); w.writeString("a"); w.writeString(nil)
        w.writeBool(true); w.writeBool(false); w.writeVolume(3)
        #expect(w.bytes == [0x4C, 0, 0, 0, 1, 0x42, 2, 0x74, 0x61, 0, 0x4E, 0x31, 0x30, 0x56, 0, 0, 0, 3])
        var p = TagStructWriter()
        p.writeProplist(Proplist([(key: "k", value: [0x76, 0])]))
        #expect(p.bytes == [0x50, 0x74, 0x6B, 0, 0x4C, 0, 0, 0, 2, 0x78, 0, 0, 0, 2, 0x76, 0, 0x4E])
        var u = TagStructWriter()
        u.writeUsec(1); u.writeU64(2); u.writeS64(-1); u.writeTimeval(Timeval(seconds: 1, microseconds: 2))
        #expect(
            u.bytes == [
                0x55, 0, 0, 0, 0, 0, 0, 0, 1, 0x52, 0, 0, 0, 0, 0, 0, 0, 2,
                0x72, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x54, 0, 0, 0, 1, 0, 0, 0, 2,
            ])
    }

    @Test func readerStartsAtOffset() throws {
        var r = TagStructReader([0x4C, 0, 0, 0, 1, 0x4C, 0, 0, 0, 2], from: 5)
        #expect(r.position == 5)
        #expect(r.peekTag() == 0x4C)
        #expect(try r.readU32() == 2)
        #expect(r.peekTag() == nil)
        #expect(TagStructReader([1, 2], from: 99).isAtEnd)
        #expect(TagStructReader([1, 2], from: -4).position == 0)
    }
}

@Suite struct TagStructRejectionTests {
    @Test func wrongTagIsRejectedWithoutConsuming() {
        var r = TagStructReader(bytes(hex: "4c000000054c0000000274616263"))
        #expect(wireError { _ = try r.readU32() } == nil)
        #expect(wireError { _ = try r.readU32() } == nil)
        #expect(r.position == 10)
        let error = wireError { _ = try r.readU32() }
        #expect(error == .unexpectedTag(expected: WireTag.u32, found: WireTag.string, at: 10))
        #expect(error?.description == "expected tag 'L' (u32) at byte 10, found 't'")
        #expect(r.position == 10)
        // No implicit conversions: 'U' is not 'R', 'V' is not 'L'.
        var usec = TagStructReader([0x55, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(wireError { _ = try usec.readU64() } == .unexpectedTag(expected: WireTag.u64, found: WireTag.usec, at: 0))
        var volume = TagStructReader([0x56, 0, 0, 0, 1])
        #expect(wireError { _ = try volume.readU32() } == .unexpectedTag(expected: WireTag.u32, found: WireTag.volume, at: 0))
        var notBool = TagStructReader([0x42, 1])
        #expect(wireError { _ = try notBool.readBool() } == .unexpectedTag(expected: WireTag.boolTrue, found: WireTag.u8, at: 0))
    }

    @Test func endOfPayload() {
        var r = TagStructReader([])
        #expect(wireError { _ = try r.readU32() } == .unexpectedEnd(expected: WireTag.u32, at: 0))
        #expect(wireError { _ = try r.readBool() } == .unexpectedEnd(expected: WireTag.boolTrue, at: 0))
        #expect(wireError { _ = try r.readString() } == .unexpectedEnd(expected: WireTag.string, at: 0))
        #expect(wireError { try r.skipValue() } == .unexpectedEnd(expected: 0, at: 0))
    }

    @Test func truncatedValues() {
        let cases: [[UInt8]] = [
            [0x4C, 0, 0, 0], [0x42], [0x52, 0, 0, 0, 0, 0, 0, 0], [0x72], [0x55, 1], [0x56, 0, 0],
            [0x54, 0, 0, 0, 0, 0, 0, 0], [0x61, 3, 2, 0, 0, 0xAC], [0x78, 0, 0, 0], [0x6D, 2, 1],
            [0x76, 1, 0, 1, 0],
        ]
        for bytes in cases {
            var r = TagStructReader(bytes)
            #expect(wireError { try r.skipValue() } == .truncatedValue(tag: bytes[0], at: 0), "\(bytes)")
            #expect(r.position == 0)
        }
    }

    @Test func arbitraryLongerThanPayload() {
        // Length 0xFFFFFFFF: must be rejected before allocating anything.
        var huge = TagStructReader([0x78, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2])
        #expect(wireError { _ = try huge.readArbitrary() } == .truncatedValue(tag: WireTag.arbitrary, at: 0))
        var byOne = TagStructReader([0x78, 0, 0, 0, 3, 1, 2])
        #expect(wireError { _ = try byOne.readArbitrary() } == .truncatedValue(tag: WireTag.arbitrary, at: 0))
    }

    @Test func unterminatedString() {
        var r = TagStructReader([0x74, 0x61, 0x62])
        #expect(wireError { _ = try r.readString() } == .unterminatedString(at: 0))
        #expect(wireError { try r.skipValue() } == .unterminatedString(at: 0))
        #expect(r.position == 0)
    }

    @Test func invalidUTF8String() throws {
        var r = TagStructReader([0x74, 0xC3, 0x28, 0])
        #expect(wireError { _ = try r.readString() } == .invalidUTF8(at: 0))
        #expect(r.position == 0)
        // The raw bytes are still reachable.
        #expect(try r.readStringBytes() == [0xC3, 0x28])
    }

    @Test func nullWhereStringRequired() {
        var r = TagStructReader([0x4E])
        #expect(wireError { _ = try r.readNonNullString() } == .nullString(at: 0))
        #expect(r.position == 0)
    }

    @Test func channelCountsAboveThirtyTwo() throws {
        var map = TagStructReader([0x6D, 33] + [UInt8](repeating: 1, count: 33))
        #expect(wireError { _ = try map.readChannelMap() } == .tooManyChannels(count: 33, at: 0))
        var volume = TagStructReader([0x76, 200])
        #expect(wireError { _ = try volume.readCVolume() } == .tooManyChannels(count: 200, at: 0))
        var ok = TagStructReader([0x6D, 32] + [UInt8](repeating: 1, count: 32))
        #expect(try ok.readChannelMap().channels == 32)
    }

    @Test func proplistLengthMismatch() {
        // 'L' says 3, 'x' carries 2.
        var r = TagStructReader(bytes(hex: "50 746b00 4c00000003 78000000027600 4e"))
        #expect(wireError { _ = try r.readProplist() } == .proplistLengthMismatch(declared: 3, actual: 2, at: 9))
        #expect(r.position == 0)
    }

    @Test func proplistValueAboveLimit() throws {
        let length = UInt32(Limits.maxProplistValue + 1)
        var w = TagStructWriter()
        w.writeString("k")
        w.writeU32(length)
        var r = TagStructReader([0x50] + w.bytes + [0x78, 0, 1, 0, 1])
        #expect(wireError { _ = try r.readProplist() } == .proplistValueTooLarge(length: length, at: 4))
        // Exactly 64 KiB is still fine.
        var p = Proplist()
        p.set("k", value: [UInt8](repeating: 7, count: Limits.maxProplistValue))
        var ok = TagStructWriter()
        ok.writeProplist(p)
        var okReader = TagStructReader(ok.bytes)
        #expect(try okReader.readProplist() == p)
    }

    @Test func proplistKeys() {
        var empty = TagStructReader(bytes(hex: "50 7400 4c00000001 780000000100 4e"))
        #expect(wireError { _ = try empty.readProplist() } == .invalidProplistKey(at: 1))
        var nonASCII = TagStructReader(bytes(hex: "50 74c3a900 4c00000001 780000000100 4e"))
        #expect(wireError { _ = try nonASCII.readProplist() } == .invalidProplistKey(at: 1))
        var wrongTag = TagStructReader(bytes(hex: "50 4c00000001"))
        #expect(wireError { _ = try wrongTag.readProplist() } == .unexpectedTag(expected: WireTag.string, found: WireTag.u32, at: 1))
        var unterminated = TagStructReader(bytes(hex: "50 746b00 4c00000001 780000000100"))
        #expect(wireError { _ = try unterminated.readProplist() } == .unexpectedEnd(expected: WireTag.string, at: 15))
    }

    @Test func proplistEntryLimit() throws {
        var p = Proplist()
        for index in 0..<Limits.maxProplistEntries { p.set("k\(index)", value: []) }
        var w = TagStructWriter()
        w.writeProplist(p)
        var atLimit = TagStructReader(w.bytes)
        #expect(try atLimit.readProplist().count == Limits.maxProplistEntries)
        p.set("one.more", value: [])
        var over = TagStructWriter()
        over.writeProplist(p)
        var r = TagStructReader(over.bytes)
        #expect(wireError { _ = try r.readProplist() } == .tooManyProplistEntries(at: 0))
    }

    @Test func formatInfoNeedsEncodingThenProplist() {
        var noEncoding = TagStructReader(bytes(hex: "66 50 4e"))
        #expect(wireError { _ = try noEncoding.readFormatInfo() } == .unexpectedTag(expected: WireTag.u8, found: WireTag.proplist, at: 1))
        #expect(noEncoding.position == 0)
        var skip = TagStructReader(bytes(hex: "66 4201 4c00000000"))
        #expect(wireError { try skip.skipValue() } == .unexpectedTag(expected: WireTag.proplist, found: WireTag.u32, at: 3))
        #expect(skip.position == 0)
    }

    @Test func unknownTagInSkip() {
        var r = TagStructReader([0x7A])
        let error = wireError { try r.skipValue() }
        #expect(error == .unknownTag(0x7A, at: 0))
        #expect(error?.description == "unknown tag 'z' at byte 0")
    }

    @Test func trailingBytes() {
        let r = TagStructReader([0x31, 0x30], from: 1)
        #expect(wireError { try r.expectEnd() } == .trailingBytes(count: 1, at: 1))
    }
}

@Suite struct ValueTests {
    @Test func silenceBytesPerFormat() {
        let expected: [SampleFormat: UInt8] = [
            .u8: 0x80, .alaw: 0xD5, .ulaw: 0xFF, .s16le: 0, .s16be: 0, .float32le: 0, .float32be: 0,
            .s32le: 0, .s32be: 0, .s24le: 0, .s24be: 0, .s24_32le: 0, .s24_32be: 0, .invalid: 0,
        ]
        for format in SampleFormat.allCases {
            #expect(format.silenceByte == expected[format], "\(format)")
        }
        #expect(SampleSpec(format: .alaw, channels: 1, rate: 8000).silenceByte == 0xD5)
        #expect(SampleSpec(formatByte: 77, channels: 1, rate: 8000).silenceByte == 0)
    }

    @Test func formatSizesAndNames() {
        let table: [(SampleFormat, Int, String)] = [
            (.u8, 1, "u8"), (.alaw, 1, "aLaw"), (.ulaw, 1, "uLaw"), (.s16le, 2, "s16le"), (.s16be, 2, "s16be"),
            (.float32le, 4, "float32le"), (.float32be, 4, "float32be"), (.s32le, 4, "s32le"), (.s32be, 4, "s32be"),
            (.s24le, 3, "s24le"), (.s24be, 3, "s24be"), (.s24_32le, 4, "s24-32le"), (.s24_32be, 4, "s24-32be"),
            (.invalid, 0, "invalid"),
        ]
        #expect(table.count == SampleFormat.allCases.count)
        for (format, size, name) in table {
            #expect(format.bytesPerSample == size)
            #expect(format.name == name)
        }
    }

    @Test func sampleSpecValidity() {
        #expect(SampleSpec(format: .s16le, channels: 2, rate: 44100).frameSize == 4)
        #expect(SampleSpec(format: .s24le, channels: 6, rate: 48000).frameSize == 18)
        #expect(SampleSpec(format: .s16le, channels: 2, rate: 44100).isValid)
        #expect(SampleSpec(format: .u8, channels: 32, rate: Limits.maxRate).isValid)
        #expect(!SampleSpec(format: .u8, channels: 33, rate: 8000).isValid)
        #expect(!SampleSpec(format: .u8, channels: 0, rate: 8000).isValid)
        #expect(!SampleSpec(format: .u8, channels: 1, rate: 0).isValid)
        #expect(!SampleSpec(format: .u8, channels: 1, rate: Limits.maxRate + 1).isValid)
        #expect(!SampleSpec(format: .invalid, channels: 1, rate: 8000).isValid)
        var spec = SampleSpec(formatByte: 13, channels: 1, rate: 8000)
        #expect(spec.format == .invalid && spec.frameSize == 0)
        spec.format = .ulaw
        #expect(spec.formatByte == 2)
    }

    @Test func proplistAccessors() {
        var p = Proplist()
        p.set("application.name", string: "parecord")
        #expect(p.value(forKey: "application.name") == Array("parecord".utf8) + [0])
        #expect(p["application.name"] == "parecord")
        #expect(p[string: "application.name"] == "parecord")
        #expect(p["missing"] == nil)
        p.set("raw", value: [0x61, 0x62]) // no NUL
        #expect(p["raw"] == nil)
        p.set("inner", value: [0x61, 0, 0x62, 0]) // inner NUL
        #expect(p["inner"] == nil)
        p.set("bad", value: [0xFF, 0]) // not UTF-8
        #expect(p["bad"] == nil)
        // Duplicates as read from the wire: the last one counts; set collapses them.
        var dup = Proplist([(key: "a", value: [0x31, 0]), (key: "b", value: []), (key: "a", value: [0x32, 0])])
        #expect(dup["a"] == "2")
        dup.set("a", string: "3")
        #expect(dup.entries.map(\.key) == ["a", "b"])
        #expect(dup["a"] == "3")
        dup.remove("a")
        #expect(dup.count == 1)
        #expect(Proplist([(key: "a", value: [1])]) != Proplist([(key: "a", value: [2])]))
    }

    @Test func formatEncodings() {
        #expect(FormatInfo(encoding: .pcm).isPCM)
        #expect(!FormatInfo(encoding: .ac3).isPCM)
        #expect(FormatEncoding.dtsHD.rawValue == 8)
    }
}
