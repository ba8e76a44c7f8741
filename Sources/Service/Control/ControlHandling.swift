// What the control server (ControlServer.swift) hands to the daemon: a
// connection's id and peer, the handler it calls for each request, and its
// options and errors.
import ControlProtocol
import LinuxSystem

/// Identifies one control connection for the lifetime of the server.
public struct ControlConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// The raw number (unique, never reused by one server).
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "control#\(rawValue)" }
}

/// Kernel-reported credentials of a control peer.
public struct ControlPeer: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// The daemon's side of the control protocol. All calls arrive on the control thread,
/// one at a time; they must return quickly (no audio path waits, no blocking I/O).
public protocol ControlHandler: AnyObject, Sendable {
    /// A peer connected and passed the uid check.
    func connectionOpened(_ connection: ControlConnectionID, peer: ControlPeer)
    /// Answers one request. The server echoes the request id. A non-error reply to
    /// `subscribe` makes the connection receive `broadcast` events. Messages sent with
    /// `ControlServer.send` from inside this call are delivered after the reply.
    func handle(_ request: ControlRequest, from connection: ControlConnectionID) -> ControlResponse
    /// The connection is gone (peer closed, dropped, or the server stopped).
    func connectionClosed(_ connection: ControlConnectionID)
}

extension ControlHandler {
    public func connectionOpened(_ connection: ControlConnectionID, peer: ControlPeer) {}
}

/// Tunables of a `ControlServer`.
public struct ControlServerOptions: Sendable {
    /// The daemon release announced in the greeting.
    public var daemonVersion: String
    /// Longest request line accepted.
    public var maxLineBytes: Int
    /// Unsent output a connection may accumulate before it is dropped.
    public var maxPendingOutputBytes: Int
    /// Most simultaneous connections. A new one over it takes the place of the connection idle
    /// the longest that did not subscribe or become an agent, so a one-shot request always
    /// gets a slot.
    public var maxConnections: Int
    /// Seconds a connection that did not subscribe or become an agent may stay silent.
    public var idleTimeout: Double
    /// Connections of one uid that may subscribe or be agents at once (they never time out),
    /// counted apart for Earmuff's own programs and for the rest.
    public var maxLongLivedPerUID: Int
    /// Peer uids served; nil means this process's effective uid and root.
    public var allowedUIDs: Set<UInt32>?
    /// Whether a peer runs one of Earmuff's own programs (its agent, `watch`, the settings
    /// window), which alone may become agents and have long-lived slots of their own; nil means
    /// `ProcessInspector.runsEarmuffsOwnProgram`.
    public var ownProgram: (@Sendable (ControlPeer) -> Bool)?

    public init(
        daemonVersion: String = "0.0.0", maxLineBytes: Int = ControlLimits.maxRequestLine,
        maxPendingOutputBytes: Int = 4 << 20, maxConnections: Int = 128, idleTimeout: Double = 10,
        maxLongLivedPerUID: Int = 16, allowedUIDs: Set<UInt32>? = nil
    ) {
        self.daemonVersion = daemonVersion
        self.maxLineBytes = maxLineBytes
        self.maxPendingOutputBytes = maxPendingOutputBytes
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.maxLongLivedPerUID = maxLongLivedPerUID
        self.allowedUIDs = allowedUIDs
    }
}

/// Setting up the control socket failed.
public struct ControlServerError: Error, Sendable, CustomStringConvertible {
    /// errno of the failed call.
    public let code: Errno
    /// One line naming what failed and the fix.
    public let message: String

    public init(code: Errno, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
