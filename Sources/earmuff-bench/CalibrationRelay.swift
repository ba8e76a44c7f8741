// The calibration relay: the least a relay can do, as a yardstick for
// earmuff's figures. One thread, one level-triggered epoll set, no parsing:
// bytes read from one socket are written to the other (what a socket does
// not take waits, and its source is not read meanwhile), and after forwarding
// the loop polls the set for up to 200 µs before it sleeps (the reply to a
// request usually comes within that window, so it is relayed without a
// scheduler wake-up, as earmuff does). The bench starts it as a child process
// (`earmuff-bench --calibration-relay LISTEN UPSTREAM`) so its CPU time is
// read like socat's and earmuff's.

import CLinux
import Foundation
import Glibc
import LinuxSystem

enum CalibrationRelay {
    static let argument = "--calibration-relay"
    /// How long the loop polls after forwarding before it sleeps.
    static let spinNanoseconds: UInt64 = 200_000

    /// Runs the relay until the process is killed.
    static func run(listen: String, upstream: String) -> Never {
        signal(SIGPIPE, SIG_IGN)
        let listener = socket(
            AF_UNIX,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0, bindUnix(listener, listen), Glibc.listen(listener, 1024) == 0 else {
            die("cannot listen at \(listen): \(Errno(rawValue: errno))")
        }
        let ep = earmuff_epoll_create()
        guard ep >= 0, earmuff_epoll_add(ep, listener, EARMUFF_EPOLLIN, UInt64(listener)) == 0 else {
            die("epoll: \(Errno(rawValue: errno))")
        }
        var peer: [Int32: Int32] = [:]
        // Bytes a socket did not take yet; while any wait, the other side is not read
        // (backpressure: one stalled reader never holds up the other connections).
        var pending: [Int32: [UInt8]] = [:]
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        let maxEvents: Int32 = 64
        var events = [UInt32](repeating: 0, count: Int(maxEvents))
        var datas = [UInt64](repeating: 0, count: Int(maxEvents))
        var spinUntil: UInt64 = 0

        func close2(_ fd: Int32) {
            guard let other = peer.removeValue(forKey: fd) else { return }
            peer.removeValue(forKey: other)
            pending.removeValue(forKey: fd)
            pending.removeValue(forKey: other)
            _ = earmuff_epoll_del(ep, fd)
            _ = earmuff_epoll_del(ep, other)
            close(fd)
            close(other)
        }

        /// Sends what it can of `bytes` to `fd`; false when the connection failed.
        func forward(_ bytes: UnsafeRawBufferPointer, to fd: Int32, from source: Int32) -> Bool {
            let w = unsafe send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if w < 0 && errno != EAGAIN && errno != EINTR { return false }
            let sent = max(0, w)
            if sent < bytes.count {
                unsafe pending[fd, default: []].append(contentsOf: bytes[sent...])
                _ = earmuff_epoll_mod(ep, fd, EARMUFF_EPOLLIN | EARMUFF_EPOLLOUT, UInt64(fd))
                _ = earmuff_epoll_mod(ep, source, 0, UInt64(source))
            }
            return true
        }

        while true {
            let spinning = now() < spinUntil
            let n = unsafe earmuff_epoll_wait(ep, &events, &datas, maxEvents, spinning ? 0 : -1)
            if n < 0 {
                if errno == EINTR { continue }
                die("epoll_wait: \(Errno(rawValue: errno))")
            }
            var forwarded = false
            for i in 0..<Int(n) {
                let fd = Int32(truncatingIfNeeded: datas[i])
                if fd == listener {
                    acceptOne(listener, upstream: upstream, ep: ep, peer: &peer)
                    continue
                }
                guard let other = peer[fd] else { continue }
                if events[i] & EARMUFF_EPOLLOUT != 0, let rest = pending[fd] {
                    let w = unsafe rest.withUnsafeBytes { unsafe send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if w < 0 && errno != EAGAIN && errno != EINTR { close2(fd); continue }
                    if w >= rest.count {
                        pending.removeValue(forKey: fd)
                        _ = earmuff_epoll_mod(ep, fd, EARMUFF_EPOLLIN, UInt64(fd))
                        _ = earmuff_epoll_mod(ep, other, EARMUFF_EPOLLIN, UInt64(other))
                        forwarded = true
                    } else if w > 0 {
                        pending[fd] = Array(rest[w...])
                    }
                }
                guard events[i] & (EARMUFF_EPOLLIN | EARMUFF_EPOLLHUP | EARMUFF_EPOLLERR) != 0,
                    pending[other] == nil
                else { continue }
                let got = unsafe read(fd, buffer, 256 * 1024)
                if got > 0 {
                    if unsafe forward(UnsafeRawBufferPointer(start: buffer, count: got), to: other, from: fd) {
                        forwarded = true
                    } else {
                        close2(fd)
                    }
                } else if got == 0 || (errno != EAGAIN && errno != EINTR) {
                    close2(fd)
                }
            }
            if forwarded { spinUntil = now() + spinNanoseconds }
        }
    }

    private static func acceptOne(_ listener: Int32, upstream: String, ep: Int32, peer: inout [Int32: Int32]) {
        let client = earmuff_accept(listener)
        guard client >= 0 else { return }
        let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard server >= 0, connectUnix(server, upstream) else {
            close(client)
            if server >= 0 { close(server) }
            return
        }
        _ = fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK)
        peer[client] = server
        peer[server] = client
        _ = earmuff_epoll_add(ep, client, EARMUFF_EPOLLIN, UInt64(client))
        _ = earmuff_epoll_add(ep, server, EARMUFF_EPOLLIN, UInt64(server))
    }

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        unsafe withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            unsafe raw.copyBytes(from: bytes)
            unsafe raw[bytes.count] = 0
        }
        return unsafe withUnsafePointer(to: &addr) {
            unsafe $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { unsafe body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    private static func bindUnix(_ fd: Int32, _ path: String) -> Bool {
        unsafe unlink(path)
        return unsafe withAddress(path) { unsafe bind(fd, $0, $1) } == 0
    }

    private static func connectUnix(_ fd: Int32, _ path: String) -> Bool {
        unsafe withAddress(path) { unsafe connect(fd, $0, $1) } == 0
    }

    private static func now() -> UInt64 {
        var ts = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    private static func die(_ message: String) -> Never {
        FileHandle.standardError.write(Data("earmuff-bench calibration relay: \(message)\n".utf8))
        exit(1)
    }
}
