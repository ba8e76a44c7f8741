// The owning descriptor: a socket, epoll set or eventfd that is closed exactly once, by
// `close()` or when its owner lets go of it, and nowhere else.
import CLinux
import Glibc

/// An open file descriptor that this value owns (`~Copyable`: one owner, one close; it may
/// move to another thread with its owner).
public struct FileDescriptor: ~Copyable, Sendable {
    /// The descriptor number, -1 once closed (or for `FileDescriptor.none`).
    public private(set) var rawValue: Int32

    /// Takes ownership of `rawValue` (which the caller must not close).
    public init(taking rawValue: Int32) { self.rawValue = rawValue }

    /// No descriptor (yet): a place an owner fills later.
    public static var none: FileDescriptor { FileDescriptor(taking: -1) }

    public var isOpen: Bool { rawValue >= 0 }

    /// Closes the descriptor (once; later calls do nothing). EINTR is ignored: Linux always
    /// releases the descriptor.
    public mutating func close() {
        if rawValue >= 0 { _ = Glibc.close(rawValue) }
        rawValue = -1
    }

    /// Gives the descriptor up to the caller, who closes it.
    public consuming func release() -> Int32 {
        let fd = rawValue
        discard self
        return fd
    }

    deinit {
        if rawValue >= 0 { _ = Glibc.close(rawValue) }
    }

    /// Runs `body` on `raw`, a descriptor someone else owns (it stays open).
    public static func borrowing<R, E: Error>(_ raw: Int32, _ body: (borrowing FileDescriptor) throws(E) -> R) throws(E) -> R {
        let fd = FileDescriptor(taking: raw)
        let result = Result { () throws(E) in try body(fd) }
        _ = fd.release()
        return try result.get()
    }
}

/// Who is at the other end of a Unix socket (SO_PEERCRED).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

// MARK: Unix stream sockets

extension FileDescriptor {
    /// A new close-on-exec Unix stream socket, non-blocking unless asked.
    public static func unixSocket(blocking: Bool = false) throws(Errno) -> FileDescriptor {
        let socket = FileDescriptor(taking: try Errno.check(earmuff_unix_socket()))
        if blocking { try socket.setBlocking(true) }
        return socket
    }

    /// Binds to `path` (a stale socket there is removed first) and listens.
    public func listen(at path: String, backlog: Int32 = 128) throws(Errno) {
        _ = try unsafe Errno.check(earmuff_unix_listen(rawValue, path, backlog))
    }

    /// Makes calls on this descriptor wait (`true`) or fail with `.wouldBlock` (`false`).
    public func setBlocking(_ blocking: Bool) throws(Errno) {
        let flags = try Errno.check(fcntl(rawValue, F_GETFL))
        _ = try Errno.check(fcntl(rawValue, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK))
    }

    /// Connects to `path`; a non-blocking socket still connecting throws `.wouldBlock` or
    /// `.inProgress` (`isNotReady`).
    public func connect(to path: String) throws(Errno) {
        _ = try unsafe Errno.check(earmuff_unix_connect(rawValue, path))
    }

    /// Accepts a connection (non-blocking, close-on-exec); `.wouldBlock` when none waits.
    public func accept() throws(Errno) -> FileDescriptor {
        FileDescriptor(taking: try Errno.check(earmuff_accept(rawValue)))
    }

    /// The connected peer's pid, uid and gid.
    public func peerCredentials() throws(Errno) -> PeerCredentials {
        var c = earmuff_ucred()
        _ = try unsafe Errno.check(earmuff_peercred(rawValue, &c))
        return PeerCredentials(pid: c.pid, uid: c.uid, gid: c.gid)
    }

    /// Sets SO_PASSCRED: every read then says which process sent the bytes.
    public func passCredentials() throws(Errno) {
        _ = try Errno.check(earmuff_set_passcred(rawValue))
    }

    /// Reads into `buffer`, closing every descriptor that arrives with the data (`closedCount`
    /// says how many); `senderPID` gets the pid that sent the bytes (0 when unknown). Returns
    /// the bytes read, 0 at end of file.
    @inline(__always)
    public func receiveClosingDescriptors(
        into buffer: UnsafeMutableRawBufferPointer, closedCount: inout Int32,
        senderPID: inout Int32
    ) throws(Errno) -> Int {
        try unsafe Errno.check(earmuff_recv_closing_fds(rawValue, buffer.baseAddress, buffer.count, &closedCount, &senderPID))
    }

    /// Sends up to two regions with one sendmsg (no SIGPIPE); returns the bytes sent.
    @inline(__always)
    public func send(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try unsafe Errno.check(earmuff_send2(rawValue, a.baseAddress, a.count, b.baseAddress, b.count))
    }

