// A named thread for blocking work (SQLite writes, asking snapd, reading
// desktop entries), so that none of it runs on an I/O loop or on Dispatch's
// shared pool. It is an `EventLoop` that only runs posted jobs: one at a time,
// in the order they were posted, on a thread with the worker's name.
import Glibc

public final class Worker: Sendable {
    private let loop: EventLoop

    /// Starts the thread; `name` (at most 15 bytes shown) names it in `top -H` and gdb.
    public init(name: String) throws(SystemError) {
        loop = try EventLoop(name: name)
        loop.start()
    }

    /// Jobs still queued run before the thread ends.
    deinit { loop.stopAndJoin() }

    /// Runs `job` on the worker's thread after the jobs posted before it. Safe from any thread.
    public func async(_ job: @escaping @Sendable () -> Void) { loop.post(job) }

    /// Returns once the jobs posted so far have run (at shutdown, in tests). Not from a job.
    public func waitForJobs() {
        precondition(!loop.isCurrentThread, "\(loop.name): a job waited for its own worker")
        let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        unsafe sem_init(done, 0, 0)
        defer {
            unsafe sem_destroy(done)
            unsafe done.deallocate()
        }
        nonisolated(unsafe) let signal = unsafe done
        loop.post { unsafe sem_post(signal) }
        while unsafe sem_wait(done) != 0 {}
    }
}
