// libFuzzer entry for PulseWire, compiled together with the module's sources
// by `fuzz/run` (`swiftc -sanitize=fuzzer,address`), so it sees the internal API.
//
// One input drives four things, all of which must hold on any bytes:
//   byte 0      chunking of the frame stream (chunk sizes, append variant, payload reuse, repetition)
//   byte 1      protocol version for the typed decoders (8…35, 36, 0xFFFF, max, 7)
//   byte 2      number k (0…63) of tagstruct read operations that follow
//   bytes 3…    k operation bytes, then the body
//
// 1. The body is a byte stream for `FrameParser`: fed in a chunking derived
//    from byte 0 it must give exactly the frames, error and leftover that one
//    append of the whole body gives; frames must re-encode to the stream.
// 2. The body is also a byte stream for `FrameProcessor`, the state machine
//    the relay runs on every byte: fed in a chunking derived from byte 0, with
//    memblocks passed, silenced or dropped by channel and some packets refused
//    (also chosen by byte 0), its output must be exactly what the frames of
//    the reference parse give under the same decisions, it must throw exactly
//    when the reference parse finds a bad descriptor, and it must be at a
//    frame boundary exactly when nothing is left over.
// 3. The body and every packet frame's payload are packet payloads: after the
//    header, every typed decoder runs at the chosen version. Whenever one
//    succeeds, encode(decode(x)) must be x byte for byte, and decoding again
//    must give an equal value.
// 4. A `TagStructReader` over the same payloads performs the k operations,
//    then `skipValue` to the end. A successful read must re-encode to exactly
//    the bytes it consumed and agree with `skipValue`; a failed one must not
//    move the reader.
//
// Any violated property traps (`fatalError`), which libFuzzer reports as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let plan = FuzzPlan(input)
    let packets = checkFrameStream(plan.body, chunking: plan.chunking)
    checkProcessor(plan.body, chunking: plan.chunking)
    checkPayload(plan.body, plan: plan)
    for payload in packets { checkPayload(payload, plan: plan) }
    return 0
}

// MARK: - Input layout

struct FuzzPlan {
    var chunking: UInt8
    var version: UInt32
    var ops: [UInt8]
    var body: [UInt8]

    init(_ input: [UInt8]) {
        chunking = input.count > 0 ? input[0] : 0
        version = fuzzVersion(input.count > 1 ? input[1] : 0)
        let opCount = input.count > 2 ? Int(input[2] & 0x3F) : 0
        let opsStart = min(3, input.count)
        let opsEnd = min(opsStart + opCount, input.count)
        ops = Array(input[opsStart..<opsEnd])
        body = Array(input[opsEnd...])
    }
}

/// 0…27 → versions 8…35, then 36, 0xFFFF and UInt32.max (newer than known), and 7 (older than any server accepts).
func fuzzVersion(_ selector: UInt8) -> UInt32 {
    let s = UInt32(selector % 32)
    switch s {
    case 0..<28: return Limits.minProtocolVersion + s
    case 28: return Limits.protocolVersion + 1
    case 29: return 0xFFFF
    case 30: return .max
    default: return Limits.minProtocolVersion - 1
    }
}

@inline(never)
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("PulseWire fuzz property violated: " + message()) }
}

/// Deterministic chunk sizes.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(upTo bound: Int) -> Int { Int(next() % UInt64(bound)) + 1 }
}

// MARK: - Frame parser

struct ParseOutcome: Equatable {
    var frames: [Frame] = []
    var error: WireError? = nil
    var leftover = 0
}

/// Pulls frames until the parser needs more bytes or throws.
func drain(_ parser: inout FrameParser, into outcome: inout ParseOutcome, reusing: Bool, scratch: inout [UInt8]) {
    while outcome.error == nil {
        let before = parser.bufferedByteCount
        do throws(WireError) {
            let frame: Frame?
            if reusing {
                frame = try parser.next(reusing: &scratch).map { Frame(descriptor: $0, payload: scratch) }
            } else {
                frame = try parser.next()
            }
            guard let frame else {
                require(parser.bufferedByteCount == before, "next() returned nil but consumed bytes")
                return
            }
            require(
                parser.bufferedByteCount == before - Limits.descriptorSize - frame.payload.count,
                "next() consumed a different byte count than the frame's size")
            outcome.frames.append(frame)
        } catch {
            require(parser.bufferedByteCount == before, "a throwing next() consumed bytes")
            _ = error.description
            outcome.error = error
        }
    }
}

