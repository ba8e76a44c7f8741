// One connection of the app to its sound server, as libpulse makes it (AUTH with the
// process's credentials and the cookie, SET_CLIENT_NAME with the declared properties),
// used only for the permission extension. A reader thread pairs replies with requests by
// tag and hands `module-earmuff` events to listeners; whoever waits for a reply is told
// when the connection closes.
import Dispatch
import Glibc
import PulseWire
import LinuxSystem

/// What a request got.
enum CallResult: Sendable {
    /// The REPLY packet's payload.
    case reply([UInt8])
    /// An ERROR with this code.
    case error(UInt32)
    /// The connection closed (or never opened) first.
    case closed(String)
}

final class PermissionConnection: Sendable {
    /// Closed with the connection, once nothing (the reader included) holds it, so no write
    /// can reach a descriptor number the process has reused.
    private let socket: FileDescriptor
    private struct State {
        var nextTag: UInt32 = 2
        var waiting: [UInt32: @Sendable (CallResult) -> Void] = [:]
        var listeners: [UInt64: @Sendable (PermissionEvent?) -> Void] = [:]
        var nextListener: UInt64 = 1
        var closed: String?
    }
    private let state = Locked(State())
    /// Serialises whole frames on the socket; true once the first (AUTH, with credentials) went.
    private let writing = Locked(false)

    private init(socket: consuming FileDescriptor) { self.socket = socket }

    /// Connects to the first of `paths` that answers and completes the handshake, each step
    /// within `timeout` seconds; throws why not.
    static func open(
        paths: [String], environment: [String: String],
        timeout: Double
    ) throws(UnavailableReason) -> PermissionConnection {
        guard !paths.isEmpty else {
            throw UnavailableReason("no sound server address: neither PULSE_SERVER (unix:PATH) nor XDG_RUNTIME_DIR is set")
        }
        var failures: [String] = []
        for path in paths {
            let socket: FileDescriptor
            do throws(Errno) {
                socket = try .unixSocket(blocking: true)
            } catch {
                throw UnavailableReason("cannot create a socket: \(error)")
            }
            do throws(Errno) {
                try socket.connect(to: path)
            } catch {
                failures.append("\(path): \(error)")
                continue
            }
            var tv = timeval(tv_sec: max(1, Int(timeout)), tv_usec: 0)
            unsafe setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            let c = PermissionConnection(socket: socket)
            c.startReader()
            try c.handshake(environment: environment, timeout: timeout)
            return c
        }
        throw UnavailableReason("no sound server answers at \(failures.joined(separator: "; "))")
    }

    /// Ends the connection: no new request goes out, and the reader sees the end and tells
    /// every waiting request.
    func close(_ why: String = "the connection was closed") {
        state.withLock { if $0.closed == nil { $0.closed = why } }
        _ = shutdown(socket.rawValue, Int32(SHUT_RDWR))
    }

    var isOpen: Bool { state.withLock { $0.closed == nil } }

    // MARK: requests

    /// Sends the packet `build(tag)` makes; `done` gets its reply, error, or the close.
    func send(_ build: (UInt32) -> [UInt8], done: @escaping @Sendable (CallResult) -> Void) {
        let tag: UInt32? = state.withLock { s in
            guard s.closed == nil else { return nil }
            let tag = s.nextTag
            s.nextTag = s.nextTag >= 0x7FFF_FFFF ? 2 : s.nextTag + 1
            s.waiting[tag] = done
            return tag
        }
        guard let tag else {
            done(.closed(state.withLock { $0.closed } ?? "closed"))
            return
        }
        let payload = build(tag)
        var frame = FrameDescriptor(
            length: UInt32(payload.count), channel: FrameDescriptor.controlChannel,
            offsetHi: 0, offsetLo: 0, flags: 0
        ).bytes
        frame += payload
        let sent = writing.withLock { started in
            defer { started = true }
            return started ? sendAll(frame) : sendWithCredentials(frame)
        }
        if !sent { finish("cannot write to the sound server: \(Errno.current)") }
    }

    /// Sends and waits up to `timeout` seconds (nil: until the connection closes).
    func call(_ build: (UInt32) -> [UInt8], timeout: Double?) -> CallResult {
        let box = Locked<CallResult?>(nil)
        let ready = DispatchSemaphore(value: 0)
        send(build) { result in
            box.withLock { $0 = result }
            ready.signal()
        }
        if let timeout {
            if ready.wait(timeout: .now() + timeout) == .timedOut {
                // A server that does not answer is of no use: the next call connects again.
                close("the sound server did not answer within \(Int(timeout)) s")
                return .closed("the sound server did not answer within \(Int(timeout)) s")
            }
        } else {
            ready.wait()
        }
        return box.withLock { $0 } ?? .closed("no answer")
    }

    /// Calls `body` with every `module-earmuff` event, and with nil once when the connection closes.
    func listen(_ body: @escaping @Sendable (PermissionEvent?) -> Void) -> UInt64? {
        state.withLock { s in
            guard s.closed == nil else { return nil }
            let id = s.nextListener
            s.nextListener += 1
            s.listeners[id] = body
            return id
        }
    }

    func stopListening(_ id: UInt64) {
        _ = state.withLock { $0.listeners.removeValue(forKey: id) }
    }

    var hasListeners: Bool { state.withLock { !$0.listeners.isEmpty } }

    // MARK: handshake