    /// Sends the `count` regions `vector` describes with one sendmsg (no SIGPIPE); returns the bytes sent.
    @inline(__always)
    public func send(_ vector: UnsafePointer<iovec>, count: Int) throws(Errno) -> Int {
        try unsafe Errno.check(earmuff_sendv(rawValue, vector, Int32(count)))
    }

    /// One send(2) of `bytes` (no SIGPIPE; with `waiting` false, MSG_DONTWAIT), made again
    /// after an interruption; returns the bytes sent.
    public func send(_ bytes: ArraySlice<UInt8>, waiting: Bool = true) throws(Errno) -> Int {
        let flags = Int32(MSG_NOSIGNAL) | (waiting ? 0 : Int32(MSG_DONTWAIT))
        while true {
            let n = unsafe bytes.withUnsafeBytes { unsafe Glibc.send(rawValue, $0.baseAddress, $0.count, flags) }
            if n >= 0 { return n }
            let e = Errno.current
            if e != .interrupted { throw e }
        }
    }

    /// Sends every byte of `bytes`; each time the socket is full (EAGAIN: it does not block, or
    /// its send timeout ran out) `whenFull` runs, which waits for room or throws.
    public func sendAll<E: Error>(_ bytes: [UInt8], whenFull: () throws(E) -> Void) throws(SendFailure<E>) {
        var sent = 0
        while sent < bytes.count {
            do throws(Errno) {
                sent += try send(bytes[sent...])
            } catch {
                guard error == .wouldBlock else { throw .failed(error) }
                do throws(E) { try whenFull() } catch { throw .gaveUp(error) }
            }
        }
    }

    /// One recv(2) into `buffer` (with `waiting` false, MSG_DONTWAIT), made again after an
    /// interruption; returns the bytes read, 0 at end of file.
    public func receive(into buffer: inout [UInt8], waiting: Bool = true) throws(Errno) -> Int {
        let flags = waiting ? 0 : Int32(MSG_DONTWAIT)
        while true {
            let n = unsafe buffer.withUnsafeMutableBytes { unsafe Glibc.recv(rawValue, $0.baseAddress, $0.count, flags) }
            if n >= 0 { return n }
            let e = Errno.current
            if e != .interrupted { throw e }
        }
    }

    /// Sends `bytes` with this process's own credentials attached (SCM_CREDENTIALS).
    public func sendWithCredentials(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try unsafe Errno.check(earmuff_send_with_creds(rawValue, bytes.baseAddress, bytes.count))
    }

    /// One write(2); returns the bytes written.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try unsafe Errno.check(Glibc.write(rawValue, bytes.baseAddress, bytes.count))
    }

    /// Shuts the sending direction down (the peer reads end of file).
    public func shutdownWriting() {
        _ = Glibc.shutdown(rawValue, Int32(SHUT_WR))
    }
}

/// Why `sendAll` stopped: the socket failed, or the wait for room gave up.
public enum SendFailure<E: Error>: Error {
    case failed(Errno)
    case gaveUp(E)
}

// MARK: epoll and eventfd

/// epoll event bits.
public enum PollEvents {
    public static let input = EARMUFF_EPOLLIN
    public static let output = EARMUFF_EPOLLOUT
    public static let error = EARMUFF_EPOLLERR
    public static let hangUp = EARMUFF_EPOLLHUP
    public static let peerHangUp = EARMUFF_EPOLLRDHUP
    public static let edgeTriggered = EARMUFF_EPOLLET
}

extension FileDescriptor {
    /// A new epoll set (close-on-exec).
    public static func epoll() throws(Errno) -> FileDescriptor {
        FileDescriptor(taking: try Errno.check(earmuff_epoll_create()))
    }

    /// Watches `fd` in this epoll set; `data` comes back with its events.
    public func watch(_ fd: Int32, events: UInt32, data: UInt64) throws(Errno) {
        _ = try Errno.check(earmuff_epoll_add(rawValue, fd, events, data))
    }

    /// Changes what `fd` is watched for.
    public func rewatch(_ fd: Int32, events: UInt32, data: UInt64) throws(Errno) {
        _ = try Errno.check(earmuff_epoll_mod(rawValue, fd, events, data))
    }

    /// Stops watching `fd`.
    public func unwatch(_ fd: Int32) throws(Errno) {
        _ = try Errno.check(earmuff_epoll_del(rawValue, fd))
    }