/// Parses `stream` whole; the reference outcome.
func parseWhole(_ stream: [UInt8]) -> ParseOutcome {
    var parser = FrameParser()
    parser.append(contentsOf: stream)
    var outcome = ParseOutcome()
    var scratch: [UInt8] = []
    drain(&parser, into: &outcome, reusing: false, scratch: &scratch)
    outcome.leftover = parser.bufferedByteCount
    if let first = outcome.error {
        // Documented: the parser stays stuck on a bad frame.
        do throws(WireError) {
            _ = try parser.next()
            require(false, "parser did not stay stuck after \(first)")
        } catch {
            require(error == first, "parser threw \(error) after \(first)")
        }
    }
    return outcome
}

/// Feeds `stream` in the chunking selected by `chunking`, draining after every append.
func parseChunked(_ stream: [UInt8], chunking: UInt8, maxChunk: Int) -> ParseOutcome {
    var parser = FrameParser()
    var outcome = ParseOutcome()
    var scratch: [UInt8] = []
    var random = SplitMix64(state: UInt64(chunking) << 32 | UInt64(stream.count))
    let useRawAppend = chunking & 0x04 != 0
    let reusing = chunking & 0x40 != 0
    var offset = 0
    while offset < stream.count && outcome.error == nil {
        let size = min(maxChunk == 1 ? 1 : random.next(upTo: maxChunk), stream.count - offset)
        let chunk = stream[offset..<(offset + size)]
        if useRawAppend {
            chunk.withUnsafeBytes { parser.append($0) }
        } else {
            parser.append(contentsOf: chunk)
        }
        offset += size
        drain(&parser, into: &outcome, reusing: reusing, scratch: &scratch)
    }
    // A chunked reader stops feeding once the connection is known bad.
    let unfed = stream.count - offset
    outcome.leftover = parser.bufferedByteCount + unfed
    return outcome
}

/// Checks the parser on `body`; returns the payloads of its packet frames.
func checkFrameStream(_ body: [UInt8], chunking: UInt8) -> [[UInt8]] {
    let whole = parseWhole(body)
    let maxChunk: Int
    switch chunking & 0x03 {
    case 0: maxChunk = 1
    case 1: maxChunk = 7
    case 2: maxChunk = 64
    default: maxChunk = 1024
    }
    let chunked = parseChunked(body, chunking: chunking, maxChunk: maxChunk)
    require(chunked == whole, "chunked parse differs from whole parse")

    // Frames re-encode to the stream they came from, and are valid.
    var reencoded: [UInt8] = []
    for frame in whole.frames {
        require(frame.payload.count == Int(frame.descriptor.length), "payload length differs from descriptor")
        do throws(WireError) { try frame.descriptor.validate() } catch {
            require(false, "parser handed out a frame whose descriptor fails validate(): \(error)")
        }
        let start = reencoded.count
        frame.append(to: &reencoded)
        let decoded = reencoded[start..<(start + Limits.descriptorSize)].withUnsafeBytes { FrameDescriptor(decoding: $0) }
        require(decoded == frame.descriptor, "FrameDescriptor(decoding:) disagrees with the parser")
        var raw = [UInt8](repeating: 0, count: Limits.descriptorSize)
        raw.withUnsafeMutableBytes { frame.descriptor.encode(into: $0) }
        require(raw == frame.descriptor.bytes, "encode(into:) disagrees with bytes")
        if frame.descriptor.isPacket {
            // PulseAudio ignores the offset words of a packet frame, so only length and channel must agree.
            let packet = Frame(packet: frame.payload)
            require(
                packet.descriptor.length == frame.descriptor.length && packet.descriptor.isPacket
                    && packet.payload == frame.payload, "Frame(packet:) differs")
        }
        let offset = frame.descriptor.offset
        var copy = frame.descriptor
        copy.offset = offset
        require(copy == frame.descriptor, "offset does not round-trip")
    }
    require(reencoded.count + whole.leftover == body.count, "frames and leftover do not cover the stream")
    require(reencoded[...] == body[..<reencoded.count], "frames do not re-encode to the stream")

    // One input in 32: repeat the body past the parser's compaction threshold (64 KiB).
    if chunking & 0xF8 == 0x38 && !body.isEmpty {
        let repeats = (80 * 1024) / body.count + 1
        var stream: [UInt8] = []
        stream.reserveCapacity(repeats * body.count)
        for _ in 0..<repeats { stream.append(contentsOf: body) }
        let long = parseChunked(stream, chunking: chunking, maxChunk: 4096)
        let longWhole = parseWhole(stream)
        require(long == longWhole, "chunked parse of the repeated stream differs from the whole parse")
    }

    return whole.frames.filter { $0.descriptor.isPacket }.map { $0.payload }
}

