// The two direction filters: parse → classify → decide → act, per packet.
//
// Client → server (read by the client half): the first packet must be AUTH and there is
// only one; its version word loses every transport flag so that no SHM, memfd
// or srbchannel is ever negotiated. Requests whose replies matter are noted by
// tag. Shared-memory side channels are protocol violations. A record stream
// that may not record is held (RecordChannels): its CREATE and the requests
// about it are answered here, never forwarded.
//
// Server → client (read by the upstream half): replies are paired with requests by tag
// (they may come out of order); the AUTH reply loses its flags too; record
// streams enter the channel table from their CREATE reply and leave it on
// DELETE, KILLED or disconnect; RECORD_STREAM_MOVED has a stream decided again
// (for its new source's capture kind) before its next memblock is looked at;
// replies to Earmuff's own requests go no further. Every memblock is looked up
// once by the server's channel and goes on under the app's: real samples pass,
// others are overwritten with the format's silence byte, and memblocks on
// unknown channels are dropped.
import Basics
import PulseWire
import Runtime
import StreamState

final class ClientToServerFilter: FrameFilter {
    private let conversation: Conversation
    /// The client, as the consent service knows it.
    private var state: SessionState { conversation.state }
    private let observer: SessionObserver
    /// The session's record streams (shared with the other direction, on the same thread).
    let channels: RecordChannels
    private var authSeen = false
    /// The client's own protocol version (from AUTH).
    private(set) var clientVersion: UInt32 = 8
    /// Called to refuse a request: queue ERROR(tag, code) for the client.
    let refuse: (UInt32, UInt32) -> Void
    /// The budget the client's large packets draw on (nil: none).
    private let budget: PacketBudget?
    /// Bytes of the packet under way taken from `budget` (0: none).
    private var budgeted = 0

    /// Called (on the session's loop) once the client has sent SET_CLIENT_NAME.
    private let handshakeFinished: () -> Void

    init(
        conversation: Conversation, observer: SessionObserver, channels: RecordChannels, budget: PacketBudget? = nil,
        handshakeFinished: @escaping () -> Void = {}, refuse: @escaping (UInt32, UInt32) -> Void
    ) {
        self.conversation = conversation
        self.observer = observer
        self.channels = channels
        self.budget = budget
        self.handshakeFinished = handshakeFinished
        self.refuse = refuse
    }

    func memblock(_ d: inout FrameDescriptor) throws(ProtocolViolation) -> FrameDisposition {
        guard authSeen else { throw ProtocolViolation("audio data before AUTH") }
        // Client memblocks are playback or upload data: pass.
        return .pass
    }

    func admitPacket(_ length: Int) -> Bool {
        guard let budget, length > PacketBudget.unbudgeted else { return true }
        guard budget.take(length) else { return false }
        budgeted = length
        return true
    }

    func packetReleased(_ length: Int) { releaseBudget() }

    /// Gives back what the packet under way holds of the budget (also when the connection closes).
    func releaseBudget() {
        if budgeted > 0 { budget?.give(budgeted) }
        budgeted = 0
    }

    func packet(
        _ header: PacketHeader, body: TagStructReader,
        payload: inout [UInt8]
    ) throws(ProtocolViolation) -> FrameDisposition {
        conversation.lastPacketAt.store(Conversation.monotonicMilliseconds(), ordering: .relaxed)
        // Default deny: an opcode outside the table, or one only a server
        // sends, is never forwarded (PulseAudio would drop the client anyway).
        guard let command = Command(rawValue: header.command) else {
            throw ProtocolViolation("unknown command \(header.command)")
        }
        switch command.info.direction {
        case .clientToServer, .both: break
        case .serverToClient, .none:
            throw ProtocolViolation("\(command.info.name) is sent only by servers")
        }
        if !authSeen {
            guard command == .auth else {
                throw ProtocolViolation("first packet must be AUTH, got \(command.info.name)")
            }
        }
        do {
            return try handle(command, header: header, body: body, payload: &payload)
        } catch let e as ProtocolViolation {
            throw e
        } catch {
            throw ProtocolViolation("malformed \(command.info.name): \(error)")
        }
    }

