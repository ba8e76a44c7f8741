/// Every size and count bound of the wire format, in one place. Decoders check
/// lengths read from the wire against these before they allocate anything.
public enum Limits {
    /// Size of a frame descriptor: five big-endian u32.
    public static let descriptorSize = 20
    /// Largest legal frame payload (16 MiB, inclusive).
    public static let maxFrameLength: UInt32 = 16 * 1024 * 1024
    /// Smallest legal packet payload; a payload of 8 bytes or less is invalid.
    public static let minPacketLength = 9
    /// Largest value of one proplist entry (64 KiB, inclusive).
    public static let maxProplistValue = 64 * 1024
    /// Largest number of entries accepted in one proplist.
    public static let maxProplistEntries = 512
    /// Largest channel count of a sample spec, channel map or cvolume.
    public static let maxChannels = 32
    /// Largest sample rate of a valid sample spec.
    public static let maxRate: UInt32 = 768_000
    /// Length of the authentication cookie in AUTH.
    public static let cookieLength = 256
    /// Newest native protocol version this module knows.
    public static let protocolVersion: UInt32 = 35
    /// Oldest protocol version a PulseAudio server accepts.
    public static let minProtocolVersion: UInt32 = 8
}

/// `PA_INVALID_INDEX`: "no object" in index fields (`u32 -1`).
public let invalidIndex: UInt32 = 0xFFFF_FFFF
