// Carries what the consent engine asks to persist to SQLite, off the I/O loops.
//
// Writes are coalesced, so that no client can queue unbounded work: the
// latest decision and the latest app record per app replace earlier ones that
// are not written yet (a client renaming itself a million times costs one
// row write per batch, not a million), and the event log is capped. Decisions
// go first in every batch and can be flushed by the caller, so `earmuff grant`
// never waits behind another app's writes. Usage rows keep their order (a
// finish needs the row its start created).
import LinuxSystem
import Consent
import ConsentStore
import Runtime

final class StoreWriter: Sendable {

    /// Queued event-log rows beyond this are counted and dropped (a summary row says how many).
    static let maximumQueuedEvents = 1024

    /// One decision row: the lasting one of an app and capability, or the timed one over it.
    private struct DecisionKey: Hashable {
        var app: AppKey
        var capability: Capability
        var timed: Bool
    }

    /// What is to become of a decision row.
    private enum DecisionWrite {
        case save(Decision)
        case removeTimed
    }

    private enum Row {
        case startUsage(stream: UInt64, UsageRecord)
        case finishUsage(stream: UInt64, endedAt: Double, bytesReal: UInt64, bytesSilenced: UInt64, decision: String?)
        case event(kind: String, app: AppKey?, detail: String, at: Double)
    }

    private struct Pending {
        var decisions: [DecisionKey: DecisionWrite] = [:]
        /// The master switch per kind: the latest replaces a queued one.
        var access: [Capability: (enabled: Bool, at: Double)] = [:]
        var apps: [AppKey: AppRecord] = [:]
        var rows: [Row] = []
        var queuedEvents = 0
        var droppedEvents = 0
        var draining = false

        var isEmpty: Bool { decisions.isEmpty && access.isEmpty && apps.isEmpty && rows.isEmpty && droppedEvents == 0 }
    }

    private let store: PermissionStore
    private let pending = Locked(Pending())
    /// Held while decisions are taken from `pending` and written, so they reach the disk in order;
    /// counts the flushes. (Not a Locked<Void>: the thread sanitizer takes a zero-sized value
    /// for the lock field that shares its address.)
    private let decisionWrites = Locked(0)
    /// Usage row ids by stream, from `startUsage` to `finishUsage`.
    private let usageRows = Locked([UInt64: Int64]())
    /// Where batches are written ("store").
    private let worker: Worker

    init(store: PermissionStore) throws(SystemError) {
        self.store = store
        worker = try Worker(name: "store")
    }

    /// Queues a decision; a later one for the same app, capability and layer (lasting or timed) replaces it.
    func save(_ d: Decision) {
        let key = DecisionKey(app: d.appKey, capability: d.capability, timed: d.lifespan.expiresAt != nil)
        enqueue { $0.decisions[key] = .save(d) }
    }

    /// Queues the master switch of `kind`, written with the decisions; a later one replaces it.
    func setAccess(_ kind: Capability, enabled: Bool, at: Double) {
        enqueue { $0.access[kind] = (enabled, at) }
    }

    /// Queues the removal of the timed decision of `app` and `capability`, replacing a queued save of it.
    func removeTimed(_ app: AppKey, _ capability: Capability) {
        enqueue { $0.decisions[DecisionKey(app: app, capability: capability, timed: true)] = .removeTimed }
    }

    /// Queues an app record; a later one for the same app replaces it (keeping the first-seen time).
    func record(_ r: AppRecord) {
        enqueue { p in
            // Merged with one still queued as the store merges it with its row: a field not
            // given keeps the one known (a name change must not drop the command queued before it).
            var r = r
            if let queued = p.apps[r.appKey] {
                r.firstSeenAt = min(r.firstSeenAt, queued.firstSeenAt)
                r.displayName = r.displayName ?? queued.displayName
                r.executable = r.executable ?? queued.executable
                r.commandName = r.commandName ?? queued.commandName
            }
            p.apps[r.appKey] = r
        }
    }

    /// Queues the start of a usage row for `stream`.
    func startUsage(stream: UInt64, _ u: UsageRecord) {
        enqueue { $0.rows.append(.startUsage(stream: stream, u)) }
    }

