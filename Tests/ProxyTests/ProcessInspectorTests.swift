import Glibc
import Testing
@testable import Proxy

@Suite struct ProcessInspectorTests {
    @Test func startTimeSurvivesParenthesesInTheCommandName() {
        let fields = (3...30).map(String.init).joined(separator: " ")
        let stat = Array("4242 (evil) (x) y) \(fields)\n".utf8)
        // Field 22 is the 20th after the command name: the values above start at 3.
        #expect(ProcessInspector.startTime(fromStat: stat) == 22)
        #expect(ProcessInspector.startTime(fromStat: Array("4242 (short) S 1 2".utf8)) == nil)
    }

    @Test func keepsOnlyTheVariablesThatLoadCode() {
        let raw = Array("HOME=/root\0LD_PRELOAD=/tmp/a.so\0PYTHONPATH=/x=y\0NOEQUALS\0".utf8)
        #expect(ProcessInspector.relevantVariables(raw) == ["LD_PRELOAD": "/tmp/a.so", "PYTHONPATH": "/x=y"])
    }

    @Test func readsItsOwnProcess() {
        let f = ProcessInspector.facts(pid: getpid(), uid: getuid(), gid: getgid(), launcherAppID: nil)
        #expect(f.inspectable)
        #expect(f.startTime != nil)
        #expect(!f.foreignMountNamespace)
        #expect(f.environmentComplete)
        #expect(f.exe != nil)
    }

    @Test func aVanishedProcessIsUninspectable() {
        // Pid 2^22 + 1 is above the kernel's pid_max limit, so it never exists.
        let f = ProcessInspector.facts(pid: 4_194_305, uid: getuid(), gid: getgid(), launcherAppID: nil)
        #expect(!f.inspectable)
        #expect(f.exe == nil)
    }
}
