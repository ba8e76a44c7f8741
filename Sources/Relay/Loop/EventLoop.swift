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
// After forwarding a request that expects a reply, a loop may stay awake
// briefly (`stayAwake()`), polling with a zero timeout instead of sleeping,
// so the reply is forwarded without waiting for the scheduler to wake it.
// Between zero-timeout waits it yields its CPU (`sched_yield`): at normal
// priority a peer queued behind the loop on its CPU (the server the request
// woke) runs then, and the poll catches its answer; a real-time loop yields
// only to its own priority, so there the peer waits for the poll to end.
// How long is learned from what the polls found (`ReplyPoll`): where the
// server cannot answer while the loop polls (queued on the loop's CPU), its
// reply comes right after a window runs out, and the loop sleeps at once from
// then on. After forwarding the last reply an app waited for,
// it polls in the same way for the app's next request
// (`stayAwakeForNextRequest()`), with a window learned apart.
//
// The opposite case, record audio trickling in from many servers' sockets,
// one memblock at a time, is batched: after a wake-up that only read a little
// from bulk descriptors (registered with `urgent: false`), with no reply
// awaited on the loop, the loop first sleeps on a second epoll set holding
// only its urgent descriptors (apps' sockets, listeners, the eventfd) for up
// to `coalesceWindow`, then collects everything that became ready with a
// zero-timeout wait. Several streams' memblocks then share one wake-up, audio
// is delayed by at most the window, and anything from an app ends the sleep
// at once. Batching is for audio, which one connection brings at a few MB/s at
// most: while any connection of the loop reads faster than `InputRate.bulk`,
// the loop does not batch (a relay faster than its server reads a flooding
// stream in small pieces, and would sleep after every other read).
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

/// A thread running an epoll loop.
public final class EventLoop: @unchecked Sendable {
    // @unchecked Sendable: `handlers`, `timers`, `nextToken` and `nextTimer` are touched only
    // on the loop thread; `tasks` and `woken` are behind their locks; the fds are immutable.
    public let name: String
    private let epoll: FileDescriptor
    /// The urgent descriptors only (level-triggered input), slept on while audio gathers.
    private let urgentSet: FileDescriptor
    private let wakeFD: FileDescriptor
    private var handlers: [UInt64: (handler: LoopHandler, urgent: Bool)] = [:]
    private var nextToken: UInt64 = 1
    private let tasks = Locked<[@Sendable () -> Void]>([])
    private let woken = Locked<[any Wakeable]>([])
    private var wokenBatch: [any Wakeable] = []
    /// Wake-ups asked for on the loop's own thread, run after the current handler.
    private var localWoken: [any Wakeable] = []
    private var localBatch: [any Wakeable] = []
    /// Monotonic time until which the loop polls instead of sleeping (0: none).
    private var awakeUntil: Double = 0
    /// How long a wake-up that only moved a little bulk data lets more gather (0: never).
    let coalesceWindow: Double
    /// Bulk wake-ups that read at least this much do not wait (a busy stream would be throttled).
    static let coalesceMaximumBytes = 64 * 1024
    /// When the current wake-up began (monotonic seconds; kept only while batching is on).
    private var wakeTime: Double = 0
    /// Monotonic time before which the loop does not batch: a connection read faster than
    /// `InputRate.bulk` over its last period (0: none did).
    private var batchingResumesAt: Double = 0
    /// Sessions of this loop waiting for a reply from their server: no batching while any do.
    var sessionsAwaitingReplies = 0
    /// Bytes read during the current wake-up (handlers report them with `noteRead`).
    private var bytesThisWake = 0
    /// Returns from epoll_wait with at least one event (read by tests from other threads).
    public let wakeUps = Atomic<Int>(0)
    /// Sleeps on the urgent set to let record audio gather (read by tests).
    let batchingSleeps = Atomic<Int>(0)
    /// Reply polls that an event ended, and reply polls whose window ran out (read by tests).
    let pollsFound = Atomic<Int>(0)
    let pollsRanOut = Atomic<Int>(0)
    /// Polls for an app's next request after its reply went out that an event ended, and
    /// those whose window ran out (read by tests).
    let requestPollsFound = Atomic<Int>(0)
    let requestPollsRanOut = Atomic<Int>(0)
    /// How long the next reply poll lasts.
    private var replyPoll = ReplyPoll()
    /// How long the next poll for an app's next request lasts.
    private var requestPoll = ReplyPoll()
    /// Whether the current poll waits for an app's next request (else for a reply).
    private var pollingForRequest = false
    /// A poll whose window ran out and whose learner waits to hear how late the next event
    /// came: whether it polled for a request, and when its window ended.
    private var ranOut: (forRequest: Bool, at: Double)?
    /// The loop thread's id once it runs (0 before).
    private let threadID = Atomic<UInt>(0)
    /// The loop thread's kernel id (gettid) once it runs (0 before): what
    /// the scheduler and RealtimeKit know it by.
    public let kernelThreadID = Atomic<Int32>(0)
    /// Read buffer shared by every socket of this loop (used only on its thread).
    public let scratch: UnsafeMutableRawBufferPointer
    /// What the current read lets through, for one write to the other socket (on this thread only).
    let gather: WriteGather
    /// The pipe large passing payloads move through (made at first use; nil once the
    /// system gave none, or one broke: then every byte is read and written).
    private(set) lazy var splicePipe: SplicePipe? = SplicePipe(readBufferSize: scratch.count)
    /// Payload bytes moved through `splicePipe` to their destination (read by tests).
    let splicedBytes = Atomic<Int>(0)
    /// Payload bytes a full destination left in the pipe, read back to wait in a ring (read by tests).
    let splicedBack = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private var timers: [Timer] = []
    private var nextTimer: UInt64 = 1
    /// The earliest deadline in `timers` (infinity when there are none): what each turn of
    /// the loop looks at, so a pending timer costs no scan and no allocation per wake-up.
    private var earliestDeadline = Double.infinity
    private var thread: pthread_t?

