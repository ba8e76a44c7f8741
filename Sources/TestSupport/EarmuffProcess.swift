import Foundation
import Glibc
import Synchronization

/// The built `earmuff` binary running `serve` in front of an upstream server,
/// with every XDG directory and HOME private to a temp directory, so it never
/// touches the user's store, config or sockets. stderr (its log) goes to a file
/// for diagnostics. Keep it alive for the whole test (`defer { earmuff.stop() }`).
public final class EarmuffProcess: Sendable {
    /// The private directory (XDG tree, listen socket, logs).
    public let directory: String
    /// Where apps connect (`--listen`).
    public let listenPath: String
    /// `unix:<listenPath>`, the PULSE_SERVER value for apps.
    public var serverString: String { "unix:\(listenPath)" }
    /// The private XDG_RUNTIME_DIR (the default control socket lives under it).
    public let runtimeDir: String
    /// The default control socket path, `$XDG_RUNTIME_DIR/earmuff/control`.
    public var controlPath: String { "\(runtimeDir)/earmuff/control" }
    /// The environment earmuff runs with (private HOME and XDG dirs).
    public let environment: [String: String]
    /// The binary that was started.
    public let binary: String
    /// The process.
    public let process: ChildProcess

    private let stopped = Mutex(false)

    /// Starts `earmuff serve --listen <dir>/native --upstream <upstream>` plus
    /// `extraArguments`, and waits up to `startTimeout` seconds for its
    /// `PULSE_SERVER=` line (or for the listening socket to accept).
    /// With `runAs` (a uid, for tests running as root) earmuff runs as that user and group
    /// through `setpriv`, its directory owned by them. With `relayOnly`, the relay alone
    /// runs instead (`earmuff-relay`, no consent service: every stream is real).
    public init(
        upstream: String, extraArguments: [String] = [], environment extra: [String: String] = [:],
        startTimeout: Double = 60, maxLifetime: Int = 1800, runAs: UInt32? = nil, relayOnly: Bool = false
    ) throws {
        let binary = try relayOnly ? Self.locateBinary(named: "earmuff-relay") : Self.locateBinary()
        let dir = try TempDir.make(prefix: "earmuff-e2e")
        self.binary = binary
        directory = dir
        listenPath = "\(dir)/native"
        runtimeDir = "\(dir)/run"
        var env = Tool.privateEnvironment(root: dir)
        env.merge(extra) { _, new in new }
        environment = env
        do {
            for sub in ["run", "home", "config", "state", "cache", "data"] {
                try TempDir.makeDirectory("\(dir)/\(sub)")
            }
            var command = [binary] + (relayOnly ? [] : ["serve"]) + ["--listen", listenPath, "--upstream", upstream] + extraArguments
            if let uid = runAs {
                guard let setpriv = findExecutable("setpriv") else { throw TestSupportError("setpriv (util-linux) not found") }
                for sub in ["", "/run", "/home", "/config", "/state", "/cache", "/data"] { unsafe chown(dir + sub, uid, uid) }
                command = [setpriv, "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + command
            }
            process = try ChildProcess.spawn(
                executable: command[0],
                arguments: Array(command.dropFirst()),
                environment: env, stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr.log",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
        do {
            try waitUntilListening(timeout: startTimeout)
        } catch {
            stop()
            throw error
        }
    }

    private func waitUntilListening(timeout: Double) throws {
        let ready = Wait.untilBlocking(timeout: timeout, interval: 0.02) {
            if !process.isRunning { return true }
            if printedServerLine { return true }
            // Not by connecting: a connection, even one that sends nothing, is a client that
            // earmuff remembers as an app.
            return UnixSocket.isListening(listenPath, heldBy: process.pid)
        }
        guard process.isRunning else {
            throw TestSupportError("earmuff exited during startup (status \(process.poll() ?? -1)); stdout: \(stdoutText())\nstderr:\n\(log())")
        }
        guard ready else {
            throw TestSupportError("earmuff did not start listening within \(timeout) s; stdout: \(stdoutText())\nstderr:\n\(log())")
        }
    }

    /// Whether earmuff printed `PULSE_SERVER=unix:<listenPath>` on stdout.
    public var printedServerLine: Bool {
        stdoutText().split(separator: "\n").contains { $0 == "PULSE_SERVER=\(serverString)" }
    }

    /// What earmuff printed on stdout so far.
    public func stdoutText() -> String { String(decoding: process.stdoutData(), as: UTF8.self) }

    /// earmuff's log (stderr) so far.
    public func log() -> String { process.stderrText() }

    /// Runs another `earmuff` subcommand (status, apps, grant…) with the same
    /// private environment, so it finds this instance's default control socket.
    /// `extraEnvironment` is added to it (e.g. a PATH of test programs).
    public func runCLI(
        _ arguments: [String], extraEnvironment: [String: String] = [:],
        timeout: Double = 30
    ) throws -> ToolResult {
        let out = "\(directory)/cli-\(UInt32.random(in: 0...UInt32.max))"
        let child = try ChildProcess.spawn(
            executable: binary, arguments: arguments, environment: environment.merging(extraEnvironment) { _, new in new },
            stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr", maxLifetime: Int(timeout) + 30)
        defer {
            try? FileManager.default.removeItem(atPath: "\(out).stdout")
            try? FileManager.default.removeItem(atPath: "\(out).stderr")
        }
        return child.finish(timeout: timeout)
    }

    /// Runs an `earmuff` client subcommand like `runCLI`, and throws with its
    /// output unless it exits 0 (e.g. `try earmuff.control("grant", key)`).
    @discardableResult
    public func control(_ arguments: String..., timeout: Double = 30) throws -> ToolResult {
        let result = try runCLI(arguments, timeout: timeout)
        guard result.succeeded else { throw TestSupportError("earmuff \(arguments.joined(separator: " ")) failed: \(result)\nearmuff log:\n\(log())") }
        return result
    }

    /// Stops earmuff (SIGTERM, then SIGKILL after `grace` seconds) and removes its
    /// directory. Returns the exit status (nil if it was already stopped).
    @discardableResult
    public func stop(grace: Double = 5) -> Int32? {
        let first = stopped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return nil }
        let status = process.terminate(signal: SIGTERM, grace: grace)
        TempDir.remove(directory)
        return status
    }

    deinit { stop() }

    /// The `earmuff` binary: `$EARMUFF_BINARY`, else next to the running test
    /// bundle (`.build/<triple>/debug/earmuff`); another of the package's programs
    /// (`earmuff-relay`) is looked for next to the bundle only.
    public static func locateBinary(named name: String = "earmuff") throws -> String {
        if name == "earmuff", let explicit = ProcessInfo.processInfo.environment["EARMUFF_BINARY"], !explicit.isEmpty {
            guard unsafe access(explicit, X_OK) == 0 else { throw TestSupportError("EARMUFF_BINARY=\(explicit) is not executable") }
            return explicit
        }
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
            // The test executable may sit inside a bundle directory (…/debug/X.xctest/…).
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent(name).path)
                dir = dir.deletingLastPathComponent()
            }
        }
        for candidate in candidates where unsafe access(candidate, X_OK) == 0 {
            var st = stat()
            if unsafe stat(candidate, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG { return candidate }
        }
        throw TestSupportError(
            "\(name) binary not found (looked at \(candidates)); build it (swift build)"
                + (name == "earmuff" ? " or set EARMUFF_BINARY" : ""))
    }
}

/// Minimal Unix sockets for tests: readiness probes and plain listeners.
public enum UnixSocket {
    /// A blocking, close-on-exec stream socket bound to `path` and listening.
    public static func listen(_ path: String, backlog: Int32 = 16) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(fd)
            throw TestSupportError("socket path too long: \(path)")
        }
        unsafe withUnsafeMutableBytes(of: &addr.sun_path) { unsafe $0.copyBytes(from: bytes) }
        let rc = unsafe withUnsafePointer(to: &addr) {
            unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0, Glibc.listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            throw TestSupportError("bind/listen \(path): errno \(e)")
        }
        return fd
    }

    /// Whether a socket that process `pid` holds listens at `path` now, told without connecting
    /// to it (a connection, even one that sends nothing, is a client earmuff remembers).
    ///
    /// Not by finding the path in /proc/net/unix: reading that file walks the kernel's table of
    /// Unix sockets a page at a time, each read resuming at a bucket and a position in it saved
    /// by the one before, so a socket closed meanwhile ahead of ours in its bucket moves ours
    /// back past the resume point and the walk skips it. With sockets coming and going (a test
    /// run's servers and clients) a socket listening all along was now and then not found.
    /// Instead, the sockets `pid` holds (its descriptors, `socket:[INODE]` in /proc/PID/fd) are
    /// each asked about by inode through sock_diag (NETLINK_SOCK_DIAG, UNIX_DIAG for one inode):
    /// an exact lookup under the table's lock, which cannot skip a socket that exists, and
    /// which gives its state and bound path. Only where the kernel has no unix_diag is the
    /// table read instead, for those inodes.
    public static func isListening(_ path: String, heldBy pid: pid_t) -> Bool {
        let inodes = socketInodes(of: pid)
        guard !inodes.isEmpty else { return false }
        let diag = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard diag >= 0 else { return listedAsListening(path, inodes: inodes) }
        defer { close(diag) }
        for inode in inodes {
            switch unixSocket(inode: inode, via: diag) {
            case .socket(let listening, let bound): if listening && bound == path { return true }
            case .none: continue
            case .unanswered: return listedAsListening(path, inodes: inodes)
            }
        }
        return false
    }

    /// The inodes of the sockets among `pid`'s descriptors.
    static func socketInodes(of pid: pid_t) -> [UInt32] {
        let dir = "/proc/\(pid)/fd"
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return fds.compactMap { fd in
            guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(dir)/\(fd)"),
                link.hasPrefix("socket:["), link.hasSuffix("]")
            else { return nil }
            return UInt32(link.dropFirst("socket:[".count).dropLast())
        }
    }

    private static let netlinkSockDiag: Int32 = 4 // NETLINK_SOCK_DIAG
    private static let sockDiagByFamily: UInt16 = 20 // SOCK_DIAG_BY_FAMILY
    private static let tcpListen: UInt8 = 10 // the state of a listening Unix socket

    /// What sock_diag says of one Unix socket.
    enum DiagAnswer: Equatable {
        /// It exists: whether it listens, and the path it is bound to (nil: none).
        case socket(listening: Bool, path: String?)
        /// No Unix socket has that inode.
        case none
        /// No answer to read (no unix_diag in this kernel).
        case unanswered
    }

    /// Asks sock_diag (the netlink socket `diag`) about the Unix socket with `inode`.
    static func unixSocket(inode: UInt32, via diag: Int32) -> DiagAnswer {
        var request: [UInt8] = []
        func put<T: FixedWidthInteger>(_ v: T) { unsafe withUnsafeBytes(of: v) { unsafe request += $0 } }
        // struct nlmsghdr: length, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, sequence, port (the kernel's).
        put(UInt32(40)); put(sockDiagByFamily); put(UInt16(1)); put(UInt32(1)); put(UInt32(0))
        // struct unix_diag_req: AF_UNIX, protocol, pad, every state, the inode, UDIAG_SHOW_NAME,
        // and no cookie (INET_DIAG_NOCOOKIE twice).
        put(UInt8(AF_UNIX)); put(UInt8(0)); put(UInt16(0)); put(UInt32.max); put(inode); put(UInt32(1))
        put(UInt32.max); put(UInt32.max)
        guard unsafe send(diag, request, request.count, 0) == request.count else { return .unanswered }
        // The kernel answers within send(): the reply is queued by now.
        var reply = [UInt8](repeating: 0, count: 8192)
        let n = unsafe recv(diag, &reply, reply.count, Int32(MSG_DONTWAIT))
        guard n >= 16 else { return .unanswered }
        func u16(_ at: Int) -> UInt16 { unsafe reply.withUnsafeBytes { unsafe $0.loadUnaligned(fromByteOffset: at, as: UInt16.self) } }
        func u32(_ at: Int) -> UInt32 { unsafe reply.withUnsafeBytes { unsafe $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) } }
        let length = min(Int(u32(0)), n)
        switch u16(4) {
        case 2: // NLMSG_ERROR: -ENOENT for an inode that is no Unix socket
            return length >= 20 && Int32(bitPattern: u32(16)) == -ENOENT ? .none : .unanswered
        case sockDiagByFamily where length >= 32 && u32(20) == inode:
            // struct unix_diag_msg (family, type, state, pad, inode, cookie), then attributes.
            var path: String?
            var at = 32
            while at + 4 <= length {
                let size = Int(u16(at)), type = u16(at + 2)
                guard size >= 4, at + size <= length else { break }
                if type == 0 { // UNIX_DIAG_NAME: sun_path as bound, with its NUL
                    path = String(decoding: reply[(at + 4)..<(at + size)].prefix { $0 != 0 }, as: UTF8.self)
                }
                at += (size + 3) & ~3
            }
            return .socket(listening: reply[18] == tcpListen, path: path)
        default:
            return .unanswered
        }
    }

    /// The fallback where sock_diag does not answer: a line of /proc/net/unix for one of
    /// `inodes`, bound to `path`, with the listening flag (__SO_ACCEPTCON). It can miss a
    /// line while other sockets come and go (see `isListening`).
    private static func listedAsListening(_ path: String, inodes: [UInt32]) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8) else { return false }
        let wanted = Set(inodes)
        return table.split(separator: "\n").dropFirst().contains { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, let flags = UInt32(fields[3], radix: 16), let inode = UInt32(fields[6]) else { return false }
            return flags & 0x10000 != 0 && wanted.contains(inode) && fields[7...].joined(separator: " ") == path
        }
    }

    /// Whether a stream connection to `path` succeeds right now.
    public static func canConnect(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        unsafe withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            unsafe buf.copyBytes(from: bytes)
            unsafe buf[bytes.count] = 0
        }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        let rc = unsafe withUnsafePointer(to: &addr) {
            unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe connect(fd, $0, len) }
        }
        return rc == 0
    }
}
