// Who started whom, from /proc/PID/stat: a launcher socket admits only the
// process tree of the `earmuff run` that asked for it.
//
// A process is named by its pid and start time together, so that a pid the
// kernel recycled for another process never passes for the original.
// /proc/PID/stat is the kernel's (no file system an app controls is read) and
// stays readable for non-dumpable processes.

/// A process, told apart from later ones with the same pid by its start time.
struct ProcessStamp: Hashable, Sendable, CustomStringConvertible {
    var pid: Int32
    /// Field 22 of /proc/PID/stat (clock ticks after boot).
    var startTime: UInt64

    var description: String { "pid \(pid) (started at tick \(startTime))" }
}

enum Lineage {
    /// How many parents are followed before giving up (a chain this deep is no launcher's).
    static let maximumDepth = 128

    /// The parent pid and start time of `pid`, from /proc/PID/stat; nil when it is gone.
    static func parentAndStart(of pid: Int32) -> (parent: Int32, start: UInt64)? {
        guard let raw = ProcessInspector.readSmallFile("/proc/\(pid)/stat") else { return nil }
        return parse(stat: raw)
    }

    /// The stamp of a live process.
    static func stamp(of pid: Int32) -> ProcessStamp? {
        parentAndStart(of: pid).map { ProcessStamp(pid: pid, startTime: $0.start) }
    }

    /// Fields 4 (ppid) and 22 (starttime) of a /proc/PID/stat text; the command
    /// name in field 2 is in parentheses and may contain both.
    static func parse(stat raw: [UInt8]) -> (parent: Int32, start: UInt64)? {
        guard let close = raw.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = raw[(close + 1)...].split(separator: UInt8(ascii: " "))
        // After ")" come field 3 (state), 4 (ppid), …, 22 (starttime) = index 19.
        guard fields.count >= 20,
            let parent = Int32(String(decoding: fields[1], as: UTF8.self)),
            let start = UInt64(String(decoding: fields[19], as: UTF8.self))
        else { return nil }
        return (parent, start)
    }

    /// True when `pid` is `ancestor` or one of its descendants. `lookup` gives a
    /// pid's parent and start time (injectable for tests).
    static func descends(
        _ pid: Int32, from ancestor: ProcessStamp,
        lookup: (Int32) -> (parent: Int32, start: UInt64)? = parentAndStart
    ) -> Bool {
        var current = pid
        for _ in 0..<maximumDepth {
            guard current > 0, let info = lookup(current) else { return false }
            if current == ancestor.pid { return info.start == ancestor.startTime }
            // A parent always started no later than its child; a later start means the
            // ancestor's pid was recycled, and the chain cannot lead to it any more.
            if info.start < ancestor.startTime { return false }
            current = info.parent
        }
        return false
    }
}
