// RawClient: a native-protocol client that speaks raw bytes, for hostile-input
// tests. It builds well-formed packets with PulseWire (AUTH, SET_CLIENT_NAME,
// CREATE_RECORD_STREAM, any command) and sends whatever bytes a test wants
// after them, optionally with a file descriptor attached (SCM_RIGHTS). What
// comes back is read with PulseWire's frame parser under a deadline, so a test
// can wait for a reply, or for the connection to be closed, without hanging.

import CLinux
import Foundation
import Glibc
import LinuxSystem
import PulseWire

/// A blocking Unix-socket connection to a native-protocol endpoint that sends raw bytes.
public final class RawClient {
    /// The connected socket (-1 once closed).
    public private(set) var fd: Int32
    private var parser = FrameParser()
    /// Set when the peer closed the connection (EOF or reset).
    public private(set) var peerClosed = false
    /// The version word the AUTH reply carried (0 before `handshake`).
    public private(set) var serverVersionWord: UInt32 = 0

    /// Connects to the Unix socket at `path` (throws if nobody listens there).
    public init(path: String) throws {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        guard unsafe earmuff_unix_connect(s, path) == 0 else {
            let e = errno
            Glibc.close(s)
            throw TestSupportError("connect to \(path): \(Errno(rawValue: e))")
        }
        fd = s
    }

    deinit { close() }

    /// Closes the connection (idempotent).
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Half-closes the connection: the peer reads EOF, replies can still arrive.
    public func shutdownWrite() {
        if fd >= 0 { _ = shutdown(fd, Int32(SHUT_WR)) }
    }

    // MARK: - Sending

