// A snap records only if its `audio-record` plug is connected.
//
// Without Earmuff, pipewire-pulse (and PulseAudio's snap policy) ask snapd
// about a snap client's `audio-record` connection themselves. Behind Earmuff
// the server sees Earmuff's credentials and cannot, so Earmuff asks instead:
// `GET /v2/connections?snap=NAME&interface=audio-record` on snapd's socket,
// when that socket exists. Until snapd has answered that the plug is
// connected, every record stream of the snap's connection is silence,
// whatever the user granted; if snapd cannot be asked, it stays silence.
// The question is asked off the I/O loops, once per connection.
import Consent
import Foundation
import Glibc
import LinuxSystem
import Runtime

/// snapd's answer about one snap.
enum SnapConnectionAnswer: Equatable, Sendable {
    case connected
    case notConnected
    /// snapd could not be asked or answered something unusable.
    case unavailable(String)
}

/// A minimal client of snapd's REST API over its Unix socket.
struct SnapdClient: Sendable {
    /// `/run/snapd.socket` unless told otherwise (`earmuff serve --snapd-socket`).
    static let defaultSocket = "/run/snapd.socket"
    let socketPath: String
    /// Seconds for the whole exchange.
    var timeout: Double = 3

    var isPresent: Bool { unsafe access(socketPath, F_OK) == 0 }

    /// Whether `snap`'s `audio-record` plug is connected. Blocks: call off the I/O loops.
    func audioRecordConnected(snap: String) -> SnapConnectionAnswer {
        guard snap.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }), !snap.isEmpty else {
            return .unavailable("\"\(snap)\" is not a snap name")
        }
        let request = "GET /v2/connections?snap=\(snap)&interface=audio-record HTTP/1.1\r\nHost: localhost\r\nUser-Agent: earmuff\r\nConnection: close\r\n\r\n"
        let response: [UInt8]
        switch exchange(Array(request.utf8)) {
        case .failed(let why): return .unavailable(why)
        case .bytes(let bytes): response = bytes
        }
        return Self.parse(response, snap: snap)
    }

    /// Reads snapd's HTTP response: status, body (Content-Length or chunked), JSON.
    static func parse(_ response: [UInt8], snap: String) -> SnapConnectionAnswer {
        guard let split = find([13, 10, 13, 10], in: response) else { return .unavailable("no HTTP header from snapd") }
        let head = String(decoding: response[..<split], as: UTF8.self).split(separator: "\r\n").map(String.init)
        var body = Array(response[(split + 4)...])
        guard let statusLine = head.first, statusLine.hasPrefix("HTTP/1.") else { return .unavailable("not an HTTP answer from snapd") }
        let code = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        if head.contains(where: { $0.lowercased().hasPrefix("transfer-encoding:") && $0.lowercased().contains("chunked") }) {
            guard let decoded = dechunk(body) else { return .unavailable("a malformed chunked answer from snapd") }
            body = decoded
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return .unavailable("snapd answered HTTP \(code) without JSON")
        }
        guard code == 200, let result = json["result"] as? [String: Any] else {
            let message = ((json["result"] as? [String: Any])?["message"] as? String) ?? "HTTP \(code)"
            return .unavailable("snapd: \(message)")
        }
        let established = result["established"] as? [[String: Any]] ?? []
        let connected = established.contains { c in
            (c["interface"] as? String) == "audio-record" && ((c["plug"] as? [String: Any])?["snap"] as? String) == snap
        }
        return connected ? .connected : .notConnected
    }

    private enum Exchange { case bytes([UInt8]), failed(String) }

    private func exchange(_ request: [UInt8]) -> Exchange {
        let socket: FileDescriptor
        do throws(Errno) {
            socket = try .unixSocket(blocking: true)
        } catch {
            return .failed("socket: \(error)")
        }
        let fd = socket.rawValue
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        unsafe setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        unsafe setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        do throws(Errno) {
            try socket.connect(to: socketPath)
        } catch {
            return .failed("cannot connect to \(socketPath): \(error)")
        }
        // The send timeout set above is the one wait: a full socket after it gives up.
        do throws(SendFailure<Errno>) {
            try socket.sendAll(request) { () throws(Errno) in throw .timedOut }
        } catch {
            switch error {
            case .failed(let e), .gaveUp(let e): return .failed("writing to snapd: \(e)")
            }
        }
        let deadline = monotonicSeconds() + timeout
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        while true {
            let n: Int
            do throws(Errno) {
                n = try socket.receive(into: &buf)
            } catch {
                return .failed(error == .wouldBlock ? "snapd did not answer within \(timeout) s" : "reading from snapd: \(error)")
            }
            if n == 0 { break }
            out += buf[..<n]
            if out.count > 4 << 20 { return .failed("snapd's answer is larger than 4 MiB") }
            if monotonicSeconds() > deadline { return .failed("snapd did not finish answering within \(timeout) s") }
        }
        return .bytes(out)
    }

    private static func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return i }
        return nil
    }

    private static func dechunk(_ body: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var i = 0
        while true {
            guard let end = find([13, 10], in: Array(body[i...])) else { return nil }
            let sizeText = String(decoding: body[i..<(i + end)], as: UTF8.self).split(separator: ";").first.map(String.init) ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return nil }
            i += end + 2
            if size == 0 { return out }
            guard i + size <= body.count else { return nil }
            out += body[i..<(i + size)]
            i += size + 2
            guard i <= body.count else { return nil }
        }
    }
}