// MARK: - Frame processor (the relay's state machine)

/// Decisions derived from the chunking byte: which channels are silenced or
/// dropped, which packets refused; records what goes out.
final class FuzzHandler: FrameHandler {
    let rule: UInt8
    var output: [UInt8] = []
    var payloadBytes = 0

    init(rule: UInt8) { self.rule = rule }

    func action(channel: UInt32) -> MemblockAction {
        switch (channel &+ UInt32(rule >> 3)) % 3 {
        case 0: return .pass
        case 1: return .silence(rule)
        default: return .drop
        }
    }

    func refuses(_ payload: [UInt8]) -> Bool {
        rule & 0x20 != 0 && payload.count % 3 == 0
    }

    func memblock(_ descriptor: FrameDescriptor) throws(ProtocolViolation) -> MemblockAction {
        action(channel: descriptor.channel)
    }

    func packet(_ payload: inout [UInt8]) throws(ProtocolViolation) -> Bool { !refuses(payload) }

    func emit(_ bytes: UnsafeRawBufferPointer) { output.append(contentsOf: bytes) }

    func memblockPayload(_ count: Int, silenced: Bool) { payloadBytes += count }
}

/// Runs the relay's `FrameProcessor` over `body` and compares it with the reference parse.
func checkProcessor(_ body: [UInt8], chunking: UInt8) {
    let whole = parseWhole(body)
    let handler = FuzzHandler(rule: chunking)
    var expected: [UInt8] = []
    var expectedPayload = 0
    func expect(_ d: FrameDescriptor, _ payload: ArraySlice<UInt8>, whole: Bool) {
        if d.isPacket {
            if whole && !handler.refuses(Array(payload)) { expected += d.bytes + payload }
            return
        }
        switch handler.action(channel: d.channel) {
        case .pass:
            expected += d.bytes + payload
            expectedPayload += payload.count
        case .silence(let b):
            expected += d.bytes + [UInt8](repeating: b, count: payload.count)
            expectedPayload += payload.count
        case .drop:
            break
        }
    }
    for f in whole.frames { expect(f.descriptor, f.payload[...], whole: true) }
    let consumed = body.count - whole.leftover
    if whole.error == nil && whole.leftover >= Limits.descriptorSize {
        // An incomplete frame with a valid descriptor: a memblock streams out what arrived of it.
        let d = body[consumed..<(consumed + Limits.descriptorSize)].withUnsafeBytes { FrameDescriptor(decoding: $0) }
        expect(d, body[(consumed + Limits.descriptorSize)...], whole: false)
    }

    var processor = FrameProcessor()
    var random = SplitMix64(state: UInt64(chunking) << 32 | UInt64(body.count) ^ 0x5A5A)
    let maxChunk = [1, 5, 100, 4096][Int(chunking >> 6)]
    var offset = 0
    var thrown: ProtocolViolation?
    var copy = body
    while offset < copy.count && thrown == nil {
        let size = min(maxChunk == 1 ? 1 : random.next(upTo: maxChunk), copy.count - offset)
        let start = offset
        do {
            try copy.withUnsafeMutableBytes { buf in
                try processor.process(UnsafeMutableRawBufferPointer(rebasing: buf[start..<(start + size)]), handler: handler)
            }
        } catch {
            thrown = error as? ProtocolViolation
            require(thrown != nil, "processor threw \(error)")
        }
        offset += size
    }
    require(
        (thrown != nil) == (whole.error != nil),
        "processor threw \(String(describing: thrown)), reference parse found \(String(describing: whole.error))")
    require(handler.output == expected, "processor output differs from the reference frames under the same decisions")
    require(handler.payloadBytes == expectedPayload, "processor counted \(handler.payloadBytes) payload bytes, expected \(expectedPayload)")
    if thrown == nil {
        require(processor.isAtFrameBoundary == (whole.leftover == 0), "frame boundary disagrees with the leftover")
        require(
            processor.packetsForwarded == whole.frames.filter { $0.descriptor.isPacket && !handler.refuses($0.payload) }.count,
            "packetsForwarded disagrees")
    }
}

