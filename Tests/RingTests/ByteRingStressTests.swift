import Dispatch
import Foundation
import Synchronization
import Testing
import Ring

/// Shared state of one two-thread run: the first failure stops both sides.
private final class StressRun: Sendable {
    let ring: ByteRing
    let total: UInt64
    /// Signalled when `write` or `finishProducing` says the consumer must be woken.
    let consumerWake = DispatchSemaphore(value: 0)
    /// Signalled when `consume` says the parked producer must be woken.
    let producerWake = DispatchSemaphore(value: 0)
    let failure = Mutex<String?>(nil)
    let stopped = Atomic<Bool>(false)
    let producerParks = Atomic<Int>(0)
    let consumerSleeps = Atomic<Int>(0)
    let bytesChecked = Atomic<UInt64>(0)
    /// A wait this long with the other side running means a lost wake-up.
    let wakeTimeout: DispatchTimeInterval = .seconds(30)

    init(capacity: Int, total: UInt64) {
        ring = ByteRing(capacity: capacity)
        self.total = total
    }

    func fail(_ message: String) {
        failure.withLock { if $0 == nil { $0 = message } }
        stopped.store(true, ordering: .sequentiallyConsistent)
        consumerWake.signal()
        producerWake.signal()
    }

    var isStopped: Bool { stopped.load(ordering: .sequentiallyConsistent) }

    /// Writes the pattern in odd chunk sizes, alternating copy and zero-copy writes,
    /// parking when the ring is full.
    func produce() {
        let chunkSizes = [1, 3, 7, 61, 509, 4093, 13, 1021, 2, 8191, 127, 33_331]
        var staging = [UInt8](repeating: 0, count: chunkSizes.max()!) // non-empty literal: max exists
        var position: UInt64 = 0
        var chunkIndex = 0
        while position < total, !isStopped {
            let chunk = Int(min(UInt64(chunkSizes[chunkIndex % chunkSizes.count]), total - position))
            let zeroCopy = chunkIndex % 2 == 1
            chunkIndex += 1
            for i in 0..<chunk { staging[i] = patternByte(position + UInt64(i)) }
            var done = 0
            while done < chunk {
                if isStopped { return }
                let wake: Bool
                if zeroCopy {
                    let n = unsafe staging.withUnsafeBufferPointer { source in
                        unsafe ring.withWritableRegions { first, second -> Int in
                            let n = min(chunk - done, first.count + second.count)
                            let inFirst = min(n, first.count)
                            unsafe storeInstrumented(first, from: source, at: done, count: inFirst)
                            unsafe storeInstrumented(second, from: source, at: done + inFirst, count: n - inFirst)
                            return n
                        }
                    }
                    wake = ring.commitWrite(n)
                    done += n
                } else {
                    let result = unsafe staging.withUnsafeBytes { unsafe ring.write(UnsafeRawBufferPointer(rebasing: $0[done..<chunk])) }
                    wake = result.wakeConsumer
                    done += result.written
                }
                if wake { consumerWake.signal() }
                if done < chunk, !ring.parkProducer() {
                    producerParks.add(1, ordering: .relaxed)
                    if producerWake.wait(timeout: .now() + wakeTimeout) == .timedOut {
                        fail("producer parked at \(position + UInt64(done)) and was never woken")
                        return
                    }
                }
            }
            position += UInt64(chunk)
        }
        if ring.finishProducing() { consumerWake.signal() }
    }

