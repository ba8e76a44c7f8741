// Failures of the relay's system calls, with what was being done. The calls themselves
// (and their `Errno`) are in LinuxSystem.
import LinuxSystem

/// A failed system call, with its errno and what was being done.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    /// The call or action that failed, e.g. "connect /run/user/0/pulse/native".
    public let action: String
    public let errno: Errno

    public init(_ action: String, _ errno: Errno) {
        self.action = action
        self.errno = errno
    }

    public var description: String { "\(action): \(errno)" }
}

/// Creates the missing directories of `path`'s parent, mode 0700.
public func makeParentDirectory(of path: String) throws(SystemError) {
    do {
        try PrivateDirectories.createParents(of: path)
    } catch {
        throw SystemError(error.operation, error.errno)
    }
}