// MARK: - Typed decoders

func checkPayload(_ payload: [UInt8], plan: FuzzPlan) {
    checkReader(payload, ops: plan.ops)
    var reader = TagStructReader(payload)
    let header: PacketHeader
    do throws(WireError) {
        header = try PacketHeader.decode(from: &reader)
    } catch {
        _ = error.description
        return
    }
    var writer = TagStructWriter()
    header.encode(into: &writer)
    require(writer.bytes[...] == payload[..<reader.position], "PacketHeader does not round-trip")
    if let command = header.knownCommand {
        let info = command.info
        require(info.command == command, "command table entry \(command.rawValue) names another command")
        _ = command.isObsolete
    }
    do throws(WireError) {
        let (reply, rest) = try Reply.decode(payload)
        require(reply.tag == header.tag && rest.position == reader.position, "Reply.decode disagrees with PacketHeader")
        require(Reply(tag: header.tag).packet[...] == payload[..<reader.position], "Reply.packet differs")
    } catch {
        _ = error.description
        require(header.command != Command.reply.rawValue, "Reply.decode rejected a REPLY: \(error)")
    }

    let version = plan.version
    roundTrip(AuthRequest.self, payload, reader, header, version) { m in
        _ = ProtocolVersion.number(of: m.versionWord)
        _ = ProtocolVersion.effective(client: m.versionWord, server: version)
        require(m.cookie.count == Limits.cookieLength, "AUTH cookie of \(m.cookie.count) bytes")
    }
    roundTrip(AuthReply.self, payload, reader, header, version) { _ in }
    roundTrip(SetClientName.self, payload, reader, header, version) { m in
        _ = m.name
        checkProplist(m.proplist)
    }
    roundTrip(SetClientNameReply.self, payload, reader, header, version) { _ in }
    roundTrip(ErrorReply.self, payload, reader, header, version) { m in _ = m.errorCode }
    roundTrip(CreateRecordStreamRequest.self, payload, reader, header, version) { m in
        checkSpec(m.sampleSpec, m.channelMap, m.volume)
        checkProplist(m.proplist)
        for format in m.formats { checkProplist(format.properties) }
    }
    roundTrip(CreateRecordStreamReply.self, payload, reader, header, version) { m in
        checkSpec(m.sampleSpec, m.channelMap, CVolume())
        checkProplist(m.format.properties)
    }
    roundTrip(CreatePlaybackStreamRequest.self, payload, reader, header, version) { m in
        checkSpec(m.sampleSpec, m.channelMap, m.volume)
        checkProplist(m.proplist)
        for format in m.formats { checkProplist(format.properties) }
    }
    roundTrip(CreatePlaybackStreamReply.self, payload, reader, header, version) { m in
        checkSpec(m.sampleSpec, m.channelMap, CVolume())
        checkProplist(m.format.properties)
    }
    roundTrip(DeleteRecordStream.self, payload, reader, header, version) { _ in }
    roundTrip(RecordStreamKilled.self, payload, reader, header, version) { _ in }
    roundTrip(RecordStreamSuspended.self, payload, reader, header, version) { _ in }
    roundTrip(RecordStreamMoved.self, payload, reader, header, version) { _ in }
    roundTrip(PermissionStatus.self, payload, reader, header, version) { _ in }
    roundTrip(PermissionTestReply.self, payload, reader, header, version) { _ in }
    checkPermissionExtension(payload, reader, header)
}

/// The permission extension (module-earmuff): a request that decodes encodes back to the same
/// bytes, and so does an event, when they carry what the encoders write (no index, tag 0 for events).
func checkPermissionExtension(_ payload: [UInt8], _ afterHeader: TagStructReader, _ header: PacketHeader) {
    guard header.command == Command.extension.rawValue else { return }
    var reader = afterHeader
    do throws(WireError) {
        let (index, name) = try PermissionExtension.addressee(&reader)
        let call = try PermissionCall.decode(from: &reader)
        if index == invalidIndex, name == PermissionExtension.moduleName, reader.isAtEnd {
            if case .unknown = call {
            } else {
                require(call.packet(tag: header.tag) == payload, "PermissionCall \(call): encode(decode(x)) != x")
            }
        }
    } catch {
        _ = error.description
    }
    do throws(WireError) {
        if let event = try PermissionEvent.decode(payload) {
            var r = afterHeader
            if header.tag == PermissionEvent.tag, (try? r.readU32()) == invalidIndex {
                require(event.packet == payload, "PermissionEvent: encode(decode(x)) != x")
            }
        }
    } catch {
        _ = error.description
    }
}

