// An event-loop thread: one epoll set, one eventfd for wake-ups from other
// threads, a queue of tasks posted by other threads, and simple timers.
//
// Everything registered with a loop is touched only on that loop's thread;
// other threads talk to it only through `post` and `wake`, which take a short
// lock and signal the eventfd when the queue goes from empty to non-empty.
// A `wake` from the loop's own thread (one half of a session waking the
// other) costs neither a lock nor a system call: it goes to a local queue
// that the loop runs after the handler that asked for it.
//
// How a loop waits is its own unless its owner gives it a `LoopWaiting`: the
// relay's audio loops poll for replies and let record audio gather
// (`Relay/Loop/AudioTuning.swift`); every other thread (control, prompts, the
// store, the catalog) waits on epoll until an event or a timer is due.
import Glibc
import LinuxSystem
import Synchronization

/// Something that reacts to readiness of its descriptor on one loop.
public protocol LoopHandler: AnyObject {
    /// Called on the loop thread with the epoll event bits.
    func handleEvents(_ events: UInt32)
}

/// Something another thread can wake on this loop without allocating.
public protocol Wakeable: AnyObject, Sendable {
    /// Called on the loop thread after `EventLoop.wake(_:)`.
    func serviceWake()
}

/// How a loop waits, for an owner that tunes it. Called on the loop thread, each turn in this
/// order: `willWait`, the wait, `woke`, the handlers, `keepsPolling`, then (unless that said
/// to wait again at once) the timers and `turnEnded`.
public protocol LoopWaiting: AnyObject {
    /// `fd` was registered with `token` (0: the loop's own eventfd), urgent or not.
    func registered(_ fd: Int32, token: UInt64, urgent: Bool) throws(Errno)
    /// `fd`, registered as `urgent` or not, is no longer watched.
    func removed(_ fd: Int32, urgent: Bool)
    /// The loop is about to wait for `timeout` ms at most (-1: no timer is set): returns how
    /// long to wait instead. It may sleep first.
    func willWait(timeout: Int32) -> Int32
    /// The wait returned `events` events.
    func woke(events: Int)
    /// True: wait again at once, before the timers run (the waiting polls for an event).
    func keepsPolling(events: Int) -> Bool
    /// The turn's handlers and timers ran; `urgent`: an urgent descriptor or the eventfd was ready.
    func turnEnded(events: Int, urgent: Bool)
}

/// A thread running an epoll loop.
public final class EventLoop: @unchecked Sendable {
    // @unchecked Sendable: `handlers`, `local`, `timers` and `nextToken` are touched only on
    // the loop thread; `posted` is behind its locks; the fds are immutable.
    public let name: String
    private let epoll: FileDescriptor
    private let wakeFD: FileDescriptor
    private var handlers: [UInt64: (handler: LoopHandler, urgent: Bool)] = [:]
    private var nextToken: UInt64 = 1
    /// Tasks and wake-ups posted from other threads.
    private let posted = PostedWork()
    /// Wake-ups asked for on the loop's own thread, run after the current handler.
    private let local = LocalWakes()
    private var timers = Timers()
    /// How the loop waits, if its owner tunes it (nil: until an event or a timer).
    private let waiting: (any LoopWaiting)?
    /// Returns from epoll_wait with at least one event (read by tests from other threads).
    public let wakeUps = Atomic<Int>(0)
    /// The loop thread's id once it runs (0 before).
    private let threadID = Atomic<UInt>(0)
    /// The loop thread's kernel id (gettid) once it runs (0 before): what
    /// the scheduler and RealtimeKit know it by.
    public let kernelThreadID = Atomic<Int32>(0)
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?

    /// `waiting`: how the loop waits, for an owner that tunes it; kept for the loop's life.
    public init(name: String, waiting: (any LoopWaiting)? = nil) throws(SystemError) {
        self.name = name
        self.waiting = waiting
        do throws(Errno) {
            epoll = try .epoll()
        } catch {
            throw SystemError("epoll_create1", error)
        }
        do throws(Errno) {
            wakeFD = try .eventfd()
        } catch {
            throw SystemError("eventfd", error)
        }
        do throws(Errno) {
            try epoll.watch(wakeFD.rawValue, events: PollEvents.input, data: 0)
            try waiting?.registered(wakeFD.rawValue, token: 0, urgent: true)
        } catch {
            throw SystemError("epoll_ctl add eventfd", error)
        }
    }

    /// Starts the loop on a new thread.
    public func start() {
        thread = startThread(named: name) { [self] in run() }
    }

