// The relay's frame state machine over every golden capture, fed byte by byte,
// all at once and frame by frame: the same frames and the same output, equal to
// what the reference `FrameParser` sees.
import PulseWire
import Testing

/// Records what a `FrameProcessor` lets through; silences memblocks of
/// `silenced` channels and drops those of `dropped` channels.
final class RecordingHandler: FrameFilter, FrameSink {
    var silenced: Set<UInt32> = []
    var dropped: Set<UInt32> = []
    var refusePacketsWithCommand: UInt32?
    var output: [UInt8] = []
    var packets: [[UInt8]] = []
    var memblocks: [FrameDescriptor] = []
    var passedBytes = 0
    var silencedBytes = 0
    /// Packets of this length are not admitted (nil: all are).
    var notAdmitted: Int?
    var admitted: [Int] = []
    var released: [Int] = []
    var refused: [(header: PacketHeader?, length: Int, limit: Int?)] = []

    func admitPacket(_ length: Int) -> Bool {
        guard length != notAdmitted else { return false }
        admitted.append(length)
        return true
    }

    func packetReleased(_ length: Int) { released.append(length) }

    func refusedPacket(_ header: PacketHeader?, length: Int, overLimit limit: Int?) throws(ProtocolViolation) {
        refused.append((header, length, limit))
    }

    func memblock(_ descriptor: inout FrameDescriptor) throws(ProtocolViolation) -> FrameDisposition {
        memblocks.append(descriptor)
        if dropped.contains(descriptor.channel) { return .drop }
        return silenced.contains(descriptor.channel) ? .silence(0) : .pass
    }

    func packet(
        _ header: PacketHeader, body: TagStructReader,
        payload: inout [UInt8]
    ) throws(ProtocolViolation) -> FrameDisposition {
        packets.append(payload)
        if let c = refusePacketsWithCommand, header.command == c { return .drop }
        return .pass
    }

    func emit(_ bytes: UnsafeRawBufferPointer) { unsafe output.append(contentsOf: bytes) }

    func memblockPayload(_ count: Int, silenced: Bool) {
        if silenced { silencedBytes += count } else { passedBytes += count }
    }
}

/// How a byte stream is cut into reads.
enum Feeding: CaseIterable, CustomStringConvertible {
    case byteByByte, allAtOnce, frameByFrame, oddChunks

    var description: String {
        switch self {
        case .byteByByte: "byte by byte"
        case .allAtOnce: "all at once"
        case .frameByFrame: "frame by frame"
        case .oddChunks: "chunks of 7 bytes"
        }
    }

    func chunks(_ stream: [UInt8], frames: [Frame]) -> [[UInt8]] {
        switch self {
        case .byteByByte: return stream.map { [$0] }
        case .allAtOnce: return [stream]
        case .frameByFrame: return frames.map { $0.descriptor.bytes + $0.payload }
        case .oddChunks: return stride(from: 0, to: stream.count, by: 7).map { Array(stream[$0..<min($0 + 7, stream.count)]) }
        }
    }
}

/// Runs `processor` over `chunks` into `handler`.
func feed(_ chunks: [[UInt8]], into handler: RecordingHandler, processor: inout FrameProcessor) throws {
    for var chunk in chunks {
        try unsafe chunk.withUnsafeMutableBytes { buf in try unsafe processor.process(buf, filter: handler, sink: handler) }
    }
}

/// Every golden capture as a stream of whole frames (a descriptor-only capture gets a payload of its length).
let goldenStreams: [(name: String, bytes: [UInt8])] = {
    let named: [(String, String)] = [
        ("authRequest", Golden.authRequest), ("authReply", Golden.authReply),
        ("setClientName", Golden.setClientName), ("setClientNameReply", Golden.setClientNameReply),
        ("createRecordDefault", Golden.createRecordDefault), ("createRecordDefaultReply", Golden.createRecordDefaultReply),
        ("recordMemblockDescriptor", Golden.recordMemblockDescriptor),
        ("createRecordMono", Golden.createRecordMono), ("createRecordMonoReply", Golden.createRecordMonoReply),
        ("createRecordU8", Golden.createRecordU8), ("createRecordU8Reply", Golden.createRecordU8Reply),
        ("u8MemblockDescriptor", Golden.u8MemblockDescriptor),
        ("createPlayback", Golden.createPlayback), ("createPlaybackReply", Golden.createPlaybackReply),
        ("request", Golden.request), ("started", Golden.started), ("underflow", Golden.underflow),
        ("loadModule", Golden.loadModule), ("errorModInitFailed", Golden.errorModInitFailed),
        ("errorNoEntity", Golden.errorNoEntity), ("recordSuspended", Golden.recordSuspended),
        ("recordResumed", Golden.recordResumed), ("recordMovedToMonitor", Golden.recordMovedToMonitor),
        ("recordMovedToMic", Golden.recordMovedToMic), ("recordKilled", Golden.recordKilled),
        ("createRecordV8", Golden.createRecordV8), ("createRecordV8Reply", Golden.createRecordV8Reply),
        ("createRecordV9Reply", Golden.createRecordV9Reply), ("createRecordV12", Golden.createRecordV12),
        ("createRecordV12Reply", Golden.createRecordV12Reply), ("createRecordV13", Golden.createRecordV13),
        ("createRecordV13Reply", Golden.createRecordV13Reply), ("setClientNameV12", Golden.setClientNameV12),
        ("setClientNameV12Reply", Golden.setClientNameV12Reply), ("setClientNameV13", Golden.setClientNameV13),
        ("setClientNameV13Reply", Golden.setClientNameV13Reply), ("createRecordPeak", Golden.createRecordPeak),
        ("createRecordPeakReply", Golden.createRecordPeakReply), ("peakServerStream", Golden.peakServerStream),
    ]
    return named.map { name, hex in
        var b = bytes(hex: hex)
        if b.count == Limits.descriptorSize {
            // A memblock descriptor captured without its payload: give it one (a ramp, so silence shows).
            let length = unsafe Int(b.withUnsafeBytes { unsafe FrameDescriptor(decoding: $0) }.length)
            b += (0..<length).map { UInt8(truncatingIfNeeded: $0 | 1) }
        }
        return (name, b)
    }
}()

