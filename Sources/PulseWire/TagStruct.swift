/// Tag bytes of the tagstruct encoding.
public enum WireTag {
    /// `'t'` NUL-terminated string.
    public static let string: UInt8 = 0x74
    /// `'N'` null string.
    public static let nullString: UInt8 = 0x4E
    /// `'L'` u32.
    public static let u32: UInt8 = 0x4C
    /// `'B'` u8.
    public static let u8: UInt8 = 0x42
    /// `'R'` u64.
    public static let u64: UInt8 = 0x52
    /// `'r'` s64.
    public static let s64: UInt8 = 0x72
    /// `'a'` sample spec.
    public static let sampleSpec: UInt8 = 0x61
    /// `'x'` length-prefixed bytes.
    public static let arbitrary: UInt8 = 0x78
    /// `'1'` boolean true.
    public static let boolTrue: UInt8 = 0x31
    /// `'0'` boolean false.
    public static let boolFalse: UInt8 = 0x30
    /// `'T'` timeval.
    public static let timeval: UInt8 = 0x54
    /// `'U'` microseconds.
    public static let usec: UInt8 = 0x55
    /// `'m'` channel map.
    public static let channelMap: UInt8 = 0x6D
    /// `'v'` per-channel volume.
    public static let cvolume: UInt8 = 0x76
    /// `'P'` proplist.
    public static let proplist: UInt8 = 0x50
    /// `'V'` volume.
    public static let volume: UInt8 = 0x56
    /// `'f'` format info.
    public static let formatInfo: UInt8 = 0x66
}

/// Reads tagged values from a packet payload. Every `read…` checks the tag,
/// checks lengths before allocating, and consumes the value only on success.
public struct TagStructReader {
    /// The payload being read.
    public let bytes: [UInt8]
    /// Byte offset of the next tag.
    public var position: Int

