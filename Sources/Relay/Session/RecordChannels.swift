// A session's record streams as the app knows them, and what each has of the server.
//
// A record stream that may not record is *held*: Earmuff answers its CREATE_RECORD_STREAM
// itself and sends it silence on its own clock, so the server has no stream of it, no device
// is opened for it, and no desktop indicator counts it. A stream that may record has a stream
// on the server (*attached*): its audio passes as relayed audio does. When a decision changes,
// the same app stream moves between the two: Earmuff creates the server stream of a held one
// (with the sample spec, map and buffer the app was given) or deletes an attached one's, and
// the app sees one stream throughout. Its channel and source-output index are the ones it was
// given; where the server's differ (a held stream, a server stream made later), requests,
// events and memblocks are translated. Requests for a held stream are answered here.
//
// Loop-confined: the two halves of the session call it on their loop thread; a decision made
// elsewhere reaches it as a posted task (`reconcile`).
import Basics
import PulseWire
import Runtime
import StreamState
import Synchronization

/// What the table needs done by the session's halves.
protocol RecordOutlet: AnyObject {
    /// A packet Earmuff sends the app itself (a reply, an event).
    func toClient(_ packet: [UInt8])
    /// Earmuff's own requests for the server are queued (`takeUpstream`): send them.
    func upstreamQueued()
    /// Held streams will have silence due: set `tickDue` after `period` seconds, and have the
    /// server half send it.
    func tick(after period: Double)
}

/// One record stream of the app.
final class ServedRecord {
    let stream: RecordStream
    /// How to ask the server for it: the app's request, with the spec, map and buffer it was given.
    var request: CreateRecordStreamRequest
    /// The server's channel while attached (its source-output index is the stream's `serverOutput`).
    var upstream: UInt32?
    /// The tag of Earmuff's CREATE for it, while that waits for its reply.
    var promotion: UInt32?
    var corked: Bool
    /// Whether the app deleted it (a CREATE still under way is deleted when it is answered).
    var deleted = false
    /// While held and not corked: when its clock started (monotonic s) and the bytes sent since.
    var clock: (start: Double, sent: UInt64)?
    /// Bytes the app had of this stream before the attached server stream's first.
    var offset: Int64 = 0
    /// What the server stream captured when it last heard real samples (nil: it has not).
    var heardKind: Capability?
    /// Whether `offset` was fitted to the server stream's first latency reply (below).
    var calibrated = true

    init(stream: RecordStream, request: CreateRecordStreamRequest, corked: Bool) {
        self.stream = stream
        self.request = request
        self.corked = corked
    }

    var channel: UInt32 { stream.channel }
    var isHeld: Bool { upstream == nil }
    /// Bytes sent to the app so far.
    var delivered: UInt64 { stream.bytesReal.load(ordering: .relaxed) &+ stream.bytesSilenced.load(ordering: .relaxed) }
}

final class RecordChannels: @unchecked Sendable {
    // @unchecked Sendable: touched only on the session's loop thread (`reconcile` is posted there).
    private let conversation: Conversation
    /// The client, as the consent service knows it.
    private var state: SessionState { conversation.state }
    private let observer: SessionObserver
    private let newStreamID: () -> UInt64
    /// Runs a task on the session's loop.
    private let post: @Sendable (@escaping @Sendable () -> Void) -> Void
    var outlet: RecordOutlet?

    /// By the app's channel.
    private(set) var byApp: [UInt32: ServedRecord] = [:]
    /// Attached ones by the server's channel.
    private var byUpstream: [UInt32: ServedRecord] = [:]
    /// Server channels Earmuff deleted and whose DELETE is not answered yet: what comes on them is dropped.
    private var released: Set<UInt32> = []
    /// Earmuff's own requests for the server, not sent yet.
    private var upstream: [[UInt8]] = []
    private var nextOwnTag: UInt32 = RecordChannels.firstOwnTag
    private var nextChannel: UInt32 = RecordChannels.firstHeldNumber
    private var nextOutput: UInt32 = RecordChannels.firstHeldNumber
    private var ticking = false
    /// The clock ticked: silence is due (the server half sends it at its next frame boundary).
    var tickDue = false
    /// Whether the server refused a CREATE of Earmuff's (logged once per session).
    private var refusalLogged = false

