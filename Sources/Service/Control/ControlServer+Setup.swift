// Setting up the control socket: its directory, a stale or live socket at its path, and
// the errors that name the path.
import Glibc
import LinuxSystem

extension ControlServer {
    static func failure(_ what: String, _ path: String, code: Errno = .current) -> ControlServerError {
        ControlServerError(code: code, "\(what) at \(path) (\(code)); check the path given with --control")
    }

    /// Creates missing directories (mode 0700); refuses a directory anybody may write into.
    static func prepareDirectory(for path: String) throws(ControlServerError) {
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/") else {
            throw ControlServerError(code: .invalidArgument, "the control socket path '\(path)' is not absolute; give a full path with --control")
        }
        let dir = String(path[..<slash])
        guard !dir.isEmpty else { return }
        do {
            try PrivateDirectories.createParents(of: path)
        } catch {
            throw failure("cannot create the directory for the control socket (\(error.operation))", path, code: error.errno)
        }
        // A directory that was there already keeps its mode (it may be /tmp, or a home): the
        // socket is 0600 and every peer's uid is checked. One that anybody may write to without
        // the sticky bit would let anybody replace the socket, so it is refused.
        var st = stat()
        guard unsafe stat(dir, &st) == 0 else { throw failure("cannot inspect the control socket's directory", path) }
        if st.st_mode & 0o002 != 0 && st.st_mode & S_ISVTX == 0 {
            throw ControlServerError(
                code: .permissionDenied,
                "\(dir) is writable by everyone (mode \(String(st.st_mode & 0o7777, radix: 8))), so anybody could replace the control socket at \(path); choose a private directory with --control"
            )
        }
    }

    /// Throws when `path` is something other than a socket, or a socket someone still listens on.
    static func refuseLiveSocket(at path: String) throws(ControlServerError) {
        var st = stat()
        guard unsafe lstat(path, &st) == 0 else { return }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlServerError(code: .fileExists, "\(path) exists and is not a socket; remove it or choose another --control path")
        }
        guard let socket = try? FileDescriptor.unixSocket() else { return }
        let listening: Bool
        do throws(Errno) {
            try socket.connect(to: path)
            listening = true
        } catch {
            listening = error.isNotReady
        }
        if listening {
            throw ControlServerError(code: .addressInUse, "another earmuff daemon is listening at \(path); stop it first, or choose another --control path")
        }
    }
}
