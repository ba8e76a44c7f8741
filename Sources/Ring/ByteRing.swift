// Ring: the hand-off between the two halves of a session, one ring per direction.
// Both halves of a session run on one event loop today, so producer and consumer
// are one thread; the ring is built (and checked under the thread sanitizer) for
// two, so that a session could be split across threads again without changing it.
//
// One side (the producer) reads frames from one socket, processes them and
// copies the bytes into a `ByteRing`; the other side (the consumer) sends the
// readable bytes to the other socket with one `sendmsg` of up to two regions
// and releases what the kernel took. Neither side ever blocks on the other or
// takes a lock: each side owns one index, publishes it with a release store and
// reads the other side's with an acquire load. When a side runs out of work
// (consumer: ring empty; producer: ring full) it goes to sleep on its own event
// loop, and the other side learns from the value the ring returns whether it
// must send a wake-up (for example by writing to an eventfd).
//
// Nothing here is trusted or untrusted: the ring moves opaque bytes.

import Glibc
import Synchronization

/// Bounded lock-free single-producer/single-consumer byte ring.
///
/// Layout: `capacity` bytes of storage (a power of two, at least 64), mapped
/// once with `mmap` so untouched pages cost no memory, and two free-running
/// `UInt` indices that only ever grow (with wrapping `&+`). A byte with index
/// `i` lives at offset `i & mask`.
///
/// Ownership:
/// - `writeIndex` is stored only by the producer, `readIndex` only by the
///   consumer. Each side loads its own index `.relaxed` (nobody else changes
///   it), loads the other side's `.acquiring`, and publishes its own
///   `.releasing`. The release store of `writeIndex` after copying bytes in,
///   paired with the consumer's acquire load, makes those bytes visible before
///   the consumer reads them; the release store of `readIndex` after reading,
///   paired with the producer's acquire load, makes sure the consumer finished
///   reading a byte before the producer overwrites it.
/// - The producer touches only bytes in `[write, read + capacity)`; the
///   consumer touches only bytes in `[read, write)`. Those ranges never overlap.
///
/// Invariants (checked with `assert` in debug builds):
/// - `0 <= write &- read <= capacity` (as unsigned wrapping distance);
/// - a write copies at most `freeSpace()` bytes, a `consume(n)` has
///   `0 <= n <= readableCount()`;
/// - indices only move forward, each by its owner only.
///
/// Wake protocol (no lost wake-ups):
/// - Consumer sleeps when it sees the ring empty. After publishing new bytes the
///   producer checks whether `readIndex` equals the write index from *before*
///   its write; if so the ring was empty, the consumer may be asleep, and
///   `write` returns `wakeConsumer == true`.
/// - Producer that cannot write all it has calls `parkProducer(minimumFreeSpace:)`,
///   which records how much free space it waits for and then re-checks the free
///   space. After publishing a new read index, `consume` checks the mark and,
///   once that much space is free, clears it with a compare-exchange (so exactly
///   one wake-up is sent) and returns `true`. Waiting for, say, half the ring
///   instead of one byte turns many small wake-ups into few large ones.
/// - Both checks are the store-then-load-the-other-side pattern (Dekker):
///   "store my index (or my mark), then load the other side's". Release stores
///   and acquire loads do *not* forbid a later load from being performed before
///   an earlier store to a different location (StoreLoad reordering; x86 store
///   buffers do exactly this). If it happened, the producer could read the old
///   read index (ring not empty, no wake) while the consumer read the old write
///   index (ring empty, go to sleep): both sleep, the wake-up is lost. A
///   sequentially consistent fence between the store and the load on both sides
///   forbids this: of the two fences one is first in the single total order, so
///   the side with the later fence sees the other side's store.
/// - Wake-ups may be spurious (for example when `parkProducer` finds space at
///   the same moment `consume` clears the mark); the sleeping mechanism must
///   tolerate an extra wake, as an eventfd or a counting semaphore does. After
///   any wake-up the woken side re-checks the ring.
///
/// End of stream: `finishProducing()` sets a flag after the last write. The
/// consumer is done when `isFinishedAndEmpty` is true; it checks the flag
/// *before* the readable count so it cannot miss bytes written just before the
/// flag was set.
///
/// Memory: storage is allocated once in `init` and unmapped in `deinit`;
/// reading and writing never allocate. Raw pointers never leave the type except
/// inside the `with…Regions` closures.
@safe
public final class ByteRing: @unchecked Sendable {
    // @unchecked Sendable is safe because every stored property is either a
    // constant (`storage`, `capacity`, `mask`) or an `Atomic`, and access to the
    // bytes behind `storage` is partitioned between exactly one producer thread
    // and one consumer thread by the index protocol described above (the
    // release/acquire pairs on the indices order every byte access). Using the
    // ring from more than one producer or more than one consumer is a contract
    // violation the type cannot express.