    /// Earmuff's own request tags count up from here (the app's count up from 0).
    static let firstOwnTag: UInt32 = 0xFFF0_0000
    /// Channels and source-output indexes of held streams count up from here.
    static let firstHeldNumber: UInt32 = 0x4000_0000
    /// The most a server keeps for a record stream (PulseAudio's MAX_MEMBLOCKQ_LENGTH).
    static let maximumLength: UInt32 = 4 << 20
    /// The fragment of a stream that asks for none: two seconds of audio, as PulseAudio gives.
    static let defaultFragmentSeconds = 2.0
    /// The largest memblock a server sends (PulseAudio's pool block).
    static let largestMemblock = 65_472
    /// How often a held stream's clock sends: its fragment, within these bounds.
    static let tickBounds = (low: 0.01, high: 0.1)

    init(
        conversation: Conversation, observer: SessionObserver, newStreamID: @escaping () -> UInt64,
        post: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) {
        self.conversation = conversation
        self.observer = observer
        self.newStreamID = newStreamID
        self.post = post
    }

    /// The app's streams by its channel.
    var streams: [UInt32: RecordStream] { byApp.mapValues(\.stream) }

    // MARK: creation

    /// The app's CREATE_RECORD_STREAM is answered here: the stream is held. False when the
    /// request cannot be answered without the server (no valid sample spec of its own).
    func hold(_ request: CreateRecordStreamRequest, tag: UInt32, at placement: HeldPlacement) -> Bool {
        let spec = request.sampleSpec
        guard spec.isValid, request.channelMap.channels == Int(spec.channels), request.formats.isEmpty else { return false }
        let (maxLength, fragSize) = Self.buffer(spec, maxLength: request.maxLength, fragSize: request.fragSize)
        let channel = allocate(&nextChannel) { byApp[$0] != nil }
        let output = allocate(&nextOutput) { o in byApp.values.contains { $0.stream.sourceOutputIndex == o } }
        let asked = Self.asGiven(request, spec: spec, map: request.channelMap, maxLength: maxLength, fragSize: fragSize)
        let stream = makeStream(
            channel: channel, output: output, spec: spec,
            source: placement.sourceName ?? request.sourceName ?? "@DEFAULT_SOURCE@",
            sourceIndex: placement.sourceIndex, directOnInput: request.directOnInput != invalidIndex)
        stream.serverOutput.store(invalidIndex, ordering: .relaxed)
        let record = ServedRecord(stream: stream, request: asked, corked: request.corked)
        var reply = CreateRecordStreamReply()
        reply.channel = channel
        reply.sourceOutputIndex = output
        reply.maxLength = maxLength
        reply.fragSize = fragSize
        reply.sampleSpec = spec
        reply.channelMap = request.channelMap
        reply.sourceIndex = placement.sourceIndex
        reply.sourceName = stream.sourceName
        outlet?.toClient(reply.packet(tag: tag, version: state.protocolVersion))
        add(record)
        if !record.corked { startClock(record) }
        observer.recordStreamStarted(state, stream: stream)
        reconcile(record)
        return true
    }

    /// The server created a stream the app asked for (the request was forwarded): it is the app's,
    /// under the server's channel unless a stream of the app already has that one (then the reply's
    /// channel, at `channelAt` in `payload`, is rewritten to a new one).
    func created(
        _ reply: CreateRecordStreamReply, request: CreateRecordStreamRequest, payload: inout [UInt8],
        channelAt: Int
    ) {
        if let old = byUpstream[reply.channel] {
            // pipewire-pulse reuses channel numbers; a stale entry means its end was missed.
            detach(old)
            end(old)
        }
        var channel = reply.channel
        if byApp[channel] != nil {
            channel = allocate(&nextChannel) { byApp[$0] != nil }
            setU32(channel, in: &payload, at: channelAt)
        }
        let spec = reply.sampleSpec.isValid ? reply.sampleSpec : request.sampleSpec
        let (maxLength, fragSize) = Self.buffer(spec, maxLength: reply.maxLength, fragSize: reply.fragSize)
        let asked = Self.asGiven(
            request, spec: spec,
            map: reply.channelMap.channels == Int(spec.channels) ? reply.channelMap : request.channelMap,
            maxLength: maxLength, fragSize: fragSize)
        let stream = makeStream(
            channel: channel, output: reply.sourceOutputIndex, spec: asked.sampleSpec,
            source: reply.sourceName ?? request.sourceName ?? "@DEFAULT_SOURCE@",
            sourceIndex: reply.sourceIndex, directOnInput: request.directOnInput != invalidIndex)
        let record = ServedRecord(stream: stream, request: asked, corked: request.corked)
        add(record)
        attach(record, channel: reply.channel, output: reply.sourceOutputIndex)
        observer.recordStreamStarted(state, stream: stream)
        reconcile(record)
    }