@Suite struct FrameProcessorTests {
    @Test("every golden capture passes through unchanged, whatever the reads", arguments: Feeding.allCases)
    func goldenPassThrough(feeding: Feeding) throws {
        for (name, stream) in goldenStreams {
            let frames = try parseAll(stream)
            let handler = RecordingHandler()
            var processor = FrameProcessor()
            try feed(feeding.chunks(stream, frames: frames), into: handler, processor: &processor)
            #expect(handler.output == stream, "\(name) fed \(feeding)")
            #expect(handler.packets == frames.filter(\.descriptor.isPacket).map(\.payload), "\(name) fed \(feeding)")
            #expect(handler.memblocks == frames.filter { !$0.descriptor.isPacket }.map(\.descriptor), "\(name) fed \(feeding)")
            #expect(processor.isAtFrameBoundary, "\(name) fed \(feeding)")
            #expect(processor.packetsForwarded == handler.packets.count)
            let payload = frames.filter { !$0.descriptor.isPacket }.reduce(0) { $0 + $1.payload.count }
            #expect(handler.passedBytes == payload, "\(name) fed \(feeding)")
        }
    }

    @Test("all golden captures back to back: silenced and dropped memblocks, refused packets", arguments: Feeding.allCases)
    func goldenSilenceDropRefuse(feeding: Feeding) throws {
        // The captures' memblocks are all on channel 0: add one of another channel, between them.
        let other = FrameDescriptor(length: 333, channel: 7).bytes + [UInt8](repeating: 0x5A, count: 333)
        let half = goldenStreams.count / 2
        let stream = goldenStreams[..<half].flatMap(\.bytes) + other + goldenStreams[half...].flatMap(\.bytes)
        let frames = try parseAll(stream)
        let channels = Set(frames.filter { !$0.descriptor.isPacket }.map(\.descriptor.channel))
        #expect(channels == [0, 7], "the captures hold memblocks of \(channels.sorted())")
        let silencedChannel: UInt32 = 0
        let handler = RecordingHandler()
        handler.silenced = [silencedChannel]
        handler.dropped = channels.subtracting([silencedChannel])
        handler.refusePacketsWithCommand = Command.createPlaybackStream.rawValue
        var expected: [UInt8] = []
        for f in frames {
            if f.descriptor.isPacket {
                if (try? PacketHeader.decode(f.payload).command) == Command.createPlaybackStream.rawValue { continue }
                expected += f.descriptor.bytes + f.payload
            } else if f.descriptor.channel == silencedChannel {
                expected += f.descriptor.bytes + [UInt8](repeating: 0, count: f.payload.count)
            }
        }
        var processor = FrameProcessor()
        try feed(feeding.chunks(stream, frames: frames), into: handler, processor: &processor)
        #expect(handler.output == expected, "fed \(feeding)")
        #expect(handler.passedBytes == 0)
        #expect(
            handler.silencedBytes
                == frames.filter { !$0.descriptor.isPacket && $0.descriptor.channel == silencedChannel }
                .reduce(0) { $0 + $1.payload.count })
    }

    @Test("a bad descriptor throws once it is complete, however it arrives", arguments: Feeding.allCases)
    func badDescriptor(feeding: Feeding) throws {
        let good = bytes(hex: Golden.authReply)
        var bad = FrameDescriptor.packet(length: 12).bytes
        bad[16] = 0x01 // packet flags must be 0
        let stream = good + bad + [UInt8](repeating: 0, count: 12)
        let handler = RecordingHandler()
        var processor = FrameProcessor()
        let chunks = feeding == .frameByFrame ? [good, bad] : feeding.chunks(stream, frames: [])
        #expect(throws: ProtocolViolation.self) {
            try feed(chunks, into: handler, processor: &processor)
        }
        #expect(handler.output == good, "only the frame before the bad one went out")
    }

    @Test("a packet is handed over only once it is whole; a partial one is not a frame boundary")
    func partialPacket() throws {
        let stream = bytes(hex: Golden.setClientName)
        let handler = RecordingHandler()
        var processor = FrameProcessor()
        try feed([Array(stream[0..<30])], into: handler, processor: &processor)
        #expect(handler.packets.isEmpty && handler.output.isEmpty)
        #expect(!processor.isAtFrameBoundary)
        try feed([Array(stream[30...])], into: handler, processor: &processor)
        #expect(handler.output == stream)
        #expect(processor.isAtFrameBoundary)
    }

    @Test(
        "a packet over the limit, or not admitted, is skipped unbuffered and reported once its tag is in",
        arguments: Feeding.allCases)
    func refusedPackets(feeding: Feeding) throws {
        let big = Command.updateClientProplist.rawValue
        func packet(tag: UInt32, filler: Int) -> [UInt8] {
            var w = TagStructWriter(reservingCapacity: 64)
            PacketHeader(command: big, tag: tag).encode(into: &w)
            w.writeArbitrary([UInt8](repeating: 0x41, count: filler))
            return FrameDescriptor.packet(length: UInt32(w.bytes.count)).bytes + w.bytes
        }
        let good = bytes(hex: Golden.setClientName)
        let overLimit = packet(tag: 7, filler: 500)
        let overBudget = packet(tag: 8, filler: 200)
        let small = packet(tag: 9, filler: 20)
        let stream = good + overLimit + overBudget + small
        let frames = try parseAll(stream)
        let handler = RecordingHandler()
        handler.notAdmitted = overBudget.count - 20
        var processor = FrameProcessor(packetLimit: 450)
        try feed(feeding.chunks(stream, frames: frames), into: handler, processor: &processor)
        #expect(handler.output == good + small, "fed \(feeding)")
        #expect(handler.refused.map(\.length) == [overLimit.count - 20, overBudget.count - 20])
        #expect(handler.refused.map(\.limit) == [450, nil])
        #expect(handler.refused.map { $0.header?.tag } == [7, 8])
        #expect(handler.admitted == handler.released && handler.admitted.count == 2)
        #expect(processor.isAtFrameBoundary)
    }

    @Test("a refused packet is reported when its tag arrives, before the rest of it")
    func refusedEarly() throws {
        var w = TagStructWriter(reservingCapacity: 64)
        PacketHeader(command: Command.updateClientProplist.rawValue, tag: 3).encode(into: &w)
        w.writeArbitrary([UInt8](repeating: 0, count: 1000))
        let stream = FrameDescriptor.packet(length: UInt32(w.bytes.count)).bytes + w.bytes
        let handler = RecordingHandler()
        var processor = FrameProcessor(packetLimit: 100)
        try feed([Array(stream[0..<40])], into: handler, processor: &processor)
        #expect(handler.refused.count == 1)
        try feed([Array(stream[40...])], into: handler, processor: &processor)
        #expect(handler.refused.count == 1 && handler.output.isEmpty && processor.isAtFrameBoundary)
    }
}

