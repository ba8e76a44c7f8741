// What the packets being received from all clients may hold together, and the queue a
// direction keeps of bytes its ring cannot take yet.
import Ring
import Synchronization

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
            let (exchanged, original) = used.compareExchange(
                expected: current, desired: current + bytes,
                ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    func give(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }

    /// Bytes held now.
    var inUse: Int { used.load(ordering: .relaxed) }
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
        unsafe storage.append(contentsOf: bytes)
    }

    /// Moves as much as fits into `ring`; returns whether the consumer must be woken.
    mutating func flush(into ring: ByteRing) -> Bool {
        guard !isEmpty else { return false }
        let (written, wake) = unsafe storage.withUnsafeBytes { buf in
            unsafe ring.write(UnsafeRawBufferPointer(rebasing: buf[head...]))
        }
        head += written
        if isEmpty {
            storage.removeAll(keepingCapacity: storage.capacity <= 1 << 20)
            head = 0
        }
        return wake
    }
}
