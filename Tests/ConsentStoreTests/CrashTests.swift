import Consent
import ConsentStore
import Glibc
import Testing

/// The key of decision `seq` written in round `round` of the crash test.
private func crashKey(round: Int, seq: Int64) -> AppKey {
    AppKey(kind: "exe", value: "/crash/\(round)/\(seq)")
}

/// The decision the child writes for `seq`: its state and purpose encode the sequence number.
private func crashDecision(round: Int, seq: Int64) -> Decision {
    Decision(
        appKey: crashKey(round: round, seq: seq), state: seq % 2 == 0 ? .granted : .denied,
        reason: .user, purpose: "round \(round) seq \(seq)", decidedAt: Double(seq))
}

/// The forked child: opens its own connection, writes decisions in a loop and reports each
/// sequence number over `fd` once `setDecision` has returned (i.e. committed). Calls only store
/// code, `write` and `_exit`, and never returns into the test runner.
private func crashWriter(path: String, round: Int, fd: Int32) -> Never {
    do {
        let store = try PermissionStore(path: path)
        for seq in Int64(0)..<1_000_000 {
            try store.setDecision(crashDecision(round: round, seq: seq))
            var word = seq
            let written = unsafe withUnsafeBytes(of: &word) { unsafe write(fd, $0.baseAddress, $0.count) }
            if written != MemoryLayout<Int64>.size { _exit(3) }
        }
        _exit(0)
    } catch {
        _exit(2)
    }
}

/// Reads the sequence numbers the child reports until `enough` have arrived (then SIGKILLs it)
/// and on until the pipe closes; returns every reported number and the child's wait status.
private func superviseChild(pid: pid_t, fd: Int32, enough: Int, deadlineSeconds: Int) -> (reported: [Int64], status: Int32, timedOut: Bool) {
    var reported: [Int64] = []
    var pending: [UInt8] = []
    var killed = false
    var timedOut = false
    var chunk = [UInt8](repeating: 0, count: 4096)
    var waited = 0
    while true {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = unsafe poll(&pfd, 1, 100)
        if ready == 0 {
            waited += 100
            if !killed && waited >= deadlineSeconds * 1000 {
                // No progress: kill the child so the test fails instead of hanging.
                timedOut = true
                kill(pid, SIGKILL)
                killed = true
            }
            continue
        }
        if ready < 0 {
            if errno == EINTR { continue }
            break
        }
        let n = unsafe chunk.withUnsafeMutableBytes { unsafe read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break } // EOF: the child is gone and the pipe is drained.
        pending += chunk[0..<n]
        while pending.count >= 8 {
            var value: Int64 = 0
            unsafe withUnsafeMutableBytes(of: &value) { unsafe $0.copyBytes(from: pending[0..<8]) }
            reported.append(value)
            pending.removeFirst(8)
        }
        if !killed && reported.count >= enough {
            kill(pid, SIGKILL)
            killed = true
        }
    }
    var status: Int32 = 0
    while unsafe waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (reported, status, timedOut)
}

extension StoreTests {
    /// A writer killed with SIGKILL in the middle of a burst loses no decision it reported as
    /// committed, and leaves a file that passes integrity_check. Three rounds on one file, so
    /// each round also starts from the WAL a killed writer left behind.
    @Test func committedDecisionsSurviveSIGKILL() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/state/earmuff/permissions.sqlite"

        // Create the schema here, and run the child's code path once on another file, so the
        // child runs nothing for the first time (no lazy runtime initialization after fork).
        try PermissionStore(path: path).close()
        do {
            let warm = try PermissionStore(path: dir.path + "/warm.sqlite")
            try warm.setDecision(crashDecision(round: 9, seq: 1))
            warm.close()
        }

        var expected: [(round: Int, seq: Int64)] = []
        for round in 0..<3 {
            var fds: [Int32] = [-1, -1]
            unsafe #expect(pipe(&fds) == 0)
            let pid = fork()
            if pid == 0 {
                close(fds[0])
                crashWriter(path: path, round: round, fd: fds[1])
            }
            close(fds[1])
            #expect(pid > 0, "fork failed: errno \(errno)")
            guard pid > 0 else { close(fds[0]); return }

            // Kill at a different point each round.
            let (reported, status, timedOut) = superviseChild(
                pid: pid, fd: fds[0], enough: 150 + 67 * round,
                deadlineSeconds: 60)
            close(fds[0])
            #expect(!timedOut, "the forked writer made no progress in 60 s")
            #expect(status & 0x7f == SIGKILL, "the writer should die by SIGKILL, wait status \(status)")
            #expect(reported.count >= 150 + 67 * round)
            #expect(reported == (0..<Int64(reported.count)).map { $0 })
            expected += reported.map { (round, $0) }
        }

        let store = try PermissionStore(path: path)
        #expect(try store.integrityCheck() == "ok")
        var missing: [String] = []
        for (round, seq) in expected
        where try store.decision(for: crashKey(round: round, seq: seq))
            != crashDecision(round: round, seq: seq)
        {
            missing.append("\(round)/\(seq)")
        }
        #expect(missing.isEmpty, "reported-committed decisions lost: \(missing.prefix(20))")
        // Nothing but what the writers wrote (at most one unreported commit per round).
        let count = try store.allDecisions().count
        #expect(count >= expected.count && count <= expected.count + 3)
    }
}
