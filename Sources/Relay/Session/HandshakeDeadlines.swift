// The handshake timeout of one loop's sessions, with one loop timer for all of
// them. Every session gets the same timeout, so deadlines come due in the order
// the sessions were accepted: a queue, oldest first. When the timer fires, the
// queue drops every session that has finished its handshake and closes every
// one that is due and has not; then the timer is set again for the oldest
// session still waiting. A thousand clients that connect and finish their
// handshake cost one wake-up, not a thousand (a timer per session would wake
// the loop once per client, five seconds after it connected).

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
    private var armed = false

    init(loop: EventLoop) { self.loop = loop }

    /// Watches one session: `expire` runs at `deadline` unless `done` says so by then.
    func add(deadline: Double, done: @escaping () -> Bool, expire: @escaping () -> Void) {
        loop.assertInLoop()
        queue.append(Entry(deadline: deadline, done: done, expire: expire))
        arm()
    }

    /// Sessions still in the queue (finished ones leave at the next timer).
    var count: Int { queue.count - head }

    private func arm() {
        guard !armed, head < queue.count else { return }
        armed = true
        loop.schedule(at: queue[head].deadline) { [weak self] in self?.fire() }
    }

    private func fire() {
        armed = false
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
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 1024)
            head = 0
        } else if head > 1024 && head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        arm()
    }
}
