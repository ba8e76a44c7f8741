// A plain pthread for the D-Bus threads (the desktop prompter, the desktop
// permission mirror: sd-bus is single-threaded), and the request queue they
// are woken through.
import CLinux
import Glibc
import LinuxSystem

private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Starts `body` on a new joinable thread; returns it for `pthread_join`.
func startThread(_ body: @escaping () -> Void) -> pthread_t {
    let box = Unmanaged.passRetained(ThreadBody(body))
    var tid = pthread_t()
    let rc = pthread_create(&tid, nil, { arg in
        Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue().run()
        return nil
    }, box.toOpaque())
    precondition(rc == 0, "pthread_create failed: \(rc)")
    return tid
}

/// A thread that takes requests from other threads: they queue a request and signal an
/// eventfd, which the thread polls with whatever else it waits on (a bus socket).
final class RequestThread<Request: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `requests` is locked; `thread` is set and joined by the owner only.
    private let requests = Locked<(queue: [Request], stopping: Bool)>(([], false))
    /// The eventfd to poll for input; drain it with `earmuff_eventfd_drain` after each wake-up.
    let wakeFD = earmuff_eventfd()
    private var thread: pthread_t?

    deinit { _ = Glibc.close(wakeFD) }

    /// Starts `body` on the thread.
    func start(_ body: @escaping () -> Void) { thread = startThread(body) }

    /// Queues `r` and wakes the thread.
    func post(_ r: Request) {
        requests.withLock { $0.queue.append(r) }
        _ = earmuff_eventfd_signal(wakeFD)
    }

    /// The requests queued so far, and whether the thread is to stop.
    func take() -> (requests: [Request], stopping: Bool) {
        requests.withLock { r in
            defer { r.queue.removeAll() }
            return (r.queue, r.stopping)
        }
    }

    /// Tells the thread to stop (`take` says so) and waits for it.
    func stopAndJoin() {
        requests.withLock { $0.stopping = true }
        _ = earmuff_eventfd_signal(wakeFD)
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
    }
}
