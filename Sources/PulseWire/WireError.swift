/// Why bytes from the wire were rejected. Every case is fatal for the
/// connection that sent them.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    // MARK: Framing
    /// A frame descriptor announced an empty payload.
    case zeroLength
    /// A frame descriptor announced more than `Limits.maxFrameLength` bytes.
    case frameTooLong(length: UInt32)
    /// A flags word had SHM bits (0xFF000000) on a connection without SHM.
    case shmFlags(flags: UInt32)
    /// A packet frame had non-zero flags.
    case packetFlags(flags: UInt32)
    /// A memblock frame had a seek mode above 3.
    case invalidSeekMode(UInt8)
    /// A packet frame was shorter than `Limits.minPacketLength`.
    case packetTooShort(length: UInt32)

    // MARK: Tagstruct
    /// The payload ended where a tag was expected (`expected` 0: any value).
    case unexpectedEnd(expected: UInt8, at: Int)
    /// A different tag was found than the one expected.
    case unexpectedTag(expected: UInt8, found: UInt8, at: Int)
    /// `skipValue` met a byte that is no tag.
    case unknownTag(UInt8, at: Int)
    /// The value after the tag at `at` runs past the end of the payload.
    case truncatedValue(tag: UInt8, at: Int)
    /// A string had no NUL terminator before the end of the payload.
    case unterminatedString(at: Int)
    /// A string was not valid UTF-8.
    case invalidUTF8(at: Int)
    /// A null string (`'N'`) where a string is required.
    case nullString(at: Int)
    /// A channel map or cvolume announced more than `Limits.maxChannels` channels.
    case tooManyChannels(count: Int, at: Int)
    /// A proplist key was empty or not ASCII.
    case invalidProplistKey(at: Int)
    /// A proplist value was longer than `Limits.maxProplistValue`.
    case proplistValueTooLarge(length: UInt32, at: Int)
    /// A proplist entry's `'L'` length differed from its `'x'` length.
    case proplistLengthMismatch(declared: UInt32, actual: UInt32, at: Int)
    /// A proplist had more than `Limits.maxProplistEntries` entries.
    case tooManyProplistEntries(at: Int)
    /// Bytes were left after the last field of a message.
    case trailingBytes(count: Int, at: Int)

    // MARK: Messages
    /// A typed decoder was given a packet of another command.
    case unexpectedCommand(expected: UInt32, found: UInt32)
    /// The AUTH cookie did not have `Limits.cookieLength` bytes.
    case invalidCookieLength(Int)
    /// A record layout of a protocol version this decoder does not read.
    case unsupportedVersion(UInt32, what: String)

    /// One line saying what was wrong.
    public var description: String {
        switch self {
        case .zeroLength:
            return "frame length 0"
        case .frameTooLong(let length):
            return "frame length \(length) exceeds the limit of \(Limits.maxFrameLength)"
        case .shmFlags(let flags):
            return "SHM bit set in flags \(hex(flags)) on a connection without SHM"
        case .packetFlags(let flags):
            return "packet frame with non-zero flags \(hex(flags))"
        case .invalidSeekMode(let mode):
            return "memblock seek mode \(mode) is above 3"
        case .packetTooShort(let length):
            return "packet payload of \(length) bytes is shorter than \(Limits.minPacketLength)"
        case .unexpectedEnd(0, let at):
            return "expected a tagged value at byte \(at), found end of packet"
        case .unexpectedEnd(let expected, let at):
            return "expected tag \(tagName(expected)) at byte \(at), found end of packet"
        case .unexpectedTag(let expected, let found, let at):
            return "expected tag \(tagName(expected)) at byte \(at), found \(byteName(found))"
        case .unknownTag(let tag, let at):
            return "unknown tag \(byteName(tag)) at byte \(at)"
        case .truncatedValue(let tag, let at):
            return "value of tag \(tagName(tag)) at byte \(at) runs past the end of the packet"
        case .unterminatedString(let at):
            return "string at byte \(at) has no NUL terminator"
        case .invalidUTF8(let at):
            return "string at byte \(at) is not valid UTF-8"
        case .nullString(let at):
            return "null string at byte \(at) where a string is required"
        case .tooManyChannels(let count, let at):
            return "\(count) channels at byte \(at) exceed the limit of \(Limits.maxChannels)"
        case .invalidProplistKey(let at):
            return "proplist key at byte \(at) is empty or not ASCII"
        case .proplistValueTooLarge(let length, let at):
            return "proplist value of \(length) bytes at byte \(at) exceeds the limit of \(Limits.maxProplistValue)"
        case .proplistLengthMismatch(let declared, let actual, let at):
            return "proplist entry at byte \(at) declares \(declared) bytes but carries \(actual)"
        case .tooManyProplistEntries(let at):
            return "proplist at byte \(at) has more than \(Limits.maxProplistEntries) entries"
        case .trailingBytes(let count, let at):
            return "\(count) trailing bytes at byte \(at)"
        case .unexpectedCommand(let expected, let found):
            return "expected command \(commandName(expected)), found \(commandName(found))"
        case .invalidCookieLength(let length):
            return "auth cookie of \(length) bytes, expected \(Limits.cookieLength)"
        case .unsupportedVersion(let version, let what):
            return "\(what) of protocol version \(version) are not read here"
        }
    }
}

private let hexDigits = Array("0123456789ABCDEF")

/// `0x80000000`-style rendering of a flags word.
func hex(_ value: UInt32) -> String {
    var digits = ""
    for shift in stride(from: 28, through: 0, by: -4) {
        digits.append(hexDigits[Int((value >> UInt32(shift)) & 0xF)])
    }
    return "0x" + digits
}

/// `'t'` for printable ASCII, `0x05` otherwise.
private func byteName(_ byte: UInt8) -> String {
    if byte >= 0x20 && byte < 0x7F {
        return "'" + String(UnicodeScalar(byte)) + "'"
    }
    return "0x" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0xF)])
}

private func tagName(_ tag: UInt8) -> String {
    switch tag {
    case WireTag.string, WireTag.nullString: return "'t' (string)"
    case WireTag.u32: return "'L' (u32)"
    case WireTag.u8: return "'B' (u8)"
    case WireTag.u64: return "'R' (u64)"
    case WireTag.s64: return "'r' (s64)"
    case WireTag.sampleSpec: return "'a' (sample spec)"
    case WireTag.arbitrary: return "'x' (arbitrary)"
    case WireTag.boolTrue, WireTag.boolFalse: return "'1'/'0' (bool)"
    case WireTag.timeval: return "'T' (timeval)"
    case WireTag.usec: return "'U' (usec)"
    case WireTag.channelMap: return "'m' (channel map)"
    case WireTag.cvolume: return "'v' (cvolume)"
    case WireTag.proplist: return "'P' (proplist)"
    case WireTag.volume: return "'V' (volume)"
    case WireTag.formatInfo: return "'f' (format info)"
    default: return byteName(tag)
    }
}

private func commandName(_ raw: UInt32) -> String {
    if let command = Command(rawValue: raw) {
        return "\(command.info.name) (\(raw))"
    }
    return "\(raw)"
}
