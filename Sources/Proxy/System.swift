// Syscalls in layers: CLinux calls Glibc and retries EINTR; this file turns
// results into typed errors. EAGAIN is not an error: callers see `.wouldBlock`.
import CLinux
import ConsentStore
import Glibc

/// A failed system call, with its errno and what was being done.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    /// The errno value.
    public let code: Int32
    /// The call or action that failed, e.g. "connect /run/user/0/pulse/native".
    public let action: String

    public init(_ action: String, code: Int32 = errno) {
        self.code = code
        self.action = action
    }

    public var description: String { "\(action): \(String(cString: strerror(code)))" }
}

/// Result of a non-blocking read or write.
enum IOResult: Equatable {
    case bytes(Int)
    case wouldBlock
    /// The peer is gone: end of file on a read, EPIPE or ECONNRESET on either.
    /// One meaning, because whether the kernel reports FIN or RST, and whether
    /// the read or the write sees it first, is timing.
    case peerClosed
    case failed(Int32)

    /// The result of a call that returned `n` (-1 with `errno` set).
    static func from(_ n: Int, readingZeroIsEOF: Bool) -> IOResult {
        if n > 0 || (n == 0 && !readingZeroIsEOF) { return .bytes(n) }
        if n == 0 { return .peerClosed }
        switch errno {
        case EAGAIN, EWOULDBLOCK: return .wouldBlock
        case EPIPE, ECONNRESET: return .peerClosed
        case let e: return .failed(e)
        }
    }
}

/// Reads into `buffer`, closing every file descriptor that arrives with the data;
/// `senderPID` gets the pid of the process that sent the bytes (0 when unknown).
func readClosingFDs(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, closedFDs: inout Int32,
                    senderPID: inout Int32) -> IOResult {
    .from(earmuff_recv_closing_fds(fd, buffer.baseAddress, buffer.count, &closedFDs, &senderPID), readingZeroIsEOF: true)
}

/// Writes up to two regions with one sendmsg (no SIGPIPE).
func writeRegions(_ fd: Int32, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> IOResult {
    .from(earmuff_send2(fd, a.baseAddress, a.count, b.baseAddress, b.count), readingZeroIsEOF: false)
}

/// Writes up to three regions with one sendmsg (no SIGPIPE).
func writeRegions(_ fd: Int32, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer,
                  _ c: UnsafeRawBufferPointer) -> IOResult {
    .from(earmuff_send3(fd, a.baseAddress, a.count, b.baseAddress, b.count, c.baseAddress, c.count),
          readingZeroIsEOF: false)
}

/// Closes a descriptor, ignoring EINTR (Linux always releases the fd).
func closeFD(_ fd: Int32) {
    if fd >= 0 { _ = Glibc.close(fd) }
}

/// Creates the missing directories of `path`'s parent, mode 0700.
func makeParentDirectory(of path: String) throws(SystemError) {
    do {
        try PrivateDirectories.createParents(of: path)
    } catch {
        throw SystemError(error.operation, code: error.code)
    }
}