    /// Smallest capacity a ring is given.
    public static let minimumCapacity = 64
    /// Largest capacity a ring may ask for (1 GiB).
    public static let maximumCapacity = 1 << 30

    /// Number of bytes the ring holds when full (a power of two).
    public let capacity: Int
    private let mask: UInt
    private let storage: UnsafeMutableRawPointer

    /// Total bytes ever published by the producer (free-running, owned by the producer).
    private let writeIndex = Atomic<UInt>(0)
    /// Total bytes ever released by the consumer (free-running, owned by the consumer).
    private let readIndex = Atomic<UInt>(0)
    /// Set by the producer when it waits for space; cleared by whoever wins the exchange.
    /// Free bytes the parked producer waits for; 0 when it is not parked.
    private let producerWants = Atomic<Int>(0)
    /// Set once by the producer after its last write.
    private let producerFinished = Atomic<Bool>(false)

    /// Creates a ring of at least `capacity` bytes (rounded up to a power of two, at least 64).
    public convenience init(capacity requested: Int) {
        self.init(capacity: requested, initialIndex: 0)
    }

    /// Creates a ring whose free-running indices start at `initialIndex`, so tests can
    /// cross the `UInt` wrap-around without moving 2^64 bytes.
    init(capacity requested: Int, initialIndex: UInt) {
        precondition(requested <= Self.maximumCapacity, "ByteRing capacity \(requested) exceeds \(Self.maximumCapacity)")
        var size = Self.minimumCapacity
        while size < requested { size <<= 1 }
        capacity = size
        mask = UInt(size - 1)
        // Anonymous private mapping: pages stay unbacked until first touched, so
        // an idle ring costs address space but (almost) no memory.
        let mapped = unsafe mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped = unsafe mapped, unsafe mapped != MAP_FAILED else {
            fatalError("ByteRing: mmap of \(size) bytes failed (errno \(errno))")
        }
        unsafe storage = mapped
        writeIndex.store(initialIndex, ordering: .relaxed)
        readIndex.store(initialIndex, ordering: .relaxed)
    }

    deinit {
        unsafe munmap(storage, capacity)
    }

    // MARK: - Producer side (one thread only)

    /// Bytes the producer can write now (producer only).
    public func freeSpace() -> Int {
        let write = writeIndex.load(ordering: .relaxed)
        let read = readIndex.load(ordering: .acquiring)
        let used = write &- read
        assert(used <= UInt(capacity), "ByteRing invariant broken: write - read = \(used) > capacity \(capacity)")
        return capacity - Int(used)
    }

    /// Gives the free space as up to two writable regions (the second is empty unless it wraps); publish what was filled with `commitWrite(_:)` (producer only).
    public func withWritableRegions<R>(
        _ body: (UnsafeMutableRawBufferPointer, UnsafeMutableRawBufferPointer) throws -> R
    ) rethrows -> R {
        let write = writeIndex.load(ordering: .relaxed)
        let read = readIndex.load(ordering: .acquiring)
        let used = write &- read
        assert(used <= UInt(capacity), "ByteRing invariant broken: write - read = \(used) > capacity \(capacity)")
        let free = capacity - Int(used)
        let offset = Int(write & mask)
        let firstCount = min(free, capacity - offset)
        let first = unsafe UnsafeMutableRawBufferPointer(start: storage + offset, count: firstCount)
        let second = unsafe UnsafeMutableRawBufferPointer(start: storage, count: free - firstCount)
        return try unsafe body(first, second)
    }

    /// Publishes `n` bytes filled through `withWritableRegions`; returns true when the consumer must be woken (producer only).
    public func commitWrite(_ n: Int) -> Bool {
        let before = writeIndex.load(ordering: .relaxed)
        assert(n >= 0, "ByteRing: negative commit \(n)")
        assert(
            n <= capacity - Int(before &- readIndex.load(ordering: .acquiring)),
            "ByteRing: commit of \(n) exceeds free space")
        guard n > 0 else { return false }
        writeIndex.store(before &+ UInt(n), ordering: .releasing)
        // StoreLoad barrier: the store of writeIndex above must be ordered
        // before the load of readIndex below (see "Wake protocol").
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let read = readIndex.load(ordering: .acquiring)
        assert(before &+ UInt(n) &- read <= UInt(capacity), "ByteRing invariant broken after commit")
        return read == before
    }