    /// Asks the loop to stop and waits for its thread.
    public func stopAndJoin() {
        stopping.store(true, ordering: .releasing)
        wakeFD.signalEvent()
        if let t = thread {
            // From its own thread (its owner released there), the loop ends after this task.
            if pthread_equal(t, pthread_self()) != 0 { pthread_detach(t) } else { pthread_join(t, nil) }
            thread = nil
        }
    }

    /// Runs `task` on the loop thread soon. Safe from any thread.
    public func post(_ task: @escaping @Sendable () -> Void) {
        if posted.post(task) { wakeFD.signalEvent() }
    }

    /// Calls `target.serviceWake()` on the loop thread soon. Safe from any
    /// thread; allocates nothing once the queue has grown to its working size.
    public func wake(_ target: any Wakeable) {
        if isCurrentThread {
            local.woken.append(target)
        } else if posted.wake(target) {
            wakeFD.signalEvent()
        }
    }

    /// True when called on this loop's thread.
    public var isCurrentThread: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Stops a debug build when called off this loop's thread: for objects that belong to one loop.
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(isCurrentThread, "used off its loop, \(name)", file: file, line: line)
    }

    // MARK: loop-thread only

    /// Registers `fd` for `events`; returns the token used for `modify`/`remove`.
    /// `urgent` is for the loop's `LoopWaiting`: the relay's loops let input from a bulk
    /// descriptor (a server's socket) gather, and wake at once for an urgent one.
    public func register(_ fd: Int32, events: UInt32, handler: LoopHandler, urgent: Bool = true) throws(SystemError) -> UInt64 {
        let token = nextToken
        nextToken &+= 1
        do throws(Errno) {
            try epoll.watch(fd, events: events, data: token)
        } catch {
            throw SystemError("epoll_ctl add", error)
        }
        do throws(Errno) {
            try waiting?.registered(fd, token: token, urgent: urgent)
        } catch {
            try? epoll.unwatch(fd)
            throw SystemError("epoll_ctl add", error)
        }
        handlers[token] = (handler, urgent)
        return token
    }

    /// Changes the events `fd` is watched for.
    public func modify(_ fd: Int32, token: UInt64, events: UInt32) {
        try? epoll.rewatch(fd, events: events, data: token)
    }

    /// Stops watching `fd` (call before closing it).
    public func remove(_ fd: Int32, token: UInt64) {
        try? epoll.unwatch(fd)
        if let entry = handlers.removeValue(forKey: token) { waiting?.removed(fd, urgent: entry.urgent) }
    }

    /// A timer set with `schedule`, for `cancel`.
    public struct TimerID: Hashable, Sendable { fileprivate let value: UInt64 }

    /// Runs `action` on this thread after `seconds`.
    @discardableResult
    public func schedule(after seconds: Double, _ action: @escaping () -> Void) -> TimerID {
        schedule(at: monotonicNow() + seconds, action)
    }

    /// Runs `action` on this thread once `monotonicNow()` reaches `deadline`.
    @discardableResult
    public func schedule(at deadline: Double, _ action: @escaping () -> Void) -> TimerID {
        TimerID(value: timers.add(deadline, action))
    }

    /// Timers set and not run yet (loop thread only; for tests).
    public var pendingTimers: Int { timers.count }

    /// Drops a timer that has not run yet (a no-op once it has), so the loop does not wake for it.
    public func cancel(_ timer: TimerID) {
        timers.cancel(timer.value)
    }

    private func run() {
        var events = [UInt32](repeating: 0, count: 128)
        var datas = [UInt64](repeating: 0, count: 128)
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        kernelThreadID.store(ProcessLimits.currentThreadID(), ordering: .releasing)
        while !stopping.load(ordering: .acquiring) {
            var timeout = timers.timeoutMilliseconds()
            if let waiting { timeout = waiting.willWait(timeout: timeout) }
            let waited = unsafe events.withUnsafeMutableBufferPointer { ev in
                unsafe datas.withUnsafeMutableBufferPointer { da in
                    Result { () throws(Errno) in try unsafe epoll.wait(events: ev, data: da, timeoutMs: timeout) }
                }
            }
            let n: Int
            switch waited {
            case .success(let count): n = count
            case .failure(let error):
                Log.error("\(name): epoll_wait: \(error)")
                continue
            }
            // Only this thread writes the counter: no read-modify-write instruction is needed.
            if n > 0 { wakeUps.store(wakeUps.load(ordering: .relaxed) &+ 1, ordering: .relaxed) }
            waiting?.woke(events: n)
            var urgent = false
            for i in 0..<n {
                let token = datas[i]
                if token == 0 {
                    urgent = true
                    wakeFD.drainEvents()
                    posted.run()
                } else if let entry = handlers[token] {
                    if entry.urgent { urgent = true }
                    entry.handler.handleEvents(events[i])
                }
                local.run()
            }
            if waiting?.keepsPolling(events: n) == true { continue }
            for action in timers.takeDue() { action() }
            local.run()
            waiting?.turnEnded(events: n, urgent: urgent)
        }
        posted.run()
        local.run()
    }
}

