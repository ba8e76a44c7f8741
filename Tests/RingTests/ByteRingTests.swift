import Glibc
import Testing
@testable import Ring

/// Byte `i` of the deterministic test stream: a hash of the absolute position, so a
/// byte read from the wrong offset (even one capacity away) is almost surely caught.
func patternByte(_ position: UInt64) -> UInt8 {
    var x = position &* 0x9E37_79B9_7F4A_7C15
    x ^= x >> 29
    x &*= 0xBF58_476D_1CE4_E5B9
    return UInt8(truncatingIfNeeded: x >> 56)
}

/// Writes `count` pattern bytes starting at stream position `start` through `write(_:)`.
@discardableResult
private func writePattern(_ ring: ByteRing, start: UInt64, count: Int) -> (written: Int, wakeConsumer: Bool) {
    let bytes = (0..<count).map { patternByte(start + UInt64($0)) }
    return unsafe bytes.withUnsafeBytes { unsafe ring.write($0) }
}

/// Reads every readable byte (both regions, in order) without consuming.
private func readableBytes(_ ring: ByteRing) -> [UInt8] {
    unsafe ring.withReadableRegions { first, second in unsafe Array(first) + Array(second) }
}

/// Moves both indices forward by `n` bytes, leaving the ring empty.
private func advance(_ ring: ByteRing, by n: Int) {
    guard n > 0 else { return }
    let filler = [UInt8](repeating: 0xEE, count: n)
    let result = unsafe filler.withUnsafeBytes { unsafe ring.write($0) }
    #expect(result.written == n)
    _ = ring.consume(n)
    #expect(ring.readableCount() == 0)
}

@Suite("ByteRing basics")
struct ByteRingBasicTests {
    @Test(
        "capacity is rounded up to a power of two, at least 64",
        arguments: [(0, 64), (1, 64), (63, 64), (64, 64), (65, 128), (4095, 4096), (4096, 4096), (100_000, 131_072)])
    func capacityRounding(requested: Int, expected: Int) {
        let ring = ByteRing(capacity: requested)
        #expect(ring.capacity == expected)
        #expect(ring.freeSpace() == expected)
        #expect(ring.readableCount() == 0)
    }

    @Test("storage pages stay non-resident until written")
    func untouchedPagesAreNotResident() {
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        let ring = ByteRing(capacity: 1 << 20)
        let byte: [UInt8] = [42]
        unsafe #expect(byte.withUnsafeBytes { unsafe ring.write($0) }.written == 1)
        // The first readable region starts at storage offset 0, i.e. the base of the mapping.
        let resident = unsafe ring.withReadableRegions { first, _ -> Int in
            let pages = ring.capacity / pageSize
            var vector = [UInt8](repeating: 0, count: pages)
            // One byte is readable, so the region is non-empty and its base is non-nil.
            let rc = unsafe mincore(UnsafeMutableRawPointer(mutating: first.baseAddress!), ring.capacity, &vector)
            #expect(rc == 0)
            return vector.reduce(0) { $0 + Int($1 & 1) }
        }
        #expect(resident == 1, "only the page holding the one written byte should be resident")
    }

    @Test(
        "every wrap position: regions split exactly at the end of storage",
        arguments: [1, 2, 3, 7, 31, 32, 33, 63, 64])
    func everyWrapPosition(size: Int) {
        let capacity = 64
        for offset in 0..<capacity {
            let ring = ByteRing(capacity: capacity)
            advance(ring, by: offset)

            // Writable side sees the same split before the write.
            unsafe ring.withWritableRegions { first, second in
                #expect(first.count == capacity - offset)
                #expect(second.count == offset)
            }

            let stream = UInt64(offset) * 1000
            let result = writePattern(ring, start: stream, count: size)
            #expect(result.written == size)
            #expect(result.wakeConsumer, "ring was empty before this write")
            #expect(ring.readableCount() == size)
            #expect(ring.freeSpace() == capacity - size)

            let expectedFirst = min(size, capacity - offset)
            unsafe ring.withReadableRegions { first, second in
                #expect(first.count == expectedFirst, "offset \(offset) size \(size)")
                #expect(second.count == size - expectedFirst, "offset \(offset) size \(size)")
                if second.count > 0 {
                    // Both regions are non-empty here, so both bases are non-nil.
                    // The second region is the start of storage; the first begins `offset` bytes in.
                    unsafe #expect(first.baseAddress! - second.baseAddress! == offset)
                    unsafe #expect(first.baseAddress! + first.count == second.baseAddress! + capacity)
                }
                let got = unsafe Array(first) + Array(second)
                let want = (0..<size).map { patternByte(stream + UInt64($0)) }
                #expect(got == want, "offset \(offset) size \(size)")
            }
            #expect(ring.consume(size) == false)
            #expect(ring.readableCount() == 0)
            #expect(ring.freeSpace() == capacity)
        }
    }

