// A client of the sound server as the consent service knows it: who it is, what it says of
// itself, and what the service sends it. The Pulse relay makes one per session (and keeps
// its conversation with the server beside it, `Relay/Session/Conversation.swift`); the
// PipeWire door makes one per native client. Touched when a packet or an event passes,
// never per audio frame, so locks are fine here.
import Basics
import LinuxSystem
import PulseWire
import Synchronization

/// What the daemon knows about one client connection.
public final class SessionState: Sendable {
    public let id: UInt64
    public let identity: ClientIdentity
    public let connectedAt: Double
    /// Name of the listening socket the client came through (launcher sockets have an app id).
    public let launcherAppID: String?
    public let properties = Locked<ClientProperties>(ClientProperties())
    /// Source-output indexes of this client's record streams (for ownership checks).
    public let ownSourceOutputs = Locked<Set<UInt32>>([])
    /// Sink-input indexes of this client's playback streams (for ownership checks).
    public let ownSinkInputs = Locked<Set<UInt32>>([])
    /// The server's index for this client (from the SET_CLIENT_NAME reply).
    public let clientIndex = Locked<UInt32?>(nil)
    /// Effective protocol version used to parse layouts: min(client, server), masked; set by
    /// the relay from the client's AUTH and the server's reply.
    public let version = Atomic<UInt32>(8)
    /// The most packets Earmuff makes itself (refusals, permission replies and events) that may
    /// wait for a client that does not read.
    public static let maximumInjections = 1024
    private let injections = Locked<[[UInt8]]>([])
    /// Packets in `injections`, so the audio path can skip the lock when there are none.
    private let injectionCount = Atomic<Int>(0)
    /// Permission requests Earmuff answers itself, still waiting for the person.
    private let answeredHere = Locked<Set<UInt32>>([])
    private let closeReason = Locked<String?>(nil)

    /// Told whether the client may record each kind, from when it opens and at every change
    /// (called under the consent engine's lock: it must not block). The PipeWire door shows a
    /// client the sources of the kinds it may record only.
    public let grantWatch: (@Sendable (Capability, Bool) -> Void)?

    public init(
        id: UInt64, identity: ClientIdentity, launcherAppID: String?, connectedAt: Double,
        grantWatch: (@Sendable (Capability, Bool) -> Void)? = nil
    ) {
        self.id = id
        self.identity = identity
        self.launcherAppID = launcherAppID
        self.connectedAt = connectedAt
        self.grantWatch = grantWatch
    }

    public var protocolVersion: UInt32 { version.load(ordering: .acquiring) }

    /// The most permission requests of one client that may wait for the person at once.
    public static let maximumPermissionRequests = 64

    /// A permission request with `tag` waits for Earmuff's own reply; false when too many do.
    public func holdPermissionTag(_ tag: UInt32) -> Bool {
        answeredHere.withLock { held in
            guard held.count < Self.maximumPermissionRequests else { return false }
            held.insert(tag)
            return true
        }
    }

    /// Earmuff's reply to the permission request with `tag` is on its way.
    public func releasePermissionTag(_ tag: UInt32) {
        _ = answeredHere.withLock { $0.remove(tag) }
    }

    /// Whether a permission request with `tag` waits for Earmuff's own reply (its tag is in use,
    /// though it was never forwarded).
    public func isAnsweredHere(_ tag: UInt32) -> Bool {
        answeredHere.withLock { $0.contains(tag) }
    }

    /// Refusals queued for the client and not yet written.
    public var injectionBacklog: Int { injectionCount.load(ordering: .acquiring) }

    /// Queues a packet for the client, to be inserted at the next S→C frame boundary.
    public func queueInjection(_ payload: [UInt8]) {
        injections.withLock { q in
            q.append(payload)
            injectionCount.store(q.count, ordering: .releasing)
        }
    }

    /// Takes the queued packets out (the relay's server half, at a frame boundary).
    public func takeInjections() -> [[UInt8]] {
        guard injectionCount.load(ordering: .acquiring) > 0 else { return [] }
        return injections.withLock { q in
            let all = q
            q.removeAll()
            injectionCount.store(0, ordering: .releasing)
            return all
        }
    }

    /// Remembers the first reason the session ended.
    public func noteCloseReason(_ reason: String) {
        closeReason.withLock { if $0 == nil { $0 = reason } }
    }

    public var reasonClosed: String? { closeReason.withLock { $0 } }
}

/// What the client says about itself: display only, never used for consent.
public struct ClientProperties: Sendable, Equatable {
    public var applicationName: String?
    public var processBinary: String?
    public var capturePurpose: String?
    /// The purpose given to `earmuff run --purpose` for a launcher socket.
    public var launcherPurpose: String?

    /// The name shown to people: application.name, else the binary, else nil.
    public var displayName: String? { applicationName ?? processBinary }

    /// Merges the keys of a client proplist that Earmuff shows.
    public mutating func update(from props: Proplist) {
        if let v = props["application.name"] { applicationName = v }
        if let v = props["application.process.binary"] { processBinary = v }
        if let v = props["application.capture.purpose"] { capturePurpose = v.isEmpty ? nil : v }
    }
}