    /// How the server is asked for the app's stream later: for exactly what the app was given.
    private static func asGiven(
        _ request: CreateRecordStreamRequest, spec: SampleSpec, map: ChannelMap,
        maxLength: UInt32, fragSize: UInt32
    ) -> CreateRecordStreamRequest {
        var asked = request
        asked.sampleSpec = spec
        asked.channelMap = map
        asked.maxLength = maxLength
        asked.fragSize = fragSize
        asked.fixFormat = false
        asked.fixRate = false
        asked.fixChannels = false
        asked.formats = []
        return asked
    }

    /// The buffer a server gives for what a request asks (`u32 -1` or 0: its default): at most
    /// `maximumLength`, a fragment of two seconds by default, both whole frames.
    static func buffer(_ spec: SampleSpec, maxLength: UInt32, fragSize: UInt32) -> (maxLength: UInt32, fragSize: UInt32) {
        let frame = UInt32(max(1, spec.frameSize))
        var length = maxLength == .max || maxLength == 0 || maxLength > maximumLength ? maximumLength : maxLength
        length = max(frame, length / frame * frame)
        let fragment = fragSize == .max || fragSize == 0 ? UInt32(defaultFragmentSeconds * Double(spec.rate)) * frame : fragSize
        return (length, max(frame, min(fragment, length) / frame * frame))
    }

    private func makeStream(
        channel: UInt32, output: UInt32, spec: SampleSpec, source: String, sourceIndex: UInt32,
        directOnInput: Bool
    ) -> RecordStream {
        let post = self.post
        weak let table = self
        return RecordStream(
            sessionID: state.id, streamID: newStreamID(), channel: channel, sourceOutputIndex: output,
            sampleSpec: spec, source: source, sourceIndex: sourceIndex, directOnInput: directOnInput,
            real: false, startedAt: wallClockNow(), placedByGraph: false
        ) { _ in
            post { table?.reconcile(channel: channel) }
        }
    }

    private func add(_ record: ServedRecord) {
        byApp[record.channel] = record
        conversation.liveRecords.store(byApp.count, ordering: .relaxed)
    }

    /// A number of `counter`'s range that `taken` does not hold.
    private func allocate(_ counter: inout UInt32, taken: (UInt32) -> Bool) -> UInt32 {
        while true {
            let n = counter
            counter = counter == invalidIndex - 1 ? Self.firstHeldNumber : counter + 1
            if !taken(n) { return n }
        }
    }

    // MARK: decisions

    /// A decision about the stream on `channel` changed (posted by the consent layer).
    func reconcile(channel: UInt32) {
        if let record = byApp[channel] { reconcile(record) }
    }

    /// Gives the stream a server stream while it may record, and takes it away once a decision
    /// says it may not. A server stream moved to a source of another kind that the app may not
    /// hear (by the person's mixer, a policy, the app) stays where it was moved, silenced, so that
    /// it can be moved back; so does one whose source the catalog does not know yet.
    private func reconcile(_ record: ServedRecord) {
        let kind = record.stream.placement.withLock { $0.kind }
        if record.stream.isReal && !record.deleted {
            if record.upstream != nil { record.heardKind = kind }
            if record.upstream == nil && record.promotion == nil { promote(record) }
        } else if record.upstream != nil,
            record.deleted || kind != nil && (record.heardKind == nil || record.heardKind == kind)
        {
            release(record)
        }
    }

