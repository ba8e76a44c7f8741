// FrameProcessor: the incremental frame state machine the relay runs on every
// byte of both directions. Pure: it owns no socket, ring or lock; what it reads
// comes in as chunks of any size; its filter decides about each frame, and what it
// lets through goes out to its sink, in order.
//
// Per frame: the 20-byte descriptor is collected (it may straddle chunks) and
// validated with every receiver check of `FrameDescriptor.validate()`. Then
//   * a memblock streams through chunk by chunk: the filter decides once, from
//     the descriptor, whether the payload passes, is overwritten in place with
//     a silence byte, or is dropped (descriptor included);
//   * a packet is collected whole, its header decoded, handed to the filter (which may rewrite it,
//     in place or to another length, or refuse it) and then emitted with its
//     descriptor;
//   * a packet longer than `packetLimit`, or one the filter does not admit
//     (`admitPacket`: its share of a budget), is never buffered: only its first
//     bytes (command and tag) are kept, the rest is skipped, and the filter is
//     told (`refusedPacket`) so that it can answer it with an error.
// Frames are never split, merged or reordered: the output is the input minus
// dropped frames, with silenced payloads. A relay may move the rest of a passing
// memblock's payload on by itself (`passingPayloadRemaining`, `passedOn`).

/// What to do with one frame: the one answer a `FrameFilter` gives.
public enum FrameDisposition: Equatable, Sendable {
    /// Forward it: a memblock's samples unchanged, a packet as it is now (possibly rewritten).
    case pass
    /// Memblocks only: overwrite every payload byte with this value before passing it on.
    case silence(UInt8)
    /// Forward neither the descriptor nor the payload.
    case drop
}

/// A malformed or forbidden frame: the connection is closed with this cause.
public struct ProtocolViolation: Error, CustomStringConvertible, Equatable, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Decides about each frame a `FrameProcessor` reads, and hears what it lets through.
public protocol FrameFilter: AnyObject {
    /// A validated memblock descriptor: what to do with its payload. The filter may give the
    /// memblock another channel (the one its reader knows the stream by); nothing else of it.
    func memblock(_ descriptor: inout FrameDescriptor) throws(ProtocolViolation) -> FrameDisposition
    /// `count` payload bytes of the current memblock were passed (or silenced) on.
    func memblockPayload(_ count: Int, silenced: Bool)
    /// A whole packet, its header decoded (`body` reads what follows it): `.pass` or `.drop`.
    /// `payload` may be rewritten, in place or to another length (a packet still: header first).
    func packet(
        _ header: PacketHeader, body: TagStructReader,
        payload: inout [UInt8]
    ) throws(ProtocolViolation) -> FrameDisposition
    /// A packet of `length` bytes (within the processor's `packetLimit`) is about to be
    /// collected: whether it may be buffered. An admitted packet is followed by
    /// `packetReleased(length)` once it has been handed on (or dropped).
    func admitPacket(_ length: Int) -> Bool
    /// The packet admitted with `admitPacket(length)` no longer needs its buffer.
    func packetReleased(_ length: Int)
    /// A packet was skipped without being buffered: it was longer than `limit` bytes
    /// (`overLimit`), or `admitPacket` refused it. `header` is its command and tag (nil when
    /// they do not decode). Throw to close the connection.
    func refusedPacket(_ header: PacketHeader?, length: Int, overLimit limit: Int?) throws(ProtocolViolation)
}

extension FrameFilter {
    public func memblockPayload(_ count: Int, silenced: Bool) {}
    /// Every packet may be buffered.
    public func admitPacket(_ length: Int) -> Bool { true }
    public func packetReleased(_ length: Int) {}
    /// A skipped packet breaks the connection.
    public func refusedPacket(_ header: PacketHeader?, length: Int, overLimit limit: Int?) throws(ProtocolViolation) {
        throw ProtocolViolation("a packet of \(length) bytes is over the limit of \(limit ?? 0) bytes")
    }

    /// Decodes a whole packet's header (the one place it is decoded) and asks `packet(_:body:payload:)`.
    public func packet(_ payload: inout [UInt8]) throws(ProtocolViolation) -> FrameDisposition {
        var body = TagStructReader(payload)
        let header: PacketHeader
        do {
            header = try PacketHeader.decode(from: &body)
        } catch {
            throw ProtocolViolation("malformed packet: \(error)")
        }
        return try packet(header, body: body, payload: &payload)
    }
}

