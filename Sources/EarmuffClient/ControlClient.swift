// A blocking control-protocol client for the `earmuff` subcommands and tests:
// connect, read the greeting, send requests, read replies; events and prompts
// that arrive while a reply is awaited are kept in order for `receive`.
import ControlProtocol
import Glibc
import LinuxSystem

/// Why talking to the daemon failed.
public struct ControlClientError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// Nothing accepts connections at the path (see `errno`).
        case unreachable
        /// The daemon closed the connection.
        case closed
        /// The daemon sent something this client cannot read, or spoke another protocol version.
        case protocolError
        /// No reply within the time limit.
        case timeout
        /// The daemon answered with an error reply (see `reply`).
        case daemon
    }

    public let kind: Kind
    /// The failed call's errno, when one failed.
    public let errno: Errno?
    /// The daemon's error reply for `.daemon`.
    public let reply: ControlError?
    /// One line naming cause and fix.
    public let message: String

    public init(_ kind: Kind, errno: Errno? = nil, reply: ControlError? = nil, _ message: String) {
        self.kind = kind
        self.errno = errno
        self.reply = reply
        self.message = message
    }

    public var description: String { message }
}

/// One connection to the daemon's control socket. Not thread-safe: use from one thread.
public final class ControlClient {
    /// The socket path.
    public let path: String
    /// The daemon's greeting.
    public private(set) var greeting: ServerHello
    private var socket: FileDescriptor
    /// The connected descriptor, for `poll` alongside other input (-1 once closed).
    public var fd: Int32 { socket.rawValue }
    private var framer = LineFramer(limit: ControlLimits.maxServerLine)
    private var queued: [ServerMessage] = []
    private var nextID = 1
    /// How to start the daemon, for the message when nothing answers.
    private let startHint: String

    /// What an unreachable daemon's message advises by default.
    public static let serveHint = "start it with 'earmuff serve'"

    /// Connects and reads the greeting (waiting at most `timeoutMs`). `startHint` ends the
    /// message when nothing answers: how to start the daemon where this client runs.
    public init(path: String, timeoutMs: Int32 = 5000, startHint: String = ControlClient.serveHint) throws(ControlClientError) {
        self.path = path
        self.startHint = startHint
        let socket: FileDescriptor
        do throws(Errno) {
            // Blocking connect: it waits while the daemon's backlog is full instead of failing.
            socket = try .unixSocket(blocking: true)
        } catch {
            throw ControlClientError(.unreachable, errno: error, "cannot create a socket (\(error))")
        }
        do throws(Errno) {
            try socket.connect(to: path)
        } catch {
            throw Self.unreachable(path, error, startHint: startHint)
        }
        self.socket = socket
        greeting = ServerHello(daemonVersion: "", pid: 0)
        guard case .response(_, .hello(let hello))? = try nextMessage(timeoutMs: timeoutMs, waitForConnect: true) else {
            throw ControlClientError(.protocolError, "\(path) did not greet like an earmuff daemon; check the path given with --control")
        }
        guard ControlProtocolVersion.supported.contains(hello.version) else {
            throw ControlClientError(
                .protocolError,
                "the daemon at \(path) speaks control protocol version \(hello.version), this client version \(ControlProtocolVersion.current); use the earmuff of the daemon's release (\(hello.daemonVersion))"
            )
        }
        greeting = hello
    }

    /// Closes the connection (the socket closes itself when the client goes, too).
    public func close() { socket.close() }

    private static func unreachable(_ path: String, _ e: Errno, startHint: String) -> ControlClientError {
        let hint =
            e == .permissionDenied || e == .operationNotPermitted
            ? "the control socket belongs to another user; run earmuff as the daemon's user"
            : startHint
        return ControlClientError(.unreachable, errno: e, "cannot reach the daemon at \(path) (\(e)); \(hint)")
    }