    /// A packet too large to buffer: answered with ERROR(TOOLARGE) when it is a request with a
    /// tag after AUTH; before that (no reply can be paired with it) the connection closes.
    func refusedPacket(_ header: PacketHeader?, length: Int, overLimit limit: Int?) throws(ProtocolViolation) {
        let reason =
            limit.map { "it is larger than the \($0) bytes one packet may have" }
            ?? "it does not fit in the \(budget?.limit ?? 0) bytes that the large packets being received from all clients may hold together"
        guard authSeen, let header, let command = Command(rawValue: header.command) else {
            throw ProtocolViolation("a packet of \(length) bytes\(authSeen ? "" : " before AUTH") was refused: \(reason)")
        }
        try noteRefusal(command, "its \(length) bytes were not read into memory: \(reason)")
        refuse(header.tag, ErrorCode.tooLarge.rawValue)
    }

    /// `body` reads the fields after command and tag.
    private func handle(
        _ command: Command, header: PacketHeader, body: TagStructReader,
        payload: inout [UInt8]
    ) throws -> FrameDisposition {
        let version = state.protocolVersion
        // Replies are matched to requests by tag: a tag still waiting for its reply
        // would let one request's reply pass for another's (a PLAY_SAMPLE index taken
        // for the client's own index, an AUTH reply with its flags).
        if let problem = conversation.tagProblem(header.tag) {
            throw ProtocolViolation("\(command.info.name): \(problem)")
        }
        var expected: PendingRequest?
        var held: (CreateRecordStreamRequest, HeldPlacement)?
        switch command {
        case .setClientName, .updateClientProplist, .createRecordStream, .updateRecordStreamProplist:
            disownVolumeControlClaims(body, payload: &payload)
        default:
            break
        }
        switch try channels.clientRequest(command, tag: header.tag, body: body, payload: &payload) {
        case .answered:
            return .drop
        case .forward(let expect):
            expected = expect
        case .notMine:
            break
        }
        switch command {
        case .auth:
            guard !authSeen else { throw ProtocolViolation("second AUTH") }
            authSeen = true
            let at = body.position + 1 // the version word's value bytes
            var r = body
            // The cookie must be 256 bytes and nothing may follow.
            let word = try AuthRequest.decode(from: &r, version: 0).versionWord
            // Before 13 there are no transport flags to clear: SHM is negotiated from the
            // version alone, and the server would send shared-memory references.
            guard word & ProtocolVersion.numberMask >= ProtocolVersion.firstVersionWithFlags else {
                throw ProtocolViolation(
                    "protocol version \(word) is older than "
                        + "\(ProtocolVersion.firstVersionWithFlags), the first whose shared memory can be turned off; "
                        + "the client's libpulse (before 0.9.15) is not supported")
            }
            let stripped = ProtocolVersion.stripTransportFlags(word)
            setU32(stripped, in: &payload, at: at)
            clientVersion = min(ProtocolVersion.number(of: word), Limits.protocolVersion)
            state.version.store(clientVersion, ordering: .releasing)
            expected = .auth
        case .setClientName:
            var r = body
            let msg = try SetClientName.decode(from: &r, version: version)
            state.properties.withLock { $0.update(from: msg.proplist) }
            observer.clientPropertiesChanged(state)
            if !conversation.handshakeDone.load(ordering: .relaxed) {
                conversation.handshakeDone.store(true, ordering: .relaxed)
                handshakeFinished()
            }
            expected = .setClientName
        case .updateClientProplist:
            var r = body
            _ = try r.readU32() // update mode
            let props = try r.readProplist()
            state.properties.withLock { $0.update(from: props) }
            observer.clientPropertiesChanged(state)
        case .createRecordStream:
            try checkSender(command)
            // Read from the packet as it goes on (volume-control claims renamed).
            var r = TagStructReader(payload)
            r.position = body.position
            let req = try CreateRecordStreamRequest.decode(from: &r, version: version)
            if let reason = observer.recordStreamRequested(state, request: req) {
                throw ProtocolViolation(reason)
            }
            // Earmuff's own nodes are no one's source: as if they did not exist.
            if OwnNodes.isOwn(req.sourceName) {
                try noteRefusal(command, "\(req.sourceName ?? "") is Earmuff's own node, no one's source")
                refuse(header.tag, ErrorCode.noEntity.rawValue)
                return .drop
            }
            if let placement = observer.holdPlacement(state, request: req) { held = (req, placement) }
            expected = .createRecord(req)
        case .createPlaybackStream:
            expected = .createPlayback
        case .createUploadStream:
            expected = .createUpload
        case .getSourceInfo:
            var r = body
            let req = try GetSourceInfo.decode(from: &r, version: version)
            if OwnNodes.isOwn(req.name) {
                try noteRefusal(command, "\(req.name ?? "") is Earmuff's own node, no one's source")
                refuse(header.tag, ErrorCode.noEntity.rawValue)
                return .drop
            }
            expected = .sourceInfo(list: false)
        case .getSourceInfoList:
            expected = .sourceInfo(list: true)
        case .getSourceOutputInfo:
            expected = .sourceOutputInfo(list: false)
        case .getSourceOutputInfoList:
            expected = .sourceOutputInfo(list: true)
        case .extension:
            var r = body
            // Not addressed to us (or not parsable: the command policy refuses that): on to the policy.
            guard (try? PermissionExtension.addressee(&r))?.name == PermissionExtension.moduleName else { break }
            // Answered here, on this connection, for the process that connected.
            try checkSender(command)
            let call = try PermissionCall.decode(from: &r)
            if let reason = observer.permissionCall(state, tag: header.tag, call: call) {
                throw ProtocolViolation(reason)
            }
            return .drop
        case .enableSrbchannel, .disableSrbchannel, .registerMemfdShmid:
            throw ProtocolViolation("client tried to set up shared memory (\(command.info.name)) on a connection without SHM")
        default:
            break
        }
        if let reason = observer.refusal(for: command, payload: payload, session: state) {
            try noteRefusal(command, reason)
            refuse(header.tag, ErrorCode.access.rawValue)
            return .drop
        }
        if let (request, placement) = held, channels.hold(request, tag: header.tag, at: placement) {
            return .drop
        }
        conversation.expectReply(tag: header.tag, expected)
        return .pass
    }

