// What the two sides of a session do differently: the client side asks the loop to poll
// for replies after a request; the server side inserts Earmuff's own packets at frame
// boundaries, keeps the loop's count of sessions awaiting replies, and connects.
import Basics
import LinuxSystem
import PulseWire
import Ring

extension Half {
    /// After each processed chunk.
    func afterProcessing() {
        switch side {
        case .client:
            let forwarded = packetsForwarded
            if forwarded != requestsSeen {
                requestsSeen = forwarded
                // Never after audio: only requests (packets, which all carry a tag) start a reply poll.
                loop.stayAwake()
                peer?.updateAwaitingReply()
            }
        case .server:
            injectPending()
            updateAwaitingReply()
        }
    }

    /// Server side: inserts the packets Earmuff queued for the client, at a frame boundary.
    func injectPending() {
        guard case .server = side else { return }
        // Only into free space: while the client does not read, refusals stay counted in
        // the session (which closes a client that lets too many pile up), not in a backlog.
        guard isAtFrameBoundary, backlog.isEmpty else { return }
        let packets = state.takeInjections()
        if !packets.isEmpty && inject(packets: packets) { peer?.notify(.readable) }
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
                loop.sessionsAwaitingReplies -= 1
            }
        }
    }

    /// Server side: keeps the loop's count of sessions awaiting replies (which stops it
    /// batching audio) in step with this session's outstanding requests.
    func updateAwaitingReply() {
        guard case .server = side else { return }
        let awaits = !closed && state.awaitsReply
        guard awaits != countedAsAwaiting else { return }
        countedAsAwaiting = awaits
        loop.sessionsAwaitingReplies += awaits ? 1 : -1
        // The last reply the app waited for went out: its next request may follow at once.
        if !awaits && !closed { loop.stayAwakeForNextRequest() }
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