    private func handshake(environment: [String: String], timeout: Double) throws(UnavailableReason) {
        let auth = call(
            { tag in
                AuthRequest(versionWord: Limits.protocolVersion, cookie: Self.cookie(environment)).packet(tag: tag, version: 0)
            }, timeout: timeout)
        try expectReply(auth, "AUTH")
        let name = call(
            { tag in
                SetClientName(proplist: Self.clientProperties(environment)).packet(tag: tag, version: Limits.protocolVersion)
            }, timeout: timeout)
        try expectReply(name, "SET_CLIENT_NAME")
    }

    private func expectReply(_ r: CallResult, _ what: String) throws(UnavailableReason) {
        switch r {
        case .reply: return
        case let .error(code):
            close()
            throw UnavailableReason("the sound server refused \(what) (\(ErrorCode(rawValue: code).map { "\($0)" } ?? "error \(code)"))")
        case let .closed(why):
            close()
            throw UnavailableReason("the sound server closed the connection during \(what): \(why)")
        }
    }

    /// The 256-byte cookie libpulse would send: `PULSE_COOKIE`, else `~/.config/pulse/cookie`;
    /// zeros without one (a server that checks credentials accepts its own user).
    static func cookie(_ environment: [String: String]) -> [UInt8] {
        var candidates: [String] = []
        if let c = environment["PULSE_COOKIE"] { candidates.append(c) }
        if let config = environment["XDG_CONFIG_HOME"] { candidates.append(config + "/pulse/cookie") }
        if let home = environment["HOME"] { candidates += [home + "/.config/pulse/cookie", home + "/.pulse-cookie"] }
        for path in candidates {
            let fd = unsafe Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { Glibc.close(fd) }
            var bytes = [UInt8](repeating: 0, count: Limits.cookieLength)
            let n = unsafe bytes.withUnsafeMutableBytes { unsafe read(fd, $0.baseAddress, $0.count) }
            if n == Limits.cookieLength { return bytes }
        }
        return [UInt8](repeating: 0, count: Limits.cookieLength)
    }

    /// application.name and the process's own properties, then what the environment declares.
    static func clientProperties(_ environment: [String: String]) -> Proplist {
        var props = Proplist()
        let exe = readLink("/proc/self/exe") ?? CommandLine.arguments.first ?? "app"
        let binary = exe.split(separator: "/").last.map(String.init) ?? exe
        props.set(Proplist.Key.applicationName, string: binary)
        props.set("application.process.binary", string: binary)
        props.set("application.process.id", string: String(getpid()))
        for (key, value) in ClientEnvironment.declaredProperties(environment).sorted(by: { $0.key < $1.key }) {
            props.set(key, string: value)
        }
        return props
    }

    // MARK: socket

    /// Sends all of `bytes` on the blocking socket.
    private func sendAll(_ bytes: [UInt8]) -> Bool {
        do throws(SendFailure<Errno>) {
            try socket.sendAll(bytes) { () throws(Errno) in throw .wouldBlock }
            return true
        } catch {
            return false
        }
    }

    /// The first packet (AUTH) carries the process's credentials, as libpulse sends them.
    private func sendWithCredentials(_ bytes: [UInt8]) -> Bool {
        let sent = unsafe bytes.withUnsafeBytes { try? unsafe socket.sendWithCredentials($0) }
        guard let n = sent else { return false }
        return n == bytes.count || sendAll(Array(bytes[n...]))
    }

    /// The reader runs for the connection's life on a queue of its own (it blocks in recv).
    private func startReader() {
        DispatchQueue(label: "earmuff-kit.reader").async { [self] in
            var parser = FrameParser()
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var why = "the sound server closed the connection"
            reading: while true {
                let n: Int
                do throws(Errno) {
                    n = try socket.receive(into: &buffer)
                } catch {
                    why = "reading from the sound server: \(error)"
                    break
                }
                if n == 0 { break }
                parser.append(contentsOf: buffer[0..<n])
                do {
                    while let frame = try parser.next() {
                        guard frame.descriptor.isPacket else { continue }
                        try dispatch(frame.payload)
                    }
                } catch {
                    why = "the sound server sent a malformed packet: \(error)"
                    break reading
                }
            }
            finish(why)
        }
    }

    private func dispatch(_ payload: [UInt8]) throws(WireError) {
        var r = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &r)
        switch Command(rawValue: header.command) {
        case .reply:
            state.withLock { $0.waiting.removeValue(forKey: header.tag) }?(.reply(payload))
        case .error:
            let code = (try? r.readU32()) ?? ErrorCode.unknown.rawValue
            state.withLock { $0.waiting.removeValue(forKey: header.tag) }?(.error(code))
        case .extension:
            guard let event = try PermissionEvent.decode(payload) else { return }
            for l in state.withLock({ Array($0.listeners.values) }) { l(event) }
        default:
            break // other events of the server: not asked for
        }
    }

    /// Marks the connection closed and tells everyone waiting.
    private func finish(_ why: String) {
        let (reason, waiting, listeners) = state.withLock { s in
            // The first reason stands (a close for no answer, before the reader saw the end).
            let reason = s.closed ?? why
            s.closed = reason
            defer {
                s.waiting.removeAll()
                s.listeners.removeAll()
            }
            return (reason, Array(s.waiting.values), Array(s.listeners.values))
        }
        close()
        for w in waiting { w(.closed(reason)) }
        for l in listeners { l(nil) }
    }
}

/// Why the permission API cannot be used here (no server, no Earmuff in front of it).
public struct UnavailableReason: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The target of a symbolic link.
private func readLink(_ path: String) -> String? {
    var buf = [CChar](repeating: 0, count: 4096)
    let n = unsafe readlink(path, &buf, buf.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
