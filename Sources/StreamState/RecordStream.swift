// A record stream as the consent service decides it: one class for a Pulse stream of the
// relay and a native stream of the PipeWire door. The audio path reads `access` once per
// frame; everything else changes only when the stream is decided, moves or ends.
import Basics
import LinuxSystem
import PulseWire
import Synchronization

/// Where a record stream records from, and what that captures.
public struct StreamPlacement: Sendable, Equatable {
    /// The source's name as the server gave it (or as requested, when it gave none).
    public var source: String
    /// The source's index, or `invalidIndex`.
    public var sourceIndex: UInt32
    /// What the source captures; nil until it is known (the stream is silent meanwhile).
    public var kind: Capability?
    /// When (monotonic seconds) the server last said the stream moved (RECORD_STREAM_MOVED).
    public var movedAt: Double = 0
}

/// One record stream of a session, shared by the S→C filter (audio path) and the consent engine.
public final class RecordStream: Sendable {
    public let sessionID: UInt64
    public let streamID: UInt64
    public let channel: UInt32
    public let sourceOutputIndex: UInt32
    /// The sample spec, packed (format byte, channels, rate): fixed at creation for a Pulse
    /// stream; a native PipeWire stream's is set once its format is negotiated, after it starts.
    private let spec: Atomic<UInt64>
    /// Created with `direct_on_input`: it records one other app's playback (app audio).
    public let directOnInput: Bool
    /// Changed when the stream moves or its source becomes known; read when it is decided.
    public let placement: Locked<StreamPlacement>
    /// 1 = real samples pass, 0 = silence. Read once per frame on the audio path.
    public let access = Atomic<UInt8>(0)
    public let bytesReal = Atomic<UInt64>(0)
    public let bytesSilenced = Atomic<UInt64>(0)
    public let startedAt: Double
    /// Carries out each change of `access`: the PipeWire gate routes a native stream; a Pulse
    /// stream gets or loses its stream on the server (`RecordChannels`).
    public let accessChanged: (@Sendable (Bool) -> Void)?
    /// A native PipeWire stream: its source and kind are the gate's to say (from the graph), not
    /// the source catalog's.
    public let placedByGraph: Bool
    /// The server's index of the stream's source output while it has one (a Pulse stream's may
    /// differ from `sourceOutputIndex`, the one the app was given; a native stream's is the one
    /// pipewire-pulse lists it under), else `invalidIndex`.
    public let serverOutput: Atomic<UInt32>

    public init(
        sessionID: UInt64, streamID: UInt64, channel: UInt32, sourceOutputIndex: UInt32,
        sampleSpec: SampleSpec, source: String, sourceIndex: UInt32 = invalidIndex, directOnInput: Bool = false,
        real: Bool, startedAt: Double, placedByGraph: Bool = false, accessChanged: (@Sendable (Bool) -> Void)? = nil
    ) {
        self.sessionID = sessionID
        self.streamID = streamID
        self.channel = channel
        self.sourceOutputIndex = sourceOutputIndex
        serverOutput = Atomic(sourceOutputIndex)
        spec = Atomic(Self.pack(sampleSpec))
        self.directOnInput = directOnInput
        placement = Locked(StreamPlacement(source: source, sourceIndex: sourceIndex, kind: nil))
        self.startedAt = startedAt
        self.accessChanged = accessChanged
        self.placedByGraph = placedByGraph
        access.store(real ? 1 : 0, ordering: .releasing)
    }

    public var isReal: Bool { access.load(ordering: .acquiring) == 1 }

    /// The stream's sample spec (read on the audio path: one plain load).
    public var sampleSpec: SampleSpec {
        let v = spec.load(ordering: .relaxed)
        return SampleSpec(
            formatByte: UInt8(truncatingIfNeeded: v >> 40), channels: UInt8(truncatingIfNeeded: v >> 32),
            rate: UInt32(truncatingIfNeeded: v))
    }

    /// The format a native PipeWire stream negotiated.
    public func negotiated(_ sampleSpec: SampleSpec) { spec.store(Self.pack(sampleSpec), ordering: .relaxed) }

    private static func pack(_ s: SampleSpec) -> UInt64 {
        UInt64(s.formatByte) << 40 | UInt64(s.channels) << 32 | UInt64(s.rate)
    }

    /// The source's name now.
    public var sourceName: String { placement.withLock { $0.source } }

    public func setReal(_ real: Bool) {
        let before = access.exchange(real ? 1 : 0, ordering: .acquiringAndReleasing)
        if before != (real ? 1 : 0) { accessChanged?(real) }
    }

    public func countReal(_ n: Int) { bytesReal.add(UInt64(n), ordering: .relaxed) }
    public func countSilenced(_ n: Int) { bytesSilenced.add(UInt64(n), ordering: .relaxed) }
}

/// Where a held stream says it records from (the observer's answer for a request it holds).
public struct HeldPlacement: Sendable, Equatable {
    public var sourceName: String?
    public var sourceIndex: UInt32
    public init(sourceName: String?, sourceIndex: UInt32) {
        self.sourceName = sourceName
        self.sourceIndex = sourceIndex
    }
}
