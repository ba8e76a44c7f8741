// The handshake timeout of one loop's sessions, with one loop timer for all of
// them. Every session gets the same timeout, so deadlines come due in the order
// the sessions were accepted: a queue, oldest first. When the timer fires, the
// queue drops every session that has finished its handshake and closes every
// one that is due and has not; then the timer is set again for the oldest
// session still waiting. A session that finishes its handshake says so
// (`finished`): the sessions at the head that are done leave at once, and when
// none is left waiting the timer is cancelled. A thousand clients that connect
// and finish their handshake cost no wake-up at all (a timer per session would
// wake the loop once per client, five seconds after it connected; one timer,
// never cancelled, once per loop).
import Runtime

/// Owned by one loop: `add` and the timer run on that loop's thread only.
final class HandshakeDeadlines: @unchecked Sendable {
    // @unchecked Sendable: posted to its loop with each session's start; every
    // member is used on that loop only (`add` checks).
    private struct Entry {
        let deadline: Double
        /// Whether the session finished its handshake (or is gone).
        let done: () -> Bool
        /// Closes the session that did not.
        let expire: () -> Void
    }

    private let loop: EventLoop
    private var queue: [Entry] = []
    private var head = 0
    private var timer: EventLoop.TimerID?

    init(loop: EventLoop) { self.loop = loop }

    /// Watches one session: `expire` runs at `deadline` unless `done` says so by then.
    func add(deadline: Double, done: @escaping () -> Bool, expire: @escaping () -> Void) {
        loop.assertInLoop()
        queue.append(Entry(deadline: deadline, done: done, expire: expire))
        arm()
    }

    /// Sessions still in the queue (finished ones leave at the next timer).
    var count: Int { queue.count - head }

    /// A session finished its handshake: the finished ones at the head leave, and with
    /// nobody left waiting, so does the timer.
    func finished() {
        loop.assertInLoop()
        while head < queue.count && queue[head].done() { head += 1 }
        compact()
        if count == 0, let timer {
            loop.cancel(timer)
            self.timer = nil
        }
    }

    private func arm() {
        guard timer == nil, head < queue.count else { return }
        timer = loop.schedule(at: queue[head].deadline) { [weak self] in self?.fire() }
    }

    private func fire() {
        timer = nil
        let now = monotonicNow()
        while head < queue.count {
            let e = queue[head]
            if e.done() {
                head += 1
            } else if e.deadline <= now {
                head += 1
                e.expire()
            } else {
                break
            }
        }
        compact()
        arm()
    }

    /// Lets go of the entries before `head`: all of them once the queue is empty, else once
    /// they are most of it.
    private func compact() {
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 1024)
            head = 0
        } else if head > 1024 && head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }
}