/// Where a `FrameProcessor` puts the bytes it lets through, in order (descriptors,
/// payload chunks, packets).
public protocol FrameSink: AnyObject {
    func emit(_ bytes: UnsafeRawBufferPointer)
}

/// Incremental frame processor for one direction of one connection.
public struct FrameProcessor {
    private enum State {
        case descriptor
        case memblock(remaining: Int, action: FrameDisposition)
        case packet(remaining: Int)
        /// A refused packet: its first bytes are kept (and reported once they are in), the rest skipped.
        case skip(remaining: Int, overLimit: Int?, reported: Bool)
    }

    /// Bytes kept of a refused packet: command and tag (two tagged u32).
    public static let refusedPrefixLength = 10
    /// The longest packet buffered whole; longer ones are refused (`refusedPacket`).
    public let packetLimit: Int
    /// Payloads up to this size grow with what arrives; longer admitted ones are
    /// allocated at their full length once this much has arrived.
    static let growthStep = 64 * 1024

    private var state = State.descriptor
    private var header = [UInt8](repeating: 0, count: Limits.descriptorSize)
    private var headerCount = 0
    private var packetDescriptor = FrameDescriptor.packet(length: 0)
    private var packet: [UInt8] = []
    /// Packets forwarded so far.
    public private(set) var packetsForwarded = 0
    /// The length of the latest frame if it was a memblock that passes unchanged, else 0.
    public private(set) var lastPassingMemblockLength = 0

    /// `packetLimit`: the longest packet buffered whole (the protocol's own limit by default).
    public init(packetLimit: Int = Int(Limits.maxFrameLength)) {
        self.packetLimit = packetLimit
    }

    /// True when no frame is half-way through (a packet may be inserted here).
    public var isAtFrameBoundary: Bool {
        if case .descriptor = state { return headerCount == 0 }
        return false
    }

    /// The payload bytes still to come of a memblock that passes unchanged; nil in any other
    /// state. A relay may move them on without reading them, and says so with `passedOn`.
    public var passingPayloadRemaining: Int? {
        if case .memblock(let remaining, .pass) = state { return remaining }
        return nil
    }

    /// The bytes the descriptor being collected still lacks; nil inside a frame.
    public var descriptorBytesMissing: Int? {
        if case .descriptor = state { return Limits.descriptorSize - headerCount }
        return nil
    }

    /// `count` payload bytes of the passing memblock (at most `passingPayloadRemaining`)
    /// went on without coming through `process`.
    public mutating func passedOn(_ count: Int, filter: some FrameFilter) {
        guard case .memblock(let remaining, .pass) = state, count > 0, count <= remaining else {
            preconditionFailure("passedOn(\(count)) outside a passing memblock's payload")
        }
        filter.memblockPayload(count, silenced: false)
        state = remaining == count ? .descriptor : .memblock(remaining: remaining - count, action: .pass)
    }

