// One timer thread for prompt deadlines.
//
// A min-heap of deadlines on CLOCK_MONOTONIC and one thread that sleeps on a
// condition variable until the earliest is due, then runs its action. Nothing
// else runs on this thread, so a deadline fires on time however many prompt
// commands, dialogs or relay threads are busy (Dispatch's global pool, by
// contrast, can be exhausted by blocked work items, and its timers then wait).
// Actions must be short: they run one after another on the timer thread.
import Glibc

final class DeadlineTimers: @unchecked Sendable {
    // @unchecked Sendable: `heap`, `cancelled`, `stopping` are guarded by `mutex`.
    private struct Entry {
        var due: Double
        var key: UInt64
        var serial: UInt64
        var action: @Sendable () -> Void
    }

    private var heap: [Entry] = []
    /// The serial of the live entry per key; an entry whose serial differs is stale.
    private var live: [UInt64: UInt64] = [:]
    private var nextSerial: UInt64 = 1
    private var stopping = false
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var thread: pthread_t?

    init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Seconds on the monotonic clock.
    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    func start() {
        thread = startThread { self.run() }
    }

    func stopAndJoin() {
        locked { stopping = true }
        pthread_cond_signal(condition)
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
    }

    /// Runs `action` `seconds` from now, replacing any timer under the same key.
    func schedule(key: UInt64, after seconds: Double, _ action: @escaping @Sendable () -> Void) {
        let due = Self.now() + max(0, seconds)
        locked {
            let serial = nextSerial
            nextSerial += 1
            live[key] = serial
            push(Entry(due: due, key: key, serial: serial, action: action))
        }
        pthread_cond_signal(condition)
    }

    /// Drops the timer under `key`, if it has not fired.
    func cancel(key: UInt64) {
        locked { _ = live.removeValue(forKey: key) }
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while !stopping {
            guard let first = heap.first else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            if live[first.key] != first.serial {
                _ = pop()
                continue
            }
            let now = Self.now()
            if first.due > now {
                var ts = timespec()
                let due = first.due
                ts.tv_sec = Int(due)
                ts.tv_nsec = Int((due - Double(Int(due))) * 1e9)
                pthread_cond_timedwait(condition, mutex, &ts)
                continue
            }
            let entry = pop()
            live[entry.key] = nil
            pthread_mutex_unlock(mutex)
            entry.action()
            pthread_mutex_lock(mutex)
        }
        pthread_mutex_unlock(mutex)
    }

    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    // MARK: binary heap on `due`

    private func push(_ e: Entry) {
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].due < heap[parent].due else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private func pop() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        guard !heap.isEmpty else { return top }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count, heap[l].due < heap[m].due { m = l }
            if r < heap.count, heap[r].due < heap[m].due { m = r }
            guard m != i else { break }
            heap.swapAt(i, m)
            i = m
        }
        return top
    }
}
