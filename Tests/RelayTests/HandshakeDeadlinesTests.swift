// The handshake deadlines of one loop: a session that finished its handshake is
// dropped, one that did not is closed once its deadline passes, and many
// finished sessions cost one timer, not one each, or none once they say so.
import Glibc
@testable import Relay
import Runtime
import Synchronization
import Testing
import TestSupport

@Suite struct HandshakeDeadlinesTests {
    @Test func closesOnlyTheSessionsThatDidNotFinish() async throws {
        let loop = try EventLoop(name: "handshakes")
        loop.start()
        defer { loop.stopAndJoin() }
        let expired = Mutex<[Int]>([])
        let finished = Mutex<Set<Int>>([0, 2])
        loop.post {
            let deadlines = HandshakeDeadlines(loop: loop)
            let now = monotonicNow()
            for i in 0..<4 {
                deadlines.add(
                    deadline: now + 0.05 * Double(i + 1),
                    done: { finished.withLock { $0.contains(i) } },
                    expire: { expired.withLock { $0.append(i) } })
            }
            // Keep the queue alive on the loop until the last deadline.
            loop.schedule(after: 5) { _ = deadlines.count }
        }
        #expect(await Wait.until(timeout: 30) { expired.withLock { $0 } == [1, 3] }, "\(expired.withLock { $0 })")
    }

    @Test func finishedSessionsLeaveWithoutATimerEach() async throws {
        let loop = try EventLoop(name: "handshakes")
        loop.start()
        defer { loop.stopAndJoin() }
        let left = Mutex<Int?>(nil)
        let expired = Atomic<Int>(0)
        loop.post {
            let deadlines = HandshakeDeadlines(loop: loop)
            let now = monotonicNow()
            // 1000 sessions that finish at once; the first deadline's timer drops them all.
            for i in 0..<1000 {
                deadlines.add(
                    deadline: now + 0.05 + Double(i) * 0.001, done: { true },
                    expire: { expired.add(1, ordering: .relaxed) })
            }
            loop.schedule(after: 0.1) { left.withLock { $0 = deadlines.count } }
        }
        #expect(await Wait.until(timeout: 30) { left.withLock { $0 } != nil })
        #expect(left.withLock { $0 } == 0, "finished sessions were kept until their own deadlines")
        #expect(expired.load(ordering: .relaxed) == 0)
    }

    /// Sessions that say they finished leave at once; with none left waiting, the timer goes
    /// too, so a loop whose clients all finished their handshake does not wake for it.
    @Test func whenEverySessionFinishedNoTimerIsLeft() async throws {
        let loop = try EventLoop(name: "handshakes")
        loop.start()
        defer { loop.stopAndJoin() }
        let seen = Mutex<(count: Int, timers: Int, stuckTimers: Int)?>(nil)
        let expired = Atomic<Int>(0)
        loop.post {
            let deadlines = HandshakeDeadlines(loop: loop)
            let now = monotonicNow()
            var done = [Bool](repeating: false, count: 1000)
            let box = Mutex(done)
            for i in 0..<1000 {
                deadlines.add(
                    deadline: now + 60, done: { box.withLock { $0[i] } },
                    expire: { expired.add(1, ordering: .relaxed) })
            }
            // They finish out of order: the timer stays while any is waiting.
            for i in (0..<1000).reversed() where i != 0 {
                done[i] = true
                box.withLock { $0 = done }
                deadlines.finished()
            }
            let stuck = loop.pendingTimers
            done[0] = true
            box.withLock { $0 = done }
            deadlines.finished()
            seen.withLock { $0 = (deadlines.count, loop.pendingTimers, stuck) }
        }
        #expect(await Wait.until(timeout: 30) { seen.withLock { $0 } != nil })
        let s = try #require(seen.withLock { $0 })
        #expect(s.stuckTimers == 1, "the timer went while a session was still waiting")
        #expect(s.count == 0 && s.timers == 0, "\(s.count) sessions and \(s.timers) timers left")
        #expect(expired.load(ordering: .relaxed) == 0)
    }
}