    /// Waits up to `timeoutMs` (-1: for ever) and fills the parallel arrays; returns how many
    /// events came (0 on timeout or a signal).
    public func wait(
        events: UnsafeMutableBufferPointer<UInt32>, data: UnsafeMutableBufferPointer<UInt64>,
        timeoutMs: Int32
    ) throws(Errno) -> Int {
        unsafe Int(
            try Errno.check(
                earmuff_epoll_wait(
                    rawValue, events.baseAddress, data.baseAddress,
                    Int32(min(events.count, data.count)), timeoutMs)))
    }

    /// Sleeps until the set has an event or `nanoseconds` pass, without saying which.
    public func sleep(nanoseconds: Int64) throws(Errno) {
        _ = try Errno.check(earmuff_epoll_sleep(rawValue, nanoseconds))
    }

    /// A new eventfd (non-blocking, close-on-exec).
    public static func eventfd() throws(Errno) -> FileDescriptor {
        FileDescriptor(taking: try Errno.check(earmuff_eventfd()))
    }

    /// Adds one to this eventfd's counter (wakes its reader).
    public func signalEvent() {
        _ = earmuff_eventfd_signal(rawValue)
    }

    /// Resets this eventfd's counter.
    public func drainEvents() {
        _ = earmuff_eventfd_drain(rawValue)
    }

    /// Moves up to `count` bytes from `source` to `destination` (one of them a pipe) with
    /// splice(2): pages change hands, no byte enters this process. Never waits on the pipe;
    /// returns the bytes moved, 0 at end of file.
    @inline(__always)
    public static func splice(from source: Int32, to destination: Int32, count: Int) throws(Errno) -> Int {
        try Errno.check(earmuff_splice(source, destination, count))
    }

    /// An inotify descriptor (non-blocking, close-on-exec) that becomes readable when an
    /// entry is created in, or moved into, `directory`.
    public static func watchingDirectory(_ directory: String) throws(Errno) -> FileDescriptor {
        unsafe FileDescriptor(taking: try Errno.check(earmuff_watch_directory(directory)))
    }

    /// Reads the queued events of this inotify descriptor: whether one of them named `name`
    /// (or events were lost, so the caller should look again).
    public func drainDirectoryEvents(naming name: String) -> Bool {
        unsafe earmuff_directory_events_name(rawValue, name) == 1
    }
}

// MARK: the process

public enum ProcessLimits {
    /// Raises RLIMIT_NOFILE's soft limit to its hard limit.
    public static func raiseOpenFiles() {
        _ = earmuff_raise_nofile()
    }

    /// The calling thread's kernel id (gettid): what the scheduler and RealtimeKit know it by.
    public static func currentThreadID() -> Int32 { earmuff_gettid() }
}

/// The target of the symbolic link `path` (`/proc/PID/exe`, `/proc/PID/ns/mnt`), or nil when
/// it is not one or cannot be read.
public func readSymbolicLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = unsafe readlink(path, &buffer, buffer.count)
    guard n > 0, n < buffer.count else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The names in directory `path` (without `.` and `..`), sorted; empty when it cannot be read.
public func directoryEntries(_ path: String) -> [String] {
    guard let d = unsafe opendir(path) else { return [] }
    defer { unsafe closedir(d) }
    var names: [String] = []
    while let e = unsafe readdir(d) {
        let name = unsafe withUnsafeBytes(of: e.pointee.d_name) { unsafe String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

/// What this process and its threads do to themselves.
public enum ThisProcess {
    /// Names the calling thread (the kernel keeps 15 bytes) for `top -H`, gdb and /proc.
    public static func nameCurrentThread(_ name: String) {
        _ = unsafe earmuff_set_thread_name(name)
    }

    /// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER).
    public static func becomeSubreaper() throws(Errno) {
        let rc = earmuff_become_subreaper()
        if rc != 0 { throw Errno(rawValue: -rc) }
    }
}

extension FileDescriptor {
    /// A descriptor of process `pid` (pidfd_open): readable once the process exits.
    public static func process(_ pid: Int32) throws(Errno) -> FileDescriptor {
        FileDescriptor(taking: try Errno.check(earmuff_pidfd_open(pid)))
    }
}

/// A pipe, both ends non-blocking and close-on-exec.
public struct Pipe: ~Copyable {
    public let readEnd: FileDescriptor
    public let writeEnd: FileDescriptor
    /// The bytes it holds at most.
    public let capacity: Int

    /// A pipe asked to hold `size` bytes (it keeps the kernel's default when that is refused).
    public init(size: Int) throws(Errno) {
        var fds: [Int32] = [-1, -1]
        capacity = unsafe Int(try Errno.check(earmuff_pipe(&fds, Int32(clamping: size))))
        readEnd = FileDescriptor(taking: fds[0])
        writeEnd = FileDescriptor(taking: fds[1])
    }
}
