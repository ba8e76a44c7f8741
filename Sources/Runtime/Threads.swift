// Thread start-up, written once: every thread Earmuff starts runs an
// `EventLoop`, and gets the loop's name, which `top -H`, gdb and
// /proc/<pid>/task/*/comm show.
import Glibc
import LinuxSystem

private final class ThreadBody {
    let name: String
    let run: () -> Void
    init(_ name: String, _ run: @escaping () -> Void) {
        self.name = name
        self.run = run
    }
}

/// Starts `body` on a new joinable thread called `name` (cut to the kernel's 15 bytes); returns
/// it for `pthread_join`.
func startThread(named name: String, _ body: @escaping () -> Void) -> pthread_t {
    let box = unsafe Unmanaged.passRetained(ThreadBody(name, body))
    var tid = pthread_t()
    let rc = unsafe pthread_create(
        &tid, nil,
        { arg in
            let body = unsafe Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue()
            ThisProcess.nameCurrentThread(body.name)
            body.run()
            return nil
        }, unsafe box.toOpaque())
    precondition(rc == 0, "pthread_create failed: \(Errno(rawValue: rc))")
    return tid
}
