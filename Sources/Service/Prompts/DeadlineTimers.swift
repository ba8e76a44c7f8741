// Prompt deadlines, on an event loop of their own.
//
// The timers are an `EventLoop`'s timers (Runtime), on a loop whose only work is
// firing them, so a deadline fires on time however many prompt commands,
// dialogs or relay loops are busy (Dispatch's global pool, by contrast, can be
// exhausted by blocked work items, and its timers then wait). Actions must be
// short: they run one after another on that loop's thread.
import LinuxSystem
import Runtime

final class DeadlineTimers: Sendable {
    private let loop: EventLoop
    /// The serial of the live timer per key; a timer whose serial differs was cancelled or replaced.
    private let live = Locked<(next: UInt64, serials: [UInt64: UInt64])>((1, [:]))

    init() throws(SystemError) {
        loop = try EventLoop(name: "timers")
    }

    /// Seconds on the monotonic clock.
    static func now() -> Double { monotonicNow() }

    func start() {
        loop.start()
    }

    func stopAndJoin() {
        loop.stopAndJoin()
    }

    /// Runs `action` `seconds` from now, replacing any timer under the same key.
    func schedule(key: UInt64, after seconds: Double, _ action: @escaping @Sendable () -> Void) {
        let due = Self.now() + max(0, seconds)
        let serial = live.withLock { l -> UInt64 in
            let serial = l.next
            l.next += 1
            l.serials[key] = serial
            return serial
        }
        loop.post { [self, loop] in
            loop.schedule(at: due) { [self] in
                let current = live.withLock { l -> Bool in
                    guard l.serials[key] == serial else { return false }
                    l.serials[key] = nil
                    return true
                }
                if current { action() }
            }
        }
    }

    /// Drops the timer under `key`, if it has not fired.
    func cancel(key: UInt64) {
        live.withLock { _ = $0.serials.removeValue(forKey: key) }
    }
}
