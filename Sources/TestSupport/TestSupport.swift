// TestSupport: real components for end-to-end tests.
//
// Everything here starts real programs, never mocks: a private PulseAudio
// (`PulseServer`), the built `earmuff` binary (`EarmuffProcess`) and the stock
// client tools (`Tool`). Each lives in its own directory under /tmp (short, so
// socket paths fit in sun_path) with private HOME/XDG dirs, its output goes
// to files, and a watchdog ends it if the test process dies or a lifetime cap
// passes. `AudioAnalysis` judges recorded audio by content: exact silence, or
// the share of energy at the test tone's frequency.

import CLinux
import Foundation
import Glibc

/// Errors raised while starting or talking to test processes.
public struct TestSupportError: Error, CustomStringConvertible {
    /// What went wrong, with enough context (logs, paths) to diagnose it.
    public let description: String

    /// Creates an error with a description.
    public init(_ description: String) { self.description = description }
}

/// A private temporary directory (mode 0700) under /tmp, short enough for socket paths.
public enum TempDir {
    /// Creates a fresh directory `/tmp/<prefix>-XXXXXX` and returns its path.
    public static func make(prefix: String) throws -> String {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = unsafe template.withUnsafeMutableBufferPointer { buf -> Bool in
            guard let base = buf.baseAddress else { return false }
            return unsafe mkdtemp(base) != nil
        }
        guard made else { throw TestSupportError("mkdtemp(/tmp/\(prefix)-XXXXXX) failed: errno \(errno)") }
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Creates `path` and its parents with mode 0700.
    public static func makeDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Removes `path` recursively, ignoring errors.
    public static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Whether this process runs under the thread sanitizer, which makes every instrumented
/// thread several times slower (tests that time a thread's answer cannot hold there).
public let threadSanitizerIsRunning: Bool = {
    let process = unsafe dlopen(nil, RTLD_NOW)
    let found = unsafe dlsym(process, "__tsan_init") != nil
    if let process = unsafe process { unsafe dlclose(process) }
    return found
}()

/// How a thread of this process is scheduled, for tests that put two threads in each
/// other's way (root only: SCHED_FIFO).
public enum ThreadScheduling {
    /// Runs thread `tid` SCHED_FIFO at `fifo` on this process's lowest CPU, or (`fifo`
    /// nil) SCHED_OTHER on every CPU the process may use again.
    public static func set(_ tid: Int32, fifo: Int32?) throws {
        var param = sched_param(sched_priority: fifo ?? 0)
        guard unsafe sched_setscheduler(tid, fifo == nil ? SCHED_OTHER : SCHED_FIFO, &param) == 0 else {
            throw TestSupportError("sched_setscheduler(\(tid)): errno \(errno)")
        }
        guard earmuff_pin_thread(tid, fifo == nil ? 0 : 1) == 0 else {
            throw TestSupportError("sched_setaffinity(\(tid)): errno \(errno)")
        }
    }
}