    private static let claimKey = Array(VolumeControls.claimKey.utf8)
    private static let disownedKey = Array(VolumeControls.disownedKey.utf8)
    private var claimDisowned = false

    /// A volume control's `application.id`, which desktop indicators do not count as a
    /// recording, claimed by an app that is not that volume control: the key is renamed in
    /// `payload` (to one as long, so the packet keeps its length), in every top-level proplist
    /// of the request, before it goes upstream. A proplist that does not parse is left to the
    /// request's own decoding.
    private func disownVolumeControlClaims(_ body: TagStructReader, payload: inout [UInt8]) {
        var r = body
        while !r.isAtEnd {
            guard r.peekTag() == WireTag.proplist else {
                guard (try? r.skipValue()) != nil else { return }
                continue
            }
            guard let entries = try? r.readProplistRanges() else { return }
            for e in entries where payload[e.key].elementsEqual(Self.claimKey) {
                let id = String(decoding: payload[e.value].prefix { $0 != 0 }, as: UTF8.self)
                guard !VolumeControls.mayClaim(id, appKey: state.identity.appKey) else { continue }
                payload.replaceSubrange(e.key, with: Self.disownedKey)
                if !claimDisowned {
                    claimDisowned = true
                    Log.info(
                        "session \(state.id) (\(state.identity.appKey)): claims to be the volume control \(id); "
                            + "passed upstream as \(VolumeControls.disownedKey), so that the desktop's indicator counts its recordings")
                }
            }
        }
    }

