/// Sample format byte of a sample spec (`pa_sample_format_t`).
public enum SampleFormat: UInt8, Sendable, CaseIterable {
    case u8 = 0
    case alaw = 1
    case ulaw = 2
    case s16le = 3
    case s16be = 4
    case float32le = 5
    case float32be = 6
    case s32le = 7
    case s32be = 8
    case s24le = 9
    case s24be = 10
    case s24_32le = 11
    case s24_32be = 12
    case invalid = 0xFF

    /// Bytes per sample of one channel; 0 for `invalid`.
    public var bytesPerSample: Int {
        switch self {
        case .u8, .alaw, .ulaw: return 1
        case .s16le, .s16be: return 2
        case .s24le, .s24be: return 3
        case .float32le, .float32be, .s32le, .s32be, .s24_32le, .s24_32be: return 4
        case .invalid: return 0
        }
    }

    /// The byte that, repeated, is silence in this format (as PulseAudio's own silence fill).
    public var silenceByte: UInt8 {
        switch self {
        case .u8: return 0x80
        case .alaw: return 0xD5
        case .ulaw: return 0xFF
        default: return 0x00
        }
    }

    /// The name PulseAudio tools print (`pa_sample_format_to_string`).
    public var name: String {
        switch self {
        case .u8: return "u8"
        case .alaw: return "aLaw"
        case .ulaw: return "uLaw"
        case .s16le: return "s16le"
        case .s16be: return "s16be"
        case .float32le: return "float32le"
        case .float32be: return "float32be"
        case .s32le: return "s32le"
        case .s32be: return "s32be"
        case .s24le: return "s24le"
        case .s24be: return "s24be"
        case .s24_32le: return "s24-32le"
        case .s24_32be: return "s24-32be"
        case .invalid: return "invalid"
        }
    }
}

/// A `'a'` sample spec. The raw format byte is kept, so unknown formats round-trip.
public struct SampleSpec: Equatable, Sendable {
    /// The format byte exactly as on the wire.
    public var formatByte: UInt8
    /// Channel count.
    public var channels: UInt8
    /// Sample rate in Hz.
    public var rate: UInt32

    /// Builds a spec from a known format.
    public init(format: SampleFormat, channels: UInt8, rate: UInt32) {
        self.init(formatByte: format.rawValue, channels: channels, rate: rate)
    }

    /// Builds a spec from a raw format byte.
    public init(formatByte: UInt8, channels: UInt8, rate: UInt32) {
        self.formatByte = formatByte
        self.channels = channels
        self.rate = rate
    }

    /// The format; `invalid` for any byte that names no format.
    public var format: SampleFormat {
        get { SampleFormat(rawValue: formatByte) ?? .invalid }
        set { formatByte = newValue.rawValue }
    }

    /// Bytes of one sample frame (all channels); 0 for an invalid format.
    public var frameSize: Int { format.bytesPerSample * Int(channels) }

    /// Silence byte of the format.
    public var silenceByte: UInt8 { format.silenceByte }

    /// Whether PulseAudio would accept this spec (known format, 1…32 channels, 1…768000 Hz).
    public var isValid: Bool {
        format != .invalid && channels >= 1 && Int(channels) <= Limits.maxChannels
            && rate >= 1 && rate <= Limits.maxRate
    }
}

/// A `'m'` channel map: one position byte per channel.
public struct ChannelMap: Equatable, Sendable {
    /// Channel positions (mono 0, FL 1, FR 2, FC 3, …).
    public var positions: [UInt8]

    /// Builds a map from positions (at most `Limits.maxChannels`).
    public init(positions: [UInt8] = []) { self.positions = positions }

    /// Number of channels.
    public var channels: Int { positions.count }

    /// The one-channel mono map.
    public static let mono = ChannelMap(positions: [0])
    /// Front-left, front-right.
    public static let stereo = ChannelMap(positions: [1, 2])
}

/// A `'v'` per-channel volume.
public struct CVolume: Equatable, Sendable {
    /// One volume per channel (`CVolume.norm` is 100 %).
    public var values: [UInt32]

    /// `PA_VOLUME_NORM`.
    public static let norm: UInt32 = 0x10000
    /// `PA_VOLUME_MUTED`.
    public static let muted: UInt32 = 0

    /// Builds a volume from per-channel values (at most `Limits.maxChannels`).
    public init(values: [UInt32] = []) { self.values = values }

    /// The same volume on every channel.
    public init(channels: Int, volume: UInt32) { self.values = Array(repeating: volume, count: channels) }
}

/// A `'T'` timeval.
public struct Timeval: Equatable, Sendable {
    /// Seconds.
    public var seconds: UInt32
    /// Microseconds.
    public var microseconds: UInt32

    /// Builds a timeval.
    public init(seconds: UInt32, microseconds: UInt32) {
        self.seconds = seconds
        self.microseconds = microseconds
    }
}

/// Stream encodings of a format info (`pa_encoding_t`).
public enum FormatEncoding: UInt8, Sendable, CaseIterable {
    case any = 0, pcm, ac3, eac3, mpeg, dts, mpeg2AAC, trueHD, dtsHD
    case invalid = 0xFF
}

/// A `'f'` format info: an encoding plus a proplist of format properties.
public struct FormatInfo: Equatable, Sendable {
    /// Encoding byte exactly as on the wire.
    public var encoding: UInt8
    /// `format.sample_format`, `format.rate`, … properties.
    public var properties: Proplist

    /// Builds a format info.
    public init(encoding: UInt8, properties: Proplist = Proplist()) {
        self.encoding = encoding
        self.properties = properties
    }

    /// Builds a format info from a known encoding.
    public init(encoding: FormatEncoding, properties: Proplist = Proplist()) {
        self.init(encoding: encoding.rawValue, properties: properties)
    }

    /// Whether the encoding is plain PCM.
    public var isPCM: Bool { encoding == FormatEncoding.pcm.rawValue }
}