/// Decodes the fields after the header as `M`; on success checks both round trips.
func roundTrip<M: PacketMessage>(
    _ type: M.Type, _ payload: [UInt8], _ afterHeader: TagStructReader, _ header: PacketHeader,
    _ version: UInt32, _ inspect: (M) -> Void
) {
    var reader = afterHeader
    let start = reader.position
    let message: M
    do throws(WireError) {
        message = try M.decode(from: &reader, version: version)
    } catch {
        _ = error.description
        require(
            header.command != M.command.rawValue || (try? M.decodePacket(payload, version: version)) == nil,
            "\(M.self).decodePacket accepted what decode(from:) rejected")
        return
    }
    require(reader.isAtEnd, "\(M.self) v\(version) succeeded without consuming the packet")
    inspect(message)
    var writer = TagStructWriter()
    message.encode(into: &writer, version: version)
    require(writer.bytes[...] == payload[start...], "\(M.self) v\(version): encode(decode(x)) != x")
    var again = TagStructReader(writer.bytes)
    do throws(WireError) {
        let second = try M.decode(from: &again, version: version)
        require(second == message, "\(M.self) v\(version): decode(encode(m)) != m")
    } catch {
        require(false, "\(M.self) v\(version): its own encoding does not decode: \(error)")
    }
    if header.command == M.command.rawValue {
        require(message.packet(tag: header.tag, version: version) == payload, "\(M.self).packet differs from the input")
        do throws(WireError) {
            let decoded = try M.decodePacket(payload, version: version)
            require(decoded.tag == header.tag && decoded.message == message, "\(M.self).decodePacket differs")
        } catch {
            require(false, "\(M.self).decodePacket rejected what decode(from:) accepted: \(error)")
        }
    }
}

func checkProplist(_ proplist: Proplist) {
    require(proplist.count <= Limits.maxProplistEntries, "proplist of \(proplist.count) entries")
    for entry in proplist.entries {
        require(entry.value.count <= Limits.maxProplistValue, "proplist value of \(entry.value.count) bytes")
        require(!entry.key.isEmpty && entry.key.utf8.allSatisfy { $0 < 0x80 && $0 != 0 }, "bad proplist key")
    }
    if let first = proplist.entries.first {
        _ = proplist[first.key]
        require(proplist.value(forKey: first.key) != nil, "value(forKey:) lost a key")
    }
    _ = proplist[Proplist.Key.applicationName]
}

func checkSpec(_ spec: SampleSpec, _ map: ChannelMap, _ volume: CVolume) {
    _ = spec.isValid
    _ = spec.frameSize
    _ = spec.silenceByte
    _ = spec.format.name
    require(map.channels <= Limits.maxChannels, "channel map of \(map.channels) channels")
    require(volume.values.count <= Limits.maxChannels, "cvolume of \(volume.values.count) channels")
}

// MARK: - Tagstruct reader

/// Performs `ops`, then skips values to the end of `payload`.
func checkReader(_ payload: [UInt8], ops: [UInt8]) {
    var reader = TagStructReader(payload)
    for op in ops {
        if op % 20 == 19 {
            // Resynchronise one byte further on, to read from odd offsets.
            reader = TagStructReader(payload, from: reader.position + 1)
            continue
        }
        readOne(&reader, op: op % 20)
    }
    while !reader.isAtEnd {
        let before = reader.position
        let ok = skipChecked(&reader)
        if !ok {
            require(reader.position == before, "failed skipValue moved the reader")
            do throws(WireError) { try reader.expectEnd() } catch { _ = error.description }
            return
        }
        require(reader.position > before, "skipValue made no progress")
    }
    do throws(WireError) { try reader.expectEnd() } catch { require(false, "expectEnd threw at the end: \(error)") }
}