    /// Sends all of `bytes`; throws if the peer is gone.
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = unsafe bytes.withUnsafeBytes { buf in
                // baseAddress is non-nil: the buffer is not empty inside this loop.
                unsafe Glibc.send(fd, buf.baseAddress! + sent, buf.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw TestSupportError("send: \(Errno(rawValue: errno))")
            }
            sent += n
        }
    }

    /// Sends `bytes` in one `sendmsg` with `passing` attached as SCM_RIGHTS.
    public func send(_ bytes: [UInt8], passing passFD: Int32) throws {
        precondition(!bytes.isEmpty, "a descriptor needs at least one data byte to travel with")
        let n = unsafe bytes.withUnsafeBytes { buf in unsafe earmuff_send_with_fd(fd, buf.baseAddress, buf.count, passFD) }
        if n < 0 { throw TestSupportError("sendmsg with fd: \(Errno(rawValue: errno))") }
        if n < bytes.count { try send(Array(bytes[n...])) }
    }

    // MARK: - Receiving

    /// The next frame, or nil if none arrived within `timeout` seconds or the
    /// peer closed the connection (see `peerClosed`).
    public func readFrame(timeout: Double) throws -> Frame? {
        let deadline = Wait.now() + timeout
        while true {
            if let frame = try parser.next() { return frame }
            if peerClosed { return nil }
            let left = deadline - Wait.now()
            if left <= 0 { return nil }
            guard try receive(timeout: left) else { return nil }
        }
    }

    /// Frames `reply(tag:timeout:)` read past while waiting, oldest first.
    public var skippedFrames: [Frame] = []

    /// Reads frames until a REPLY or ERROR with `tag` arrives; nil on timeout or close.
    /// Other frames are appended to `skippedFrames`.
    public func reply(tag: UInt32, timeout: Double) throws -> Frame? {
        let deadline = Wait.now() + timeout
        while let frame = try readFrame(timeout: max(0, deadline - Wait.now())) {
            if frame.descriptor.isPacket, let h = try? PacketHeader.decode(frame.payload), h.tag == tag,
                h.command == Command.reply.rawValue || h.command == Command.error.rawValue
            {
                return frame
            }
            skippedFrames.append(frame)
        }
        return nil
    }

    /// Reads and discards until the peer closes the connection; true if it did within `timeout` seconds.
    public func waitUntilClosed(timeout: Double) -> Bool {
        let deadline = Wait.now() + timeout
        while !peerClosed {
            let left = deadline - Wait.now()
            if left <= 0 { return false }
            guard (try? receive(timeout: left, discard: true)) != nil else { return peerClosed }
        }
        return true
    }

    /// Raw bytes (for non-native sockets such as the control socket): whatever
    /// arrives until `timeout` passes, `stopAfter` is seen, or the peer closes.
    public func readRaw(timeout: Double, stopAfter marker: UInt8? = UInt8(ascii: "\n")) -> [UInt8] {
        var out: [UInt8] = []
        let deadline = Wait.now() + timeout
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        while !peerClosed {
            let left = deadline - Wait.now()
            if left <= 0 { break }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = unsafe poll(&pfd, 1, Int32(left * 1000) + 1)
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { break }
            let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) {
                peerClosed = true
                break
            }
            if n > 0 {
                out.append(contentsOf: buf[0..<n])
                if let m = marker, buf[0..<n].contains(m) { break }
            }
        }
        return out
    }

    /// Waits up to `timeout` for bytes; appends them to the parser (unless `discard`).
    /// Returns false on timeout; sets `peerClosed` on EOF or reset.
    private func receive(timeout: Double, discard: Bool = false) throws -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(max(0, min(timeout, 3600)) * 1000) + 1
        let r = unsafe poll(&pfd, 1, ms)
        if r < 0 {
            if errno == EINTR { return true }
            throw TestSupportError("poll: \(Errno(rawValue: errno))")
        }
        if r == 0 { return false }
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)) {
            peerClosed = true
            return true
        }
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return true }
            throw TestSupportError("recv: \(Errno(rawValue: errno))")
        }
        if !discard { parser.append(contentsOf: buf[0..<n]) }
        return true
    }

    // MARK: - Conversation

    /// Sends AUTH (tag 0, v35 without SHM) and SET_CLIENT_NAME (tag 1) and waits
    /// for both replies; throws with what arrived instead.
    public func handshake(
        name: String = "earmuff-raw-client", properties: [String: String] = [:],
        timeout: Double = 10
    ) throws {
        try send(Self.auth(tag: 0))
        guard let auth = try reply(tag: 0, timeout: timeout) else {
            throw TestSupportError("no AUTH reply (peer closed: \(peerClosed))")
        }
        guard let (tag, r) = try? AuthReply.decodePacket(auth.payload, version: Limits.protocolVersion), tag == 0 else {
            throw TestSupportError("AUTH answered with \(auth.payload)")
        }
        serverVersionWord = r.versionWord
        try send(Self.setClientName(tag: 1, name: name, properties: properties))
        guard let named = try reply(tag: 1, timeout: timeout),
            (try? PacketHeader.decode(named.payload).command) == Command.reply.rawValue
        else {
            throw TestSupportError("no SET_CLIENT_NAME reply (peer closed: \(peerClosed))")
        }
    }

    /// Sends a request and waits for its REPLY/ERROR; returns (command, reader after the tag).
    public func request(_ packet: [UInt8], tag: UInt32, timeout: Double = 10) throws -> (command: UInt32, reader: TagStructReader)? {
        try send(packet)
        guard let frame = try reply(tag: tag, timeout: timeout) else { return nil }
        var r = TagStructReader(frame.payload)
        let header = try PacketHeader.decode(from: &r)
        return (header.command, r)
    }

    // MARK: - Builders (whole frames: descriptor + payload)

    /// A frame of `payload` with the given descriptor fields (length defaults to the payload's).
    public static func frame(
        _ payload: [UInt8], length: UInt32? = nil, channel: UInt32 = FrameDescriptor.controlChannel,
        offsetHi: UInt32 = 0, offsetLo: UInt32 = 0, flags: UInt32 = 0
    ) -> [UInt8] {
        var out = FrameDescriptor(
            length: length ?? UInt32(payload.count), channel: channel,
            offsetHi: offsetHi, offsetLo: offsetLo, flags: flags
        ).bytes
        out.append(contentsOf: payload)
        return out
    }

    /// A packet frame: command, tag, then whatever `body` writes.
    public static func packet(_ command: UInt32, tag: UInt32, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
        var w = TagStructWriter(reservingCapacity: 64)
        PacketHeader(command: command, tag: tag).encode(into: &w)
        body(&w)
        return frame(w.bytes)
    }

    /// A packet frame of a known command.
    public static func packet(_ command: Command, tag: UInt32, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
        packet(command.rawValue, tag: tag, body)
    }

    /// AUTH with `versionWord` (v35, no transport flags by default) and a cookie of `cookieLength` zero bytes.
    public static func auth(
        tag: UInt32, versionWord: UInt32 = Limits.protocolVersion,
        cookieLength: Int = Limits.cookieLength
    ) -> [UInt8] {
        packet(.auth, tag: tag) { w in
            w.writeU32(versionWord)
            w.writeArbitrary([UInt8](repeating: 0, count: cookieLength))
        }
    }

    /// SET_CLIENT_NAME (v13+ layout: a proplist with application.name and `properties`).
    public static func setClientName(tag: UInt32, name: String, properties: [String: String] = [:]) -> [UInt8] {
        var props = Proplist()
        props.set(Proplist.Key.applicationName, string: name)
        for (k, v) in properties.sorted(by: { $0.key < $1.key }) { props.set(k, string: v) }
        return packet(.setClientName, tag: tag) { $0.writeProplist(props) }
    }

    /// CREATE_RECORD_STREAM for `source` (nil: the default) in s16le mono 48 kHz with small fragments.
    public static func createRecordStream(
        tag: UInt32, source: String? = nil, properties: [String: String] = [:],
        version: UInt32 = Limits.protocolVersion
    ) -> [UInt8] {
        var req = CreateRecordStreamRequest()
        req.sampleSpec = SampleSpec(format: .s16le, channels: 1, rate: 48000)
        req.channelMap = .mono
        req.sourceName = source
        req.maxLength = 1 << 20
        req.fragSize = 1920
        req.adjustLatency = true
        // A real server checks the volume against the sample spec even when it is not set.
        req.volume = CVolume(channels: 1, volume: CVolume.norm)
        for (k, v) in properties.sorted(by: { $0.key < $1.key }) { req.proplist.set(k, string: v) }
        req.proplist.set(Proplist.Key.mediaName, string: "raw record")
        var w = TagStructWriter(reservingCapacity: 256)
        PacketHeader(command: .createRecordStream, tag: tag).encode(into: &w)
        req.encode(into: &w, version: version)
        return frame(w.bytes)
    }
}

/// Facts about a running process read from /proc (for leak checks).
public enum ProcessStats {
    /// How many file descriptors `pid` has open, or -1.
    public static func openFDs(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// VmRSS of `pid` in KiB, or -1.
    public static func residentKiB(_ pid: pid_t) -> Int { statusKiB(pid, "VmRSS:") }

    /// VmHWM (the peak resident set) of `pid` in KiB, or -1.
    public static func peakResidentKiB(_ pid: pid_t) -> Int { statusKiB(pid, "VmHWM:") }

    private static func statusKiB(_ pid: pid_t, _ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix(field) {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
        }
        return -1
    }
}