    /// Queues the end of the usage row of `stream` (`decision`, when non-nil, replaces the one logged at the start).
    func finishUsage(stream: UInt64, endedAt: Double, bytesReal: UInt64, bytesSilenced: UInt64, decision: String?) {
        enqueue {
            $0.rows.append(
                .finishUsage(
                    stream: stream, endedAt: endedAt, bytesReal: bytesReal,
                    bytesSilenced: bytesSilenced, decision: decision))
        }
    }

    /// Queues an event-log row, unless `maximumQueuedEvents` are already waiting.
    func logEvent(kind: String, app: AppKey?, detail: String, at: Double) {
        enqueue { p in
            if p.queuedEvents >= Self.maximumQueuedEvents {
                p.droppedEvents += 1
            } else {
                p.queuedEvents += 1
                p.rows.append(.event(kind: kind, app: app, detail: detail, at: at))
            }
        }
    }

    /// Writes every decision queued so far before it returns: a reply that says "granted"
    /// must not be lost by a crash. Waits at most for one write in progress, never for the queue.
    func flushDecisions() {
        decisionWrites.withLock { flushes in
            flushes &+= 1
            let (decisions, access) = pending.withLock { p in
                defer { (p.decisions, p.access) = ([:], [:]) }
                return (Array(p.decisions), p.access.sorted { $0.key.rawValue < $1.key.rawValue })
            }
            for (kind, change) in access {
                do {
                    try store.setAccess(kind, enabled: change.enabled, at: change.at)
                } catch {
                    Log.error("store: cannot save \(kind.rawValue) access \(change.enabled ? "on" : "off"): \(error)")
                }
            }
            for (key, write) in decisions {
                do {
                    switch write {
                    case .save(let d): try store.setDecision(d)
                    case .removeTimed: try store.removeTimedDecision(key.app, capability: key.capability)
                    }
                } catch {
                    Log.error("store: cannot save the decision for \(key.app): \(error)")
                }
            }
        }
    }

    /// Waits until everything queued so far is written (shutdown, tests).
    func flush() {
        worker.waitForJobs()
        flushDecisions()
    }

    private func enqueue(_ change: (inout Pending) -> Void) {
        let start = pending.withLock { p -> Bool in
            change(&p)
            defer { p.draining = true }
            return !p.draining
        }
        if start { worker.async { self.drain() } }
    }

    private func drain() {
        while true {
            flushDecisions()
            let batch = pending.withLock { p -> (apps: [AppRecord], rows: [Row], dropped: Int)? in
                if p.isEmpty {
                    p.draining = false
                    return nil
                }
                defer {
                    p.apps = [:]
                    p.rows = []
                    p.queuedEvents = 0
                    p.droppedEvents = 0
                }
                return (Array(p.apps.values), p.rows, p.droppedEvents)
            }
            guard let batch else { return }
            for r in batch.apps {
                do { try store.recordApp(r) } catch { Log.error("store: cannot record app \(r.appKey): \(error)") }
            }
            for row in batch.rows { write(row) }
            if batch.dropped > 0 {
                Log.warn("store: \(batch.dropped) event-log rows were dropped (more than \(Self.maximumQueuedEvents) queued)")
                write(.event(kind: "events-dropped", app: nil, detail: "\(batch.dropped) events not logged", at: wallClockNow()))
            }
        }
    }

    private func write(_ row: Row) {
        switch row {
        case let .startUsage(stream, u):
            do {
                let id = try store.startUsage(u)
                usageRows.withLock { $0[stream] = id }
            } catch { Log.error("store: cannot log usage of \(u.appKey): \(error)") }
        case let .finishUsage(stream, endedAt, real, silenced, decision):
            guard let id = usageRows.withLock({ $0.removeValue(forKey: stream) }) else { return }
            do {
                try store.finishUsage(id: id, endedAt: endedAt, bytesReal: real, bytesSilenced: silenced, decision: decision)
            } catch {
                Log.error("store: cannot finish usage record \(id): \(error)")
            }
        case let .event(kind, app, detail, at):
            _ = try? store.logEvent(kind: kind, appKey: app, detail: detail, at: at)
        }
    }
}
