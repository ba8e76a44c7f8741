// The two concrete halves of a session.
import Consent
import LinuxSystem
import PulseWire
import Ring

/// The app's socket: reads requests and playback data, writes replies,
/// events and (possibly silenced) record data.
final class ClientHalf: Half, @unchecked Sendable {
    override var sideName: String { "client" }
    var onClose: (() -> Void)?
    private var requestsSeen = 0

    /// How long the loop polls for a reply after forwarding a request. A reply
    /// from a local server takes tens of microseconds; sleeping and being woken
    /// for it costs about as much again. Never after audio: only requests
    /// (packets, which all carry a tag) start the window.
    static let replyPollSeconds = 0.000_2

    /// With SO_PASSCRED (set at accept) one read never mixes two senders' bytes, so the
    /// pid of the latest read is the sender of the packet the filter is about to see.
    override func noteSender(_ pid: Int32) {
        state.lastSenderPID.store(pid, ordering: .relaxed)
    }

    override func afterProcessing() {
        let forwarded = producerForwarder.packetsForwarded
        if forwarded != requestsSeen {
            requestsSeen = forwarded
            loop.stayAwake(for: Self.replyPollSeconds)
            (peer as? UpstreamHalf)?.updateAwaitingReply()
        }
    }

    override func didClose() {
        onClose?()
        onClose = nil
    }
}

/// The sound server's socket: reads replies, events and record data, writes
/// the client's requests and playback data.
final class UpstreamHalf: Half, @unchecked Sendable {
    override var sideName: String { "server" }
    private var credentialsSent = false
    var s2c: ServerToClientFilter { filter as! ServerToClientFilter } // always this type: set in Daemon.accept

    override var acceptsWriteThrough: Bool { credentialsSent }

    override func writeOut(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) throws(Errno) -> Int {
        guard !credentialsSent else { return try socket.send(a, b) }
        // The first bytes (AUTH) carry our credentials explicitly, so the
        // server's uid check never depends on when it set SO_PASSCRED.
        let n = try socket.sendWithCredentials(a)
        credentialsSent = true
        return n
    }

    override func injectPending() {
        // Only into free space: while the client does not read, refusals stay counted in
        // the session (which closes a client that lets too many pile up), not in a backlog.
        guard producerForwarder.isAtFrameBoundary, producerForwarder.backlog.isEmpty else { return }
        var wake = false
        for packet in state.takeInjections() {
            wake = producerForwarder.inject(packet: packet) || wake
        }
        if wake { peer?.notify(.readable) }
    }

    override func afterProcessing() {
        injectPending()
        updateAwaitingReply()
    }

    override func didClose() {
        s2c.endAll()
        if countedAsAwaiting {
            countedAsAwaiting = false
            loop.sessionsAwaitingReplies -= 1
        }
    }

    /// Whether this session is counted in the loop's sessions awaiting a reply.
    private var countedAsAwaiting = false

    /// Keeps the loop's count of sessions awaiting replies (which stops it
    /// batching audio) in step with this session's outstanding requests.
    func updateAwaitingReply() {
        let awaits = !closed && state.awaitsReply
        guard awaits != countedAsAwaiting else { return }
        countedAsAwaiting = awaits
        loop.sessionsAwaitingReplies += awaits ? 1 : -1
    }

    /// Connects to the server at `path` (on the session's loop) and starts watching it.
    func connect(path: String, attempt: Int = 0) {
        guard !closed else { return }
        if !socket.isOpen {
            do throws(Errno) {
                socket = try .unixSocket()
            } catch {
                close(reason: "cannot create a socket for the server: \(SystemError("socket", error))")
                return
            }
        }
        do throws(Errno) {
            try socket.connect(to: path)
        } catch {
            if error.isNotReady && attempt < 100 {
                // The server's accept queue is full: try again shortly.
                loop.schedule(after: 0.02) { [self] in connect(path: path, attempt: attempt + 1) }
                return
            }
            close(reason: "cannot connect to the server at \(path): \(error)")
            return
        }
        try? socket.passCredentials()
        do {
            // Not urgent: what a server sends unasked (record audio, events) may
            // gather for a moment; replies are awaited with batching off.
            token = try loop.register(socket.rawValue, events: Half.socketEvents, handler: self, urgent: false)
        } catch {
            close(reason: "cannot watch the server socket: \(error)")
            return
        }
        drainConsumerRing()
    }
}