    @Test("zero-copy writes through withWritableRegions at every wrap position")
    func writableRegionsAtEveryOffset() {
        let capacity = 64
        for offset in 0..<capacity {
            for size in [1, 5, 63, 64] {
                let ring = ByteRing(capacity: capacity)
                advance(ring, by: offset)
                let stream = UInt64(offset * 7 + size)
                unsafe ring.withWritableRegions { first, second in
                    for i in 0..<size {
                        let byte = patternByte(stream + UInt64(i))
                        if i < first.count { unsafe first[i] = byte } else { unsafe second[i - first.count] = byte }
                    }
                }
                #expect(ring.commitWrite(size))
                #expect(readableBytes(ring) == (0..<size).map { patternByte(stream + UInt64($0)) })
            }
        }
    }

    @Test(
        "free-running indices cross the UInt wrap-around",
        arguments: [UInt.max - 100, UInt.max - 63, UInt.max, UInt.max - 31])
    func indicesWrapAroundUIntMax(start: UInt) {
        let ring = ByteRing(capacity: 64, initialIndex: start)
        var position: UInt64 = 0
        // Many rounds of odd sizes push both indices past UInt.max and back to small values.
        for round in 0..<200 {
            let size = [1, 7, 13, 61, 64, 33][round % 6]
            let result = writePattern(ring, start: position, count: size)
            #expect(result.written == size)
            #expect(result.wakeConsumer)
            #expect(readableBytes(ring) == (0..<size).map { patternByte(position + UInt64($0)) })
            #expect(ring.consume(size) == false)
            #expect(ring.freeSpace() == 64)
            position += UInt64(size)
        }
    }

    @Test("many small writes interleaved with partial reads keep byte order")
    func interleavedOrder() {
        let ring = ByteRing(capacity: 128)
        var written: UInt64 = 0
        var read: UInt64 = 0
        for step in 0..<5000 {
            let want = [1, 3, 7, 11, 29, 61][step % 6]
            let result = writePattern(ring, start: written, count: min(want, ring.freeSpace()))
            written += UInt64(result.written)
            let take = min(ring.readableCount(), [2, 5, 13, 17, 40][step % 5])
            let bytes = readableBytes(ring).prefix(take)
            #expect(Array(bytes) == (0..<take).map { patternByte(read + UInt64($0)) })
            _ = ring.consume(take)
            read += UInt64(take)
            #expect(UInt64(ring.readableCount()) == written - read)
        }
        #expect(read > 10_000)
    }
}

@Suite("ByteRing full ring and wake protocol")
struct ByteRingProtocolTests {
    @Test("a full ring takes a partial write, then nothing, until bytes are consumed")
    func fullRing() {
        let ring = ByteRing(capacity: 64)
        let first = writePattern(ring, start: 0, count: 100)
        #expect(first.written == 64)
        #expect(first.wakeConsumer)
        #expect(ring.freeSpace() == 0)
        #expect(ring.readableCount() == 64)

        let refused = writePattern(ring, start: 64, count: 10)
        #expect(refused.written == 0)
        #expect(refused.wakeConsumer == false)
        unsafe ring.withWritableRegions { first, second in
            #expect(first.count == 0 && second.count == 0)
        }

        _ = ring.consume(20)
        #expect(ring.freeSpace() == 20)
        let more = writePattern(ring, start: 64, count: 30)
        #expect(more.written == 20)
        #expect(more.wakeConsumer == false, "ring was not empty")
        #expect(readableBytes(ring) == (20..<84).map { patternByte(UInt64($0)) })
        #expect(ring.freeSpace() == 0)
    }