    private func promote(_ record: ServedRecord) {
        var request = record.request
        request.corked = record.corked
        request.sampleSpec = record.stream.sampleSpec
        let tag = ownTag()
        record.promotion = tag
        send(request.packet(tag: tag, version: state.protocolVersion), expecting: .promote(channel: record.channel), tag: tag)
        Log.info(
            "session \(state.id) (\(state.identity.appKey)): record stream \(record.channel) may record: "
                + "a stream on the server is made for it")
    }

    /// The server stream goes; the app's stream goes on, held.
    private func release(_ record: ServedRecord) {
        guard let channel = record.upstream else { return }
        // Moved since it was asked for: the next server stream is made where it was moved to.
        let placement = record.stream.placement.withLock { $0 }
        if placement.movedAt > 0 && placement.sourceIndex != invalidIndex && record.request.directOnInput == invalidIndex {
            record.request.sourceIndex = placement.sourceIndex
            record.request.sourceName = nil
        }
        detach(record)
        released.insert(channel)
        let tag = ownTag()
        send(
            DeleteRecordStream(channel: channel).packet(tag: tag, version: state.protocolVersion),
            expecting: .release(channel: channel), tag: tag)
        if !record.corked && !record.deleted { startClock(record) }
        if !record.deleted {
            Log.info(
                "session \(state.id) (\(state.identity.appKey)): record stream \(record.channel) may not record: "
                    + "its stream on the server is deleted, and it is held (silence)")
        }
    }

    private func attach(_ record: ServedRecord, channel: UInt32, output: UInt32) {
        record.upstream = channel
        record.clock = nil
        record.offset = Int64(truncatingIfNeeded: record.delivered)
        byUpstream[channel] = record
        record.stream.serverOutput.store(output, ordering: .relaxed)
        state.ownSourceOutputs.withLock { _ = $0.insert(output) }
    }

    private func detach(_ record: ServedRecord) {
        guard let channel = record.upstream else { return }
        byUpstream[channel] = nil
        record.upstream = nil
        record.heardKind = nil
        let output = record.stream.serverOutput.exchange(invalidIndex, ordering: .relaxed)
        state.ownSourceOutputs.withLock { _ = $0.remove(output) }
    }

    private func end(_ record: ServedRecord) {
        guard byApp[record.channel] === record else { return }
        byApp[record.channel] = nil
        conversation.liveRecords.store(byApp.count, ordering: .relaxed)
        record.clock = nil
        observer.recordStreamEnded(state, stream: record.stream)
    }

    /// Ends every stream (the session closed).
    func endAll() {
        for record in Array(byApp.values) {
            detach(record)
            end(record)
        }
    }

    // MARK: Earmuff's own requests

    private func ownTag() -> UInt32 {
        while true {
            let tag = nextOwnTag
            nextOwnTag = nextOwnTag == invalidIndex - 1 ? Self.firstOwnTag : nextOwnTag + 1
            if !conversation.tagInUse(tag) { return tag }
        }
    }

    private func send(_ packet: [UInt8], expecting request: PendingRequest, tag: UInt32) {
        conversation.expectReply(tag: tag, request)
        upstream.append(packet)
        outlet?.upstreamQueued()
    }

    /// Earmuff's requests for the server, in order (taken at a frame boundary of the app's bytes).
    func takeUpstream() -> [[UInt8]] {
        defer { upstream.removeAll() }
        return upstream
    }