    /// Copies min(bytes.count, freeSpace) bytes in and publishes them; `wakeConsumer` is true when the ring was empty, so the consumer may be asleep (producer only).
    public func write(_ bytes: UnsafeRawBufferPointer) -> (written: Int, wakeConsumer: Bool) {
        guard bytes.count > 0, let source = bytes.baseAddress else { return (0, false) }
        let written = unsafe withWritableRegions { first, second -> Int in
            let total = min(bytes.count, first.count + second.count)
            let inFirst = min(total, first.count)
            // Regions point into `storage`, never nil; unwrapping only when count > 0 anyway.
            if inFirst > 0 { unsafe first.baseAddress.unsafelyUnwrapped.copyMemory(from: source, byteCount: inFirst) }
            if total > inFirst {
                unsafe second.baseAddress.unsafelyUnwrapped.copyMemory(from: source + inFirst, byteCount: total - inFirst)
            }
            return total
        }
        return (written, commitWrite(written))
    }

    /// Records that the producer waits for at least `minimumFreeSpace` bytes; returns true (and clears the mark) if that space is already there, so the producer must retry instead of sleeping (producer only).
    public func parkProducer(minimumFreeSpace: Int = 1) -> Bool {
        precondition(
            minimumFreeSpace >= 1 && minimumFreeSpace <= capacity,
            "ByteRing: cannot wait for \(minimumFreeSpace) free bytes in a ring of \(capacity)")
        producerWants.store(minimumFreeSpace, ordering: .relaxed)
        // StoreLoad barrier: the mark must be visible before we look at the
        // read index, or consume() could miss the mark while we miss its space.
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        if freeSpace() >= minimumFreeSpace {
            // Space appeared; do not sleep. If consume() cleared the mark at the
            // same time it also sends a wake-up, which is merely spurious.
            producerWants.store(0, ordering: .relaxed)
            return true
        }
        return false
    }

    /// Marks the end of the stream after the last write; returns true when the consumer must be woken to see it (producer only).
    @discardableResult
    public func finishProducing() -> Bool {
        producerFinished.store(true, ordering: .releasing)
        // StoreLoad barrier, as in commitWrite: a consumer that saw the ring
        // empty and the flag unset has published a read index equal to ours.
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        return readIndex.load(ordering: .acquiring) == writeIndex.load(ordering: .relaxed)
    }

    // MARK: - Consumer side (one thread only)

    /// Bytes the consumer can read now (consumer only).
    public func readableCount() -> Int {
        let read = readIndex.load(ordering: .relaxed)
        let write = writeIndex.load(ordering: .acquiring)
        let used = write &- read
        assert(used <= UInt(capacity), "ByteRing invariant broken: write - read = \(used) > capacity \(capacity)")
        return Int(used)
    }

    /// Gives the readable bytes as up to two regions (the second is empty unless the data wraps); the pointers are valid only inside `body` (consumer only).
    public func withReadableRegions<R>(
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        let read = readIndex.load(ordering: .relaxed)
        let write = writeIndex.load(ordering: .acquiring)
        let used = write &- read
        assert(used <= UInt(capacity), "ByteRing invariant broken: write - read = \(used) > capacity \(capacity)")
        let count = Int(used)
        let offset = Int(read & mask)
        let firstCount = min(count, capacity - offset)
        let first = unsafe UnsafeRawBufferPointer(start: storage + offset, count: firstCount)
        let second = unsafe UnsafeRawBufferPointer(start: storage, count: count - firstCount)
        return try unsafe body(first, second)
    }

    /// Releases `n` consumed bytes (`n <= readableCount()`); returns true when a parked producer must now be woken (consumer only).
    public func consume(_ n: Int) -> Bool {
        let before = readIndex.load(ordering: .relaxed)
        assert(n >= 0, "ByteRing: negative consume \(n)")
        assert(
            UInt(n) <= writeIndex.load(ordering: .acquiring) &- before,
            "ByteRing: consume(\(n)) exceeds the readable count")
        guard n > 0 else { return false }
        let newRead = before &+ UInt(n)
        readIndex.store(newRead, ordering: .releasing)
        // StoreLoad barrier: the new read index must be visible before we look
        // at the park mark (see "Wake protocol").
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let wanted = producerWants.load(ordering: .relaxed)
        guard wanted > 0 else { return false }
        // The producer is parked (it writes nothing now), so the free space only
        // grows: once everything is consumed it is `capacity`, which is at least
        // any amount it can wait for. No wake-up is lost by waiting for enough.
        let free = capacity - Int(writeIndex.load(ordering: .acquiring) &- newRead)
        guard free >= wanted else { return false }
        // Only the side that clears the mark sends a wake-up.
        return producerWants.compareExchange(expected: wanted, desired: 0, ordering: .relaxed).exchanged
    }

    /// True once `finishProducing()` was called; check it before `readableCount()` (consumer side).
    public var isProducerFinished: Bool {
        producerFinished.load(ordering: .acquiring)
    }

    /// True when the producer has finished and every byte it wrote was consumed (consumer only).
    public var isFinishedAndEmpty: Bool {
        // Flag first: its acquire load makes every write published before
        // finishProducing() visible to the readableCount() that follows.
        isProducerFinished && readableCount() == 0
    }
}