    /// The identity is the process that connected; another one writing on its connection
    /// (a child it was handed to, before or after an exec) is not it.
    private func checkSender(_ command: Command) throws(ProtocolViolation) {
        let sender = conversation.lastSenderPID.load(ordering: .relaxed)
        if sender != 0 && sender != state.identity.pid {
            throw ProtocolViolation(
                "\(command.info.name) was sent by pid \(sender), not by pid "
                    + "\(state.identity.pid) that connected and was identified")
        }
    }

    /// Refusals logged one by one before they are only counted.
    static let refusalsLogged = 10
    /// After that, one summary line per this many refusals.
    static let refusalSummaryEvery = 10_000
    private var refusals = 0

    /// Logs a refusal (the first few, then a summary line now and then), and closes a client
    /// that leaves too many of Earmuff's ERROR replies unread: each one waits in memory.
    private func noteRefusal(_ command: Command, _ reason: String) throws(ProtocolViolation) {
        refusals += 1
        let who = "session \(state.id) (\(state.identity.appKey))"
        if refusals <= Self.refusalsLogged {
            Log.info(
                "\(who): refused \(command.info.name): \(reason)"
                    + (refusals == Self.refusalsLogged ? " (further refusals are counted, not logged one by one)" : ""))
        } else if refusals % Self.refusalSummaryEvery == 0 {
            Log.info("\(who): \(refusals) requests refused so far; the last: \(command.info.name): \(reason)")
        }
        guard state.injectionBacklog < SessionState.maximumInjections else {
            throw ProtocolViolation(
                "\(refusals) requests refused and \(state.injectionBacklog) of their replies "
                    + "unread: the client does not read what it asks for")
        }
    }
}

final class ServerToClientFilter: FrameFilter {
    private let conversation: Conversation
    /// The client, as the consent service knows it.
    private var state: SessionState { conversation.state }
    private let observer: SessionObserver
    /// The session's record streams (shared with the other direction, on the same thread).
    let channels: RecordChannels
    /// The stream of the memblock under way (its byte counters).
    private var current: RecordStream?

    init(conversation: Conversation, observer: SessionObserver, channels: RecordChannels) {
        self.conversation = conversation
        self.observer = observer
        self.channels = channels
    }

    /// The app's record streams by the channel it knows them by.
    var records: [UInt32: RecordStream] { channels.streams }

    /// What the server sends is buffered up to the protocol's own limit: a packet over it
    /// breaks the connection.
    func refusedPacket(_ header: PacketHeader?, length: Int, overLimit limit: Int?) throws(ProtocolViolation) {
        throw ProtocolViolation("the server sent a packet of \(length) bytes, more than the \(limit ?? 0) bytes one packet may have")
    }

    func memblock(_ d: inout FrameDescriptor) throws(ProtocolViolation) -> FrameDisposition {
        guard let stream = channels.memblock(&d) else {
            current = nil
            return .drop
        }
        current = stream
        if stream.isReal { return .pass }
        return .silence(stream.sampleSpec.silenceByte)
    }

    func memblockPayload(_ count: Int, silenced: Bool) {
        if silenced { current?.countSilenced(count) } else { current?.countReal(count) }
    }

    func packet(
        _ header: PacketHeader, body: TagStructReader,
        payload: inout [UInt8]
    ) throws(ProtocolViolation) -> FrameDisposition {
        do {
            return try handle(header: header, body: body, payload: &payload)
        } catch let e as ProtocolViolation {
            throw e
        } catch {
            let name = Command(rawValue: header.command)?.info.name ?? "command \(header.command)"
            throw ProtocolViolation("malformed \(name) from the server: \(error)")
        }
    }

