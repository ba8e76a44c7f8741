// The daemon's private directories (the store's, the sockets'), made in one place.
import Glibc

/// The one helper that makes the daemon's private directories (the store's,
/// the sockets'): every missing parent of a path, mode 0700 exactly.
public enum PrivateDirectories {
    /// A directory could not be made or is not one.
    public struct Failure: Error, Sendable {
        /// What failed, e.g. "mkdir /run/user/1000/earmuff".
        public let operation: String
        public let errno: Errno
    }

    /// Creates every missing parent directory of `path` with mode 0700 (existing ones are left
    /// alone: `~/.local` belongs to the user, not to us). A relative path starts at ".".
    public static func createParents(of path: String) throws(Failure) {
        var components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else { return }
        components.removeLast()
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in components {
            prefix += "/" + component
            if unsafe mkdir(prefix, 0o700) == 0 {
                // mkdir honours the umask; set the exact mode on what we created.
                guard unsafe chmod(prefix, 0o700) == 0 else { throw Failure(operation: "chmod 0700 \(prefix)", errno: .current) }
                continue
            }
            let failure = Errno.current
            var info = stat()
            guard failure == .fileExists, unsafe stat(prefix, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                throw Failure(operation: "mkdir \(prefix)", errno: failure == .fileExists ? .notDirectory : failure)
            }
        }
    }
}
