// A plain pthread for the D-Bus thread of the desktop prompter (sd-bus is single-threaded).
import Glibc

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