    private func handle(header: PacketHeader, body: TagStructReader, payload: inout [UInt8]) throws -> FrameDisposition {
        guard let command = Command(rawValue: header.command) else { return .pass }
        switch command {
        case .reply:
            guard let request = conversation.takePending(tag: header.tag) else { return .pass }
            return try handleReply(request, tag: header.tag, body: body, payload: &payload)
        case .error:
            guard let request = conversation.takePending(tag: header.tag) else { return .pass }
            if request.isEarmuffs {
                channels.ownReply(request, reply: nil)
                return .drop
            }
        case _ where Command.recordChannelEvents.contains(command):
            return try channels.serverEvent(command, body: body, payload: &payload) ? .pass : .drop
        case .subscribeEvent:
            // A concealed recording is not announced (its removal is: harmless, and it may be
            // the end of one the app was shown before it was concealed).
            var r = body
            let event = try SubscribeEvent.decode(from: &r, version: state.protocolVersion)
            if event.facility == .sourceOutput, event.operation != .remove, observer.conceals(sourceOutput: event.index) {
                return .drop
            }
        case .enableSrbchannel, .disableSrbchannel, .registerMemfdShmid:
            throw ProtocolViolation("server tried to set up shared memory on a connection without SHM")
        default:
            break
        }
        return .pass
    }

    private func handleReply(
        _ request: PendingRequest, tag: UInt32, body: TagStructReader,
        payload: inout [UInt8]
    ) throws -> FrameDisposition {
        var r = body
        if request.isEarmuffs {
            channels.ownReply(request, reply: body)
            return .drop
        }
        switch request {
        case .auth:
            let at = r.position + 1 // the version word's value bytes
            let word = try r.readU32()
            setU32(ProtocolVersion.stripTransportFlags(word), in: &payload, at: at)
            let server = ProtocolVersion.number(of: word)
            let client = state.protocolVersion
            state.version.store(min(client, server), ordering: .releasing)
        case .createRecord(let request):
            let reply = try CreateRecordStreamReply.decode(from: &r, version: state.protocolVersion)
            channels.created(reply, request: request, payload: &payload, channelAt: body.position + 1)
        case .recordLatency(let channel):
            channels.latencyReplied(&payload, channel: channel, tag: tag)
        case .createPlayback:
            let reply = try CreatePlaybackStreamReply.decode(from: &r, version: state.protocolVersion)
            state.ownSinkInputs.withLock { _ = $0.insert(reply.sinkInputIndex) }
        case .deleteRecord(let channel):
            channels.deleted(channel: channel)
        case .setClientName:
            if state.protocolVersion >= 13, let reply = try? SetClientNameReply.decode(from: &r, version: state.protocolVersion) {
                state.clientIndex.withLock { $0 = reply.clientIndex }
            }
        case .createUpload:
            break
        case .sourceInfo(let list):
            // Earmuff's own nodes are no one's source. The sound server hides them from its
            // clients, but a connection it has just opened may be shown them until Earmuff's
            // gate has hidden them from it.
            leaveOut(SourceInfoReply.self, { OwnNodes.isOwn($0.name) }, of: &payload, tag: tag, recordsAt: body.position, list: list)
        case .sourceOutputInfo(let list):
            // A native recording that may not record is no recording (the same: the gate hides
            // it from the server's connections, a new one may be shown it for a moment).
            leaveOut(
                SourceOutputInfoReply.self, { observer.conceals(sourceOutput: $0.index) }, of: &payload, tag: tag,
                recordsAt: body.position, list: list)
        case .promote, .release, .own:
            break
        }
        return .pass
    }

    /// The records of an introspection reply that `leaveOut` picks are left out of it: of a
    /// list, and a request for one of them (by index) fails as for an object that does not
    /// exist. A reply that cannot be read is passed as it is (logged): the list is the server's.
    private func leaveOut<Record>(
        _ reply: InfoReply<Record>.Type, _ leaveOut: (Record) -> Bool, of payload: inout [UInt8],
        tag: UInt32, recordsAt start: Int, list: Bool
    ) {
        do {
            guard let (packet, kept) = try reply.leaving(out: leaveOut, of: payload, recordsAt: start, version: state.protocolVersion)
            else { return }
            if list || kept > 0 {
                payload = packet
            } else {
                payload = ErrorReply(code: .noEntity).packet(tag: tag, version: state.protocolVersion)
            }
        } catch {
            Log.info("session \(state.id): a \(Record.self) record of the server could not be read (\(error)): passed as it is")
        }
    }

    /// Ends every stream (the session closed).
    func endAll() { channels.endAll() }
}
