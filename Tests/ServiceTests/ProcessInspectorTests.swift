import Foundation
import Glibc
import Synchronization
import Testing
@testable import Service
import TestSupport

@Suite struct ProcessInspectorTests {
    @Test func startTimeSurvivesParenthesesInTheCommandName() {
        let fields = (3...30).map(String.init).joined(separator: " ")
        let stat = Array("4242 (evil) (x) y) \(fields)\n".utf8)
        // Field 22 is the 20th after the command name: the values above start at 3.
        #expect(Lineage.parse(stat: stat)?.parent == 4)
        #expect(Lineage.parse(stat: stat)?.start == 22)
        #expect(Lineage.parse(stat: Array("4242 (short) S 1 2".utf8)) == nil)
    }

    @Test func keepsOnlyTheVariablesThatLoadCode() {
        let raw = Array("HOME=/root\0LD_PRELOAD=/tmp/a.so\0PYTHONPATH=/x=y\0NOEQUALS\0".utf8)
        #expect(ProcessInspector.relevantVariables(raw) == ["LD_PRELOAD": "/tmp/a.so", "PYTHONPATH": "/x=y"])
    }

    @Test func flatpakInfoIsReadOnlyFromLocalFileSystems() {
        let flatpak = """
            2431 2380 0:118 / / rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=4096k,uid=1000
            2432 2431 259:2 /usr /usr ro,nosuid,nodev,relatime master:1 - ext4 /dev/nvme0n1p2 rw
            2440 2431 0:45 /user/1000/.flatpak/2316139651/info /.flatpak-info ro,nosuid,nodev - tmpfs tmpfs rw,size=3280664k
            """
        #expect(ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: flatpak))
        let fuseRoot = "2431 2380 0:118 / / rw,nosuid - fuse.evil evil rw,user_id=1000,group_id=1000\n"
        #expect(!ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: fuseRoot))
        let fuseInfo = flatpak + "\n2450 2431 0:99 / /.flatpak-info rw - fuse evil rw,user_id=1000\n"
        #expect(!ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: fuseInfo))
        let overlay = "2431 2380 0:118 / / rw - overlay overlay rw,lowerdir=/a,upperdir=/b\n"
        #expect(!ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: overlay))
        #expect(!ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: ""))
        // A tmpfs mounted over a FUSE root later hides it.
        #expect(ProcessInspector.flatpakInfoIsSafeToRead(mountinfo: fuseRoot + "2500 2431 0:50 / / rw - tmpfs tmpfs rw\n"))
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

@Suite struct LineageTests {
    /// pid → (parent, start): 1 ← 100 ← 200 ← 300, and 400 (a recycled 100's pid would start later).
    static let tree: [Int32: (parent: Int32, start: UInt64)] = [
        1: (0, 1), 100: (1, 500), 200: (100, 600), 300: (200, 700), 400: (1, 800),
    ]
    static func lookup(_ pid: Int32) -> (parent: Int32, start: UInt64)? { tree[pid] }

    @Test func theOwnerAndItsDescendantsPass() {
        let owner = ProcessStamp(pid: 100, startTime: 500)
        for pid: Int32 in [100, 200, 300] {
            #expect(Lineage.descends(pid, from: owner, lookup: Self.lookup), "\(pid)")
        }
    }

    @Test func othersDoNot() {
        let owner = ProcessStamp(pid: 100, startTime: 500)
        #expect(!Lineage.descends(400, from: owner, lookup: Self.lookup))
        #expect(!Lineage.descends(1, from: owner, lookup: Self.lookup))
        #expect(!Lineage.descends(999, from: owner, lookup: Self.lookup))
    }

    @Test func aRecycledPidDoesNotPass() {
        // The owner was pid 100 started at tick 450; pid 100 now is another process.
        #expect(!Lineage.descends(300, from: ProcessStamp(pid: 100, startTime: 450), lookup: Self.lookup))
    }

    @Test func ownProcessTree() {
        guard let me = Lineage.stamp(of: getpid()) else {
            Issue.record("cannot read /proc/self/stat")
            return
        }
        #expect(Lineage.descends(getpid(), from: me))
        #expect(!Lineage.descends(1, from: me))
    }
}

/// A process whose /.flatpak-info is a FUSE mount that never answers (its own mount
/// namespace, a tmpfs root, /dev/fuse opened and never read): reading it would hang the
/// thread that identifies clients, the accept loop. The inspector must not touch it.
@Suite struct FrozenFileSystemTests {
    static let helper = """
        import ctypes, os, sys, time
        libc = ctypes.CDLL(None, use_errno=True)
        root = sys.argv[1]
        os.makedirs(root, exist_ok=True)
        if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
            sys.exit("unshare: %d" % ctypes.get_errno())
        libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
        if libc.mount(b"none", root.encode(), b"tmpfs", 0, None) != 0:
            sys.exit("mount tmpfs: %d" % ctypes.get_errno())
        info = os.path.join(root, ".flatpak-info")
        os.mkdir(info)
        fd = os.open("/dev/fuse", os.O_RDWR)
        opts = ("fd=%d,rootmode=40000,user_id=0,group_id=0" % fd).encode()
        if libc.mount(b"hang", info.encode(), b"fuse.hang", 0, opts) != 0:
            sys.exit("mount fuse: %d" % ctypes.get_errno())
        os.chroot(root)
        print("ready", flush=True)
        time.sleep(600)
        """

    @Test func aFuseFlatpakInfoThatNeverAnswersIsNotRead() async throws {
        // Mounting FUSE in a namespace of its own needs root here (or user namespaces with FUSE).
        guard getuid() == 0, unsafe access("/dev/fuse", R_OK | W_OK) == 0 else { return }
        let dir = try TempDir.make(prefix: "earmuff-fuse")
        defer { TempDir.remove(dir) }
        try Self.helper.write(toFile: "\(dir)/hang.py", atomically: true, encoding: .utf8)
        let child = try ChildProcess.spawn(
            executable: findExecutable("python3") ?? "/usr/bin/python3",
            arguments: ["\(dir)/hang.py", "\(dir)/root"], environment: [:],
            stdoutPath: "\(dir)/out", stderrPath: "\(dir)/err", maxLifetime: 120)
        defer { _ = child.terminate(signal: SIGKILL, grace: 1) }
        let ready = await Wait.until(timeout: 30) { child.stdoutData().starts(with: Array("ready".utf8)) || !child.isRunning }
        try #require(ready && child.isRunning, "helper: \(child.stderrText())")

        // Atomics only: the thread sanitizer (which runs ProxyTests) cannot follow Synchronization.Mutex.
        final class Outcome: Sendable { let done = Atomic<Bool>(false); let readInfo = Atomic<Bool>(false) }
        let outcome = Outcome()
        let pid = child.pid
        Thread.detachNewThread {
            let facts = ProcessInspector.facts(pid: pid, uid: 0, gid: 0, launcherAppID: nil)
            outcome.readInfo.store(facts.flatpakInfo != nil, ordering: .relaxed)
            outcome.done.store(true, ordering: .releasing)
        }
        let finished = await Wait.until(timeout: 10) { outcome.done.load(ordering: .acquiring) }
        // (Before this was fixed the thread stayed in open(2) until the helper died.)
        #expect(finished, "identifying the process hung on its FUSE /.flatpak-info")
        let readInfo = outcome.readInfo.load(ordering: .relaxed)
        #expect(!readInfo)
    }
}
