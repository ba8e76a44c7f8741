import Foundation
import Glibc

/// Polling with a deadline. Tests wait on conditions (a file has grown, a
/// process printed a line), never on fixed sleeps.
public enum Wait {
    /// Polls `condition` every `interval` seconds until it holds (returns true)
    /// or `timeout` seconds have passed (returns false), sleeping the task.
    @discardableResult
    public static func until(
        timeout: Double, interval: Double = 0.02, _ condition: () throws -> Bool
    ) async rethrows -> Bool {
        let deadline = now() + timeout
        while true {
            if try condition() { return true }
            if now() >= deadline { return false }
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
        }
    }

    /// Like `until`, but blocks the calling thread (for synchronous code and deinit).
    @discardableResult
    public static func untilBlocking(
        timeout: Double, interval: Double = 0.02, _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let deadline = now() + timeout
        while true {
            if try condition() { return true }
            if now() >= deadline { return false }
            usleep(UInt32(interval * 1e6))
        }
    }

    /// Seconds on the monotonic clock.
    public static func now() -> Double {
        var ts = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
