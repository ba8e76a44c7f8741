// Control state shared by the two halves of a session. Touched only when a
// packet passes (never per audio frame), so a lock is fine here.
import Basics
import LinuxSystem
import PulseWire
import Runtime
import Synchronization

/// A request whose reply the S→C side must recognise, keyed by tag.
enum PendingRequest: Sendable {
    case auth
    case setClientName
    case createRecord(CreateRecordStreamRequest)
    case createPlayback
    case createUpload
    /// The app deleted the record stream it knows as `channel`.
    case deleteRecord(channel: UInt32)
    /// A forwarded GET_RECORD_LATENCY of the app's stream on `channel`, which was held: its
    /// indexes are the app's.
    case recordLatency(channel: UInt32)
    /// Earmuff's own CREATE_RECORD_STREAM for the app's stream on `channel` (never the app's reply).
    case promote(channel: UInt32)
    /// Earmuff's own DELETE_RECORD_STREAM of the server's `channel`.
    case release(channel: UInt32)
    /// Another request of Earmuff's own whose reply only goes away.
    case own
    /// GET_SOURCE_INFO (one record) or its _LIST: Earmuff's own nodes are left out of the reply.
    case sourceInfo(list: Bool)
    /// GET_SOURCE_OUTPUT_INFO (one record) or its _LIST: concealed recordings are left out.
    case sourceOutputInfo(list: Bool)
}

extension PendingRequest {
    /// A request Earmuff sent itself: its reply is never the app's.
    var isEarmuffs: Bool {
        switch self {
        case .promote, .release, .own: true
        default: false
        }
    }
}

/// What the daemon knows about one client connection.
public final class SessionState: Sendable {
    public let id: UInt64
    public let identity: ClientIdentity
    public let connectedAt: Double
    /// Name of the listening socket the client came through (launcher sockets have an app id).
    public let launcherAppID: String?
    /// The process that sent the client's latest bytes (SCM_CREDENTIALS; 0 before any).
    /// Written and read on the session's loop only; atomic so the type stays Sendable.
    let lastSenderPID = Atomic<Int32>(0)
    /// Whether the client has sent AUTH and SET_CLIENT_NAME (before `handshake-timeout` ends).
    let handshakeDone = Atomic<Bool>(false)
    /// When (monotonic milliseconds) the client last sent a packet, or connected.
    let lastPacketAt = Atomic<UInt64>(SessionState.monotonicMilliseconds())

    static func monotonicMilliseconds() -> UInt64 { UInt64(monotonicNow() * 1000) }

    /// Whether the client holds nothing of the server's: no record stream now, no playback
    /// stream ever (those are not followed to their end).
    var holdsNothing: Bool {
        liveRecords.load(ordering: .relaxed) == 0 && ownSinkInputs.withLock { $0.isEmpty }
    }
    /// Record streams the app has now (held or not).
    let liveRecords = Atomic<Int>(0)
    /// Effective protocol version used to parse layouts: min(client, server), masked.
    let version = Atomic<UInt32>(8)
    /// Requests forwarded and not answered yet: every tag, and what matters of some.
    private struct Outstanding {
        var tags: Set<UInt32> = []
        var requests: [UInt32: PendingRequest] = [:]
        /// Permission requests Earmuff answers itself, still waiting for the person (never
        /// forwarded, so not in `tags`: they must not stop the loop batching audio).
        var answeredHere: Set<UInt32> = []
    }
    private let pending = Locked(Outstanding())
    /// How many requests wait for replies (the loop does not batch audio while any do).
    private let awaiting = Atomic<Int>(0)
    /// The most requests a client may have waiting for replies.
    static let maximumOutstanding = 16_384
    /// The most packets Earmuff makes itself (refusals, permission replies and events) that may
    /// wait for a client that does not read.
    public static let maximumInjections = 1024
    private let injections = Locked<[[UInt8]]>([])
    /// Packets in `injections`, so the audio path can skip the lock when there are none.
    private let injectionCount = Atomic<Int>(0)
    private let closeReason = Locked<String?>(nil)
    public let properties = Locked<ClientProperties>(ClientProperties())
    /// Source-output indexes of this client's record streams (for ownership checks).
    public let ownSourceOutputs = Locked<Set<UInt32>>([])
    /// Sink-input indexes of this client's playback streams (for ownership checks).
    public let ownSinkInputs = Locked<Set<UInt32>>([])
    /// The server's index for this client (from the SET_CLIENT_NAME reply).
    public let clientIndex = Locked<UInt32?>(nil)