    /// `coalesceWindow`: seconds a loop lets record audio gather after a
    /// wake-up that moved only a little of it (0 turns batching off).
    public init(name: String, coalesceWindow: Double = 0) throws(SystemError) {
        self.name = name
        self.coalesceWindow = coalesceWindow
        do throws(Errno) {
            epoll = try .epoll()
            urgentSet = try .epoll()
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
            try urgentSet.watch(wakeFD.rawValue, events: PollEvents.input, data: 0)
        } catch {
            throw SystemError("epoll_ctl add eventfd", error)
        }
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
        gather = WriteGather(readBuffer: scratch)
    }

    deinit {
        scratch.deallocate()
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
        let wasEmpty = tasks.withLock { queue in
            queue.append(task)
            return queue.count == 1
        }
        if wasEmpty { wakeFD.signalEvent() }
    }

    /// Calls `target.serviceWake()` on the loop thread soon. Safe from any
    /// thread; allocates nothing once the queue has grown to its working size.
    public func wake(_ target: any Wakeable) {
        if isCurrentThread {
            localWoken.append(target)
            return
        }
        let wasEmpty = woken.withLock { queue in
            queue.append(target)
            return queue.count == 1
        }
        if wasEmpty { wakeFD.signalEvent() }
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

    /// Keeps polling instead of sleeping, until the next event arrives or the
    /// reply poll's window runs out: used after forwarding a request.
    func stayAwake() {
        learnHowLate(eventCame: false)
        let window = replyPoll.windowForRequest()
        guard window > 0 else { return }
        awakeUntil = monotonicNow() + window
        pollingForRequest = false
    }

    /// Keeps polling for a while after forwarding the last reply an app waited for: an app
    /// that waits for each reply sends its next request at once. Learned like the reply
    /// poll (`ReplyPoll`), apart from it; a reply poll under way goes on.
    func stayAwakeForNextRequest() {
        guard awakeUntil == 0 else { return }
        learnHowLate(eventCame: false)
        let window = requestPoll.windowForRequest()
        guard window > 0 else { return }
        awakeUntil = monotonicNow() + window
        pollingForRequest = true
    }

    /// A splice that moved bytes into the pipe could not take them all out again: the pipe
    /// may hold stray bytes, so it is never used again.
    func stopSplicing() {
        Log.warn("\(name): the splice pipe lost bytes; audio is copied through the relay from now on")
        splicePipe = nil
    }

    /// Registers `fd` for `events`; returns the token used for `modify`/`remove`.
    /// An urgent descriptor (the default) ends a batching sleep as soon as it
    /// has input; a bulk one (a server's socket) lets its data gather.
    public func register(_ fd: Int32, events: UInt32, handler: LoopHandler, urgent: Bool = true) throws(SystemError) -> UInt64 {
        let token = nextToken
        nextToken &+= 1
        do throws(Errno) {
            try epoll.watch(fd, events: events, data: token)
        } catch {
            throw SystemError("epoll_ctl add", error)
        }
        if urgent && coalesceWindow > 0 {
            // Level-triggered: only unread input ends the sleep, not an edge already handled.
            do throws(Errno) {
                try urgentSet.watch(fd, events: PollEvents.input, data: token)
            } catch {
                try? epoll.unwatch(fd)
                throw SystemError("epoll_ctl add", error)
            }
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
        if let entry = handlers.removeValue(forKey: token), entry.urgent && coalesceWindow > 0 {
            try? urgentSet.unwatch(fd)
        }
    }

    /// A handler read `count` bytes in the current wake-up, from the connection `rate` measures.
    func noteRead(_ count: Int, rate: inout InputRate) {
        bytesThisWake &+= count
        guard coalesceWindow > 0, rate.add(count, at: wakeTime) else { return }
        // Fast over a whole period: no batching until it has had another period to slow down.
        batchingResumesAt = wakeTime + 2 * InputRate.period
    }

    /// A timer set with `schedule`, for `cancel`.
    public struct TimerID: Hashable, Sendable { fileprivate let value: UInt64 }

    private struct Timer {
        let id: UInt64
        let deadline: Double
        let action: () -> Void
    }

    /// Runs `action` on this thread after `seconds`.
    @discardableResult
    public func schedule(after seconds: Double, _ action: @escaping () -> Void) -> TimerID {
        schedule(at: monotonicNow() + seconds, action)
    }

    /// Runs `action` on this thread once `monotonicNow()` reaches `deadline`.
    @discardableResult
    public func schedule(at deadline: Double, _ action: @escaping () -> Void) -> TimerID {
        let id = nextTimer
        nextTimer &+= 1
        timers.append(Timer(id: id, deadline: deadline, action: action))
        earliestDeadline = min(earliestDeadline, deadline)
        return TimerID(value: id)
    }

    /// Timers set and not run yet (loop thread only; for tests).
    var pendingTimers: Int { timers.count }

    /// Drops a timer that has not run yet (a no-op once it has), so the loop does not wake for it.
    public func cancel(_ timer: TimerID) {
        guard let i = timers.firstIndex(where: { $0.id == timer.value }) else { return }
        if timers.remove(at: i).deadline == earliestDeadline { findEarliestDeadline() }
    }

    private func findEarliestDeadline() {
        earliestDeadline = timers.lazy.map(\.deadline).min() ?? .infinity
    }

    private func run() {
        var events = [UInt32](repeating: 0, count: 128)
        var datas = [UInt64](repeating: 0, count: 128)
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        kernelThreadID.store(ProcessLimits.currentThreadID(), ordering: .releasing)
        var batchNext = false
        while !stopping.load(ordering: .acquiring) {
            let polling = awakeUntil != 0
            var timeout = polling ? 0 : nextTimeoutMilliseconds()
            if batchNext && !polling {
                // Let more audio gather; anything urgent (or a due timer) ends the sleep.
                batchNext = false
                var window = coalesceWindow
                if timeout >= 0 { window = min(window, Double(timeout) / 1000) }
                Self.count(batchingSleeps)
                do throws(Errno) {
                    try urgentSet.sleep(nanoseconds: Int64(window * 1e9))
                } catch {
                    Log.error("\(name): epoll_pwait2: \(error)")
                }
                timeout = 0
            }
            let waited = events.withUnsafeMutableBufferPointer { ev in
                datas.withUnsafeMutableBufferPointer { da in
                    Result { () throws(Errno) in try epoll.wait(events: ev, data: da, timeoutMs: timeout) }
                }
            }
            let n: Int
            switch waited {
            case .success(let count): n = count
            case .failure(let error):
                Log.error("\(name): epoll_wait: \(error)")
                continue
            }
            if polling {
                // The awaited event came in time: sleep normally again, unless what is handled
                // now forwards another request or reply. One seen only after the window ran out
                // (the yield below gave the CPU away for longer) was not found by the poll.
                let over = monotonicNow() >= awakeUntil
                if n > 0 || over { endPoll(found: !over) }
            }
            if n > 0 {
                Self.count(wakeUps)
                learnHowLate(eventCame: true)
            }
            // A wake-up that began with a reply awaited brought that reply, most likely: the
            // app's next request follows it, and waiting for audio to gather would delay it.
            let awaited = sessionsAwaitingReplies > 0
            var urgent = false
            bytesThisWake = 0
            if n > 0 && coalesceWindow > 0 { wakeTime = monotonicNow() }
            for i in 0..<n {
                let token = datas[i]
                if token == 0 {
                    urgent = true
                    wakeFD.drainEvents()
                    runTasks()
                } else if let entry = handlers[token] {
                    if entry.urgent { urgent = true }
                    entry.handler.handleEvents(events[i])
                }
                runLocal()
            }
            if polling && n == 0 && awakeUntil != 0 {
                // A peer the request woke onto this CPU runs now, if it is waiting for it.
                sched_yield()
                continue
            }
            runTimers()
            runLocal()
            batchNext = n > 0 && !urgent && !awaited && coalesceWindow > 0 && awakeUntil == 0
                && sessionsAwaitingReplies == 0 && bytesThisWake < Self.coalesceMaximumBytes
                && wakeTime >= batchingResumesAt
        }
        runTasks()
        runLocal()
    }

    /// Ends the poll under way and counts it; tells its learner an event came before its
    /// window ran out, or, once the next event comes, how late.
    private func endPoll(found: Bool) {
        if !found { ranOut = (pollingForRequest, awakeUntil) }
        awakeUntil = 0
        switch (pollingForRequest, found) {
        case (false, true): replyPoll.found(); Self.count(pollsFound)
        case (false, false): Self.count(pollsRanOut)
        case (true, true): requestPoll.found(); Self.count(requestPollsFound)
        case (true, false): Self.count(requestPollsRanOut)
        }
    }

    /// Tells the learner of a poll that ran out how late the next event came: now, when it
    /// woke the loop, or (`eventCame` false) not before the next poll. The clock is read only
    /// after a poll ran out, not on every wake-up.
    private func learnHowLate(eventCame: Bool) {
        guard let poll = ranOut else { return }
        ranOut = nil
        let late = eventCame ? monotonicNow() - poll.at : .infinity
        if poll.forRequest { requestPoll.ranOut(late: late) } else { replyPoll.ranOut(late: late) }
    }

    /// Adds one to a counter only this thread writes (no read-modify-write instruction needed).
    @inline(__always)
    private static func count(_ counter: borrowing Atomic<Int>) {
        counter.store(counter.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
    }

    /// Runs the wake-ups asked for on this thread, including those they ask for.
    private func runLocal() {
        while !localWoken.isEmpty {
            swap(&localWoken, &localBatch)
            for w in localBatch { w.serviceWake() }
            localBatch.removeAll(keepingCapacity: true)
        }
    }

    private func runTasks() {
        while true {
            woken.withLock { queue in
                swap(&queue, &wokenBatch)
            }
            if wokenBatch.isEmpty { break }
            for w in wokenBatch { w.serviceWake() }
            wokenBatch.removeAll(keepingCapacity: true)
        }
        // Swap the queue out under the lock, then run without holding it.
        while true {
            let batch = tasks.withLock { queue -> [@Sendable () -> Void] in
                let b = queue
                queue.removeAll(keepingCapacity: true)
                return b
            }
            if batch.isEmpty { return }
            for t in batch { t() }
        }
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        guard earliestDeadline < .infinity else { return -1 }
        let ms = (earliestDeadline - monotonicNow()) * 1000
        return ms <= 0 ? 0 : Int32(min(ms + 1, 60_000))
    }

    private func runTimers() {
        guard earliestDeadline < .infinity else { return }
        let now = monotonicNow()
        guard earliestDeadline <= now else { return }
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
        for t in due { t.action() }
    }
}

/// Seconds on the monotonic clock.
public func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Seconds since 1970.
public func wallClockNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// How fast one connection's input runs, over periods of `period` seconds: what
/// tells a flooding stream from audio, which batching is for.
struct InputRate {
    /// Bytes per second above which a connection is bulk: far above audio (a
    /// 192 kHz 8-channel float stream is 6 MB/s), far below a flood (GB/s).
    static let bulk = 128e6
    /// Seconds over which the rate is measured.
    static let period = 0.02
    private var start: Double = 0
    private var bytes = 0

    /// Adds `count` bytes read at `now`; true when that ends a period that ran faster than `bulk`.
    mutating func add(_ count: Int, at now: Double) -> Bool {
        bytes &+= count
        let elapsed = now - start
        guard elapsed >= Self.period else { return false }
        let fast = Double(bytes) >= Self.bulk * elapsed
        start = now
        bytes = 0
        return fast
    }
}