extension FrameProcessorTests {
    /// A relay that moves a passing memblock's payload on by itself (splicing) and reads the
    /// rest: the filter hears every payload byte once, and the frames after it are processed
    /// as if the payload had come through `process`.
    @Test func payloadPassedOnOutsideTheProcessor() throws {
        let handler = RecordingHandler()
        handler.silenced = [2]
        var processor = FrameProcessor()
        #expect(processor.descriptorBytesMissing == Limits.descriptorSize)
        var first = FrameDescriptor(length: 1000, channel: 1).bytes
        try feed([Array(first[0..<8])], into: handler, processor: &processor)
        #expect(processor.descriptorBytesMissing == Limits.descriptorSize - 8)
        first.removeFirst(8)
        try feed([first, [UInt8](repeating: 9, count: 100)], into: handler, processor: &processor)
        #expect(processor.passingPayloadRemaining == 900)
        #expect(processor.descriptorBytesMissing == nil)
        #expect(processor.lastPassingMemblockLength == 1000)
        processor.passedOn(600, filter: handler)
        #expect(processor.passingPayloadRemaining == 300)
        processor.passedOn(300, filter: handler)
        #expect(processor.isAtFrameBoundary && processor.passingPayloadRemaining == nil)
        #expect(handler.passedBytes == 1000)
        #expect(handler.output.count == Limits.descriptorSize + 100, "spliced bytes are not emitted")

        // A silenced memblock's payload is never left to pass on, nor is a packet's.
        let silenced = Frame(descriptor: FrameDescriptor(length: 50, channel: 2), payload: [UInt8](repeating: 9, count: 50))
        try feed([silenced.descriptor.bytes], into: handler, processor: &processor)
        #expect(processor.passingPayloadRemaining == nil)
        #expect(processor.lastPassingMemblockLength == 0)
        try feed([silenced.payload], into: handler, processor: &processor)
        #expect(handler.silencedBytes == 50)
        try feed([Array(bytes(hex: Golden.request).prefix(Limits.descriptorSize + 3))], into: handler, processor: &processor)
        #expect(processor.passingPayloadRemaining == nil && processor.descriptorBytesMissing == nil)
        #expect(processor.lastPassingMemblockLength == 0)
    }
}
