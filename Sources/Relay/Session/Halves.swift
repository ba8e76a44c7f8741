// What the two sides of a session do differently: the client side asks the loop to poll
// for replies after a request; the server side inserts Earmuff's own packets at frame
// boundaries, keeps the loop's count of sessions awaiting replies, and connects.
import Basics
import LinuxSystem
import PulseWire
import Ring
import Runtime
import StreamState

extension Half {
    /// After each processed chunk.
    func afterProcessing() {
        switch side {
        case .client:
            injectPending()
            let forwarded = packetsForwarded
            if forwarded != requestsSeen {
                requestsSeen = forwarded
                // Never after audio: only requests (packets, which all carry a tag) start a reply poll.
                audio.stayAwake()
                peer?.updateAwaitingReply()
            }
        case .server:
            injectPending()
            updateAwaitingReply()
        }
    }

    /// Inserts, at a frame boundary, what Earmuff sends itself: on the server side the packets
    /// queued for the client and the silence due to held record streams; on the client side
    /// Earmuff's own requests for the server.
    func injectPending() {
        // Only into free space: while the client does not read, refusals stay counted in
        // the session (which closes a client that lets too many pile up), not in a backlog.
        guard isAtFrameBoundary, backlog.isEmpty else { return }
        switch side {
        case .server(let replies):
            let packets = state.takeInjections()
            var wake = !packets.isEmpty && inject(packets: packets)
            if replies.channels.tickDue {
                replies.channels.tickDue = false
                let frames = replies.channels.dueSilence(now: monotonicNow(), room: producerRing.freeSpace())
                if !frames.isEmpty { wake = inject(frames: frames) || wake }
            }
            if wake { peer?.notify(.readable) }
        case .client(let requests):
            let packets = requests.channels.takeUpstream()
            if !packets.isEmpty && inject(packets: packets) { peer?.notify(.readable) }
        }
    }

    /// Run once when this half has closed.
    func didClose() {
        switch side {
        case .client:
            onClose?()
            onClose = nil
        case .server(let replies):
            replies.endAll()
            if countedAsAwaiting {
                countedAsAwaiting = false
                audio.sessionsAwaitingReplies -= 1
            }
        }
    }

    /// Server side: keeps the loop's count of sessions awaiting replies (which stops it
    /// batching audio) in step with this session's outstanding requests.
    func updateAwaitingReply() {
        guard case .server = side else { return }
        let awaits = !closed && conversation.awaitsReply
        guard awaits != countedAsAwaiting else { return }
        countedAsAwaiting = awaits
        audio.sessionsAwaitingReplies += awaits ? 1 : -1
        // The last reply the app waited for went out: its next request may follow at once.
        if !awaits && !closed { audio.stayAwakeForNextRequest() }
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

/// Carries out what a session's record table asks, through its two halves (on their loop).
final class SessionOutlet: RecordOutlet {
    private let state: SessionState
    private weak var client: Half?
    private weak var server: Half?

    init(state: SessionState, client: Half, server: Half) {
        self.state = state
        self.client = client
        self.server = server
    }

    func toClient(_ packet: [UInt8]) {
        state.queueInjection(packet)
        server?.notify(.inject)
    }

    func upstreamQueued() { client?.notify(.inject) }

    func tick(after period: Double) {
        guard let server else { return }
        _ = server.loop.schedule(after: period) { [weak server] in
            guard let server, case .server(let replies) = server.side else { return }
            replies.channels.tickDue = true
            server.injectPending()
        }
    }
}
