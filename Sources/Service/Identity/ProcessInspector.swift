// Reads what /proc says about a connected peer, for IdentityClassifier.
//
// Called once per accepted client, right after SO_PEERCRED. Every read is
// bounded and non-blocking (a sandbox controls its own /.flatpak-info and
// could make it a FIFO), nothing follows symlinks inside the peer's root, and
// any failure yields nil for that fact: classification then falls back to the
// next, weaker source. A process whose /proc is not the peer's own (it made
// itself non-dumpable) is marked uninspectable and gets a key of its own.

import Consent
import Glibc
import LinuxSystem

/// Gathers `ProcessFacts` for a peer from /proc; never throws.
public enum ProcessInspector {
    /// The most bytes read from any one /proc file.
    public static let maximumFileSize = 64 * 1024

    /// Facts about `pid` (from SO_PEERCRED). When /proc/PID is not owned by `uid`
    /// (the pid was reused, or the process is not dumpable) only the credentials
    /// and `launcherAppID` are returned.
    public static func facts(pid: Int32, uid: UInt32, gid: UInt32, launcherAppID: String?) -> ProcessFacts {
        var facts = ProcessFacts(pid: pid, uid: uid, gid: gid, launcherAppID: launcherAppID, inspectable: false)
        guard pid > 0 else { return facts }
        let dir = "/proc/\(pid)"
        // /proc/PID/stat stays readable for a non-dumpable process.
        facts.startTime = readSmallFile(dir + "/stat").flatMap(Lineage.parse(stat:))?.start
        var st = stat()
        guard unsafe stat(dir, &st) == 0, st.st_uid == uid else { return facts }
        facts.inspectable = true
        if let theirs = readSymbolicLink(dir + "/ns/mnt"), let ours = readSymbolicLink("/proc/self/ns/mnt") {
            facts.foreignMountNamespace = theirs != ours
        }
        if let raw = readSmallFile(dir + "/environ", limit: maximumEnvironmentSize) {
            facts.environmentComplete = raw.count < maximumEnvironmentSize
            facts.environment = relevantVariables(raw)
        } else {
            facts.environmentComplete = false
        }
        facts.exe = readSymbolicLink(dir + "/exe")
        facts.cwd = readSymbolicLink(dir + "/cwd")
        if let raw = readSmallFile(dir + "/cmdline") {
            facts.cmdline = raw.split(separator: 0, omittingEmptySubsequences: false)
                .map { String(decoding: $0, as: UTF8.self) }
            if facts.cmdline.last == "" { facts.cmdline.removeLast() }
        }
        facts.cgroup = readSmallFile(dir + "/cgroup").map { String(decoding: $0, as: UTF8.self) }
        let label = readSmallFile(dir + "/attr/apparmor/current") ?? readSmallFile(dir + "/attr/current")
        facts.apparmorLabel = label.map { String(decoding: $0, as: UTF8.self) }
        // /.flatpak-info lives in a file system the peer chose: read it only where reads cannot hang.
        if let mounts = readSmallFile(dir + "/mountinfo", limit: maximumEnvironmentSize),
            flatpakInfoIsSafeToRead(mountinfo: String(decoding: mounts, as: UTF8.self))
        {
            facts.flatpakInfo = readFlatpakInfo(dir + "/root").map { String(decoding: $0, as: UTF8.self) }
        }
        return facts
    }

    /// Whether `peer` runs one of Earmuff's own programs as installed beside this one: the
    /// executable this process runs (`earmuff`: its agent, `watch`), or the settings window
    /// or the tray indicator next to it, as the kernel reports it, in this mount namespace. (What it loads is not
    /// asked: a program of the uid that could inject code into one could as well run
    /// `earmuff grant` itself; and desktops set GTK_MODULES for every GTK program.)
    public static func runsEarmuffsOwnProgram(_ peer: ControlPeer) -> Bool {
        guard let mine = ownExecutable else { return false }
        let f = facts(pid: peer.pid, uid: peer.uid, gid: peer.gid, launcherAppID: nil)
        guard f.inspectable, !f.foreignMountNamespace, let exe = f.exe.map(IdentityClassifier.cleanExecutablePath) else { return false }
        return exe == mine || exe == settingsProgram || exe == indicatorProgram
    }

    /// The executable this process runs, as the kernel reports it (read once).
    static let ownExecutable = readSymbolicLink("/proc/self/exe").map(IdentityClassifier.cleanExecutablePath)

    /// Where Earmuff Settings is when installed: beside this program.
    static let settingsProgram = besideOwnExecutable("earmuff-settings")
    /// Where the tray indicator is when installed: beside this program.
    static let indicatorProgram = besideOwnExecutable("earmuff-indicator")