    /// A reader over `bytes`, starting at `start`.
    public init(_ bytes: [UInt8], from start: Int = 0) {
        self.bytes = bytes
        self.position = min(max(start, 0), bytes.count)
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { position >= bytes.count }

    /// Bytes not read yet.
    public var remainingByteCount: Int { bytes.count - position }

    /// The next tag byte, without consuming it.
    public func peekTag() -> UInt8? { isAtEnd ? nil : bytes[position] }

    /// Throws unless every byte has been read.
    public func expectEnd() throws(WireError) {
        if !isAtEnd { throw .trailingBytes(count: remainingByteCount, at: position) }
    }

    // MARK: Scalars

    /// Reads `'L'` u32.
    public mutating func readU32() throws(WireError) -> UInt32 {
        let start = try valueStart(WireTag.u32, size: 4)
        position = start + 4
        return loadBigEndian(bytes, at: start)
    }

    /// Reads `'B'` u8.
    public mutating func readU8() throws(WireError) -> UInt8 {
        let start = try valueStart(WireTag.u8, size: 1)
        position = start + 1
        return bytes[start]
    }

    /// Reads `'R'` u64.
    public mutating func readU64() throws(WireError) -> UInt64 {
        try read64(WireTag.u64)
    }

    /// Reads `'r'` s64.
    public mutating func readS64() throws(WireError) -> Int64 {
        Int64(bitPattern: try read64(WireTag.s64))
    }

    /// Reads `'U'` microseconds.
    public mutating func readUsec() throws(WireError) -> UInt64 {
        try read64(WireTag.usec)
    }

    /// Reads `'V'` volume.
    public mutating func readVolume() throws(WireError) -> UInt32 {
        let start = try valueStart(WireTag.volume, size: 4)
        position = start + 4
        return loadBigEndian(bytes, at: start)
    }

    /// Reads `'1'` (true) or `'0'` (false).
    public mutating func readBool() throws(WireError) -> Bool {
        guard let tag = peekTag() else { throw .unexpectedEnd(expected: WireTag.boolTrue, at: position) }
        switch tag {
        case WireTag.boolTrue: position += 1; return true
        case WireTag.boolFalse: position += 1; return false
        default: throw .unexpectedTag(expected: WireTag.boolTrue, found: tag, at: position)
        }
    }

    /// Reads `'T'` timeval.
    public mutating func readTimeval() throws(WireError) -> Timeval {
        let start = try valueStart(WireTag.timeval, size: 8)
        position = start + 8
        return Timeval(seconds: loadBigEndian(bytes, at: start), microseconds: loadBigEndian(bytes, at: start + 4))
    }

    /// Reads `'a'` sample spec (not validated; the raw format byte is kept).
    public mutating func readSampleSpec() throws(WireError) -> SampleSpec {
        let start = try valueStart(WireTag.sampleSpec, size: 6)
        position = start + 6
        return SampleSpec(formatByte: bytes[start], channels: bytes[start + 1], rate: loadBigEndian(bytes, at: start + 2))
    }

    // MARK: Strings and bytes

    /// Reads `'t'` string or `'N'` (nil).
    public mutating func readString() throws(WireError) -> String? {
        let at = position
        guard let range = try readStringRange() else { return nil }
        guard let text = String(validating: bytes[range], as: UTF8.self) else {
            position = at
            throw .invalidUTF8(at: at)
        }
        return text
    }

    /// Reads a `'t'` string; `'N'` is an error.
    public mutating func readNonNullString() throws(WireError) -> String {
        let at = position
        guard let text = try readString() else {
            position = at
            throw .nullString(at: at)
        }
        return text
    }

    /// Reads `'t'` or `'N'` without decoding: the string bytes (no NUL), or nil.
    public mutating func readStringBytes() throws(WireError) -> [UInt8]? {
        guard let range = try readStringRange() else { return nil }
        return Array(bytes[range])
    }

    /// Reads `'x'` arbitrary bytes.
    public mutating func readArbitrary() throws(WireError) -> [UInt8] {
        Array(bytes[try readArbitraryRange()])
    }

    /// Reads the AUTH cookie: `'x'` data of exactly `Limits.cookieLength` bytes, checked before copying.
    public mutating func readCookie() throws(WireError) -> [UInt8] {
        let saved = position
        let range = try readArbitraryRange()
        guard range.count == Limits.cookieLength else {
            position = saved
            throw .invalidCookieLength(range.count)
        }
        return Array(bytes[range])
    }

    // MARK: Compound values

    /// Reads `'m'` channel map (at most `Limits.maxChannels` positions).
    public mutating func readChannelMap() throws(WireError) -> ChannelMap {
        let range = try readCountedRange(WireTag.channelMap, elementSize: 1)
        return ChannelMap(positions: Array(bytes[range]))
    }

    /// Reads `'v'` cvolume (at most `Limits.maxChannels` values).
    public mutating func readCVolume() throws(WireError) -> CVolume {
        let range = try readCountedRange(WireTag.cvolume, elementSize: 4)
        var values = [UInt32]()
        values.reserveCapacity(range.count / 4)
        for index in stride(from: range.lowerBound, to: range.upperBound, by: 4) {
            values.append(loadBigEndian(bytes, at: index))
        }
        return CVolume(values: values)
    }

    /// Reads `'P'` proplist.
    public mutating func readProplist() throws(WireError) -> Proplist {
        var entries: [(key: String, value: [UInt8])] = []
        let bytes = self.bytes
        try scanProplist { (key, value) throws(WireError) in
            // scanProplist checked the key is non-empty ASCII, hence valid UTF-8.
            entries.append((key: String(decoding: bytes[key], as: UTF8.self), value: Array(bytes[value])))
        }
        return Proplist(entries)
    }

    /// Reads a `'P'` proplist as where its entries lie in `bytes`: each key's characters (no
    /// tag, no NUL) and its value's bytes; checked as `readProplist` checks.
    public mutating func readProplistRanges() throws(WireError) -> [(key: Range<Int>, value: Range<Int>)] {
        var entries: [(key: Range<Int>, value: Range<Int>)] = []
        try scanProplist { (key, value) throws(WireError) in entries.append((key: key, value: value)) }
        return entries
    }

    /// Reads `'f'` format info: `'B'` encoding then `'P'` proplist.
    public mutating func readFormatInfo() throws(WireError) -> FormatInfo {
        let start = position
        _ = try valueStart(WireTag.formatInfo, size: 0)
        position = start + 1
        do throws(WireError) {
            let encoding = try readU8()
            let properties = try readProplist()
            return FormatInfo(encoding: encoding, properties: properties)
        } catch {
            position = start
            throw error
        }
    }

    /// Skips any one tagged value, checking it as its `read…` would.
    public mutating func skipValue() throws(WireError) {
        guard let tag = peekTag() else { throw .unexpectedEnd(expected: 0, at: position) }
        switch tag {
        case WireTag.string, WireTag.nullString: _ = try readStringRange()
        case WireTag.u32: _ = try readU32()
        case WireTag.u8: _ = try readU8()
        case WireTag.u64: _ = try readU64()
        case WireTag.s64: _ = try readS64()
        case WireTag.usec: _ = try readUsec()
        case WireTag.volume: _ = try readVolume()
        case WireTag.boolTrue, WireTag.boolFalse: _ = try readBool()
        case WireTag.timeval: _ = try readTimeval()
        case WireTag.sampleSpec: _ = try readSampleSpec()
        case WireTag.arbitrary: _ = try readArbitraryRange()
        case WireTag.channelMap: _ = try readCountedRange(WireTag.channelMap, elementSize: 1)
        case WireTag.cvolume: _ = try readCountedRange(WireTag.cvolume, elementSize: 4)
        case WireTag.proplist: try scanProplist { (_, _) throws(WireError) in }
        case WireTag.formatInfo:
            let start = position
            position += 1
            do throws(WireError) {
                _ = try readU8()
                try scanProplist { (_, _) throws(WireError) in }
            } catch {
                position = start
                throw error
            }
        default: throw .unknownTag(tag, at: position)
        }
    }

    // MARK: Internals

    /// Checks that `tag` is next and `size` value bytes follow it; returns where the value starts.
    private func valueStart(_ tag: UInt8, size: Int) throws(WireError) -> Int {
        guard let found = peekTag() else { throw .unexpectedEnd(expected: tag, at: position) }
        guard found == tag else { throw .unexpectedTag(expected: tag, found: found, at: position) }
        guard remainingByteCount - 1 >= size else { throw .truncatedValue(tag: tag, at: position) }
        return position + 1
    }

    private mutating func read64(_ tag: UInt8) throws(WireError) -> UInt64 {
        let start = try valueStart(tag, size: 8)
        position = start + 8
        return UInt64(loadBigEndian(bytes, at: start)) << 32 | UInt64(loadBigEndian(bytes, at: start + 4))
    }

    /// Reads `'t'`/`'N'`; returns the byte range of the text (without NUL), or nil for `'N'`.
    private mutating func readStringRange() throws(WireError) -> Range<Int>? {
        guard let tag = peekTag() else { throw .unexpectedEnd(expected: WireTag.string, at: position) }
        switch tag {
        case WireTag.nullString:
            position += 1
            return nil
        case WireTag.string:
            let start = position + 1
            guard let end = bytes[start...].firstIndex(of: 0) else { throw .unterminatedString(at: position) }
            position = end + 1
            return start..<end
        default:
            throw .unexpectedTag(expected: WireTag.string, found: tag, at: position)
        }
    }

    /// Reads `'x'` u32 length + bytes; returns the byte range of the data.
    private mutating func readArbitraryRange() throws(WireError) -> Range<Int> {
        let start = try valueStart(WireTag.arbitrary, size: 4)
        let length = loadBigEndian(bytes, at: start)
        // Compare in UInt64 space: a u32 length never overflows there.
        guard UInt64(length) <= UInt64(bytes.count - start - 4) else { throw .truncatedValue(tag: WireTag.arbitrary, at: position) }
        let dataStart = start + 4
        position = dataStart + Int(length)
        return dataStart..<position
    }

    /// Reads a tag, a u8 count (at most `Limits.maxChannels`) and count × elementSize bytes.
    private mutating func readCountedRange(_ tag: UInt8, elementSize: Int) throws(WireError) -> Range<Int> {
        let start = try valueStart(tag, size: 1)
        let count = Int(bytes[start])
        guard count <= Limits.maxChannels else { throw .tooManyChannels(count: count, at: position) }
        guard bytes.count - start - 1 >= count * elementSize else { throw .truncatedValue(tag: tag, at: position) }
        position = start + 1 + count * elementSize
        return (start + 1)..<position
    }

    /// Walks a `'P'` proplist, handing each entry's key and value byte ranges to `body`.
    /// On error the position is left where the proplist started.
    private mutating func scanProplist(_ body: (Range<Int>, Range<Int>) throws(WireError) -> Void) throws(WireError) {
        let start = position
        do throws(WireError) {
            _ = try valueStart(WireTag.proplist, size: 0)
            position += 1
            var count = 0
            while true {
                let keyAt = position
                guard let key = try readStringRange() else { break }
                guard !key.isEmpty, !bytes[key].contains(where: { $0 >= 0x80 }) else {
                    throw .invalidProplistKey(at: keyAt)
                }
                count += 1
                guard count <= Limits.maxProplistEntries else { throw .tooManyProplistEntries(at: start) }
                let lengthAt = position
                let declared = try readU32()
                guard declared <= UInt32(Limits.maxProplistValue) else {
                    throw .proplistValueTooLarge(length: declared, at: lengthAt)
                }
                let valueAt = position
                let value = try readArbitraryRange()
                guard value.count == Int(declared) else {
                    throw .proplistLengthMismatch(declared: declared, actual: UInt32(value.count), at: valueAt)
                }
                try body(key, value)
            }
        } catch {
            position = start
            throw error
        }
    }
}

/// Appends tagged values to a packet payload.
public struct TagStructWriter {
    /// The encoded bytes so far.
    public private(set) var bytes: [UInt8]

