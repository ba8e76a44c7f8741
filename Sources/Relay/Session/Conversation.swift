// What the relay keeps of one client's conversation with the server, beside the
// `SessionState` it shares with the consent service: the requests that wait for replies,
// the handshake and idle clocks, the record streams that live. Touched only when a packet
// passes (never per audio frame), so a lock is fine here.
import Basics
import LinuxSystem
import PulseWire
import Runtime
import StreamState
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

/// One session's conversation with the server, as the relay follows it.
final class Conversation: Sendable {
    /// The client, as the consent service knows it.
    let state: SessionState
    /// The process that sent the client's latest bytes (SCM_CREDENTIALS; 0 before any).
    /// Written and read on the session's loop only; atomic so the type stays Sendable.
    let lastSenderPID = Atomic<Int32>(0)
    /// Whether the client has sent AUTH and SET_CLIENT_NAME (before `handshake-timeout` ends).
    let handshakeDone = Atomic<Bool>(false)
    /// When (monotonic milliseconds) the client last sent a packet, or connected.
    let lastPacketAt = Atomic<UInt64>(Conversation.monotonicMilliseconds())
    /// Record streams the app has now (held or not).
    let liveRecords = Atomic<Int>(0)
    /// Requests forwarded and not answered yet: every tag, and what matters of some.
    private struct Outstanding {
        var tags: Set<UInt32> = []
        var requests: [UInt32: PendingRequest] = [:]
    }
    private let pending = Locked(Outstanding())
    /// How many requests wait for replies (the loop does not batch audio while any do).
    private let awaiting = Atomic<Int>(0)
    /// The most requests a client may have waiting for replies.
    static let maximumOutstanding = 16_384

    init(_ state: SessionState) { self.state = state }

    static func monotonicMilliseconds() -> UInt64 { UInt64(monotonicNow() * 1000) }

    /// Whether the client holds nothing of the server's: no record stream now, no playback
    /// stream ever (those are not followed to their end).
    var holdsNothing: Bool {
        liveRecords.load(ordering: .relaxed) == 0 && state.ownSinkInputs.withLock { $0.isEmpty }
    }

    /// Why a request with `tag` must not be forwarded: its tag still waits for a reply
    /// (the server's two replies could not be told apart), or too many do; nil if it may.
    func tagProblem(_ tag: UInt32) -> String? {
        if state.isAnsweredHere(tag) { return "tag \(tag) is still waiting for its reply" }
        return pending.withLock { p in
            if p.tags.contains(tag) { return "tag \(tag) is still waiting for its reply" }
            if p.tags.count >= Self.maximumOutstanding { return "more than \(Self.maximumOutstanding) requests wait for replies" }
            return nil
        }
    }

    /// Whether a request with `tag` waits for its reply (forwarded, or answered here later).
    func tagInUse(_ tag: UInt32) -> Bool {
        pending.withLock { $0.tags.contains(tag) } || state.isAnsweredHere(tag)
    }

    /// A request with `tag` goes to the server; `request` says what its reply will set up.
    func expectReply(tag: UInt32, _ request: PendingRequest? = nil) {
        pending.withLock { p in
            p.tags.insert(tag)
            if let request { p.requests[tag] = request }
            awaiting.store(p.tags.count, ordering: .relaxed)
        }
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
}