    @Test("wakeConsumer is true exactly when the ring was empty before the write")
    func wakeConsumerOnlyWhenEmpty() {
        let ring = ByteRing(capacity: 64)
        #expect(writePattern(ring, start: 0, count: 0) == (0, false))
        #expect(writePattern(ring, start: 0, count: 10) == (10, true))
        #expect(writePattern(ring, start: 10, count: 5) == (5, false))
        _ = ring.consume(14)
        #expect(writePattern(ring, start: 15, count: 1) == (1, false), "one byte was still unread")
        _ = ring.consume(2)
        #expect(ring.readableCount() == 0)
        #expect(writePattern(ring, start: 16, count: 3) == (3, true))
        unsafe ring.withWritableRegions { _, _ in }
        #expect(ring.commitWrite(0) == false)
        #expect(ring.commitWrite(0) == false)
    }

    @Test("a parked producer is woken exactly once")
    func parkAndWakeOnce() {
        let ring = ByteRing(capacity: 64)
        writePattern(ring, start: 0, count: 64)
        #expect(ring.consume(0) == false)
        #expect(ring.parkProducer() == false, "no space: the producer may sleep")
        #expect(ring.consume(10) == true, "producer was parked: wake it")
        #expect(ring.consume(5) == false, "mark already cleared: only one wake")
        #expect(ring.freeSpace() == 15)

        // Space is already there: parking reports it and does not leave a mark.
        #expect(ring.parkProducer() == true)
        #expect(ring.consume(1) == false)

        // No park, no wake.
        #expect(ring.consume(1) == false)
    }

    @Test("a producer parked for a minimum amount of free space is woken only once it is there")
    func parkForMinimumSpace() {
        let ring = ByteRing(capacity: 64)
        writePattern(ring, start: 0, count: 64)
        _ = ring.consume(16)
        #expect(ring.parkProducer(minimumFreeSpace: 20) == false, "16 free: too little")
        #expect(ring.consume(1) == false, "17 free: still too little, no wake")
        #expect(ring.consume(2) == false, "19 free: still too little, no wake")
        #expect(ring.consume(1) == true, "20 free: wake")
        #expect(ring.consume(1) == false, "mark cleared: only one wake")
        #expect(ring.parkProducer(minimumFreeSpace: 20) == true, "21 free: no need to sleep")
        #expect(ring.consume(1) == false, "no mark left behind")
        #expect(ring.parkProducer(minimumFreeSpace: 64) == false)
        #expect(ring.consume(ring.readableCount() - 1) == false, "63 free")
        #expect(ring.consume(1) == true, "drained: a full ring's worth is free")
        #expect(ring.parkProducer(minimumFreeSpace: 64) == true)
    }

    @Test("end of stream is seen only after the consumer drained the ring")
    func finishProducing() {
        let empty = ByteRing(capacity: 64)
        #expect(empty.isProducerFinished == false)
        #expect(empty.isFinishedAndEmpty == false)
        #expect(empty.finishProducing() == true, "empty ring: consumer may sleep, wake it")
        #expect(empty.isProducerFinished)
        #expect(empty.isFinishedAndEmpty)

        let ring = ByteRing(capacity: 64)
        writePattern(ring, start: 0, count: 40)
        #expect(ring.finishProducing() == false, "consumer has bytes to read, it is awake")
        #expect(ring.isProducerFinished)
        #expect(ring.isFinishedAndEmpty == false)
        _ = ring.consume(39)
        #expect(ring.isFinishedAndEmpty == false)
        _ = ring.consume(1)
        #expect(ring.isFinishedAndEmpty)
    }
}
