// What a native PipeWire stream's negotiated format is in Pulse's words, and how
// status shows a format that is not (or not wholly) known.
import PipeWireGate
import PulseWire
@testable import Service
import StreamState
import Testing

@Suite struct PipeWireFormatTests {
    @Test func spaFormatsBecomeTheirPulseNames() {
        func spec(_ name: String, _ channels: UInt32? = 2, _ rate: UInt32? = 44100) -> String {
            specText(PipeWireDoor.sampleSpec(PipeWireAudioFormat(sample: name, channels: channels, rate: rate)))
        }
        #expect(spec("S16LE") == "s16le 2ch 44100Hz")
        #expect(spec("S24_32BE") == "s24-32be 2ch 44100Hz")
        #expect(spec("ULAW", 1, 8000) == "uLaw 1ch 8000Hz")
        // Planar formats are native-endian: the interleaved little-endian name.
        #expect(spec("F32P") == "float32le 2ch 44100Hz")
        #expect(spec("S16P") == "s16le 2ch 44100Hz")
        // Pulse has no name for these.
        #expect(spec("F64LE") == "unknown format 2ch 44100Hz")
        // A JACK client's: a port per channel, at the graph's rate.
        #expect(spec("F32P", 3, nil) == "float32le 3ch")
    }

    @Test func aStreamShowsItsSpecOnceNegotiated() {
        let stream = RecordStream(
            sessionID: 1, streamID: 2, channel: 3, sourceOutputIndex: invalidIndex,
            sampleSpec: PipeWireDoor.notNegotiated, source: "mic", real: false, startedAt: 0)
        #expect(specText(stream.sampleSpec) == "not negotiated yet")
        stream.negotiated(SampleSpec(format: .s24le, channels: 6, rate: 192_000))
        #expect(stream.sampleSpec == SampleSpec(format: .s24le, channels: 6, rate: 192_000))
        #expect(specText(stream.sampleSpec) == "s24le 6ch 192000Hz")
    }
}
