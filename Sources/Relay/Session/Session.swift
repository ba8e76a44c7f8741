// A session is one client connection and its own upstream connection, both
// on the same event loop (thread):
//
//   client fd ── Half(.client) ──ring up──▶ Half(.server) ── upstream fd
//             ◀──────────────── ring down ◀──
//
// Each half owns one socket. It produces into one ring (what it reads, after
// its direction's filter) and consumes the other (what it writes). Every chunk
// read goes through the half's `FrameProcessor` once, which asks the
// direction's filter (`HalfSide`) about each frame and emits what passes to the
// half (its `FrameSink`). Emitted bytes go straight to the other socket when it
// takes them (`writeThrough`); only the rest waits in the ring, and a full ring
// stops reading the source (backpressure). Wake-ups between the two halves stay
// on the loop's thread; shared control state lives in `SessionState`.
import Basics
import Glibc
import LinuxSystem
import PulseWire
import Ring
import Runtime
import StreamState
import Synchronization

/// Wake-up bits a half can receive from the other thread.
struct HalfSignal: OptionSet, Sendable {
    let rawValue: UInt8
    /// The ring this half consumes has new bytes (or finished).
    static let readable = HalfSignal(rawValue: 1)
    /// The ring this half produces into has free space again.
    static let space = HalfSignal(rawValue: 2)
    /// The session is being torn down: close now.
    static let terminate = HalfSignal(rawValue: 4)
    /// Injected packets are waiting.
    static let inject = HalfSignal(rawValue: 8)
    /// Our own socket may still hold data (a read loop yielded its fair share).
    static let readMore = HalfSignal(rawValue: 16)
}

/// Which socket of a session a half owns, with the filter of the direction it reads.
enum HalfSide {
    /// The app's socket: reads requests and playback data, writes replies, events and
    /// (possibly silenced) record data.
    case client(ClientToServerFilter)
    /// The sound server's socket: reads replies, events and record data, writes the
    /// client's requests and playback data.
    case server(ServerToClientFilter)

    /// Which side this is, for log lines.
    var name: String {
        switch self {
        case .client: "client"
        case .server: "server"
        }
    }
}