    /// The server answered one of Earmuff's own requests (`reply`: nil for an ERROR). Never the app's.
    func ownReply(_ request: PendingRequest, reply: TagStructReader?) {
        switch request {
        case .promote(let channel):
            let created = reply.flatMap { r -> CreateRecordStreamReply? in
                var r = r
                return try? CreateRecordStreamReply.decode(from: &r, version: state.protocolVersion)
            }
            guard let record = byApp[channel], record.promotion != nil else {
                if let created { releaseStray(created.channel) }
                return
            }
            record.promotion = nil
            guard let created else {
                if !refusalLogged {
                    refusalLogged = true
                    Log.warn(
                        "session \(state.id) (\(state.identity.appKey)): the server did not create record stream "
                            + "\(channel)'s stream (\(reply == nil ? "an error" : "a reply that does not read")): it stays held")
                }
                return
            }
            attach(record, channel: created.channel, output: created.sourceOutputIndex)
            record.calibrated = false
            if created.sourceName != nil && created.sourceName != record.stream.sourceName
                || created.sourceIndex != record.stream.placement.withLock({ $0.sourceIndex })
            {
                record.stream.placement.withLock {
                    $0.source = created.sourceName ?? ""
                    $0.sourceIndex = created.sourceIndex
                }
                observer.recordStreamMoved(state, stream: record.stream)
            }
            if record.corked != record.request.corked {
                let tag = ownTag()
                send(
                    CorkRecordStream(channel: created.channel, corked: record.corked).packet(tag: tag, version: state.protocolVersion),
                    expecting: .own, tag: tag)
            }
            reconcile(record)
        case .release(let channel):
            released.remove(channel)
        default:
            break
        }
    }

    /// A server stream that belongs to no app stream any more is deleted.
    private func releaseStray(_ channel: UInt32) {
        released.insert(channel)
        let tag = ownTag()
        send(
            DeleteRecordStream(channel: channel).packet(tag: tag, version: state.protocolVersion),
            expecting: .release(channel: channel), tag: tag)
    }

    // MARK: the app's requests

    /// What becomes of an app's request.
    enum Handling {
        /// Not about a record stream of this table: the filter goes on with it.
        case notMine
        /// Forward it (rewritten in place where needed); its reply, when it matters, is `expect`.
        case forward(expect: PendingRequest?)
        /// Answered here (the reply is queued): not forwarded.
        case answered
    }

    /// A request naming a record channel or a source-output index.
    func clientRequest(_ command: Command, tag: UInt32, body: TagStructReader, payload: inout [UInt8]) throws -> Handling {
        // Read from the packet as it goes on (volume-control claims renamed), so that what is
        // kept for a later server stream claims nothing the app may not.
        var r = TagStructReader(payload)
        r.position = body.position
        let at = r.position + 1
        let version = state.protocolVersion
        if Command.sourceOutputRequests.contains(command) {
            let index = try r.readU32()
            guard let record = byApp.values.first(where: { $0.stream.sourceOutputIndex == index }) else { return .notMine }
            guard record.upstream != nil else {
                outlet?.toClient(ErrorReply(code: .noEntity).packet(tag: tag, version: version))
                return .answered
            }
            let output = record.stream.serverOutput.load(ordering: .relaxed)
            if output != index { setU32(output, in: &payload, at: at) }
            return .forward(expect: nil)
        }
        guard Command.recordChannelRequests.contains(command) else { return .notMine }
        let channel = try r.readU32()
        guard let record = byApp[channel] else {
            if byUpstream[channel] != nil || released.contains(channel) {
                outlet?.toClient(ErrorReply(code: .noEntity).packet(tag: tag, version: version))
                return .answered
            }
            return .notMine
        }
        // What the stream will be asked for again when it gets a server stream.
        switch command {
        case .setRecordStreamName:
            if let name = try r.readString() { record.request.proplist.set("media.name", string: name) }
        case .updateRecordStreamProplist:
            let mode = try r.readU32()
            record.request.proplist.update(mode: mode, with: try r.readProplist())
        case .removeRecordStreamProplist:
            while let key = try r.readString() { record.request.proplist.remove(key) }
        case .updateRecordStreamSampleRate:
            var spec = record.stream.sampleSpec
            spec.rate = try r.readU32()
            if record.request.variableRate && spec.isValid {
                record.stream.negotiated(spec)
                if record.clock != nil { startClock(record) }
            }
        case .corkRecordStream:
            record.corked = try r.readBool()
        case .deleteRecordStream:
            record.deleted = true
        default:
            break
        }
        if let upstream = record.upstream {
            if upstream != channel { setU32(upstream, in: &payload, at: at) }
            switch command {
            case .deleteRecordStream:
                return .forward(expect: .deleteRecord(channel: channel))
            case .getRecordLatency where record.offset != 0 || !record.calibrated:
                return .forward(expect: .recordLatency(channel: channel))
            case .corkRecordStream:
                record.request.corked = record.corked
                return .forward(expect: nil)
            default:
                return .forward(expect: nil)
            }
        }
        try answer(command, record: record, tag: tag, body: body)
        return .answered
    }

