// Scheduling for the relay's audio threads, as the sound servers do it: ask
// RealtimeKit (a `RealtimeBroker`: the service reaches it on the system bus) for SCHED_RR at
// a modest priority, else set it directly where the process may (root,
// CAP_SYS_NICE or RLIMIT_RTPRIO), else a higher nice level (RealtimeKit's
// MakeThreadHighPriority, then setpriority). Only the relay loops are raised:
// control, prompts, the store and the catalog stay at normal priority.
//
// RealtimeKit requires RLIMIT_RTTIME (CPU time a real-time thread may use
// without blocking) to be set; it is set first, with the soft limit at half
// the hard one. A loop that ran that long without sleeping is spinning: the
// kernel's SIGXCPU at the soft limit demotes every audio thread to normal
// scheduling (the handler only makes syscalls), long before the hard limit
// would kill the process. The relay's own polling after a request is bounded
// (200 µs), so a working loop never comes near it.

import Basics
import Glibc
import LinuxSystem
import Synchronization

/// What the relay's audio threads got.
public struct AudioThreadGrant: Sendable, Equatable {
    public enum Level: Sendable, Equatable {
        case realtime(priority: Int32)
        case highPriority(nice: Int32)
        case normal
    }

    public var level: Level
    /// What granted it: "RealtimeKit", "sched_setscheduler" or "setpriority"; nil for normal.
    public var via: String?
    /// What was tried and refused on the way, in order.
    public var refusals: [String]
}

/// How high the audio threads should go (config `realtime-priority`, `nice-level`).
public struct AudioThreadSettings: Sendable, Equatable {
    /// SCHED_RR priority asked for; 0: never real-time.
    public var realtimePriority: Int32
    /// Nice level when real-time is refused; 0: leave the nice level alone.
    public var niceLevel: Int32

    public init(realtimePriority: Int32 = Int32(RelayDefaults.realtimePriority), niceLevel: Int32 = Int32(RelayDefaults.niceLevel)) {
        self.realtimePriority = realtimePriority
        self.niceLevel = niceLevel
    }

    /// False when both are off: the threads stay as they are, and nobody need be asked.
    public var asksForAnything: Bool { realtimePriority > 0 || niceLevel < 0 }
}

/// How one thread is scheduled now (read back from the kernel).
public struct ThreadScheduling: Sendable, Equatable {
    /// SCHED_OTHER, SCHED_RR, SCHED_FIFO... without SCHED_RESET_ON_FORK.
    public var policy: Int32
    public var priority: Int32
    public var nice: Int32

    public var isRealtime: Bool { policy == SCHED_RR || policy == SCHED_FIFO }

    public var policyName: String {
        switch policy {
        case SCHED_RR: return "SCHED_RR"
        case SCHED_FIFO: return "SCHED_FIFO"
        case SCHED_OTHER: return "SCHED_OTHER"
        default: return "policy \(policy)"
        }
    }
}

/// What grants real-time scheduling on the system's behalf (RealtimeKit, on the system bus),
/// with the limits it enforces.
public protocol RealtimeBroker {
    /// Its name, for status and the log ("RealtimeKit").
    var name: String { get }
    var maxRealtimePriority: Int32 { get }
    var minNiceLevel: Int32 { get }
    /// The most RLIMIT_RTTIME (µs) it accepts.
    var rtTimeMax: Int64 { get }
    func makeRealtime(_ tid: pid_t, _ priority: Int32) throws
    func makeHighPriority(_ tid: pid_t, _ nice: Int32) throws
}

public enum AudioThreads {
    /// RealtimeKit's default ceiling for RLIMIT_RTTIME, µs.
    static let defaultRTTimeMax: Int64 = 200_000
    private static let resetOnFork: Int32 = 0x4000_0000
    /// RLIMIT_RTTIME (Linux's resource 15; glibc shows it only to GNU code).
    private static let rlimitRTTime = __rlimit_resource_t(15)

    /// The last grant, for `earmuff status`.
    private static let granted = Locked<AudioThreadGrant?>(nil)
    public static var lastGrant: AudioThreadGrant? { granted.withLock { $0 } }