    /// Reads in odd sizes, checks every byte, sleeps when the ring is empty.
    func consume() {
        let readSizes = [5, 11, 127, 2039, 1, 8191, 251, 65_521, 3]
        var position: UInt64 = 0
        var readIndex = 0
        while !isStopped {
            if ring.readableCount() == 0 {
                if ring.isFinishedAndEmpty { break }
                consumerSleeps.add(1, ordering: .relaxed)
                if consumerWake.wait(timeout: .now() + wakeTimeout) == .timedOut {
                    fail("consumer slept at \(position) and was never woken")
                    return
                }
                continue
            }
            let limit = readSizes[readIndex % readSizes.count]
            readIndex += 1
            let start = position
            let (taken, mismatch) = unsafe ring.withReadableRegions { first, second -> (Int, UInt64?) in
                let n = min(limit, first.count + second.count)
                let inFirst = min(n, first.count)
                if let bad = unsafe checkInstrumented(first, count: inFirst, streamPosition: start) { return (n, bad) }
                return unsafe (n, checkInstrumented(second, count: n - inFirst, streamPosition: start + UInt64(inFirst)))
            }
            if let mismatch {
                fail("byte \(mismatch) differs from the pattern")
                return
            }
            if taken == 0 {
                fail("readableCount() was positive but withReadableRegions gave no bytes at \(position)")
                return
            }
            position += UInt64(taken)
            if ring.consume(taken) { producerWake.signal() }
        }
        if !isStopped, position != total {
            fail("consumer saw end of stream after \(position) of \(total) bytes")
        }
        bytesChecked.store(position, ordering: .relaxed)
    }
}

// Ring bytes are touched through typed pointer subscripts, which are compiled into this
// module and so instrumented by the thread sanitizer; a copy through the (uninstrumented)
// standard library or libc memcpy would hide a missing release/acquire from it.

/// Stores `count` bytes of `source` starting at `offset` into `region`.
private func storeInstrumented(
    _ region: UnsafeMutableRawBufferPointer, from source: UnsafeBufferPointer<UInt8>,
    at offset: Int, count: Int
) {
    guard count > 0 else { return }
    // Non-empty region: baseAddress is non-nil. UInt8 may alias any raw memory.
    let target = unsafe region.baseAddress!.assumingMemoryBound(to: UInt8.self)
    for i in 0..<count { unsafe target[i] = source[offset + i] }
}

/// Returns the stream position of the first of `count` bytes in `region` that differs from the pattern.
private func checkInstrumented(_ region: UnsafeRawBufferPointer, count: Int, streamPosition: UInt64) -> UInt64? {
    guard count > 0 else { return nil }
    // Non-empty region: baseAddress is non-nil. UInt8 may alias any raw memory.
    let bytes = unsafe region.baseAddress!.assumingMemoryBound(to: UInt8.self)
    for i in 0..<count where unsafe bytes[i] != patternByte(streamPosition + UInt64(i)) {
        return streamPosition + UInt64(i)
    }
    return nil
}

@Suite("ByteRing two-thread stress", .serialized)
struct ByteRingStressTests {
    @Test(
        "producer and consumer threads move every byte in order, sleeping via park/wake",
        arguments: [(64, 2 << 20), (4096, 24 << 20), (65_536, 24 << 20)])
    func twoThreadStress(capacity: Int, bytes total: Int) {
        let run = StressRun(capacity: capacity, total: UInt64(total))
        let group = DispatchGroup()
        let clock = ContinuousClock()
        let started = clock.now
        for side in [run.produce, run.consume] {
            group.enter()
            let thread = Thread {
                side()
                group.leave()
            }
            thread.start()
        }
        if group.wait(timeout: .now() + .seconds(300)) == .timedOut {
            run.fail("stress run did not finish within 300 s (deadlock?)")
            Issue.record("stress run with capacity \(capacity) timed out")
            _ = group.wait(timeout: .now() + .seconds(60))
            return
        }
        let elapsed = clock.now - started
        if let failure = run.failure.withLock({ $0 }) {
            Issue.record("capacity \(capacity): \(failure)")
        }
        #expect(run.bytesChecked.load(ordering: .relaxed) == UInt64(total))
        #expect(run.ring.isFinishedAndEmpty)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            String(
                format: "ByteRing stress: capacity %6d, %5.1f MiB in %6.2f s (%7.1f MiB/s), producer parks %d, consumer sleeps %d",
                capacity, Double(total) / 1_048_576, seconds, Double(total) / 1_048_576 / max(seconds, 1e-9),
                run.producerParks.load(ordering: .relaxed), run.consumerSleeps.load(ordering: .relaxed)))
    }
}
