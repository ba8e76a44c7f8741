// How a relay loop waits, and what its sessions share on its thread: the
// audio tuning a relay loop carries and no other thread does (`LoopWaiting`
// of Runtime's `EventLoop`).
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
// stream in small pieces, and would sleep after every other read). Instead,
// after a turn that moved its bytes, it polls for the next ones (a third poll,
// learned apart), for at most `flowPollChain` before it waits as usual once.
//
// Its sessions also share the loop's read buffer (`scratch`), the gather of
// what one read lets through (`WriteGather`) and the pipe large payloads are
// spliced through (`SplicePipe`). Everything here but the counters is touched
// only on the loop's thread.
import Glibc
import LinuxSystem
import Runtime
import Synchronization

/// A relay loop's audio tuning, and the buffers its sessions share.
@safe
final class AudioTuning: LoopWaiting, @unchecked Sendable {
    // @unchecked Sendable: touched only on its loop's thread, but for the atomic counters.
    let name: String
    /// The urgent descriptors only (level-triggered input), slept on while audio gathers.
    private let urgentSet: FileDescriptor
    /// How long a wake-up that only moved a little bulk data lets more gather (0: never).
    let coalesceWindow: Double
    /// Bulk wake-ups that read at least this much do not wait (a busy stream would be throttled).
    static let coalesceMaximumBytes = 64 * 1024
    /// Whether the next wait first lets audio gather.
    private var batchNext = false
    /// When the current wake-up began (monotonic seconds; kept only while batching is on).
    private var wakeTime: Double = 0
    /// Monotonic time before which the loop does not batch: a connection read faster than
    /// `InputRate.bulk` over its last period (0: none did).
    private var batchingResumesAt: Double = 0
    /// Sessions of this loop waiting for a reply from their server: no batching while any do.
    var sessionsAwaitingReplies = 0
    /// Whether the current wake-up began with a reply awaited.
    private var awaited = false
    /// Bytes read during the current wake-up (handlers report them with `noteRead`).
    private var bytesThisWake = 0
    /// Monotonic time until which the loop polls instead of sleeping (0: none).
    private var awakeUntil: Double = 0
    /// Whether the current wait is a poll (it began with `awakeUntil` set).
    private var polling = false
    /// How long the next reply poll lasts, and the next poll for an app's next request.
    private var replyPoll = ReplyPoll()
    private var requestPoll = ReplyPoll()
    /// How long the loop polls after a turn that moved bytes of a flooding connection.
    private var flowPoll = ReplyPoll()
    /// When the loop began polling from flow poll to flow poll without a wait that could
    /// sleep (0: it has not).
    private var flowPollsSince: Double = 0
    /// How long flow polls may follow one another before the loop waits as usual once: a
    /// real-time loop must sleep now and then (RLIMIT_RTTIME), and a flood that never lets
    /// the socket run empty keeps it awake anyway.
    static let flowPollChain = 0.002
    /// What the current poll waits for.
    private var pollingFor = PollKind.reply
    /// A poll whose window ran out and whose learner waits to hear how late the next event
    /// came: what it polled for, and when its window ended.
    private var ranOut: (kind: PollKind, at: Double)?
    /// What the polls and batching did (read by tests and the bench from other threads).
    let counters = Counters()
    /// Read buffer shared by every socket of this loop.
    let scratch: UnsafeMutableRawBufferPointer
    /// What the current read lets through, for one write to the other socket.
    let gather: WriteGather
    /// The pipe large passing payloads move through (made at first use; nil once the
    /// system gave none, or one broke: then every byte is read and written).
    private(set) lazy var splicePipe: SplicePipe? = unsafe SplicePipe(readBufferSize: scratch.count)

    /// What a poll waits for: each kind learns its window apart.
    enum PollKind {
        /// The reply to a forwarded request.
        case reply
        /// An app's next request, after the last reply it waited for.
        case request
        /// A flooding connection's next bytes, or room in the socket it is written to.
        case flow
    }

    /// What a loop's polls, batching and splicing did.
    final class Counters: Sendable {
        /// Sleeps on the urgent set to let record audio gather.
        let batchingSleeps = Atomic<Int>(0)
        /// Reply polls that an event ended, and reply polls whose window ran out.
        let pollsFound = Atomic<Int>(0)
        let pollsRanOut = Atomic<Int>(0)
        /// Polls for an app's next request after its reply went out that an event ended, and
        /// those whose window ran out.
        let requestPollsFound = Atomic<Int>(0)
        let requestPollsRanOut = Atomic<Int>(0)
        /// Polls after moving a flooding connection's bytes that an event ended, and those whose
        /// window ran out.
        let flowPollsFound = Atomic<Int>(0)
        let flowPollsRanOut = Atomic<Int>(0)
        /// Payload bytes moved through the splice pipe to their destination.
        let splicedBytes = Atomic<Int>(0)
        /// Payload bytes a full destination left in the pipe, read back to wait in a ring.
        let splicedBack = Atomic<Int>(0)

        /// Adds one to a counter only the loop's thread writes (no read-modify-write instruction needed).
        @inline(__always)
        static func count(_ counter: borrowing Atomic<Int>) {
            counter.store(counter.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        }
    }

    /// `coalesceWindow`: seconds the loop lets record audio gather after a wake-up that moved
    /// only a little of it (0 turns batching off).
    init(name: String, coalesceWindow: Double) throws(SystemError) {
        self.name = name
        self.coalesceWindow = coalesceWindow
        do throws(Errno) {
            urgentSet = try .epoll()
        } catch {
            throw SystemError("epoll_create1", error)
        }
        unsafe scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
        gather = unsafe WriteGather(readBuffer: scratch)
    }