    private static func besideOwnExecutable(_ name: String) -> String? {
        ownExecutable.map { $0.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/" + name }
    }

    /// The system's command directories, the only places `linkName` looks a name up.
    static let commandDirectories = ["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"]

    /// The name `pid` was started as, when that is another name for `executable`: its
    /// `argv[0]` names (by its name, or as a path in one of `commandDirectories`) a symbolic
    /// link there that resolves to the executable the kernel reports, as `parecord` does to
    /// /usr/bin/pacat. Nil for the executable's own name, a name that is no such link, or a
    /// process that no longer runs `executable`. For display only: it decides nothing.
    /// Called on the accept loop for every client: it looks only in the system's directories,
    /// never in one the app chose (its argv[0]'s own directory or its working directory), where
    /// a FUSE file system could leave the lookup waiting for ever.
    public static func linkName(pid: Int32, executable: String?) -> String? {
        guard let executable, readSymbolicLink("/proc/\(pid)/exe") == executable,
            let raw = readSmallFile("/proc/\(pid)/cmdline"),
            let first = raw.split(separator: 0, omittingEmptySubsequences: false).first, !first.isEmpty
        else { return nil }
        let argv0 = String(decoding: first, as: UTF8.self)
        let name = argv0.split(separator: "/").last.map(String.init) ?? argv0
        guard name != executable.split(separator: "/").last.map(String.init) else { return nil }
        let directory = argv0.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let candidates =
            !argv0.contains("/")
            ? commandDirectories.map { "\($0)/\(name)" }
            : commandDirectories.contains(directory) ? [argv0] : []
        for path in candidates {
            var st = stat()
            guard unsafe lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK,
                let resolved = unsafe realpath(path, nil)
            else { continue }
            defer { unsafe free(resolved) }
            if unsafe String(cString: resolved) == executable { return name }
        }
        return nil
    }

    /// What changed about the process an identity was read from, or nil when it is still the
    /// same program: it exited (its connection is held by another process), its pid now
    /// names a newer process, or it exec'd another executable. Reads only what the kernel
    /// generates (/proc/PID/stat and the exe link), so it is safe on an I/O loop.
    public static func change(since identity: ClientIdentity) -> String? {
        guard !identity.isUninspectable, identity.pid > 0, let started = identity.startTime else { return nil }
        let dir = "/proc/\(identity.pid)"
        guard let now = readSmallFile(dir + "/stat").flatMap(Lineage.parse(stat:))?.start else {
            return "pid \(identity.pid) has exited and another process holds its connection"
        }
        guard now == started else { return "pid \(identity.pid) is another process now" }
        guard let before = identity.executable else { return nil }
        let exe = readSymbolicLink(dir + "/exe").map(IdentityClassifier.cleanExecutablePath)
        // Unreadable now (it made itself non-dumpable) counts as changed too.
        guard exe == before else { return "it runs \(exe ?? "an executable it hides") now, not \(before)" }
        return nil
    }

    /// File systems whose reads the kernel answers itself (no daemon can make them wait).
    static let localFileSystems: Set<String> = [
        "tmpfs", "ramfs", "ext2", "ext3", "ext4", "btrfs", "xfs", "f2fs",
        "squashfs", "erofs", "vfat", "exfat",
    ]

    /// Whether opening `/.flatpak-info` in the peer's mount namespace touches only local file
    /// systems: the mount it lies on (a bind mount of the file itself, else the root) is one of
    /// `localFileSystems`. A FUSE file system could leave an open or read waiting for ever
    /// (and overlayfs may sit on one). `mountinfo` is the kernel's /proc/PID/mountinfo.
    static func flatpakInfoIsSafeToRead(mountinfo: String) -> Bool {
        var holder: String?
        for line in mountinfo.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 7, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            let point = fields[4]
            // Later lines are mounted over earlier ones; the file's own mount beats the root's.
            if point == "/.flatpak-info" || (point == "/" && holder?.hasPrefix("/.flatpak-info:") != true) {
                holder = "\(point):\(fields[dash + 1])"
            }
        }
        guard let holder, let type = holder.split(separator: ":").last else { return false }
        return localFileSystems.contains(String(type))
    }

    /// `/.flatpak-info` inside the peer's root, when its root is not ours.
    static func readFlatpakInfo(_ rootLink: String) -> [UInt8]? {
        let root = unsafe open(rootLink, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return nil }
        defer { close(root) }
        var theirs = stat()
        var ours = stat()
        guard unsafe fstat(root, &theirs) == 0, unsafe stat("/", &ours) == 0 else { return nil }
        // A host process shares our root; only a sandbox has its own /.flatpak-info.
        if theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino { return nil }
        let fd = unsafe openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard unsafe fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return readAll(fd)
    }

    /// The most bytes read of /proc/PID/environ; a larger environment counts as unreadable
    /// (padding must not push LD_PRELOAD out of sight).
    public static let maximumEnvironmentSize = 1024 * 1024

    /// The `NAME=value` entries of an environ block that `CodeInjection` looks at.
    static func relevantVariables(_ raw: [UInt8]) -> [String: String] {
        var result: [String: String] = [:]
        for entry in raw.split(separator: 0) {
            guard let eq = entry.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: entry[entry.startIndex..<eq], as: UTF8.self)
            guard CodeInjection.isRelevant(Substring(name)) else { continue }
            result[name] = String(decoding: entry[(eq + 1)...], as: UTF8.self)
        }
        return result
    }

    /// The contents of a /proc file, or nil when it cannot be opened or read.
    static func readSmallFile(_ path: String, limit: Int = maximumFileSize) -> [UInt8]? {
        let fd = unsafe open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readAll(fd, limit: limit)
    }

    /// Reads up to `limit` bytes until end of file; nil on a read error.
    static func readAll(_ fd: Int32, limit: Int = maximumFileSize) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let want = min(chunk.count, limit - bytes.count)
            let n = unsafe chunk.withUnsafeMutableBytes { unsafe read(fd, $0.baseAddress, want) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }

    /// The target of a /proc symlink, or nil (unreadable, or longer than PATH_MAX).
}
