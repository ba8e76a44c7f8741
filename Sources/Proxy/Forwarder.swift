// Forwarder: the glue between PulseWire's `FrameProcessor` (the frame state
// machine: descriptors, memblocks streamed with pass/silence/drop, whole
// packets) and a session: the direction's filter decides about each frame,
// and what passes goes to the ring, never holding more than one read's worth
// of audio. Large chunks go straight to the other socket when it takes
// them (`WriteThrough`); the rest goes to the ring. Bytes the ring cannot take
// yet wait in a backlog; while the backlog is not empty the owner stops reading
// its socket (backpressure).
import Glibc
import PulseWire
import Ring
import Synchronization

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

/// Per-direction frame policy, called on the producing loop's thread.
protocol FrameFilter: AnyObject {
    /// Decides the fate of one memblock frame from its descriptor.
    func memblock(_ descriptor: FrameDescriptor) throws(ProtocolViolation) -> MemblockDisposition
    /// Inspects (and may rewrite in place, keeping its length) one whole packet.
    func packet(_ payload: inout [UInt8]) throws(ProtocolViolation) -> PacketDisposition
    /// A packet was skipped unbuffered (`reason` says which limit it met); `prefix` holds its
    /// first bytes (command and tag). Throw to close the connection instead of answering it.
    func refusedPacket(prefix: [UInt8], length: Int, reason: String) throws(ProtocolViolation)
}

/// The bytes all sessions may hold at once in packets being collected (one direction: what
/// clients send). Packets up to `unbudgeted` bytes never count: every request an app
/// normally sends is that small, so a budget spent by others never refuses them.
final class PacketBudget: Sendable {
    /// The most bytes of budgeted packets held at once.
    let limit: Int
    static let unbudgeted = 64 * 1024
    private let used = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` from the budget; false (and nothing taken) when they do not fit.
    func take(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes,
                                                             ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    func give(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }

    /// Bytes held now.
    var inUse: Int { used.load(ordering: .relaxed) }
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

/// One direction of one session: runs PulseWire's `FrameProcessor` over what
/// is read, asks the direction's filter about each frame, and puts what passes
/// into the ring (or straight to the other socket).
final class Forwarder: FrameHandler {
    let ring: ByteRing
    /// Takes large chunks straight to the other socket; the ring keeps only the rest.
    weak var writeThrough: WriteThrough?
    /// Chunks at least this large are offered to `writeThrough` (smaller ones
    /// gather in the ring and leave with the next large one or the next drain).
    static let writeThroughMinimum = 1024
    private(set) var backlog = ByteBacklog()
    private var frames: FrameProcessor
    /// The budget this direction's large packets draw on (nil: none, e.g. what the server sends).
    private let budget: PacketBudget?
    /// Bytes of the packet under way taken from `budget` (0: none).
    private var budgeted = 0
    /// The filter of the `process` call under way.
    private var filter: FrameFilter?
    /// The record stream of the memblock under way (for its byte counters).
    private var stream: RecordStream?
    /// Whether the consumer must be woken after the `process` call under way.
    private var wake = false

    /// `packetLimit`: the longest packet buffered whole; `budget`: what larger-than-small
    /// packets of every session may hold together.
    init(ring: ByteRing, packetLimit: Int = Int(Limits.maxFrameLength), budget: PacketBudget? = nil) {
        self.ring = ring
        frames = FrameProcessor(packetLimit: packetLimit)
        self.budget = budget
    }

    /// Gives back what the packet under way holds of the budget (the connection is closing).
    func releaseBudget() {
        if budgeted > 0 { budget?.give(budgeted) }
        budgeted = 0
    }

    /// Packets forwarded so far (the client side polls for a reply after a request).
    var packetsForwarded: Int { frames.packetsForwarded }

    /// True when no frame is half-way through this forwarder.
    var isAtFrameBoundary: Bool { frames.isAtFrameBoundary }

    /// Processes `input` (which may be overwritten in place); returns whether the consumer must be woken.
    func process(_ input: UnsafeMutableRawBufferPointer, filter: FrameFilter) throws(ProtocolViolation) -> Bool {
        self.filter = filter
        wake = false
        defer { self.filter = nil }
        try frames.process(input, handler: self)
        return wake
    }

    // MARK: FrameHandler

    func memblock(_ descriptor: FrameDescriptor) throws(ProtocolViolation) -> MemblockAction {
        switch try filter!.memblock(descriptor) { // set for the whole process() call that calls this
        case .pass(let s):
            stream = s
            return .pass
        case .silence(let byte, let s):
            stream = s
            return .silence(byte)
        case .drop:
            stream = nil
            return .drop
        }
    }

    func packet(_ payload: inout [UInt8]) throws(ProtocolViolation) -> Bool {
        try filter!.packet(&payload) == .forward // set for the whole process() call that calls this
    }

    func admitPacket(_ length: Int) -> Bool {
        guard let budget, length > PacketBudget.unbudgeted else { return true }
        guard budget.take(length) else { return false }
        budgeted = length
        return true
    }

    func packetReleased(_ length: Int) { releaseBudget() }

    func refusedPacket(prefix: [UInt8], length: Int, overLimit limit: Int?) throws(ProtocolViolation) {
        let reason = limit.map { "it is larger than the \($0) bytes one packet may have" }
            ?? "it does not fit in the \(budget?.limit ?? 0) bytes that the large packets being received from all clients may hold together"
        try filter!.refusedPacket(prefix: prefix, length: length, reason: reason) // set for the whole process() call
    }

    func memblockPayload(_ count: Int, silenced: Bool) {
        if silenced { stream?.countSilenced(count) } else { stream?.countReal(count) }
    }

    func emit(_ bytes: UnsafeRawBufferPointer) {
        if emitting(bytes) { wake = true }
    }

    /// Moves backlog bytes into the ring; returns whether the consumer must be woken.
    func flushBacklog() -> Bool {
        backlog.flush(into: ring)
    }

    /// Injects a whole packet (e.g. an ERROR reply) at the current frame boundary.
    /// Only valid between frames of this direction, on the producing thread.
    func inject(packet payload: [UInt8]) -> Bool {
        let w1 = FrameDescriptor.packet(length: UInt32(payload.count)).bytes.withUnsafeBytes { emitting($0) }
        let w2 = payload.withUnsafeBytes { emitting($0) }
        return w1 || w2
    }

    /// Puts `bytes` out; returns whether the consumer must be woken.
    private func emitting(_ bytes: UnsafeRawBufferPointer) -> Bool {
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
