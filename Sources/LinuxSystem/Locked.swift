// A value behind a pthread mutex: the one lock type of Earmuff's production code.
//
// Synchronization.Mutex is futex-based and carries no annotations the thread
// sanitizer understands on Linux, so every correctly locked access would be
// reported as a race; CI runs the relay under TSan, which does intercept
// pthread_mutex_lock. The locks here guard control state only (never taken
// per audio frame), so the cost of a pthread mutex does not matter.
import Glibc

/// A value that is read and written only under its lock.
@safe
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is touched only between lock and unlock.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        unsafe mutex = .allocate(capacity: 1)
        unsafe pthread_mutex_init(mutex, nil)
    }

    deinit {
        unsafe pthread_mutex_destroy(mutex)
        unsafe mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        unsafe pthread_mutex_lock(mutex)
        defer { unsafe pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