    /// Answers a request for a held stream as the server would.
    private func answer(_ command: Command, record: ServedRecord, tag: UInt32, body: TagStructReader) throws {
        let version = state.protocolVersion
        switch command {
        case .getRecordLatency:
            var r = body
            _ = try r.readU32()
            var reply = RecordLatencyReply()
            reply.running = !record.corked
            reply.requestTime = try r.readTimeval()
            reply.replyTime = Timeval(wallClock: wallClockNow())
            // Sent so far, and written: what its clock has made by now, sent or not (as a server
            // queue holds what its source captured until it sends a fragment), so that the
            // latency an app computes grows between fragments rather than leaping at each.
            let sent = Int64(truncatingIfNeeded: record.delivered)
            reply.readIndex = sent
            reply.writeIndex = sent + Int64(record.clock.map { dueBytes(record, since: $0, now: monotonicNow()) } ?? 0)
            outlet?.toClient(reply.packet(tag: tag, version: version))
        case .setRecordStreamBufferAttr:
            var r = body
            let attr = try SetRecordBufferAttr.decode(from: &r, version: version)
            (record.request.maxLength, record.request.fragSize) = Self.buffer(
                record.stream.sampleSpec, maxLength: attr.maxLength,
                fragSize: attr.fragSize == .max || attr.fragSize == 0 ? record.request.fragSize : attr.fragSize)
            outlet?.toClient(
                RecordBufferAttrReply(maxLength: record.request.maxLength, fragSize: record.request.fragSize)
                    .packet(tag: tag, version: version))
        case .deleteRecordStream:
            outlet?.toClient(Reply(tag: tag).packet)
            end(record)
        case .corkRecordStream:
            if record.corked {
                record.clock = nil
            } else if record.clock == nil {
                startClock(record)
            }
            outlet?.toClient(Reply(tag: tag).packet)
        case .flushRecordStream:
            if record.clock != nil { startClock(record) }
            outlet?.toClient(Reply(tag: tag).packet)
        default:
            outlet?.toClient(Reply(tag: tag).packet)
        }
    }

    /// A forwarded GET_RECORD_LATENCY of a stream that was held: its indexes count what the app
    /// had before its server stream. The stream's clock never jumps ahead: a server stream's first
    /// reply counts what its server and source hold (which a held stream did not have) against
    /// the offset, so that the latency an app computes does not leap up and its timestamps back.
    func latencyReplied(_ payload: inout [UInt8], channel: UInt32, tag: UInt32) {
        let version = state.protocolVersion
        guard let record = byApp[channel],
            var reply = try? RecordLatencyReply.decodePacket(payload, version: version).message
        else { return }
        if !record.calibrated {
            record.calibrated = true
            let spec = record.stream.sampleSpec
            func bytes(_ usec: UInt64) -> Int64 {
                Int64(Double(usec) * Double(spec.rate) / 1e6) * Int64(spec.frameSize)
            }
            let ahead = reply.writeIndex - reply.readIndex + bytes(reply.sourceUsec) - bytes(reply.monitorUsec)
            if ahead > 0 { record.offset -= ahead }
        }
        reply.writeIndex += record.offset
        reply.readIndex += record.offset
        payload = reply.packet(tag: tag, version: version)
    }

    // MARK: what the server sends

    /// The stream of a memblock on the server's `channel`, with the app's channel set; nil to drop it.
    func memblock(_ d: inout FrameDescriptor) -> RecordStream? {
        guard let record = byUpstream[d.channel] else { return nil }
        d.channel = record.channel
        return record.stream
    }