    /// Raises `threads` (kernel thread ids of this process) as far as allowed.
    /// `broker` is asked first; when it cannot be reached, `brokerRefusal` says why.
    public static func raise(
        _ threads: [pid_t], settings: AudioThreadSettings,
        broker: RealtimeBroker?, brokerRefusal: String? = nil
    ) -> AudioThreadGrant {
        var refusals: [String] = []
        func done(_ level: AudioThreadGrant.Level, via: String? = nil) -> AudioThreadGrant {
            let grant = AudioThreadGrant(level: level, via: via, refusals: refusals)
            granted.withLock { $0 = grant }
            return grant
        }
        // Nothing asked for: nothing refused either.
        guard !threads.isEmpty, settings.asksForAnything else { return done(.normal) }
        if let brokerRefusal { refusals.append(brokerRefusal) }

        if settings.realtimePriority > 0 {
            let limit = min(broker?.rtTimeMax ?? defaultRTTimeMax, defaultRTTimeMax)
            if let problem = limitRealtimeRun(threads, hardMicroseconds: limit) {
                refusals.append(problem)
            } else {
                if let broker {
                    let priority = min(settings.realtimePriority, broker.maxRealtimePriority)
                    if let refused = everyThread(threads, { tid in try broker.makeRealtime(tid, priority) }) {
                        refusals.append("\(broker.name): \(refused)")
                    } else {
                        return done(.realtime(priority: priority), via: broker.name)
                    }
                }
                var param = sched_param(sched_priority: settings.realtimePriority)
                let direct = everyThread(threads) { tid throws(Errno) in
                    _ = try unsafe Errno.check(sched_setscheduler(tid, SCHED_RR | resetOnFork, &param))
                }
                if let direct {
                    refusals.append("sched_setscheduler: \(direct)")
                } else {
                    return done(.realtime(priority: settings.realtimePriority), via: "sched_setscheduler")
                }
            }
        }
        if settings.niceLevel < 0 {
            if let broker {
                let nice = max(settings.niceLevel, broker.minNiceLevel)
                if let refused = everyThread(threads, { tid in try broker.makeHighPriority(tid, nice) }) {
                    refusals.append("\(broker.name) high priority: \(refused)")
                } else {
                    return done(.highPriority(nice: nice), via: broker.name)
                }
            }
            let direct = everyThread(threads) { tid throws(Errno) in
                _ = try Errno.check(setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid), settings.niceLevel))
            }
            if let direct {
                refusals.append("setpriority: \(direct)")
            } else {
                return done(.highPriority(nice: settings.niceLevel), via: "setpriority")
            }
        }
        return done(.normal)
    }

    /// How `tid` is scheduled now; nil when it is gone.
    public static func current(_ tid: pid_t) -> ThreadScheduling? {
        let policy = sched_getscheduler(tid)
        guard policy >= 0 else { return nil }
        var param = sched_param()
        guard unsafe sched_getparam(tid, &param) == 0 else { return nil }
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid))
        return ThreadScheduling(
            policy: policy & ~resetOnFork, priority: param.sched_priority,
            nice: errno == 0 ? nice : 0)
    }

    /// Whether SIGXCPU demoted the audio threads (a loop ran too long without sleeping).
    public static var demotedForSpinning: Bool { SpinGuard.fired.load(ordering: .relaxed) }

    /// Runs `body` for each thread; the first error, described, or nil.
    private static func everyThread<E: Error>(_ threads: [pid_t], _ body: (pid_t) throws(E) -> Void) -> String? {
        for tid in threads {
            do throws(E) {
                try body(tid)
            } catch {
                return "\(error)"
            }
        }
        return nil
    }

    /// Sets RLIMIT_RTTIME (soft at half the hard limit) and arms the SIGXCPU
    /// guard; a description of the failure, or nil.
    private static func limitRealtimeRun(_ threads: [pid_t], hardMicroseconds: Int64) -> String? {
        var current = rlimit()
        _ = unsafe getrlimit(rlimitRTTime, &current)
        let hard = min(rlim_t(hardMicroseconds), current.rlim_max)
        var limit = rlimit(rlim_cur: min(hard / 2, current.rlim_cur), rlim_max: hard)
        guard unsafe setrlimit(rlimitRTTime, &limit) == 0 else {
            return "RLIMIT_RTTIME: \(Errno.current)"
        }
        SpinGuard.arm(threads)
        return nil
    }
}

/// The SIGXCPU handler: every audio thread back to SCHED_OTHER. The thread
/// ids are kept in a fixed table written before the handler is armed, so the
/// handler reads memory and makes syscalls only.
private enum SpinGuard {
    static let fired = Atomic<Bool>(false)
    private static let capacity = 256
    nonisolated(unsafe) private static let table = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
    private static let count = Atomic<Int>(0)
    private static let armed = Atomic<Bool>(false)

    /// Records `threads` for the handler and arms it (once per process).
    static func arm(_ threads: [pid_t]) {
        let base = count.load(ordering: .acquiring)
        let n = min(threads.count, capacity - base)
        for (i, tid) in threads.prefix(n).enumerated() { unsafe table[base + i] = tid }
        count.store(base + n, ordering: .releasing)
        guard !armed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var action = sigaction()
        unsafe action.__sigaction_handler.sa_handler = { _ in SpinGuard.demoteAll() }
        unsafe sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        unsafe sigaction(SIGXCPU, &action, nil)
    }

    static func demoteAll() {
        fired.store(true, ordering: .relaxed)
        var param = sched_param(sched_priority: 0)
        for i in 0..<count.load(ordering: .acquiring) {
            _ = unsafe sched_setscheduler(table[i], SCHED_OTHER, &param)
        }
    }
}