    /// Processes `input`, which may be overwritten in place (silence).
    /// After a throw the stream is broken; the connection should be closed.
    public mutating func process(
        _ input: UnsafeMutableRawBufferPointer, filter: some FrameFilter,
        sink: some FrameSink
    ) throws(ProtocolViolation) {
        guard let base = input.baseAddress else { return }
        var pos = 0
        let end = input.count
        while pos < end {
            switch state {
            case .descriptor:
                let take = min(Limits.descriptorSize - headerCount, end - pos)
                let at = headerCount
                unsafe header.withUnsafeMutableBytes { h in
                    unsafe (h.baseAddress! + at).copyMemory(from: base + pos, byteCount: take)
                }
                headerCount += take
                pos += take
                if headerCount == Limits.descriptorSize {
                    headerCount = 0
                    try beginFrame(filter, sink)
                }
            case .memblock(let remaining, let action):
                let n = min(remaining, end - pos)
                let chunk = unsafe UnsafeMutableRawBufferPointer(start: base + pos, count: n)
                switch action {
                case .pass:
                    filter.memblockPayload(n, silenced: false)
                    unsafe sink.emit(UnsafeRawBufferPointer(chunk))
                case .silence(let byte):
                    unsafe chunk.initializeMemory(as: UInt8.self, repeating: byte)
                    filter.memblockPayload(n, silenced: true)
                    unsafe sink.emit(UnsafeRawBufferPointer(chunk))
                case .drop:
                    break
                }
                pos += n
                state = remaining == n ? .descriptor : .memblock(remaining: remaining - n, action: action)
            case .packet(let remaining):
                let n = min(remaining, end - pos)
                if packet.count + n > packet.capacity && packet.count + n > Self.growthStep {
                    // Admitted at its full length: one allocation, not a doubling series.
                    packet.reserveCapacity(Int(packetDescriptor.length))
                }
                unsafe packet.append(contentsOf: UnsafeRawBufferPointer(start: base + pos, count: n))
                pos += n
                if remaining == n {
                    state = .descriptor
                    try finishPacket(filter, sink)
                } else {
                    state = .packet(remaining: remaining - n)
                }
            case .skip(let remaining, let limit, let reported):
                let n = min(remaining, end - pos)
                let keep = reported ? 0 : min(n, Self.refusedPrefixLength - packet.count)
                if keep > 0 { unsafe packet.append(contentsOf: UnsafeRawBufferPointer(start: base + pos, count: keep)) }
                pos += n
                // Answered as soon as command and tag are in, not after the whole packet.
                let report = !reported && (packet.count == Self.refusedPrefixLength || remaining == n)
                state =
                    remaining == n
                    ? .descriptor
                    : .skip(
                        remaining: remaining - n, overLimit: limit,
                        reported: reported || report)
                if report {
                    let header = try? PacketHeader.decode(packet)
                    packet.removeAll(keepingCapacity: true)
                    try filter.refusedPacket(header, length: Int(packetDescriptor.length), overLimit: limit)
                }
            }
        }
    }

    private mutating func beginFrame(_ filter: some FrameFilter, _ sink: some FrameSink) throws(ProtocolViolation) {
        let d = unsafe header.withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }
        do {
            try d.validate()
        } catch {
            throw ProtocolViolation("invalid frame descriptor: \(error)")
        }
        if d.isPacket {
            lastPassingMemblockLength = 0
            packetDescriptor = d
            if packet.capacity > 1 << 20 { packet = [] } else { packet.removeAll(keepingCapacity: true) }
            let length = Int(d.length)
            if length > packetLimit || !filter.admitPacket(length) {
                state = .skip(remaining: length, overLimit: length > packetLimit ? packetLimit : nil, reported: false)
                return
            }
            // Grow with what arrives: a descriptor alone must not make us
            // allocate the 16 MiB it may claim.
            packet.reserveCapacity(min(Int(d.length), 64 * 1024))
            state = .packet(remaining: Int(d.length))
            return
        }
        var rechanneled = d
        let action = try filter.memblock(&rechanneled)
        state = .memblock(remaining: Int(d.length), action: action)
        lastPassingMemblockLength = action == .pass ? Int(d.length) : 0
        guard action != .drop else { return }
        if rechanneled.channel != d.channel {
            unsafe FrameDescriptor(
                length: d.length, channel: rechanneled.channel, offsetHi: d.offsetHi, offsetLo: d.offsetLo,
                flags: d.flags
            ).bytes.withUnsafeBytes { unsafe sink.emit($0) }
        } else {
            unsafe header.withUnsafeBytes { unsafe sink.emit($0) }
        }
    }

    private mutating func finishPacket(_ filter: some FrameFilter, _ sink: some FrameSink) throws(ProtocolViolation) {
        defer { filter.packetReleased(Int(packetDescriptor.length)) }
        switch try filter.packet(&packet) {
        case .pass: break
        case .drop: return
        case .silence: preconditionFailure("a frame filter silenced a packet; only memblocks have samples")
        }
        packetsForwarded &+= 1
        if packet.count == Int(packetDescriptor.length) {
            unsafe header.withUnsafeBytes { unsafe sink.emit($0) }
        } else {
            // Rewritten to another length (a reply with records left out): a descriptor of its own.
            unsafe FrameDescriptor.packet(length: UInt32(packet.count)).bytes.withUnsafeBytes { unsafe sink.emit($0) }
        }
        unsafe packet.withUnsafeBytes { unsafe sink.emit($0) }
    }
}
