// The usage log's rows of live streams: each starts with the stream (or its
// move) and ends with it, carrying the bytes counted meanwhile and the
// decision in force at both ends. Driven by the engine's usage actions while
// the engine's lock is held, so rows start and end in the order the engine
// made them: two threads' calls for one stream (a move the loop reports and
// the source the catalog then finds) must not cross, or a row would start
// after the end meant for it and never end. Its table has a lock of its own,
// taken after the engine's.
import Consent
import LinuxSystem
import StreamState
import Wording

final class UsageRows: Sendable {
    /// The decision logged at a row's start (to tell a change at its end), and the stream's
    /// byte counts when the row started (a move starts a new row).
    private struct Row {
        var decision: String?
        var kind: Capability?
        var realBefore: UInt64 = 0
        var silencedBefore: UInt64 = 0
    }
    private let rows = Locked([UInt64: Row]())
    private let registry: StreamRegistry
    private let records: any ConsentRecords

    init(registry: StreamRegistry, records: any ConsentRecords) {
        self.registry = registry
        self.records = records
    }

    /// Starts the usage row of `s`; `engine` is the engine whose lock the caller holds.
    func start(_ s: StreamID, _ u: UsageRecord, engine: borrowing ConsentEngine) {
        var u = u
        var row = Row(kind: Capability(rawValue: u.kind))
        if let stream = registry.stream(s.rawValue) {
            u.bytesPerSecond = UInt32(clamping: stream.sampleSpec.frameSize * Int(stream.sampleSpec.rate))
            u.decision = decisionText(engine, u.appKey, row.kind, real: stream.isReal)
            row.realBefore = stream.bytesReal.load(ordering: .relaxed)
            row.silencedBefore = stream.bytesSilenced.load(ordering: .relaxed)
        }
        row.decision = u.decision
        rows.withLock { $0[s.rawValue] = row }
        records.startUsage(stream: s.rawValue, u)
    }

    /// Ends the usage row of `s` with the bytes counted since it started; `engine` is the
    /// engine whose lock the caller holds.
    func finish(_ c: ClientID, _ s: StreamID, stream: RecordStream?, endedAt: Double, engine: borrowing ConsentEngine) {
        let key = registry.session(c.rawValue)?.identity.appKey
        let row = rows.withLock { $0.removeValue(forKey: s.rawValue) } ?? Row()
        let atEnd = key.map { decisionText(engine, $0, row.kind, real: stream?.isReal ?? false) }
        let real = stream?.bytesReal.load(ordering: .relaxed) ?? 0
        let silenced = stream?.bytesSilenced.load(ordering: .relaxed) ?? 0
        records.finishUsage(
            stream: s.rawValue, endedAt: endedAt,
            bytesReal: real &- min(real, row.realBefore),
            bytesSilenced: silenced &- min(silenced, row.silencedBefore),
            decision: atEnd.flatMap { $0 == row.decision ? nil : "\(row.decision ?? "?") → \($0)" })
    }

    /// "granted (user)", "denied this session (user)", "granted until 2026-11-30 14:05 (user)",
    /// "undetermined", or "once" for a stream real by an "allow once".
    private func decisionText(_ engine: borrowing ConsentEngine, _ app: AppKey, _ kind: Capability?, real: Bool) -> String {
        guard let kind else { return "source not known" }
        let d = engine.effectiveDecision(for: app, kind: kind)
        switch d.state {
        case .undetermined: return real ? "once" : "undetermined"
        case .granted, .denied:
            let lasts: String =
                switch d.lifespan {
                case .always, .once: ""
                case .session: " this session"
                case let .until(t): " until \(TextFormat.date(t))"
                }
            return "\(d.state.rawValue)\(lasts) (\(d.reason.rawValue))"
        }
    }
}
