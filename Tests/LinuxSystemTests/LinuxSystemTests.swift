// The syscall layer: errno names and meanings, and descriptors closed exactly once.
import Glibc
import LinuxSystem
import Testing

/// Whether `fd` is an open descriptor of this process.
private func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) >= 0 }

/// A connected pair of Unix stream sockets (non-blocking); the caller takes both ends.
private func socketPair() throws -> [Int32] {
    var fds: [Int32] = [-1, -1]
    let rc = unsafe socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
    try #require(rc == 0, "socketpair: \(Errno.current)")
    return fds
}

@Suite struct ErrnoTests {
    @Test("names stand for the <errno.h> codes; meanings group the ones callers tell apart")
    func namesAndMeanings() {
        #expect(Errno.wouldBlock.rawValue == EAGAIN && Errno.wouldBlock.rawValue == EWOULDBLOCK)
        #expect(Errno.brokenPipe.rawValue == EPIPE && Errno.connectionReset.rawValue == ECONNRESET)
        #expect(Errno.brokenPipe.isPeerClosed && Errno.connectionReset.isPeerClosed)
        #expect(!Errno.wouldBlock.isPeerClosed && !Errno.connectionRefused.isPeerClosed)
        #expect(Errno.wouldBlock.isNotReady && Errno.inProgress.isNotReady && !Errno.connectionRefused.isNotReady)
    }

    @Test("the description is strerror's text")
    func description() {
        unsafe #expect(Errno.noSuchFileOrDirectory.description == String(cString: strerror(ENOENT)))
        #expect(Errno(rawValue: ECONNREFUSED).description == "Connection refused")
    }

    @Test("a failing wrapper throws the errno of its call")
    func wrappersThrowTheirErrno() {
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try FileDescriptor.unixSocket().connect(to: "/nonexistent-\(getpid())/socket")
        }
        #expect(throws: Errno.wouldBlock) {
            let fds = try socketPair()
            let a = FileDescriptor(taking: fds[0])
            let b = FileDescriptor(taking: fds[1]) // open, and silent: nothing to read yet
            var closed: Int32 = 0
            var sender: Int32 = 0
            var buffer = [UInt8](repeating: 0, count: 16)
            _ = try unsafe buffer.withUnsafeMutableBytes {
                try unsafe a.receiveClosingDescriptors(into: $0, closedCount: &closed, senderPID: &sender)
            }
            _ = consume b
        }
    }
}

@Suite struct FileDescriptorTests {
    @Test("a directory watch tells an entry of the name it waits for from any other")
    func directoryWatchNamesItsEntry() throws {
        var template = Array("/tmp/earmuff-watch-XXXXXX".utf8CString)
        let made = unsafe template.withUnsafeMutableBufferPointer { unsafe mkdtemp($0.baseAddress!) != nil }
        try #require(made)
        let directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer {
            unsafe unlink("\(directory)/other"); unsafe unlink("\(directory)/socket"); unsafe rmdir(directory)
        }
        let watch = try FileDescriptor.watchingDirectory(directory)
        let nothingYet = watch.drainDirectoryEvents(naming: "socket")
        #expect(!nothingYet)
        unsafe close(open("\(directory)/other", O_CREAT | O_WRONLY, 0o600))
        let otherName = watch.drainDirectoryEvents(naming: "socket")
        #expect(!otherName)
        unsafe #expect(symlink("/nonexistent", "\(directory)/socket") == 0)
        let named = watch.drainDirectoryEvents(naming: "socket")
        #expect(named)
        let again = watch.drainDirectoryEvents(naming: "socket")
        #expect(!again, "each event is read once")
        #expect(throws: Errno.self) { _ = try FileDescriptor.watchingDirectory("\(directory)/missing") }
    }

    @Test("a descriptor closes when its owner lets go of it")
    func closesWhenDropped() throws {
        var raw: Int32 = -1
        do {
            let socket = try FileDescriptor.unixSocket()
            raw = socket.rawValue
            #expect(isOpen(raw))
        }
        #expect(!isOpen(raw))
    }

    @Test("close() closes once: later closes and the owner's end do not touch the number again")
    func closesOnce() throws {
        var socket = try FileDescriptor.unixSocket()
        let raw = socket.rawValue
        socket.close()
        #expect(!socket.isOpen && !isOpen(raw))
        // The number is free now; whoever gets it next must not lose it to a second close.
        let reused = try FileDescriptor.unixSocket()
        socket.close()
        _ = consume socket
        #expect(isOpen(reused.rawValue))
    }

    @Test("release() hands the descriptor over without closing it")
    func releaseHandsOver() throws {
        let raw = try FileDescriptor.unixSocket().release()
        defer { _ = Glibc.close(raw) }
        #expect(isOpen(raw))
    }

    @Test("bytes sent on one end of a pair arrive at the other; a closed peer reads as end of file")
    func sendAndReceive() throws {
        let fds = try socketPair()
        var a = FileDescriptor(taking: fds[0])
        var b = FileDescriptor(taking: fds[1])
        let message: [UInt8] = Array("hello".utf8)
        let sent = try unsafe message.withUnsafeBytes { try unsafe a.send($0, UnsafeRawBufferPointer(start: nil, count: 0)) }
        #expect(sent == message.count)
        var closed: Int32 = 0
        var sender: Int32 = 0
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = try unsafe buffer.withUnsafeMutableBytes { try unsafe b.receiveClosingDescriptors(into: $0, closedCount: &closed, senderPID: &sender) }
        #expect(Array(buffer[0..<n]) == message && closed == 0)
        a.close()
        let end = try unsafe buffer.withUnsafeMutableBytes { try unsafe b.receiveClosingDescriptors(into: $0, closedCount: &closed, senderPID: &sender) }
        #expect(end == 0)
        b.close()
    }

    @Test("borrowing() lends a descriptor someone else owns and leaves it open, also when the body throws")
    func borrowingLeavesItOpen() throws {
        let raw = try FileDescriptor.unixSocket().release()
        defer { _ = Glibc.close(raw) }
        #expect(FileDescriptor.borrowing(raw) { $0.rawValue } == raw)
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try FileDescriptor.borrowing(raw) { s throws(Errno) in try s.connect(to: "/nonexistent-\(getpid())/socket") }
        }
        #expect(isOpen(raw))
    }

    @Test("a socket made blocking waits; set back, it is non-blocking again")
    func blockingMode() throws {
        let socket = try FileDescriptor.unixSocket(blocking: true)
        #expect(fcntl(socket.rawValue, F_GETFL) & O_NONBLOCK == 0)
        try socket.setBlocking(false)
        #expect(fcntl(socket.rawValue, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(try FileDescriptor.unixSocket().rawValue, F_GETFL) & O_NONBLOCK != 0)
    }

    @Test("a process descriptor refers to a live process (not readable while it runs); a bad pid is refused")
    func processDescriptor() throws {
        let ours = try FileDescriptor.process(getpid())
        var p = pollfd(fd: ours.rawValue, events: Int16(POLLIN), revents: 0)
        unsafe #expect(poll(&p, 1, 0) == 0)
        #expect(throws: Errno.invalidArgument) { _ = try FileDescriptor.process(-1) }
    }
}

@Suite struct LockedTests {
    @Test("withLock passes its body's typed error through and keeps the value it left")
    func typedThrows() {
        struct Refused: Error, Equatable {}
        let value = Locked(1)
        #expect(throws: Refused()) {
            try value.withLock { (v: inout Int) throws(Refused) in
                v = 2
                throw Refused()
            }
        }
        #expect(value.withLock { $0 } == 2)
    }
}
