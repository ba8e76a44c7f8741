// The one errno type: every system-call wrapper throws it (`throws(Errno)`), every error
// that carries a system call's cause holds one, and its text comes from strerror here only.
import Glibc

/// An errno value, with a Swift name for the codes Earmuff tells apart.
public struct Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now (read it right after the call that failed).
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// strerror's text, e.g. "Connection refused".
    public var description: String {
        // glibc returns a static string for every code (an "Unknown error N" for others).
        guard let text = unsafe strerror(rawValue) else { return "errno \(rawValue)" }
        return unsafe String(cString: text)
    }

    // Names (as <errno.h> spells them in words).
    public static let operationNotPermitted = Errno(rawValue: EPERM)
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let ioError = Errno(rawValue: EIO)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// EAGAIN, which is also EWOULDBLOCK on Linux.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let noMemory = Errno(rawValue: ENOMEM)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let notConnected = Errno(rawValue: ENOTCONN)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let inProgress = Errno(rawValue: EINPROGRESS)

    // Meanings: what a caller decides on.

    /// The peer is gone: EPIPE or ECONNRESET. One meaning, because whether the kernel reports
    /// FIN or RST, and whether a read or a write sees it first, is timing.
    public var isPeerClosed: Bool { self == .brokenPipe || self == .connectionReset }

    /// A non-blocking socket is not ready yet: try again when the loop says so (EAGAIN), or,
    /// for a connect, it is under way (EINPROGRESS).
    public var isNotReady: Bool { self == .wouldBlock || self == .inProgress }
}

extension Errno {
    /// Runs a call that returns -1 with errno set on failure; returns its result otherwise.
    @inlinable @inline(__always)
    public static func check<R: BinaryInteger>(_ result: R) throws(Errno) -> R {
        if result < 0 { throw Errno.current }
        return result
    }
}
