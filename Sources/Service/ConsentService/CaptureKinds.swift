// What each record stream captures, from the source catalog (see
// SourceCatalog.swift), and deciding a stream again when it moves
// (RECORD_STREAM_MOVED on the loop thread, before its next frame) or when the
// catalog learns something (on the catalog loop). A stream's placement has a
// lock of its own; the engine call goes through Decisions.
import Consent
import PulseWire
import Runtime
import StreamState

final class CaptureKinds: Sendable {
    private let decisions: Decisions
    private let registry: StreamRegistry
    /// What each source of the server is; a source it does not know leaves its streams silent.
    let catalog: any SourceDirectory

    init(decisions: Decisions, registry: StreamRegistry, catalog: any SourceDirectory) {
        self.decisions = decisions
        self.registry = registry
        self.catalog = catalog
    }

    /// What a CREATE_RECORD_STREAM request will capture, as far as the request tells (for
    /// `missing-purpose`; the reply fixes the kind).
    func expectedKind(_ request: CreateRecordStreamRequest) -> Capability {
        catalog.snapshot.expectedKind(
            sourceIndex: request.sourceIndex, sourceName: request.sourceName,
            directOnInput: request.directOnInput != invalidIndex)
    }

    /// Where a held stream says it records from: the source its request names, as the catalog knows it.
    func placement(_ request: CreateRecordStreamRequest) -> HeldPlacement {
        guard let (index, name) = catalog.snapshot.resolve(sourceIndex: request.sourceIndex, sourceName: request.sourceName)
        else { return HeldPlacement(sourceName: request.sourceName, sourceIndex: request.sourceIndex) }
        return HeldPlacement(sourceName: name, sourceIndex: index)
    }

    /// What `stream` captures, from the catalog; stored in its placement for status and events.
    func classify(_ stream: RecordStream) -> (source: String, kind: Capability?) {
        // A native PipeWire stream's placement is the gate's, from the graph.
        if stream.placedByGraph { return stream.placement.withLock { ($0.source, $0.kind) } }
        let table = catalog.snapshot
        // A held stream whose request names a source the catalog cannot tell yet (the default
        // source before the server said which it is) is taken for what it asks: its server
        // stream, made once that is granted, is decided again from the server's reply before
        // its first frame.
        let held = stream.serverOutput.load(ordering: .relaxed) == invalidIndex
        return stream.placement.withLock { p in
            let name = p.source.isEmpty ? nil : p.source
            p.kind =
                table.kind(sourceIndex: p.sourceIndex, sourceName: name, directOnInput: stream.directOnInput)
                ?? (held && p.sourceIndex == invalidIndex
                    ? table.expectedKind(sourceIndex: p.sourceIndex, sourceName: name, directOnInput: stream.directOnInput)
                    : nil)
            return (p.source, p.kind)
        }
    }

    /// The stream records from another source now (its placement says which).
    func moved(_ stream: RecordStream) {
        redecide(stream, why: "moved")
    }

    /// Whether any record stream is live (the source catalog polls source outputs meanwhile).
    var hasRecordStreams: Bool { registry.hasStreams }

    /// Classifies `stream` again and has the engine decide it again when its source or kind changed
    /// (the flag is set under the engine lock, before the stream's next frame is looked at).
    private func redecide(_ stream: RecordStream, why: String) {
        let (source, kind) = classify(stream)
        let changed = decisions.withEngine { e in
            let (real, actions) = e.recordStreamMoved(
                ClientID(stream.sessionID), stream: StreamID(stream.streamID),
                source: source, kind: kind, now: wallClockNow())
            decisions.setAccess(stream, real: real)
            return (!actions.isEmpty, actions)
        }
        guard changed else { return }
        let app = registry.session(stream.sessionID)?.identity.appKey.description ?? "?"
        Log.info(
            "session \(stream.sessionID) (\(app)): record stream \(stream.channel) \(why): on \(source) "
                + "(\(kind?.rawValue ?? "source not known yet")), \(stream.isReal ? "real" : "silenced")")
    }

    /// The server said, when asked at `askedAt` (monotonic), that source output `index` records
    /// from source `source` (the catalog asks after change events, and polls while streams are
    /// live): a stream of ours found elsewhere is decided again. An answer asked for before the
    /// stream's last RECORD_STREAM_MOVED is older than what that said, and is ignored. A native
    /// stream, which pipewire-pulse lists too, is placed by the gate, not by this.
    func sourceOutputChanged(index: UInt32, source: UInt32, askedAt: Double) {
        guard let stream = registry.stream(sourceOutput: index), !stream.placedByGraph else { return }
        let name = catalog.snapshot.sources[source]?.name ?? ""
        let moved = stream.placement.withLock { p -> Bool in
            guard p.sourceIndex != source, askedAt > p.movedAt else { return false }
            p.sourceIndex = source
            p.source = name
            return true
        }
        if moved { redecide(stream, why: "moved (seen by the source catalog)") }
    }

    /// The catalog learned or forgot sources: streams whose kind changed with it are decided again.
    func sourcesChanged() {
        for stream in registry.streams.values { redecide(stream, why: "classified again") }
    }
}
