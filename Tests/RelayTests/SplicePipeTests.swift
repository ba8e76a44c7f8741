// The loop's splice pipe against real sockets: bytes pass unread, and what a full
// destination does not take comes back out of the pipe whole and in order.
import Glibc
import LinuxSystem
@testable import Relay
import Testing

/// A non-blocking Unix stream socket pair.
private func socketPair() throws -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    let rc = unsafe socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
    try #require(rc == 0, "socketpair: \(Errno.current)")
    return (fds[0], fds[1])
}

/// Writes `bytes` to `fd` whole (the socket has room for them).
private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    let n = unsafe bytes.withUnsafeBytes { unsafe write(fd, $0.baseAddress, $0.count) }
    try #require(n == bytes.count, "write: \(n)")
}

/// Reads what `fd` holds (up to `limit` bytes).
private func readAvailable(_ fd: Int32, limit: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: limit)
    var got = 0
    while got < limit {
        let n = unsafe out.withUnsafeMutableBytes { unsafe read(fd, $0.baseAddress! + got, limit - got) }
        if n <= 0 { break }
        got += n
    }
    return Array(out[0..<got])
}

struct SplicePipeTests {
    let pattern = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }

    @Test func bytesPassFromSocketToSocket() throws {
        let (source, sourcePeer) = try socketPair()
        let (destination, destinationPeer) = try socketPair()
        defer { for fd in [source, sourcePeer, destination, destinationPeer] { close(fd) } }
        let pipe = try #require(SplicePipe(readBufferSize: 256 * 1024))
        try writeAll(sourcePeer, pattern)
        var moved = 0
        while moved < pattern.count {
            let n = try pipe.fill(from: source, upTo: pattern.count - moved)
            #expect(try pipe.drain(to: destination, upTo: n) == n)
            moved += n
        }
        #expect(readAvailable(destinationPeer, limit: pattern.count + 1) == pattern)
        #expect(throws: Errno.wouldBlock) { try pipe.fill(from: source, upTo: 1) }
    }

    @Test func whatAFullDestinationRefusesComesBack() throws {
        let (source, sourcePeer) = try socketPair()
        let (destination, destinationPeer) = try socketPair()
        defer { for fd in [source, sourcePeer, destination, destinationPeer] { close(fd) } }
        let pipe = try #require(SplicePipe(readBufferSize: 256 * 1024))
        // Fill the destination until it takes nothing more.
        let filler = [UInt8](repeating: 0xEE, count: 4096)
        var queued = 0
        while case let n = unsafe filler.withUnsafeBytes({ unsafe send(destination, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }), n > 0 {
            queued += n
        }
        try writeAll(sourcePeer, pattern)
        var inPipe = 0
        while inPipe < pattern.count {
            inPipe += try pipe.fill(from: source, upTo: pattern.count - inPipe)
        }
        #expect(throws: Errno.wouldBlock) { try pipe.drain(to: destination, upTo: inPipe) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { unsafe buffer.deallocate() }
        unsafe #expect(pipe.takeBack(inPipe, into: buffer) == pattern.count)
        unsafe #expect(Array(buffer[0..<pattern.count]) == pattern)
        // The pipe is empty again: the next use starts clean.
        try writeAll(sourcePeer, [1, 2, 3])
        #expect(try pipe.fill(from: source, upTo: 3) == 3)
        _ = readAvailable(destinationPeer, limit: queued)
        #expect(try pipe.drain(to: destination, upTo: 3) == 3)
        #expect(readAvailable(destinationPeer, limit: 4) == [1, 2, 3])
    }
}
