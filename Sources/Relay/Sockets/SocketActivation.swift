// systemd's socket-activation protocol (sd_listen_fds(3)), implemented here
// rather than through libsystemd: the service manager passes listening sockets
// as descriptors 3, 4, … and says so in the environment:
//
//   LISTEN_PID      the pid the descriptors are meant for (ours, or ignore them)
//   LISTEN_FDS      how many descriptors, from 3 on
//   LISTEN_FDNAMES  optional, colon-separated names (FileDescriptorName=)
//
// Earmuff takes the one whose bound path is its listen path, so the socket
// (and its inode, which Flatpak sandboxes hold a bind mount of) outlives every
// restart of the daemon, and apps that connect meanwhile wait in its backlog.
// The variables are removed from the environment so children never see them.
import Glibc
import LinuxSystem

/// One descriptor passed by the service manager.
public struct PassedSocket: Equatable, Sendable {
    /// The descriptor number (3 and up).
    public let fd: Int32
    /// Its `LISTEN_FDNAMES` entry, if any.
    public let name: String?

    public init(fd: Int32, name: String?) {
        self.fd = fd
        self.name = name
    }
}

/// A socket-activation environment that cannot be used.
public struct SocketActivationError: Error, CustomStringConvertible, Equatable, Sendable {
    public let description: String
}

/// Parsing and matching of socket-activated descriptors.
public enum SocketActivation {
    /// The first passed descriptor (`SD_LISTEN_FDS_START`).
    public static let firstFD: Int32 = 3
    /// The variables of the protocol.
    public static let variables = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"]

    /// The descriptors `environment` passes to process `pid`: empty when there
    /// is no `LISTEN_FDS`, or when `LISTEN_PID` names another process (the
    /// variables were inherited, the sockets are not ours).
    public static func passedSockets(
        environment: [String: String], pid: Int32,
        firstFD: Int32 = firstFD
    ) throws(SocketActivationError) -> [PassedSocket] {
        guard let countText = environment["LISTEN_FDS"] else { return [] }
        guard let pidText = environment["LISTEN_PID"] else {
            throw SocketActivationError(description: "LISTEN_FDS=\(countText) without LISTEN_PID; the service manager sets both (or unset LISTEN_FDS)")
        }
        guard let listenPID = Int32(pidText), listenPID > 0 else {
            throw SocketActivationError(description: "LISTEN_PID=\"\(pidText)\" is not a process id; unset it, or start earmuff from systemd")
        }
        if listenPID != pid { return [] }
        guard let count = Int32(countText), count >= 0, count <= 1024 else {
            throw SocketActivationError(description: "LISTEN_FDS=\"\(countText)\" is not a descriptor count; unset it, or start earmuff from systemd")
        }
        var names: [String?] = Array(repeating: nil, count: Int(count))
        if let namesText = environment["LISTEN_FDNAMES"] {
            let parts = namesText.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            for (i, part) in parts.enumerated() where i < names.count && !part.isEmpty { names[i] = part }
        }
        return (0..<count).map { PassedSocket(fd: firstFD + $0, name: names[Int($0)]) }
    }

    /// The listening stream socket among `passed` that is bound to `path`.
    /// nil when nothing was passed. Throws when sockets were passed but none
    /// listens on `path` (a unit whose `ListenStream=` disagrees with
    /// `--listen`), naming what was passed and the fix.
    public static func listener(for path: String, among passed: [PassedSocket]) throws(SocketActivationError) -> Int32? {
        if passed.isEmpty { return nil }
        var seen: [String] = []
        for p in passed {
            switch inspect(p.fd) {
            case .listening(let bound):
                if bound == path { return p.fd }
                seen.append("fd \(p.fd)\(p.name.map { " (\($0))" } ?? ""): \(bound.isEmpty ? "unnamed socket" : bound)")
            case .other(let what):
                seen.append("fd \(p.fd)\(p.name.map { " (\($0))" } ?? ""): \(what)")
            }
        }
        throw SocketActivationError(
            description:
                "the service manager passed \(passed.count) socket(s), none listening on \(path) [\(seen.joined(separator: "; "))]; make ListenStream= in earmuff.socket and --listen name the same path"
        )
    }

    /// Takes the socket for `path` from this process's environment and removes
    /// the variables (so children do not inherit them). The socket is made
    /// non-blocking and close-on-exec; other passed descriptors get
    /// close-on-exec too.
    public static func takeListener(for path: String, environment: [String: String]) throws(SocketActivationError) -> Int32? {
        defer { for v in variables { unsafe unsetenv(v) } }
        let passed = try passedSockets(environment: environment, pid: getpid())
        for p in passed {
            let flags = fcntl(p.fd, F_GETFD)
            if flags >= 0 { _ = fcntl(p.fd, F_SETFD, flags | FD_CLOEXEC) }
        }
        guard let fd = try listener(for: path, among: passed) else { return nil }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw SocketActivationError(description: "cannot make the passed socket \(path) non-blocking: \(Errno.current)")
        }
        return fd
    }

    enum Kind: Equatable {
        case listening(path: String)
        case other(String)
    }

    /// What descriptor `fd` is: a listening Unix stream socket and its bound
    /// path, or a description of why it is not one.
    static func inspect(_ fd: Int32) -> Kind {
        var st = stat()
        guard unsafe fstat(fd, &st) == 0 else { return .other("not open") }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else { return .other("not a socket") }
        var type: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard unsafe getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0, type == Int32(SOCK_STREAM.rawValue) else {
            return .other("not a stream socket")
        }
        var accepting: Int32 = 0
        len = socklen_t(MemoryLayout<Int32>.size)
        guard unsafe getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0, accepting != 0 else {
            return .other("not listening")
        }
        var addr = sockaddr_un()
        var addrLen = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = unsafe withUnsafeMutablePointer(to: &addr) {
            unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe getsockname(fd, $0, &addrLen) }
        }
        guard rc == 0, addr.sun_family == sa_family_t(AF_UNIX) else { return .other("not a Unix socket") }
        let pathBytes = Int(addrLen) - MemoryLayout<sa_family_t>.size
        let path: String = unsafe withUnsafeBytes(of: &addr.sun_path) { raw in
            let bytes = unsafe raw.prefix(max(0, min(pathBytes, raw.count)))
            // Abstract sockets start with a NUL; they have no path to match.
            if unsafe bytes.first == 0 { return "" }
            return unsafe String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return .listening(path: path)
    }
}
