// PulseWire: the PulseAudio native protocol as values, with no I/O.
//
// Bytes flow in from a socket as an arbitrary chunking of frames. `FrameParser`
// cuts them into `Frame`s (a 20-byte `FrameDescriptor` plus payload) and applies
// every receiver check of a connection that never negotiated SHM. A packet
// frame's payload is a tagstruct; `TagStructReader`/`TagStructWriter` read and
// write its tagged values, `PacketHeader` reads the command and tag, and the
// typed messages (AUTH, SET_CLIENT_NAME, CREATE_*_STREAM, stream events, ERROR)
// decode and encode their fields for a given protocol version so that
// `encode(decode(bytes)) == bytes`. Nothing from the wire is trusted: every
// length is checked against `Limits` before allocating, and decoders throw a
// `WireError` instead of trapping on any input.

/// The 20-byte header in front of every frame: five big-endian u32.
public struct FrameDescriptor: Equatable, Sendable {
    /// Payload size in bytes (the descriptor is not counted).
    public var length: UInt32
    /// `controlChannel` for packets, else the stream channel of a memblock.
    public var channel: UInt32
    /// High 32 bits of the memblock offset.
    public var offsetHi: UInt32
    /// Low 32 bits of the memblock offset.
    public var offsetLo: UInt32
    /// Seek mode in the low byte, SHM bits in the top byte.
    public var flags: UInt32

    /// Channel value of packet (command) frames.
    public static let controlChannel: UInt32 = 0xFFFF_FFFF
    /// Flag bits that only exist on connections with SHM.
    public static let shmMask: UInt32 = 0xFF00_0000
    /// Low byte of the flags: the memblock seek mode.
    public static let seekMask: UInt32 = 0x0000_00FF
    /// Largest valid seek mode (RELATIVE_END).
    public static let maxSeekMode: UInt8 = 3

    /// Whether this frame carries a packet rather than a memblock.
    public var isPacket: Bool { channel == Self.controlChannel }

    /// The signed 64-bit memblock offset split over `offsetHi`/`offsetLo`.
    public var offset: Int64 {
        get { Int64(bitPattern: UInt64(offsetHi) << 32 | UInt64(offsetLo)) }
        set {
            let bits = UInt64(bitPattern: newValue)
            offsetHi = UInt32(truncatingIfNeeded: bits >> 32)
            offsetLo = UInt32(truncatingIfNeeded: bits)
        }
    }

    /// Seek mode of a memblock (0 RELATIVE … 3 RELATIVE_END).
    public var seekMode: UInt8 { UInt8(flags & Self.seekMask) }

    /// Builds a descriptor from its five fields.
    public init(length: UInt32, channel: UInt32, offsetHi: UInt32 = 0, offsetLo: UInt32 = 0, flags: UInt32 = 0) {
        self.length = length
        self.channel = channel
        self.offsetHi = offsetHi
        self.offsetLo = offsetLo
        self.flags = flags
    }

    /// The descriptor of a packet frame with `length` payload bytes.
    public static func packet(length: UInt32) -> FrameDescriptor {
        FrameDescriptor(length: length, channel: controlChannel)
    }

    /// Decodes 20 big-endian bytes (no validation). `bytes.count` must be >= 20.
    public init(decoding bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= Limits.descriptorSize, "a frame descriptor needs 20 bytes")
        func word(_ index: Int) -> UInt32 {
            unsafe UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self))
        }
        self.init(length: word(0), channel: word(1), offsetHi: word(2), offsetLo: word(3), flags: word(4))
    }

    /// Writes the 20 big-endian bytes to the start of `bytes` (count must be >= 20).
    public func encode(into bytes: UnsafeMutableRawBufferPointer) {
        precondition(bytes.count >= Limits.descriptorSize, "a frame descriptor needs 20 bytes")
        unsafe bytes.storeBytes(of: length.bigEndian, toByteOffset: 0, as: UInt32.self)
        unsafe bytes.storeBytes(of: channel.bigEndian, toByteOffset: 4, as: UInt32.self)
        unsafe bytes.storeBytes(of: offsetHi.bigEndian, toByteOffset: 8, as: UInt32.self)
        unsafe bytes.storeBytes(of: offsetLo.bigEndian, toByteOffset: 12, as: UInt32.self)
        unsafe bytes.storeBytes(of: flags.bigEndian, toByteOffset: 16, as: UInt32.self)
    }

    /// The 20 encoded bytes.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        append(to: &result)
        return result
    }

    /// Appends the 20 encoded bytes to `buffer`.
    public func append(to buffer: inout [UInt8]) {
        appendBigEndian(length, to: &buffer)
        appendBigEndian(channel, to: &buffer)
        appendBigEndian(offsetHi, to: &buffer)
        appendBigEndian(offsetLo, to: &buffer)
        appendBigEndian(flags, to: &buffer)
    }

    /// Every receiver check of protocol doc §1.2 for a connection without SHM.
    ///
    /// Any 0xFF000000 bit (which includes SHM release/revoke frames), a length
    /// of 0 or above 16 MiB, a packet with flags, a seek mode above 3, and a
    /// packet payload of 8 bytes or less are all rejected.
    public func validate() throws(WireError) {
        if flags & Self.shmMask != 0 { throw .shmFlags(flags: flags) }
        if length == 0 { throw .zeroLength }
        if length > Limits.maxFrameLength { throw .frameTooLong(length: length) }
        if isPacket {
            if flags != 0 { throw .packetFlags(flags: flags) }
            if length < UInt32(Limits.minPacketLength) { throw .packetTooShort(length: length) }
        } else if seekMode > Self.maxSeekMode {
            throw .invalidSeekMode(seekMode)
        }
    }
}

/// One whole frame: its descriptor and exactly `descriptor.length` payload bytes.
public struct Frame: Equatable, Sendable {
    /// The frame's descriptor.
    public var descriptor: FrameDescriptor
    /// The payload: a tagstruct for packets, raw samples for memblocks.
    public var payload: [UInt8]

    /// Pairs a descriptor with its payload.
    public init(descriptor: FrameDescriptor, payload: [UInt8]) {
        self.descriptor = descriptor
        self.payload = payload
    }

    /// A packet frame around a tagstruct payload.
    public init(packet payload: [UInt8]) {
        self.init(descriptor: .packet(length: UInt32(truncatingIfNeeded: payload.count)), payload: payload)
    }

    /// Descriptor and payload as they go on the wire.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(Limits.descriptorSize + payload.count)
        append(to: &result)
        return result
    }

    /// Appends descriptor and payload to `buffer`.
    public func append(to buffer: inout [UInt8]) {
        descriptor.append(to: &buffer)
        buffer.append(contentsOf: payload)
    }
}

/// Appends the four big-endian bytes of `word`.
@inline(__always)
func appendBigEndian(_ word: UInt32, to buffer: inout [UInt8]) {
    buffer.append(UInt8(truncatingIfNeeded: word >> 24))
    buffer.append(UInt8(truncatingIfNeeded: word >> 16))
    buffer.append(UInt8(truncatingIfNeeded: word >> 8))
    buffer.append(UInt8(truncatingIfNeeded: word))
}

/// Reads four big-endian bytes at `index`; the caller checked the bounds.
@inline(__always)
func loadBigEndian(_ bytes: [UInt8], at index: Int) -> UInt32 {
    UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
}
