import Glibc
import Relay
import Testing
import TestSupport

/// The socket-activation protocol as systemd speaks it: variables parsed,
/// descriptors matched by bound path, bad environments refused with the fix.
/// The descriptors are placed at a high number (`firstFD`) because the test
/// process already uses 3 and up.
@Suite struct SocketActivationTests {
    @Test func noVariablesMeansNoSockets() throws {
        #expect(try SocketActivation.passedSockets(environment: [:], pid: 42).isEmpty)
        #expect(try SocketActivation.listener(for: "/tmp/x", among: []) == nil)
    }

    @Test func anotherProcessesSocketsAreIgnored() throws {
        // Inherited from a parent that was socket-activated: not for us.
        let env = ["LISTEN_PID": "41", "LISTEN_FDS": "1"]
        #expect(try SocketActivation.passedSockets(environment: env, pid: 42).isEmpty)
    }

    @Test func countsAndNamesAreRead() throws {
        let env = ["LISTEN_PID": "42", "LISTEN_FDS": "3", "LISTEN_FDNAMES": "earmuff.socket::other"]
        let passed = try SocketActivation.passedSockets(environment: env, pid: 42, firstFD: 3)
        #expect(
            passed == [
                PassedSocket(fd: 3, name: "earmuff.socket"), PassedSocket(fd: 4, name: nil),
                PassedSocket(fd: 5, name: "other"),
            ])
    }

    @Test func malformedVariablesAreRefusedWithTheFix() {
        for env in [
            ["LISTEN_FDS": "1"],
            ["LISTEN_PID": "abc", "LISTEN_FDS": "1"],
            ["LISTEN_PID": "42", "LISTEN_FDS": "-1"],
            ["LISTEN_PID": "42", "LISTEN_FDS": "many"],
        ] {
            #expect(throws: SocketActivationError.self) {
                try SocketActivation.passedSockets(environment: env, pid: 42)
            }
        }
    }

    @Test func theSocketBoundToTheListenPathIsChosen() throws {
        let dir = try TempDir.make(prefix: "earmuff-sa")
        defer { TempDir.remove(dir) }
        let other = try listeningSocket("\(dir)/other")
        let wanted = try listeningSocket("\(dir)/native")
        let base = try placeConsecutively([other, wanted])
        defer { close(base); close(base + 1) }
        let env = ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"]
        let passed = try SocketActivation.passedSockets(environment: env, pid: getpid(), firstFD: base)
        #expect(try SocketActivation.listener(for: "\(dir)/native", among: passed) == base + 1)
        #expect(try SocketActivation.listener(for: "\(dir)/other", among: passed) == base)
    }

    @Test func noMatchingSocketNamesWhatWasPassed() throws {
        let dir = try TempDir.make(prefix: "earmuff-sa")
        defer { TempDir.remove(dir) }
        let sock = try listeningSocket("\(dir)/elsewhere")
        var fds: [Int32] = [0, 0]
        unsafe #expect(pipe(&fds) == 0)
        close(fds[1])
        let base = try placeConsecutively([sock, fds[0]])
        defer { close(base); close(base + 1) }
        let passed = [PassedSocket(fd: base, name: "earmuff.socket"), PassedSocket(fd: base + 1, name: nil)]
        do {
            _ = try SocketActivation.listener(for: "\(dir)/native", among: passed)
            Issue.record("a socket on another path was accepted")
        } catch {
            #expect(error.description.contains("\(dir)/elsewhere"))
            #expect(error.description.contains("not a socket"))
            #expect(error.description.contains("ListenStream="))
        }
    }

    @Test func aConnectedSocketIsNotAListener() throws {
        var pair: [Int32] = [0, 0]
        unsafe #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        #expect(throws: SocketActivationError.self) {
            try SocketActivation.listener(for: "/nowhere", among: [PassedSocket(fd: pair[0], name: nil)])
        }
    }

    @Test func takingTheListenerClearsTheVariables() throws {
        unsafe setenv("LISTEN_PID", "1", 1) // not this process: nothing is taken
        unsafe setenv("LISTEN_FDS", "1", 1)
        unsafe setenv("LISTEN_FDNAMES", "x", 1)
        let env = ["LISTEN_PID": "1", "LISTEN_FDS": "1"]
        #expect(try SocketActivation.takeListener(for: "/nowhere", environment: env) == nil)
        for name in SocketActivation.variables { unsafe #expect(getenv(name) == nil) }
    }

    // MARK: helpers

    private func listeningSocket(_ path: String) throws -> Int32 { try UnixSocket.listen(path, backlog: 8) }

    /// Moves `fds` to consecutive free descriptor numbers (as systemd lays
    /// them out from 3) and returns the first. Each number is taken with
    /// `F_DUPFD`, which picks the lowest free one at or above its argument in one
    /// step: a check-then-`dup2` would race the other tests of this process,
    /// which open descriptors at the same time, and could close one of theirs.
    private func placeConsecutively(_ fds: [Int32]) throws -> Int32 {
        var minimum: Int32 = 700
        while true {
            var placed: [Int32] = []
            for fd in fds {
                let wanted = placed.first.map { $0 + Int32(placed.count) } ?? minimum
                let got = fcntl(fd, F_DUPFD, wanted)
                guard got >= 0 else {
                    placed.forEach { close($0) }
                    throw TestSupportError("F_DUPFD: errno \(errno)")
                }
                placed.append(got)
                if got != wanted && placed.count > 1 { break }
            }
            // All of them in a row: the originals are no longer needed.
            if placed.count == fds.count, let first = placed.first, placed.last == first + Int32(fds.count) - 1 {
                fds.forEach { close($0) }
                return first
            }
            placed.forEach { close($0) }
            minimum = (placed.last ?? minimum) + 1
        }
    }
}
