/// Incremental frame parser for one direction of a connection.
///
/// Feed it any chunking of the byte stream; `next()` hands out whole,
/// validated frames in order. It keeps one buffer with a read index and
/// compacts it only when the consumed prefix is large, so a frame costs one
/// payload copy and no shifting of the rest of the buffer.
public struct FrameParser {
    private var buffer: [UInt8] = []
    private var readIndex = 0

    /// Consumed bytes tolerated at the front before `append` compacts.
    private static let compactThreshold = 64 * 1024

    /// An empty parser.
    public init() {}

    /// Bytes received but not yet handed out as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compactIfWorthIt()
        unsafe buffer.append(contentsOf: bytes)
    }

    /// Adds received bytes.
    public mutating func append<C: Collection>(contentsOf bytes: C) where C.Element == UInt8 {
        compactIfWorthIt()
        buffer.append(contentsOf: bytes)
    }

    /// The descriptor of the next frame once its 20 bytes are buffered (not validated, nothing consumed).
    public func peekDescriptor() -> FrameDescriptor? {
        guard bufferedByteCount >= Limits.descriptorSize else { return nil }
        return FrameDescriptor(
            length: loadBigEndian(buffer, at: readIndex),
            channel: loadBigEndian(buffer, at: readIndex + 4),
            offsetHi: loadBigEndian(buffer, at: readIndex + 8),
            offsetLo: loadBigEndian(buffer, at: readIndex + 12),
            flags: loadBigEndian(buffer, at: readIndex + 16))
    }

    /// The next whole frame, or nil when more bytes are needed (then nothing is consumed).
    ///
    /// The descriptor is validated as soon as it is complete, so a bad one
    /// throws before its payload arrives. After a throw the parser stays stuck
    /// on the bad frame; the connection should be closed.
    public mutating func next() throws(WireError) -> Frame? {
        var payload = [UInt8]()
        guard let descriptor = try next(reusing: &payload) else { return nil }
        return Frame(descriptor: descriptor, payload: payload)
    }

    /// Like `next()`, but writes the payload into `payload` (replacing its
    /// contents and keeping its capacity), so a caller that recycles one
    /// buffer does not allocate per frame.
    public mutating func next(reusing payload: inout [UInt8]) throws(WireError) -> FrameDescriptor? {
        guard let descriptor = peekDescriptor() else { return nil }
        try descriptor.validate()
        // validate() bounded the length to 16 MiB, so this sum cannot overflow.
        let total = Limits.descriptorSize + Int(descriptor.length)
        guard bufferedByteCount >= total else { return nil }
        let start = readIndex + Limits.descriptorSize
        payload.removeAll(keepingCapacity: true)
        payload.append(contentsOf: buffer[start..<(readIndex + total)])
        readIndex += total
        return descriptor
    }

    private mutating func compactIfWorthIt() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex >= Self.compactThreshold && readIndex >= buffer.count - readIndex {
            // Moving at most as many bytes as were consumed keeps this amortised O(1) per byte.
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }
}
