// What one local process can take of the control socket: it must not lock out
// `earmuff status`, `grant` or the agent.
//
// * A connection that did not subscribe or become an agent (a one-shot request, or a
//   peer that sends nothing) is closed after `idleTimeout` seconds of silence.
// * When `maxConnections` are open, a new connection takes the place of the one of those
//   idle the longest, so a one-shot request always gets a slot.
// * Connections that subscribed or became agents never time out; each uid may have
//   `maxLongLivedPerUID` of them, so together they can never take every slot. Earmuff's own
//   programs (its agent, `watch`, the settings window: `isOwn`) are counted apart, so other
//   processes of the uid cannot lock them out; when they reach the limit themselves, the
//   one of them silent the longest makes room for the new one.
// * Refusals and evictions are logged, at most 5 lines per 10 s.
import Consent
import ControlProtocol
import Glibc
import Runtime

extension ControlServer {
    /// Frees a slot for a new connection of `pid` if all are taken; false when none can be freed.
    func makeRoom(for pid: Int32) -> Bool {
        guard connections.count >= options.maxConnections else { return true }
        let idle = connections.values.filter { !$0.longLived }.min { ($0.lastActivity, $0.id) < ($1.lastActivity, $1.id) }
        guard let victim = idle else {
            limitLog.record(
                .warn, "refused pid \(pid): all \(connections.count) control connections subscribed or are agents",
                to: log)
            return false
        }
        limitLog.record(
            .warn,
            "closed control#\(victim.id) (uid \(victim.peer.uid)), silent for "
                + "\(Int(monotonicNow() - victim.lastActivity)) s, to make room for pid \(pid): "
                + "\(options.maxConnections) control connections were open", to: log)
        drop(victim, reason: nil)
        return true
    }

    /// Whether `c`'s peer runs one of Earmuff's own programs (asked once per connection).
    func isOwn(_ c: Connection) -> Bool {
        if let own = c.own { return own }
        let own = options.ownProgram?(c.peer) ?? ProcessInspector.runsEarmuffsOwnProgram(c.peer)
        c.own = own
        return own
    }

    /// Why `c` may not subscribe or become an agent (its uid has as many such connections as
    /// allowed, of Earmuff's own programs or of others, as `c` is), or nil.
    func longLivedRefusal(_ c: Connection) -> ControlError? {
        let own = isOwn(c)
        let alike = connections.values.filter { $0.longLived && $0.peer.uid == c.peer.uid && $0.own == own }
        let ofUID = alike.count
        guard ofUID >= options.maxLongLivedPerUID else { return nil }
        if own, let oldest = alike.min(by: { ($0.lastActivity, $0.id) < ($1.lastActivity, $1.id) }) {
            limitLog.record(
                .warn,
                "closed control#\(oldest.id) (pid \(oldest.peer.pid)), the one of Earmuff's own programs silent "
                    + "the longest, to make room for pid \(c.peer.pid): \(ofUID) of them subscribed or are agents", to: log)
            drop(oldest, reason: nil)
            return nil
        }
        limitLog.record(
            .warn,
            "control#\(c.id): refused to subscribe: uid \(c.peer.uid) already has \(ofUID) "
                + "connections that subscribed or are agents", to: log)
        return ControlError(
            .tooMany,
            "uid \(c.peer.uid) already has \(ofUID) control connections that subscribed or are "
                + "agents, the most allowed; stop an 'earmuff watch' or 'earmuff agent' first")
    }

    /// Closes connections that are not long-lived and were silent for `idleTimeout`; runs
    /// again while such connections remain.
    func scheduleIdleSweep() {
        guard sweep == nil else { return }
        sweep = loop.schedule(after: max(0.05, options.idleTimeout / 4)) { [self] in
            sweep = nil
            let now = monotonicNow()
            for c in Array(connections.values) where !c.longLived && now - c.lastActivity >= options.idleTimeout {
                log(.debug, "control#\(c.id): closed after \(options.idleTimeout) s without a request")
                drop(c, reason: nil)
            }
            if needsIdleSweep { scheduleIdleSweep() }
        }
    }

    /// With no connection left that the sweep could close, its timer goes: an idle daemon
    /// does not wake for it (`earmuff status` would otherwise cost a wake-up seconds later).
    func cancelIdleSweepIfUnneeded() {
        guard let timer = sweep, !needsIdleSweep else { return }
        loop.cancel(timer)
        sweep = nil
    }

    private var needsIdleSweep: Bool { connections.values.contains { !$0.longLived } }
}
