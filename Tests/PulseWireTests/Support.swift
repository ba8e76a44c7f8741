import Testing
import PulseWire

/// Bytes of a hex string (whitespace ignored); traps on malformed test data.
func bytes(hex: String) -> [UInt8] {
    let digits = Array(hex.utf8).filter { $0 != 0x20 && $0 != 0x0A }
    precondition(digits.count % 2 == 0, "odd hex length")
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: preconditionFailure("not hex")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
}

/// All frames of a byte stream, fed at once.
func parseAll(_ stream: [UInt8]) throws -> [Frame] {
    var parser = FrameParser()
    parser.append(contentsOf: stream)
    var frames: [Frame] = []
    while let frame = try parser.next() { frames.append(frame) }
    return frames
}

/// The single frame of a golden hex literal.
func goldenFrame(_ hex: String) throws -> Frame {
    let frames = try parseAll(bytes(hex: hex))
    precondition(frames.count == 1, "golden literal must hold one frame")
    return frames[0]
}

/// Payload of the single frame of a golden hex literal.
func goldenPayload(_ hex: String) throws -> [UInt8] {
    try goldenFrame(hex).payload
}

/// Packet payload of command + tag + whatever `body` writes.
func packet(_ command: UInt32, tag: UInt32 = 1, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
    var writer = TagStructWriter()
    writer.writeU32(command)
    writer.writeU32(tag)
    body(&writer)
    return writer.bytes
}

/// The error `body` throws (nil if it returns). The decoders throw only
/// `WireError`; anything else would surface here as a mismatch.
func wireError(_ body: () throws -> Void) -> WireError? {
    do {
        try body()
        return nil
    } catch let error as WireError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// Deterministic generator for the mutation tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