/// Tasks and wake-ups other threads posted to a loop, swapped out under their locks and run
/// without them.
private final class PostedWork: @unchecked Sendable {
    // @unchecked Sendable: `batch` is touched only on the loop thread, the queues behind their locks.
    private let tasks = Locked<[@Sendable () -> Void]>([])
    private let woken = Locked<[any Wakeable]>([])
    /// The wake-ups being run: it and the queue swap, so both keep their capacity and a steady
    /// stream of wake-ups allocates nothing.
    private var batch: [any Wakeable] = []

    /// Queues `task`; true when the queue was empty (the loop must be signalled).
    func post(_ task: @escaping @Sendable () -> Void) -> Bool {
        tasks.withLock { queue in
            queue.append(task)
            return queue.count == 1
        }
    }

    /// Queues `target`'s wake-up; true when the queue was empty (the loop must be signalled).
    func wake(_ target: any Wakeable) -> Bool {
        woken.withLock { queue in
            queue.append(target)
            return queue.count == 1
        }
    }

    /// Runs what was posted, including what that posts (on the loop thread).
    func run() {
        while true {
            woken.withLock { queue in swap(&queue, &batch) }
            if batch.isEmpty { break }
            for w in batch { w.serviceWake() }
            batch.removeAll(keepingCapacity: true)
        }
        // Swap the queue out under the lock, then run without holding it.
        while true {
            let jobs = tasks.withLock { queue -> [@Sendable () -> Void] in
                let b = queue
                queue.removeAll(keepingCapacity: true)
                return b
            }
            if jobs.isEmpty { return }
            for t in jobs { t() }
        }
    }
}

/// Wake-ups asked for on the loop's own thread: run after the handler that asked, and what
/// they ask for after them (a class: they are asked for while it runs).
private final class LocalWakes {
    var woken: [any Wakeable] = []
    private var batch: [any Wakeable] = []

    func run() {
        while !woken.isEmpty {
            swap(&woken, &batch)
            for w in batch { w.serviceWake() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

/// A loop's timers, with the earliest deadline kept: what each turn of the loop looks at, so a
/// pending timer costs no scan and no allocation per wake-up.
private struct Timers {
    private struct Timer {
        let id: UInt64
        let deadline: Double
        let action: () -> Void
    }

    private var timers: [Timer] = []
    private var nextID: UInt64 = 1
    /// The earliest deadline in `timers` (infinity when there are none).
    private var earliestDeadline = Double.infinity

    var count: Int { timers.count }

    mutating func add(_ deadline: Double, _ action: @escaping () -> Void) -> UInt64 {
        let id = nextID
        nextID &+= 1
        timers.append(Timer(id: id, deadline: deadline, action: action))
        earliestDeadline = min(earliestDeadline, deadline)
        return id
    }

    mutating func cancel(_ id: UInt64) {
        guard let i = timers.firstIndex(where: { $0.id == id }) else { return }
        if timers.remove(at: i).deadline == earliestDeadline { findEarliestDeadline() }
    }

    /// Milliseconds until the earliest deadline, rounded up (-1: none; at most a minute).
    func timeoutMilliseconds() -> Int32 {
        guard earliestDeadline < .infinity else { return -1 }
        let ms = (earliestDeadline - monotonicNow()) * 1000
        return ms <= 0 ? 0 : Int32(min(ms + 1, 60_000))
    }

    /// Takes out the timers that are due, earliest first, for the loop to run (their actions
    /// may set new timers).
    mutating func takeDue() -> [() -> Void] {
        guard earliestDeadline < .infinity else { return [] }
        let now = monotonicNow()
        guard earliestDeadline <= now else { return [] }
        var due: [Timer] = []
        timers.removeAll { t in
            if t.deadline <= now {
                due.append(t)
                return true
            }
            return false
        }
        findEarliestDeadline()
        // Earliest first (the list is kept in the order timers were set).
        due.sort { $0.deadline < $1.deadline }
        return due.map(\.action)
    }

    private mutating func findEarliestDeadline() {
        earliestDeadline = timers.lazy.map(\.deadline).min() ?? .infinity
    }
}