private func monotonicSeconds() -> Double {
    var ts = timespec()
    unsafe clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Which connections may get real samples as far as snapd is concerned:
/// every non-snap connection; a snap's only once snapd said its `audio-record`
/// plug is connected.
final class SnapRecordGate: Sendable {
    private enum State { case asking, allowed, refused }
    private let states = Locked<[UInt64: State]>([:])
    /// Where snapd is asked ("snapd"), one question at a time.
    private let worker: Worker
    let snapd: SnapdClient

    init(snapd: SnapdClient) throws(SystemError) {
        self.snapd = snapd
        worker = try Worker(name: "snapd")
    }

    /// Starts the question for a snap connection; `onAllowed` runs (on the
    /// gate's worker thread) once snapd said the plug is connected.
    func sessionOpened(id: UInt64, identity: ClientIdentity, onAllowed: @escaping @Sendable () -> Void) {
        guard identity.method == .snap, identity.appKey.kind == "snap" else { return }
        let name = identity.appKey.value
        guard snapd.isPresent else {
            Log.info("session \(id) (snap \(name)): no snapd at \(snapd.socketPath); its audio-record connection is not checked")
            return
        }
        states.withLock { $0[id] = .asking }
        let snapd = self.snapd
        worker.async { [self] in
            let answer = snapd.audioRecordConnected(snap: name)
            let state: State = answer == .connected ? .allowed : .refused
            let open = states.withLock { s -> Bool in
                guard s[id] != nil else { return false }
                s[id] = state
                return true
            }
            guard open else { return }
            switch answer {
            case .connected:
                Log.info("session \(id) (snap \(name)): audio-record is connected")
                onAllowed()
            case .notConnected:
                Log.warn(
                    "session \(id) (snap \(name)) records silence whatever is granted: its audio-record plug is not connected (snap connect \(name):audio-record)"
                )
            case .unavailable(let why):
                Log.warn("session \(id) (snap \(name)) records silence: cannot ask snapd whether audio-record is connected (\(why))")
            }
        }
    }

    func sessionClosed(id: UInt64) {
        states.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// Whether a question to snapd has not been answered yet.
    var isAsking: Bool { states.withLock { $0.values.contains(.asking) } }

    /// Whether connection `id` may get real samples (snapd permitting).
    func allows(_ id: UInt64) -> Bool {
        states.withLock { $0[id] }.map { $0 == .allowed } ?? true
    }
}