/// One socket of a session, owned by one loop.
final class Half: LoopHandler, Wakeable, FrameSink, @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on `loop`'s
    // thread, except `signals`, which is atomic; other threads only call `notify`.
    let loop: EventLoop
    /// The loop's audio tuning and the buffers its sessions share.
    let audio: AudioTuning
    let conversation: Conversation
    /// The client, as the consent service knows it.
    var state: SessionState { conversation.state }
    let side: HalfSide
    /// What this half reads, frame by frame (its direction's filter decides).
    private var frames: FrameProcessor
    /// The ring this half produces into (what it read and let through) ...
    let producerRing: ByteRing
    /// ... and the bytes that ring could not take yet (while any wait, reading stops).
    private(set) var backlog = ByteBacklog()
    /// The ring this half writes to its socket.
    let consumerRing: ByteRing
    /// This half's socket (none until it is connected; none again once closed).
    var socket = FileDescriptor.none
    var token: UInt64 = 0
    var peer: Half?
    var closed = false
    private var reading = true
    private var wantWrite = false
    private var readEOF = false
    /// The peer's hang-up (or an error) was reported: read on until EOF.
    private var hangupSeen = false
    /// Reading waits, at a large passing payload, until the peer's ring is empty and its
    /// socket takes writes, so the payload can be spliced rather than read and copied.
    private var waitsToSplice = false
    /// How fast our socket's input runs (the loop batches only slow ones).
    private var inputRate = InputRate()
    private let signals = Atomic<UInt8>(0)
    private let queued = Atomic<Bool>(false)
    /// Client side: packets forwarded when the loop was last asked to poll for a reply.
    var requestsSeen = 0
    /// Client side: run once when the half has closed (ends the session).
    var onClose: (() -> Void)?
    /// Server side: whether the first bytes (AUTH, with our credentials) went out.
    var credentialsSent = false
    /// Server side: whether this session is counted in the loop's sessions awaiting a reply.
    var countedAsAwaiting = false

    /// `packetLimit` bounds what this half buffers of one packet it reads.
    init(
        _ side: HalfSide, loop: EventLoop, audio: AudioTuning, conversation: Conversation, produceInto: ByteRing,
        consumeFrom: ByteRing, packetLimit: Int = Int(Limits.maxFrameLength)
    ) {
        self.side = side
        self.loop = loop
        self.audio = audio
        self.conversation = conversation
        frames = FrameProcessor(packetLimit: packetLimit)
        producerRing = produceInto
        consumerRing = consumeFrom
    }

    /// Which side this is, for log lines.
    var sideName: String { side.name }

    /// True when no frame is half-way through what this half reads.
    var isAtFrameBoundary: Bool { frames.isAtFrameBoundary }

    /// Packets this half has forwarded so far.
    var packetsForwarded: Int { frames.packetsForwarded }

    // MARK: cross-thread

    /// Wakes this half with `signal`. Safe from any thread; from the loop's own
    /// thread (the other half of the session) it costs no system call.
    func notify(_ signal: HalfSignal) {
        signals.bitwiseOr(signal.rawValue, ordering: .releasing)
        if !queued.exchange(true, ordering: .acquiringAndReleasing) {
            loop.wake(self)
        }
    }

    func serviceWake() {
        queued.store(false, ordering: .releasing)
        let s = HalfSignal(rawValue: signals.exchange(0, ordering: .acquiringAndReleasing))
        service(s)
    }

    // MARK: loop thread

    func service(_ s: HalfSignal) {
        guard !closed else { return }
        if s.contains(.terminate) {
            close(reason: nil)
            return
        }
        if s.contains(.inject) { injectPending() }
        if s.contains(.space) { resumeProducing() }
        if s.contains(.readMore) { readAvailable() }
        if s.contains(.readable) || s.contains(.space) { drainConsumerRing() }
    }

    /// Sockets are edge-triggered for input (a read loop runs until EAGAIN, or
    /// remembers to come back), so pausing and resuming reads costs no
    /// epoll_ctl. Output is watched only while a write waits after EAGAIN:
    /// watched all the time, every read by the peer would wake the loop (and
    /// end its wait for a reply) for nothing.
    static let socketEvents = PollEvents.input | PollEvents.peerHangUp | PollEvents.edgeTriggered

    /// A write hit EAGAIN: watch for output until the socket drains.
    private func waitForOutput() {
        wantWrite = true
        if token != 0 { loop.modify(socket.rawValue, token: token, events: Self.socketEvents | PollEvents.output) }
    }

    func handleEvents(_ events: UInt32) {
        guard !closed else { return }
        if events & (PollEvents.output | PollEvents.error | PollEvents.hangUp) != 0 && wantWrite {
            wantWrite = false
            drainConsumerRing()
            if closed { return }
            if !wantWrite && token != 0 { loop.modify(socket.rawValue, token: token, events: Self.socketEvents) }
        }
        if events & (PollEvents.hangUp | PollEvents.error | PollEvents.peerHangUp) != 0 { hangupSeen = true }
        if events & (PollEvents.input | PollEvents.hangUp | PollEvents.error | PollEvents.peerHangUp) != 0 {
            readAvailable()
        }
    }

    /// Sends up to two regions to our socket (the server side's first write carries credentials).
    private func writeOut(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) throws(Errno) -> Int {
        guard case .server = side, !credentialsSent else { return try unsafe socket.send(a, b) }
        // The first bytes (AUTH) carry our credentials explicitly, so the
        // server's uid check never depends on when it set SO_PASSCRED.
        let n = try unsafe socket.sendWithCredentials(a)
        credentialsSent = true
        return n
    }

    /// Reads and forwards until the socket is empty, the ring is full, or a fair share is done.
    func readAvailable() {
        guard reading, !readEOF else { return }
        var rounds = 0
        let scratch = unsafe audio.scratch
        while !closed {
            if rounds == 16 {
                // Fair share done; the socket may hold more and, edge-triggered,
                // will not tell us again: come back after the other sockets.
                notify(.readMore)
                return
            }
            rounds += 1
            if !backlog.isEmpty {
                pauseReading()
                return
            }
            // In a large payload that passes (its descriptor read, and gone out): splice it
            // rather than read it. PulseAudio writes a memblock's descriptor and payload
            // separately, so the payload may come after the read that took the descriptor.
            if let remaining = frames.passingPayloadRemaining, remaining >= SplicePipe.minimumPayload {
                switch splicePayload(remaining) {
                case .frameDone:
                    afterProcessing()
                    continue
                case .sourceEmpty:
                    return
                case .peerBusy:
                    waitToSplice()
                    return
                case .read:
                    if closed { return }
                }
            }
            let space = producerRing.freeSpace()
            if space == 0 {
                pauseReading()
                return
            }
            var closedFDs: Int32 = 0
            var sender: Int32 = 0
            var want = min(scratch.count, max(space, 4096))
            // After a large payload that passed, read only the next descriptor: if the payload
            // after it passes too, it is spliced whole rather than read.
            if frames.lastPassingMemblockLength >= SplicePipe.minimumPayload, let missing = frames.descriptorBytesMissing,
                audio.splicePipe != nil
            {
                want = min(want, missing)
            }
            let limit = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[0..<want])
            let n: Int
            do throws(Errno) {
                n = try unsafe socket.receiveClosingDescriptors(into: limit, closedCount: &closedFDs, senderPID: &sender)
            } catch {
                if error == .wouldBlock { return }
                if error.isPeerClosed {
                    endOfInput(reason: "\(sideName) closed the connection")
                } else {
                    close(reason: "read from the \(sideName): \(error)")
                }
                return
            }
            if n == 0 {
                endOfInput(reason: "\(sideName) closed the connection")
                return
            }
            audio.noteRead(n, rate: &inputRate)
            if closedFDs > 0 { Log.debug("session \(state.id): closed \(closedFDs) fd(s) received from the \(sideName)") }
            let chunk = unsafe UnsafeMutableRawBufferPointer(rebasing: limit[0..<n])
            do {
                switch side {
                case .client(let requests):
                    // With SO_PASSCRED (set at accept) one read never mixes two senders' bytes, so
                    // the pid of this read is the sender of the packets the filter is about to see.
                    if sender != 0 { conversation.lastSenderPID.store(sender, ordering: .relaxed) }
                    try unsafe frames.process(chunk, filter: requests, sink: self)
                case .server(let replies):
                    try unsafe frames.process(chunk, filter: replies, sink: self)
                }
            } catch {
                unsafe audio.gather.drain(skipping: .max) { _ in }
                close(reason: "protocol violation from the \(sideName): \(error)")
                return
            }
            // Same thread: what the read let through goes to the other socket now, after
            // what its ring holds, with one write (the rest waits in the ring).
            unsafe writeGathered()
            peer?.drainConsumerRing()
            afterProcessing()
            // What neither the other socket nor the ring took waits in the backlog: park
            // now, so the consumer's drain wakes us (a short read below would return
            // without parking, and a large packet would wait for the peer's next bytes).
            if !backlog.isEmpty && !closed {
                pauseReading()
                return
            }
            // A short read emptied the stream socket: new data (or a hang-up
            // arriving later) raises a new edge, so skip the read that would
            // only say EAGAIN. Not when the hang-up was already reported
            // (EOF must still be read), nor when descriptors ended the read.
            if n < limit.count && closedFDs == 0 && !hangupSeen { return }
        }
    }

    // MARK: Splicing

    private enum SpliceEnd {
        /// The payload went on whole.
        case frameDone
        /// Our socket is empty (edge-triggered: its next bytes raise a new event).
        case sourceEmpty
        /// The peer has bytes of ours still to write, or its socket is full: wait for it.
        case peerBusy
        /// Not all of it was spliced: a read takes the rest (or reports why our socket failed).
        case read
    }

    /// Moves the `remaining` bytes of a passing memblock's payload from our socket to the
    /// peer's through the loop's pipe, while nothing of ours waits to go out before them.
    /// What the peer's socket does not take is read back and kept like any bytes we read.
    private func splicePayload(_ remaining: Int) -> SpliceEnd {
        guard let pipe = audio.splicePipe, let consumer = peer, backlog.isEmpty, audio.gather.isEmpty,
            consumer.takesPeerBytes
        else { return .read }
        // Bytes the peer cannot write now stay in our socket, not in the ring: read, they would
        // cost two copies; once the peer has caught up they are spliced.
        if producerRing.readableCount() > 0 || consumer.wantWrite { return .peerBusy }
        var left = remaining
        while left > 0 {
            let moved: Int
            do throws(Errno) {
                moved = try pipe.fill(from: socket.rawValue, upTo: min(left, producerRing.freeSpace()))
            } catch {
                // Any other error (and end of file, below) is the next read's to report.
                return error == .wouldBlock ? .sourceEmpty : .read
            }
            if moved == 0 { return .read }
            audio.noteRead(moved, rate: &inputRate)
            switch side {
            case .client(let requests): frames.passedOn(moved, filter: requests)
            case .server(let replies): frames.passedOn(moved, filter: replies)
            }
            left -= moved
            let taken = consumer.spliceThrough(pipe, moved)
            audio.counters.splicedBytes.add(taken, ordering: .relaxed)
            if taken < moved {
                let back = unsafe pipe.takeBack(moved - taken, into: audio.scratch)
                guard back == moved - taken else {
                    audio.stopSplicing()
                    close(reason: "lost \(moved - taken - back) payload bytes in the splice pipe")
                    return .read
                }
                audio.counters.splicedBack.add(back, ordering: .relaxed)
                _ = unsafe store(UnsafeRawBufferPointer(rebasing: audio.scratch[0..<back]))
                consumer.drainConsumerRing()
                return .read
            }
        }
        return .frameDone
    }

    /// Stops reading until the peer has written what our ring holds and its socket takes
    /// more (`drainConsumerRing` resumes us then).
    private func waitToSplice() {
        reading = false
        waitsToSplice = true
        peer?.drainConsumerRing()
    }

    /// Resumes a peer that waits to splice, once our ring is empty and our socket takes writes.
    private func resumePeerWaitingToSplice() {
        guard let producer = peer, producer.waitsToSplice else { return }
        producer.waitsToSplice = false
        producer.notify(.space)
    }

    /// Moves `count` bytes from the loop's pipe to our socket, as far as it takes them
    /// without waiting; returns how many it took. (A full socket is watched for output; after
    /// any other error the rest goes to the ring, and the next drain reports the error.)
    func spliceThrough(_ pipe: SplicePipe, _ count: Int) -> Int {
        var sent = 0
        while sent < count {
            do throws(Errno) {
                let n = try pipe.drain(to: socket.rawValue, upTo: count - sent)
                if n == 0 { break }
                sent += n
            } catch {
                if error == .wouldBlock { waitForOutput() }
                break
            }
        }
        return sent
    }

    // MARK: FrameSink

    func emit(_ bytes: UnsafeRawBufferPointer) {
        _ = unsafe emitting(bytes)
    }

    /// Puts `bytes` out: into the loop's gather, which the end of the read (or of an
    /// injection) writes to the other socket, while that socket takes writes; else the
    /// ring, else the backlog. Returns whether the consumer must be woken.
    private func emitting(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard backlog.isEmpty, let consumer = peer, consumer.acceptsWriteThrough else {
            // Nothing is gathered here: what stops gathering (a socket that is full, a backlog)
            // only ever starts at a write, which empties the gather.
            assert(audio.gather.isEmpty, "bytes stored behind gathered ones")
            return unsafe store(bytes)
        }
        if unsafe audio.gather.add(bytes) { return false }
        // The gather is full, or these bytes do not stay put: write everything now.
        return unsafe writeGathered(then: bytes)
    }

    /// Keeps `bytes` for the consumer: in the ring, and what it cannot take in the backlog
    /// (behind anything already there). Returns whether the consumer must be woken.
    private func store(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard backlog.isEmpty else {
            unsafe backlog.append(bytes)
            return false
        }
        let (written, wake) = unsafe producerRing.write(bytes)
        if written < bytes.count {
            unsafe backlog.append(UnsafeRawBufferPointer(rebasing: bytes[written...]))
        }
        return wake
    }

    /// Writes what the consumer's ring holds, the gathered pieces and then `extra` to the
    /// other socket with one system call; what it does not take goes to the ring (then the
    /// backlog), in order. Returns whether the consumer must be woken.
    @discardableResult
    private func writeGathered(then extra: UnsafeRawBufferPointer = unsafe UnsafeRawBufferPointer(start: nil, count: 0)) -> Bool {
        let gather = audio.gather
        guard unsafe !gather.isEmpty || !extra.isEmpty else { return false }
        let sent = unsafe peer?.writeThrough(gather, then: extra) ?? 0
        var wake = false
        let extraSent = max(0, sent - gather.byteCount)
        unsafe gather.drain(skipping: sent) { wake = unsafe store($0) || wake }
        if extraSent < extra.count {
            wake = unsafe store(UnsafeRawBufferPointer(rebasing: extra[extraSent...])) || wake
        }
        return wake
    }

    /// Puts whole packets (e.g. ERROR replies) out at the current frame boundary, with one
    /// write. Only valid between frames of what this half reads; returns whether the
    /// consumer must be woken.
    /// Inserts whole frames Earmuff made itself (held streams' silence), one after the other.
    func inject(frames: [UInt8]) -> Bool {
        let wake = unsafe frames.withUnsafeBytes { unsafe emitting($0) }
        return unsafe writeGathered() || wake
    }

    func inject(packets: [[UInt8]]) -> Bool {
        var wake = false
        for payload in packets {
            wake = unsafe FrameDescriptor.packet(length: UInt32(payload.count)).bytes.withUnsafeBytes { unsafe emitting($0) } || wake
            wake = unsafe payload.withUnsafeBytes { unsafe emitting($0) } || wake
        }
        return unsafe writeGathered() || wake
    }

    /// Whether `writeThrough` may write to our socket now (not closed, not waiting for
    /// output, and on the server side not before the first bytes went out with credentials).
    private var acceptsWriteThrough: Bool { !wantWrite && takesPeerBytes }

    /// Whether our socket may take the peer's bytes directly, now or once it drains (open,
    /// and on the server side the first bytes went out with credentials).
    private var takesPeerBytes: Bool {
        guard !closed, socket.isOpen else { return false }
        if case .server = side { return credentialsSent }
        return true
    }

    /// Writes what the ring holds, then the pieces of `gather` and `extra` (the peer's
    /// bytes, on this same loop thread) as far as our socket takes them, with one system
    /// call; returns how many of the pieces' and `extra`'s bytes were written.
    func writeThrough(_ gather: WriteGather, then extra: UnsafeRawBufferPointer) -> Int {
        guard acceptsWriteThrough else { return 0 }
        var inRing = 0
        let result = unsafe consumerRing.withReadableRegions { a, b -> Result<Int, Errno> in
            inRing = a.count + b.count
            return unsafe gather.withVector(a, b, then: extra) { vector, count in
                Result { () throws(Errno) in try unsafe socket.send(vector, count: count) }
            }
        }
        switch result {
        case .success(let n):
            if consumerRing.consume(min(n, inRing)) { peer?.notify(.space) }
            return max(0, n - inRing)
        case .failure(let error):
            // Otherwise the bytes go to the ring; the next drain reports the error and closes.
            if error == .wouldBlock { waitForOutput() }
            return 0
        }
    }

    /// Free space a parked producer waits for: half the ring, so wake-ups move big chunks.
    private var parkThreshold: Int { producerRing.capacity / 2 }

    private func pauseReading() {
        reading = false
        // Re-check after marking ourselves parked so a consume() in between is not missed.
        if producerRing.parkProducer(minimumFreeSpace: parkThreshold) { notify(.space) }
    }

    private func resumeProducing() {
        if backlog.flush(into: producerRing) { peer?.notify(.readable) }
        if !backlog.isEmpty {
            if producerRing.parkProducer(minimumFreeSpace: parkThreshold) { notify(.space) }
            return
        }
        injectPending()
        if readEOF {
            // Everything read before EOF is in the ring now.
            finishAfterEOF()
            return
        }
        if !reading {
            reading = true
            readAvailable()
        }
    }

    /// Writes what the consumer ring holds to our socket.
    func drainConsumerRing() {
        guard !closed, socket.isOpen, !wantWrite else { return }
        while true {
            let finished = consumerRing.isProducerFinished
            if consumerRing.readableCount() == 0 {
                if finished { close(reason: nil) } else { resumePeerWaitingToSplice() }
                return
            }
            let result = unsafe consumerRing.withReadableRegions { a, b in
                Result { () throws(Errno) in try unsafe writeOut(a, b) }
            }
            switch result {
            case .success(let n):
                if consumerRing.consume(n) { peer?.notify(.space) }
            case .failure(let error):
                if error == .wouldBlock {
                    waitForOutput()
                } else if error.isPeerClosed {
                    close(reason: "\(sideName) closed the connection")
                } else {
                    close(reason: "write to the \(sideName): \(error)")
                }
                return
            }
        }
    }

    /// Our socket gave EOF: stop reading, let the peer flush what we read, then close.
    private func endOfInput(reason: String) {
        readEOF = true
        reading = false
        // Nothing more will be read: stop watching the socket.
        if token != 0 {
            loop.remove(socket.rawValue, token: token)
            token = 0
        }
        Log.debug("session \(state.id): \(reason)")
        state.noteCloseReason(reason)
        if backlog.isEmpty {
            finishAfterEOF()
        } else if producerRing.parkProducer() {
            resumeProducing()
        }
    }

    /// Nothing more will come from this side; whatever the other side still has
    /// for us cannot be delivered to a closed socket, so close ours now and let
    /// the peer drain the ring before closing its own.
    private func finishAfterEOF() {
        close(reason: nil, gracefulPeer: true)
    }

    /// Closes this half; with `gracefulPeer`, the peer first flushes what it has.
    func close(reason: String?, gracefulPeer: Bool = false) {
        guard !closed else { return }
        closed = true
        if let reason {
            state.noteCloseReason(reason)
        }
        if token != 0 { loop.remove(socket.rawValue, token: token) }
        socket.close()
        if case .client(let requests) = side { requests.releaseBudget() }
        _ = producerRing.finishProducing()
        if let p = peer {
            p.notify(gracefulPeer ? .readable : .terminate)
        }
        peer = nil
        didClose()
    }
}
