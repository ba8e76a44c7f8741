// Forwarder: turns the bytes read from one socket into processed frames in a
// ring, without ever holding more than one read's worth of audio.
//
// Memblock payloads stream through chunk by chunk: the descriptor decides, once
// per frame, whether the payload passes, is overwritten in place with the
// stream's silence byte, or is dropped. Packets (commands, replies, events)
// are collected whole, handed to the direction's filter, which may rewrite
// them in place (AUTH) or refuse them, and then emitted with their
// descriptor. Large chunks go straight to the other socket when it takes
// them (`WriteThrough`); the rest goes to the ring. Bytes the ring cannot take
// yet wait in a backlog; while the backlog is not empty the owner stops reading
// its socket (backpressure).
import Glibc
import PulseWire
import Ring

/// What to do with the payload of one memblock frame.
enum MemblockDisposition {
    /// Pass the samples through unchanged.
    case pass(RecordStream?)
    /// Overwrite every byte with `silence` before passing it on.
    case silence(UInt8, RecordStream?)
    /// Do not forward the frame at all (unknown channel).
    case drop
}

/// What to do with a whole packet.
enum PacketDisposition {
    case forward
    case drop
}

/// A malformed or forbidden frame: the connection is closed with this cause.
struct ProtocolViolation: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Per-direction frame policy, called on the producing loop's thread.
protocol FrameFilter: AnyObject {
    /// Decides the fate of one memblock frame from its descriptor.
    func memblock(_ descriptor: FrameDescriptor) throws(ProtocolViolation) -> MemblockDisposition
    /// Inspects (and may rewrite in place, keeping its length) one whole packet.
    func packet(_ payload: inout [UInt8]) throws(ProtocolViolation) -> PacketDisposition
}

/// The consumer of a forwarder's ring, when it can take bytes straight from
/// the producer (both halves of a session run on one loop thread).
protocol WriteThrough: AnyObject {
    /// Writes what the ring holds and then as much of `bytes` as the socket
    /// takes, with one system call; returns how many of `bytes` were written.
    func writeThrough(_ bytes: UnsafeRawBufferPointer) -> Int
}

/// A byte queue with a read index, reused without reallocating.
struct ByteBacklog {
    private(set) var storage: [UInt8] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if isEmpty {
            storage.removeAll(keepingCapacity: storage.capacity <= 1 << 20)
            head = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Moves as much as fits into `ring`; returns whether the consumer must be woken.
    mutating func flush(into ring: ByteRing) -> Bool {
        guard !isEmpty else { return false }
        let (written, wake) = storage.withUnsafeBytes { buf in
            ring.write(UnsafeRawBufferPointer(rebasing: buf[head...]))
        }
        head += written
        if isEmpty {
            storage.removeAll(keepingCapacity: storage.capacity <= 1 << 20)
            head = 0
        }
        return wake
    }
}

/// Incremental frame processor for one direction of one session.
final class Forwarder {
    private enum State {
        case descriptor
        case memblock(remaining: Int, disposition: MemblockDisposition)
        case packet(remaining: Int)
    }

    let ring: ByteRing
    /// Takes large chunks straight to the other socket; the ring keeps only the rest.
    weak var writeThrough: WriteThrough?
    /// Chunks at least this large are offered to `writeThrough` (smaller ones
    /// gather in the ring and leave with the next large one or the next drain).
    static let writeThroughMinimum = 1024
    /// Packets forwarded so far (the client side polls for a reply after a request).
    private(set) var packetsForwarded = 0
    private(set) var backlog = ByteBacklog()
    private var state = State.descriptor
    private var header = [UInt8](repeating: 0, count: Limits.descriptorSize)
    private var headerCount = 0
    private var packetDescriptor = FrameDescriptor.packet(length: 0)
    private var packet: [UInt8] = []

    init(ring: ByteRing) {
        self.ring = ring
    }