    /// Sends a message without waiting for anything.
    public func send(_ message: ClientMessage) throws(ControlClientError) {
        let bytes = ControlCodec.encodeLine(message)
        do throws(SendFailure<ControlClientError>) {
            try socket.sendAll(bytes) { () throws(ControlClientError) in _ = try waitFor(Int16(POLLOUT), timeoutMs: 5000) }
        } catch {
            switch error {
            case .gaveUp(let e): throw e
            case .failed(let e):
                throw ControlClientError(
                    .closed, errno: e, "the daemon at \(path) closed the connection (\(e)); check that it is running with 'earmuff status'")
            }
        }
    }

    /// Sends `request` with a fresh id and waits for its reply; other messages are queued.
    /// An error reply throws `.daemon` with the daemon's message.
    public func request(_ request: ControlRequest, timeoutMs: Int32 = 10000) throws(ControlClientError) -> ControlResponse {
        let id = nextRequestID()
        try send(.request(request, id: id))
        var held: [ServerMessage] = []
        defer { queued.append(contentsOf: held) } // newer than anything already queued
        while true {
            guard let m = try nextMessage(timeoutMs: timeoutMs, waitForConnect: false) else {
                throw ControlClientError(.timeout, "the daemon at \(path) did not answer '\(request.typeName)' within \(timeoutMs / 1000) s; check its log")
            }
            if case .response(let rid, let response) = m, rid == id || (rid == nil && response.isError) {
                if case .error(let e) = response {
                    throw ControlClientError(.daemon, reply: e, e.message)
                }
                return response
            }
            held.append(m)
        }
    }

    /// A fresh request id for messages sent with `send`.
    public func nextRequestID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    /// The next message: a queued one, or one read within `timeoutMs` (-1 waits forever); nil on timeout.
    public func receive(timeoutMs: Int32) throws(ControlClientError) -> ServerMessage? {
        if !queued.isEmpty { return queued.removeFirst() }
        return try nextMessage(timeoutMs: timeoutMs, waitForConnect: false)
    }

    /// True when `receive(timeoutMs: 0)` would return a message without reading the socket.
    public var hasQueuedMessages: Bool { !queued.isEmpty }

    private func nextMessage(timeoutMs: Int32, waitForConnect: Bool) throws(ControlClientError) -> ServerMessage? {
        while true {
            let line: [UInt8]?
            do {
                line = try framer.readLine()
            } catch {
                throw ControlClientError(
                    .protocolError, "the daemon at \(path) sent a line longer than \(ControlLimits.maxServerLine) bytes; report this as a bug")
            }
            if let line {
                do {
                    return try ControlCodec.decodeServerMessage(line)
                } catch .unknownType {
                    continue // a newer daemon's message kind: skip it
                } catch {
                    throw ControlClientError(
                        .protocolError, "the daemon at \(path) sent an unreadable message (\(error)); use the earmuff client of the daemon's release")
                }
            }
            if try !fill(timeoutMs: timeoutMs, waitForConnect: waitForConnect) { return nil }
        }
    }

    /// Reads what is available, waiting up to `timeoutMs`; false on timeout.
    private func fill(timeoutMs: Int32, waitForConnect: Bool) throws(ControlClientError) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n: Int
            do throws(Errno) {
                n = try socket.receive(into: &buffer, waiting: false)
            } catch {
                let e = error
                if e == .wouldBlock || (waitForConnect && e == .notConnected) {
                    if try !waitFor(Int16(POLLIN), timeoutMs: timeoutMs) { return false }
                    continue
                }
                if waitForConnect { throw Self.unreachable(path, e, startHint: startHint) }
                throw ControlClientError(
                    .closed, errno: e, "lost the connection to the daemon at \(path) (\(e)); check that it is running with 'earmuff status'")
            }
            if n > 0 {
                framer.append(buffer[0..<n])
                return true
            }
            throw ControlClientError(.closed, "the daemon at \(path) closed the connection; check its log, or restart it with 'earmuff serve'")
        }
    }

    @discardableResult
    private func waitFor(_ events: Int16, timeoutMs: Int32) throws(ControlClientError) -> Bool {
        var p = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let r = unsafe poll(&p, 1, timeoutMs)
            if r > 0 { return true }
            if r == 0 { return false }
            let e = Errno.current
            if e != .interrupted {
                throw ControlClientError(.closed, errno: e, "poll on the control socket failed (\(e))")
            }
        }
    }
}