    /// An event naming a record channel: rewritten to the app's channel, or dropped (false) when
    /// it is about a server stream Earmuff deleted.
    func serverEvent(_ command: Command, body: TagStructReader, payload: inout [UInt8]) throws -> Bool {
        var r = body
        let at = r.position + 1
        let channel = try r.readU32()
        if released.contains(channel) { return false }
        guard let record = byUpstream[channel] else { return true }
        if record.channel != channel { setU32(record.channel, in: &payload, at: at) }
        switch command {
        case .recordStreamKilled:
            detach(record)
            end(record)
        case .recordStreamMoved:
            var m = body
            let moved = try RecordStreamMoved.decode(from: &m, version: state.protocolVersion)
            record.stream.placement.withLock {
                $0.source = moved.sourceName ?? ""
                $0.sourceIndex = moved.sourceIndex
                $0.movedAt = monotonicNow()
            }
            // Decided again now, before the next memblock of this stream is looked at.
            observer.recordStreamMoved(state, stream: record.stream)
            reconcile(record)
        default:
            break
        }
        return true
    }

    /// The app deleted an attached stream and the server confirmed it.
    func deleted(channel: UInt32) {
        guard let record = byApp[channel] else { return }
        detach(record)
        end(record)
    }

    // MARK: the held streams' clock

    private func startClock(_ record: ServedRecord) {
        record.clock = (monotonicNow(), 0)
        guard !ticking else { return }
        ticking = true
        outlet?.tick(after: tickPeriod(record))
    }

    private func tickPeriod(_ record: ServedRecord) -> Double {
        let spec = record.stream.sampleSpec
        let seconds = Double(record.request.fragSize) / Double(max(1, spec.frameSize)) / Double(max(1, spec.rate))
        return min(Self.tickBounds.high, max(Self.tickBounds.low, seconds))
    }

    /// Bytes a held stream's clock has made since it started and not sent.
    private func dueBytes(_ record: ServedRecord, since clock: (start: Double, sent: UInt64), now: Double) -> UInt64 {
        let spec = record.stream.sampleSpec
        let total = UInt64(max(0, now - clock.start) * Double(spec.rate)) * UInt64(spec.frameSize)
        return total > clock.sent ? total - clock.sent : 0
    }

    /// The silence due now, as memblock frames (one after the other, at most `room` bytes), so
    /// that a tick costs the session one write; the clock ticks again while a held stream runs.
    /// Each stream gets whole pieces of what one tick makes (at most a fragment and a memblock),
    /// so a steady clock sends one memblock per stream and tick, as a server sends a fragment.
    func dueSilence(now: Double, room: Int) -> [UInt8] {
        var frames: [UInt8] = []
        var next: Double?
        for record in byApp.values {
            guard let clock = record.clock else { continue }
            let spec = record.stream.sampleSpec
            let frame = spec.frameSize
            guard frame > 0, spec.rate > 0 else { continue }
            let period = tickPeriod(record)
            next = min(next ?? .infinity, period)
            var sent = clock.sent
            var due = dueBytes(record, since: clock, now: now)
            // What the app leaves unread past its buffer is lost, as on the server.
            let keep = UInt64(record.request.maxLength)
            if due > keep {
                sent += due - keep
                due = keep
            }
            let perTick = Int(period * Double(spec.rate)) * frame
            let piece = max(frame, min(perTick, Int(record.request.fragSize), Self.largestMemblock) / frame * frame)
            while due >= UInt64(piece) && room - frames.count >= Limits.descriptorSize + piece {
                frames += FrameDescriptor(length: UInt32(piece), channel: record.channel).bytes
                frames += repeatElement(spec.silenceByte, count: piece)
                record.stream.countSilenced(piece)
                sent += UInt64(piece)
                due -= UInt64(piece)
            }
            record.clock = (clock.start, sent)
        }
        ticking = next != nil
        if let next { outlet?.tick(after: next) }
        return frames
    }
}

/// Writes a big-endian u32 into a packet payload.
func setU32(_ value: UInt32, in payload: inout [UInt8], at offset: Int) {
    payload[offset] = UInt8(truncatingIfNeeded: value >> 24)
    payload[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
    payload[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
    payload[offset + 3] = UInt8(truncatingIfNeeded: value)
}