    /// Processes `input` (which may be overwritten in place); returns whether the consumer must be woken.
    func process(_ input: UnsafeMutableRawBufferPointer, filter: FrameFilter) throws(ProtocolViolation) -> Bool {
        var wake = false
        var pos = 0
        let end = input.count
        guard let base = input.baseAddress else { return false }
        while pos < end {
            switch state {
            case .descriptor:
                let take = min(Limits.descriptorSize - headerCount, end - pos)
                header.withUnsafeMutableBytes { h in
                    (h.baseAddress! + headerCount).copyMemory(from: base + pos, byteCount: take)
                }
                headerCount += take
                pos += take
                if headerCount == Limits.descriptorSize {
                    headerCount = 0
                    try wake = beginFrame(filter: filter) || wake
                }
            case .memblock(let remaining, let disposition):
                let n = min(remaining, end - pos)
                let chunk = UnsafeMutableRawBufferPointer(start: base + pos, count: n)
                switch disposition {
                case .pass(let stream):
                    stream?.countReal(n)
                    wake = emit(UnsafeRawBufferPointer(chunk)) || wake
                case .silence(let byte, let stream):
                    stream?.countSilenced(n)
                    memset(chunk.baseAddress!, Int32(byte), n)
                    wake = emit(UnsafeRawBufferPointer(chunk)) || wake
                case .drop:
                    break
                }
                pos += n
                state = remaining == n ? .descriptor : .memblock(remaining: remaining - n, disposition: disposition)
            case .packet(let remaining):
                let n = min(remaining, end - pos)
                packet.append(contentsOf: UnsafeRawBufferPointer(start: base + pos, count: n))
                pos += n
                if remaining == n {
                    state = .descriptor
                    try wake = finishPacket(filter: filter) || wake
                } else {
                    state = .packet(remaining: remaining - n)
                }
            }
        }
        return wake
    }

    /// Moves backlog bytes into the ring; returns whether the consumer must be woken.
    func flushBacklog() -> Bool {
        backlog.flush(into: ring)
    }

    private func beginFrame(filter: FrameFilter) throws(ProtocolViolation) -> Bool {
        let d = header.withUnsafeBytes { FrameDescriptor(decoding: $0) }
        do {
            try d.validate()
        } catch {
            throw ProtocolViolation("invalid frame descriptor: \(error)")
        }
        if d.isPacket {
            packetDescriptor = d
            if packet.capacity > 1 << 20 { packet = [] } else { packet.removeAll(keepingCapacity: true) }
            packet.reserveCapacity(Int(d.length))
            state = .packet(remaining: Int(d.length))
            return false
        }
        let disposition = try filter.memblock(d)
        state = .memblock(remaining: Int(d.length), disposition: disposition)
        if case .drop = disposition { return false }
        return header.withUnsafeBytes { emit($0) }
    }

    private func finishPacket(filter: FrameFilter) throws(ProtocolViolation) -> Bool {
        guard try filter.packet(&packet) == .forward else { return false }
        precondition(packet.count == Int(packetDescriptor.length), "a filter changed a packet's length")
        packetsForwarded &+= 1
        let w1 = header.withUnsafeBytes { emit($0) }
        let w2 = packet.withUnsafeBytes { emit($0) }
        return w1 || w2
    }

    /// Injects a whole packet (e.g. an ERROR reply) at the current frame boundary.
    /// Only valid between frames of this direction, on the producing thread.
    func inject(packet payload: [UInt8]) -> Bool {
        let w1 = FrameDescriptor.packet(length: UInt32(payload.count)).bytes.withUnsafeBytes { emit($0) }
        let w2 = payload.withUnsafeBytes { emit($0) }
        return w1 || w2
    }

    /// True when no frame is half-way through this forwarder.
    var isAtFrameBoundary: Bool {
        if case .descriptor = state { return headerCount == 0 }
        return false
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard backlog.isEmpty else {
            backlog.append(bytes)
            return false
        }
        var rest = bytes
        if bytes.count >= Self.writeThroughMinimum, let sink = writeThrough {
            let n = sink.writeThrough(bytes)
            if n == bytes.count { return false }
            rest = UnsafeRawBufferPointer(rebasing: bytes[n...])
        }
        let (written, wake) = ring.write(rest)
        if written < rest.count {
            backlog.append(UnsafeRawBufferPointer(rebasing: rest[written...]))
        }
        return wake
    }
}