    /// Told whether the client may record each kind, from when it opens and at every change
    /// (called under the consent engine's lock: it must not block). The PipeWire door shows a
    /// client the sources of the kinds it may record only.
    public let grantWatch: (@Sendable (Capability, Bool) -> Void)?

    public init(id: UInt64, identity: ClientIdentity, launcherAppID: String?, connectedAt: Double,
                grantWatch: (@Sendable (Capability, Bool) -> Void)? = nil) {
        self.id = id
        self.identity = identity
        self.launcherAppID = launcherAppID
        self.connectedAt = connectedAt
        self.grantWatch = grantWatch
    }

    public var protocolVersion: UInt32 { version.load(ordering: .acquiring) }

    /// Why a request with `tag` must not be forwarded: its tag still waits for a reply
    /// (the server's two replies could not be told apart), or too many do; nil if it may.
    func tagProblem(_ tag: UInt32) -> String? {
        pending.withLock { p in
            if p.tags.contains(tag) || p.answeredHere.contains(tag) { return "tag \(tag) is still waiting for its reply" }
            if p.tags.count >= Self.maximumOutstanding { return "more than \(Self.maximumOutstanding) requests wait for replies" }
            return nil
        }
    }

    /// Whether a request with `tag` waits for its reply (forwarded, or answered here later).
    func tagInUse(_ tag: UInt32) -> Bool {
        pending.withLock { $0.tags.contains(tag) || $0.answeredHere.contains(tag) }
    }

    /// A request with `tag` goes to the server; `request` says what its reply will set up.
    func expectReply(tag: UInt32, _ request: PendingRequest? = nil) {
        pending.withLock { p in
            p.tags.insert(tag)
            if let request { p.requests[tag] = request }
            awaiting.store(p.tags.count, ordering: .relaxed)
        }
    }

    /// The most permission requests of one client that may wait for the person at once.
    public static let maximumPermissionRequests = 64

    /// A permission request with `tag` waits for Earmuff's own reply; false when too many do.
    public func holdPermissionTag(_ tag: UInt32) -> Bool {
        pending.withLock { p in
            guard p.answeredHere.count < Self.maximumPermissionRequests else { return false }
            p.answeredHere.insert(tag)
            return true
        }
    }

    /// Earmuff's reply to the permission request with `tag` is on its way.
    public func releasePermissionTag(_ tag: UInt32) {
        _ = pending.withLock { $0.answeredHere.remove(tag) }
    }

    /// The reply (or error) for `tag` arrived: it no longer waits; what it sets up, if anything.
    func takePending(tag: UInt32) -> PendingRequest? {
        pending.withLock { p in
            p.tags.remove(tag)
            awaiting.store(p.tags.count, ordering: .relaxed)
            return p.requests.removeValue(forKey: tag)
        }
    }

    /// Whether a request forwarded to the server still waits for its reply.
    var awaitsReply: Bool { awaiting.load(ordering: .relaxed) > 0 }

    /// Refusals queued for the client and not yet written.
    public var injectionBacklog: Int { injectionCount.load(ordering: .acquiring) }

    /// Queues a packet for the client, to be inserted at the next S→C frame boundary.
    public func queueInjection(_ payload: [UInt8]) {
        injections.withLock { q in
            q.append(payload)
            injectionCount.store(q.count, ordering: .releasing)
        }
    }

    func takeInjections() -> [[UInt8]] {
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