/// `skipValue`, cross-checked against the typed read of the same tag.
func skipChecked(_ reader: inout TagStructReader) -> Bool {
    let before = reader.position
    var typed = reader
    let typedOK = typedRead(&typed)
    do throws(WireError) {
        try reader.skipValue()
    } catch {
        _ = error.description
        require(!typedOK, "skipValue failed where the typed read succeeded: \(error)")
        return false
    }
    require(
        typedOK && typed.position == reader.position,
        "skipValue from \(before) ended at \(reader.position), the typed read at \(typedOK ? typed.position : -1)")
    return true
}

/// The typed read matching the next tag (strings without UTF-8 validation, as skipValue does).
func typedRead(_ reader: inout TagStructReader) -> Bool {
    guard let tag = reader.peekTag() else { return false }
    let op: UInt8
    switch tag {
    case WireTag.u32: op = 0
    case WireTag.u8: op = 1
    case WireTag.u64: op = 2
    case WireTag.s64: op = 3
    case WireTag.usec: op = 4
    case WireTag.volume: op = 5
    case WireTag.boolTrue, WireTag.boolFalse: op = 6
    case WireTag.timeval: op = 7
    case WireTag.sampleSpec: op = 8
    case WireTag.string, WireTag.nullString: op = 11
    case WireTag.arbitrary: op = 12
    case WireTag.channelMap: op = 13
    case WireTag.cvolume: op = 14
    case WireTag.proplist: op = 15
    case WireTag.formatInfo: op = 16
    default: return false
    }
    return readOne(&reader, op: op)
}

/// One typed read; on success its value must re-encode to the consumed bytes,
/// on failure the reader must not have moved. Returns whether it succeeded.
@discardableResult
func readOne(_ reader: inout TagStructReader, op: UInt8) -> Bool {
    let before = reader.position
    var writer = TagStructWriter()
    do throws(WireError) {
        switch op {
        case 0: writer.writeU32(try reader.readU32())
        case 1: writer.writeU8(try reader.readU8())
        case 2: writer.writeU64(try reader.readU64())
        case 3: writer.writeS64(try reader.readS64())
        case 4: writer.writeUsec(try reader.readUsec())
        case 5: writer.writeVolume(try reader.readVolume())
        case 6: writer.writeBool(try reader.readBool())
        case 7: writer.writeTimeval(try reader.readTimeval())
        case 8:
            let spec = try reader.readSampleSpec()
            checkSpec(spec, ChannelMap(), CVolume())
            writer.writeSampleSpec(spec)
        case 9: writer.writeString(try reader.readString())
        case 10: writer.writeString(try reader.readNonNullString())
        case 11:
            if let raw = try reader.readStringBytes() {
                require(!raw.contains(0), "string bytes contain NUL")
                var bytes = [WireTag.string] + raw
                bytes.append(0)
                return finish(reader, before, bytes)
            }
            writer.writeString(nil)
        case 12: writer.writeArbitrary(try reader.readArbitrary())
        case 13:
            let map = try reader.readChannelMap()
            checkSpec(SampleSpec(format: .invalid, channels: 0, rate: 0), map, CVolume())
            writer.writeChannelMap(map)
        case 14:
            let volume = try reader.readCVolume()
            checkSpec(SampleSpec(format: .invalid, channels: 0, rate: 0), ChannelMap(), volume)
            writer.writeCVolume(volume)
        case 15:
            let proplist = try reader.readProplist()
            checkProplist(proplist)
            writer.writeProplist(proplist)
        case 16:
            let format = try reader.readFormatInfo()
            checkProplist(format.properties)
            _ = format.isPCM
            writer.writeFormatInfo(format)
        case 17:
            return skipChecked(&reader)
        default:
            try reader.expectEnd()
            require(reader.isAtEnd && reader.remainingByteCount == 0, "expectEnd passed before the end")
            return true
        }
    } catch {
        _ = error.description
        require(reader.position == before, "a failed read (op \(op)) moved the reader from \(before) to \(reader.position)")
        return false
    }
    return finish(reader, before, writer.bytes)
}

private func finish(_ reader: TagStructReader, _ before: Int, _ encoded: [UInt8]) -> Bool {
    require(reader.position > before && reader.position <= reader.bytes.count, "read did not advance within the payload")
    require(
        encoded[...] == reader.bytes[before..<reader.position],
        "value read at \(before) does not re-encode to the bytes it consumed")
    return true
}
