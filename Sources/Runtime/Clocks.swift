// The clocks every thread reads: monotonic for deadlines and rates, wall-clock for what is
// shown or stored.
import Glibc

/// Seconds on the monotonic clock.
public func monotonicNow() -> Double {
    var ts = timespec()
    unsafe clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Seconds since 1970.
public func wallClockNow() -> Double {
    var ts = timespec()
    unsafe clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
