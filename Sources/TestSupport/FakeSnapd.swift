import Foundation
import Glibc

/// A stand-in for snapd's REST API on a Unix socket (snapd itself cannot run
/// in a test): it answers `GET /v2/connections?snap=NAME&interface=audio-record`
/// the way snapd does, from the set of snaps whose `audio-record` plug is
/// connected, and records every request line it got. Its state is behind an
/// NSLock (a pthread mutex), which the thread sanitizer understands.
public final class FakeSnapd: @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are touched only under `lock`.
    /// How it answers.
    public enum Mode: Sendable {
        /// `Content-Length` bodies, as snapd sends them.
        case normal
        /// `Transfer-Encoding: chunked` bodies.
        case chunked
        /// An error document with HTTP 500.
        case failing
    }

    public let socketPath: String
    private let fd: Int32
    private let lock = NSLock()
    private var connected: Set<String>
    private var requests: [String] = []
    private let mode: Mode
    private var stopped = false

    public init(socketPath: String, connected: Set<String>, mode: Mode = .normal) throws {
        self.socketPath = socketPath
        self.connected = connected
        self.mode = mode
        let s = try UnixSocket.listen(socketPath)
        fd = s
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    /// Connects or disconnects `snap`'s audio-record plug.
    public func setConnected(_ snap: String, _ on: Bool) {
        lock.withLock { if on { connected.insert(snap) } else { connected.remove(snap) } }
    }

    /// The request lines received so far.
    public var requestLines: [String] { lock.withLock { requests } }

    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }; return !stopped
        }
        guard first else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        unsafe unlink(socketPath)
    }

    deinit { stop() }

    private func serve() {
        while !lock.withLock({ stopped }) {
            let c = accept(fd, nil, nil)
            if c < 0 {
                if errno == EINTR { continue }
                return
            }
            handle(c)
            close(c)
        }
    }

    private func handle(_ c: Int32) {
        var request: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let n = unsafe buf.withUnsafeMutableBytes { unsafe recv(c, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            request += buf[..<n]
        }
        let line = String(String(decoding: request, as: UTF8.self).split(separator: "\r\n").first ?? "")
        lock.withLock { requests.append(line) }
        let target = line.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let snap = URLComponents(string: target)?.queryItems?.first { $0.name == "snap" }?.value ?? ""
        let body: String
        let status: String
        if mode == .failing {
            status = "500 Internal Server Error"
            body = #"{"type":"error","status-code":500,"status":"Internal Server Error","result":{"message":"cannot read state"}}"#
        } else {
            status = "200 OK"
            let plugged = lock.withLock { connected.contains(snap) }
            let established =
                plugged
                ? #"[{"slot":{"snap":"snapd","slot":"audio-record"},"plug":{"snap":"\#(snap)","plug":"audio-record"},"interface":"audio-record","manual":true}]"#
                : "[]"
            let connections = plugged ? #"[{"snap":"snapd","slot":"audio-record"}]"# : "[]"
            body =
                #"{"type":"sync","status-code":200,"status":"OK","result":{"established":\#(established),"plugs":[{"snap":"\#(snap)","plug":"audio-record","interface":"audio-record","connections":\#(connections)}],"slots":[{"snap":"snapd","slot":"audio-record","interface":"audio-record"}]}}"#
        }
        var response = "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\n"
        if mode == .chunked {
            let bytes = Array(body.utf8)
            let half = bytes.count / 2
            response += "Transfer-Encoding: chunked\r\n\r\n"
            response += String(half, radix: 16) + "\r\n" + String(decoding: bytes[..<half], as: UTF8.self) + "\r\n"
            response += String(bytes.count - half, radix: 16) + "\r\n" + String(decoding: bytes[half...], as: UTF8.self) + "\r\n0\r\n\r\n"
        } else {
            response += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        }
        let out = Array(response.utf8)
        var sent = 0
        while sent < out.count {
            let n = unsafe out.withUnsafeBytes { unsafe send(c, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) } // non-nil: out is non-empty
            if n <= 0 { return }
            sent += n
        }
    }
}