    deinit {
        unsafe scratch.deallocate()
    }

    // MARK: what sessions tell it

    /// Keeps polling instead of sleeping, until the next event arrives or the
    /// reply poll's window runs out: used after forwarding a request.
    func stayAwake() {
        learnHowLate(eventCame: false)
        let window = replyPoll.windowForRequest()
        guard window > 0 else { return }
        awakeUntil = monotonicNow() + window
        pollingFor = .reply
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
        pollingFor = .request
    }

    /// A handler read `count` bytes in the current wake-up, from the connection `rate` measures.
    func noteRead(_ count: Int, rate: inout InputRate) {
        bytesThisWake &+= count
        guard coalesceWindow > 0, rate.add(count, at: wakeTime) else { return }
        // Fast over a whole period: no batching until it has had another period to slow down.
        batchingResumesAt = wakeTime + 2 * InputRate.period
    }

    /// A splice that moved bytes into the pipe could not take them all out again: the pipe
    /// may hold stray bytes, so it is never used again.
    func stopSplicing() {
        Log.warn("\(name): the splice pipe lost bytes; audio is copied through the relay from now on")
        splicePipe = nil
    }

    // MARK: LoopWaiting

    func registered(_ fd: Int32, token: UInt64, urgent: Bool) throws(Errno) {
        // Level-triggered: only unread input ends the sleep, not an edge already handled.
        if urgent && coalesceWindow > 0 { try urgentSet.watch(fd, events: PollEvents.input, data: token) }
    }

    func removed(_ fd: Int32, urgent: Bool) {
        if urgent && coalesceWindow > 0 { try? urgentSet.unwatch(fd) }
    }

    func willWait(timeout: Int32) -> Int32 {
        polling = awakeUntil != 0
        if polling { return 0 }
        flowPollsSince = 0
        guard batchNext else { return timeout }
        // Let more audio gather; anything urgent (or a due timer) ends the sleep.
        batchNext = false
        var window = coalesceWindow
        if timeout >= 0 { window = min(window, Double(timeout) / 1000) }
        Counters.count(counters.batchingSleeps)
        do throws(Errno) {
            try urgentSet.sleep(nanoseconds: Int64(window * 1e9))
        } catch {
            Log.error("\(name): epoll_pwait2: \(error)")
        }
        return 0
    }

    func woke(events n: Int) {
        if polling {
            // The awaited event came in time: sleep normally again, unless what is handled
            // now forwards another request or reply. One seen only after the window ran out
            // (the yield in `keepsPolling` gave the CPU away for longer) was not found by the poll.
            let over = monotonicNow() >= awakeUntil
            if n > 0 || over { endPoll(found: !over) }
        }
        if n > 0 { learnHowLate(eventCame: true) }
        // A wake-up that began with a reply awaited brought that reply, most likely: the
        // app's next request follows it, and waiting for audio to gather would delay it.
        awaited = sessionsAwaitingReplies > 0
        bytesThisWake = 0
        if n > 0 && coalesceWindow > 0 { wakeTime = monotonicNow() }
    }

    func keepsPolling(events n: Int) -> Bool {
        guard polling && n == 0 && awakeUntil != 0 else { return false }
        // A peer the request woke onto this CPU runs now, if it is waiting for it.
        sched_yield()
        return true
    }

    func turnEnded(events n: Int, urgent: Bool) {
        let flooding = wakeTime < batchingResumesAt
        batchNext =
            n > 0 && !urgent && !awaited && coalesceWindow > 0 && awakeUntil == 0
            && sessionsAwaitingReplies == 0 && bytesThisWake < Self.coalesceMaximumBytes && !flooding
        // A connection that floods has its next bytes (or room to write them) within microseconds,
        // most likely: poll for them rather than sleep and be woken.
        if n > 0 && flooding && bytesThisWake > 0 && awakeUntil == 0 {
            let now = monotonicNow()
            if flowPollsSince == 0 { flowPollsSince = now }
            guard now - flowPollsSince < Self.flowPollChain else { return }
            learnHowLate(eventCame: false)
            let window = flowPoll.windowForRequest()
            if window > 0 {
                awakeUntil = now + window
                pollingFor = .flow
            }
        }
    }

    // MARK: polls

    /// Ends the poll under way and counts it; tells its learner an event came before its
    /// window ran out, or, once the next event comes, how late.
    private func endPoll(found: Bool) {
        if !found { ranOut = (pollingFor, awakeUntil) }
        awakeUntil = 0
        switch (pollingFor, found) {
        case (.reply, true): replyPoll.found(); Counters.count(counters.pollsFound)
        case (.reply, false): Counters.count(counters.pollsRanOut)
        case (.request, true): requestPoll.found(); Counters.count(counters.requestPollsFound)
        case (.request, false): Counters.count(counters.requestPollsRanOut)
        case (.flow, true): flowPoll.found(); Counters.count(counters.flowPollsFound)
        case (.flow, false): Counters.count(counters.flowPollsRanOut)
        }
    }

    /// Tells the learner of a poll that ran out how late the next event came: now, when it
    /// woke the loop, or (`eventCame` false) not before the next poll. The clock is read only
    /// after a poll ran out, not on every wake-up.
    private func learnHowLate(eventCame: Bool) {
        guard let poll = ranOut else { return }
        ranOut = nil
        let late = eventCame ? monotonicNow() - poll.at : .infinity
        switch poll.kind {
        case .reply: replyPoll.ranOut(late: late)
        case .request: requestPoll.ranOut(late: late)
        case .flow: flowPoll.ranOut(late: late)
        }
    }
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