    /// An empty writer.
    public init() { bytes = [] }

    /// An empty writer with room for `capacity` bytes.
    public init(reservingCapacity capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Writes `'L'` u32.
    public mutating func writeU32(_ value: UInt32) {
        bytes.append(WireTag.u32)
        appendBigEndian(value, to: &bytes)
    }

    /// Writes `'B'` u8.
    public mutating func writeU8(_ value: UInt8) {
        bytes.append(WireTag.u8)
        bytes.append(value)
    }

    /// Writes `'R'` u64.
    public mutating func writeU64(_ value: UInt64) { write64(WireTag.u64, value) }

    /// Writes `'r'` s64.
    public mutating func writeS64(_ value: Int64) { write64(WireTag.s64, UInt64(bitPattern: value)) }

    /// Writes `'U'` microseconds.
    public mutating func writeUsec(_ value: UInt64) { write64(WireTag.usec, value) }

    /// Writes `'V'` volume.
    public mutating func writeVolume(_ value: UInt32) {
        bytes.append(WireTag.volume)
        appendBigEndian(value, to: &bytes)
    }

    /// Writes `'1'` or `'0'`.
    public mutating func writeBool(_ value: Bool) {
        bytes.append(value ? WireTag.boolTrue : WireTag.boolFalse)
    }

    /// Writes `'t'` string + NUL, or `'N'` for nil. The string must not contain NUL.
    public mutating func writeString(_ value: String?) {
        guard let value else {
            bytes.append(WireTag.nullString)
            return
        }
        precondition(!value.utf8.contains(0), "tagstruct strings cannot contain NUL")
        bytes.append(WireTag.string)
        bytes.append(contentsOf: value.utf8)
        bytes.append(0)
    }

    /// Writes `'x'` u32 length + bytes.
    public mutating func writeArbitrary(_ value: [UInt8]) {
        bytes.append(WireTag.arbitrary)
        appendBigEndian(UInt32(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    /// Writes `'a'` sample spec.
    public mutating func writeSampleSpec(_ spec: SampleSpec) {
        bytes.append(WireTag.sampleSpec)
        bytes.append(spec.formatByte)
        bytes.append(spec.channels)
        appendBigEndian(spec.rate, to: &bytes)
    }

    /// Writes `'m'` channel map (at most 255 positions; the peer accepts 32).
    public mutating func writeChannelMap(_ map: ChannelMap) {
        precondition(map.positions.count <= Int(UInt8.max), "channel map too long")
        bytes.append(WireTag.channelMap)
        bytes.append(UInt8(map.positions.count))
        bytes.append(contentsOf: map.positions)
    }

    /// Writes `'v'` cvolume (at most 255 values; the peer accepts 32).
    public mutating func writeCVolume(_ volume: CVolume) {
        precondition(volume.values.count <= Int(UInt8.max), "cvolume too long")
        bytes.append(WireTag.cvolume)
        bytes.append(UInt8(volume.values.count))
        for value in volume.values { appendBigEndian(value, to: &bytes) }
    }

    /// Writes `'T'` timeval.
    public mutating func writeTimeval(_ value: Timeval) {
        bytes.append(WireTag.timeval)
        appendBigEndian(value.seconds, to: &bytes)
        appendBigEndian(value.microseconds, to: &bytes)
    }

    /// Writes `'P'` proplist: per entry `'t'` key, `'L'` length, `'x'` value; then `'N'`.
    public mutating func writeProplist(_ proplist: Proplist) {
        bytes.append(WireTag.proplist)
        for entry in proplist.entries {
            writeString(entry.key)
            writeU32(UInt32(entry.value.count))
            writeArbitrary(entry.value)
        }
        bytes.append(WireTag.nullString)
    }

    /// Writes `'f'` format info.
    public mutating func writeFormatInfo(_ format: FormatInfo) {
        bytes.append(WireTag.formatInfo)
        writeU8(format.encoding)
        writeProplist(format.properties)
    }

    private mutating func write64(_ tag: UInt8, _ value: UInt64) {
        bytes.append(tag)
        appendBigEndian(UInt32(truncatingIfNeeded: value >> 32), to: &bytes)
        appendBigEndian(UInt32(truncatingIfNeeded: value), to: &bytes)
    }
}
