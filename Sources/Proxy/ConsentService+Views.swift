// What the consent service shows: `status`, `apps`, prompt, client and stream
// infos, and the control events made from the engine's events.
import CLinux
import Consent
import ConsentStore
import ControlProtocol
import Dispatch
import Glibc
import PulseWire
import Synchronization
import Wording

extension ConsentService {
    func status() -> StatusPayload {
        let (clients, streams, prompts, temporary, waiting) = engine.withLock { e in
            (e.clientSnapshots, e.streamSnapshots, e.pendingPrompts,
             e.temporaryDecisions.map { ($0, e.effectiveDecision(for: $0.appKey, kind: $0.capability)) },
             e.waitingCaptures)
        }
        let live = registry.withLock { $0.streams }
        let clientInfos = clients.map { c in
            ClientInfo(id: c.id.rawValue, appKey: c.identity.appKey.description, displayName: c.displayName,
                       pid: c.identity.pid, identifiedBy: c.identity.method.rawValue, executable: c.identity.executable,
                       strength: c.identity.strength, caveat: c.identity.caveat)
        }
        let streamInfos: [StreamInfo] = streams.compactMap { s in
            guard let r = live[s.stream.rawValue] else { return nil }
            return StreamInfo(client: s.client.rawValue, stream: r.channel, appKey: s.appKey.description,
                              source: r.sourceName, sampleSpec: specText(r.sampleSpec),
                              audio: r.isReal ? .real : .silenced,
                              bytesReal: r.bytesReal.load(ordering: .relaxed),
                              bytesSilenced: r.bytesSilenced.load(ordering: .relaxed), kind: s.kind)
        }
        let d = relay
        return StatusPayload(
            daemon: DaemonInfo(pid: getpid(), version: earmuffVersion, listenPath: paths.listen, controlPath: paths.control,
                               storePath: store.path, uptimeSeconds: wallClockNow() - (d?.startedAt ?? wallClockNow()),
                               sessionSocket: paths.isSessionSocket, socketActivated: d.map { $0.activatedListener != nil },
                               promptChannels: PromptChannelsInfo(
                                   via: configuration.promptVia.map(\.rawValue),
                                   command: engine.withLock { $0.policy.hasPromptCommand },
                                   agents: registry.withLock { $0.agents.count }),
                               audioThreads: d.map { audioThreadsInfo($0.loopThreadIDs()) }),
            upstream: UpstreamInfo(server: d?.upstream.description ?? "", reachable: d.map { canConnect($0.upstream.path) } ?? false),
            clients: clientInfos, streams: streamInfos, prompts: prompts.map(promptInfo),
            temporary: temporary.map { d, eff in
                AppInfo(key: d.appKey.description, state: eff.state, reason: eff.reason, purpose: d.purpose,
                        decidedAt: d.decidedAt, lifespan: eff.lifespan.kind, expiresAt: eff.lifespan.expiresAt,
                        afterwards: eff.afterwards)
            },
            waiting: waiting.map { w in
                WaitingCaptureInfo(appKey: w.appKey.description, kind: w.kind, displayName: w.displayName,
                                   uid: w.uid, source: w.source, since: w.since)
            },
            access: accessInfos())
    }

    /// How the relay loops run now, and what granted it.
    func audioThreadsInfo(_ threads: [pid_t]) -> AudioThreadsInfo {
        let now = threads.compactMap(AudioThreads.current)
        let grant = AudioThreads.lastGrant
        // The least of the threads: one loop left behind is what a person hears.
        let least = now.min { a, b in
            a.isRealtime != b.isRealtime ? !a.isRealtime : (a.isRealtime ? a.priority < b.priority : a.nice > b.nice)
        }
        let refused = grant.map { $0.refusals.joined(separator: "; ") }.flatMap { $0.isEmpty ? nil : $0 }
        guard let least else { return AudioThreadsInfo(scheduling: "normal", policy: "SCHED_OTHER", threads: 0) }
        if least.isRealtime {
            return AudioThreadsInfo(scheduling: "realtime", policy: least.policyName, priority: least.priority,
                                    via: grant?.via, threads: now.count)
        }
        var note = refused
        if case .realtime = grant?.level {
            note = AudioThreads.demotedForSpinning ? "put back to normal: a loop ran too long without sleeping"
                                                   : "put back to normal by the system (RealtimeKit's watchdog?)"
        }
        let raised = least.nice < 0
        return AudioThreadsInfo(scheduling: raised ? "high-priority" : "normal", policy: least.policyName,
                                nice: least.nice, via: raised ? grant?.via : nil, threads: now.count, note: note)
    }

    /// The master switch of every capture kind.
    func accessInfos() -> [AccessInfo] {
        let off = engine.withLock { $0.accessOff }
        return Capability.allCases.map { AccessInfo(kind: $0, enabled: !off.contains($0)) }
    }

    /// One row per app and kind that has a decision (or a use) stored, and a microphone row for
    /// every other known app; from what the engine holds (it keeps what it stores).
    func apps() -> [AppInfo] {
        struct Row: Hashable, Comparable {
            var app: AppKey
            var kind: Capability
            static func < (a: Row, b: Row) -> Bool { (a.app, a.kind) < (b.app, b.kind) }
        }
        return engine.withLock { e in
            let decided = Set((e.storedDecisions + e.temporaryDecisions).map { Row(app: $0.appKey, kind: $0.capability) })
            let others = Set(e.nameableApps.map(\.key)).subtracting(decided.map(\.app))
            let rows = decided.union(others.map { Row(app: $0, kind: .microphone) })
            return rows.sorted().map { appInfo($0.app, $0.kind, in: e) }
        }
    }

    /// What the engine holds of `app` and `kind`: the decision in force, the stored one's purpose
    /// and times (else apps.d's purpose), and what is known of the app.
    func appInfo(_ app: AppKey, _ kind: Capability, in e: ConsentEngine) -> AppInfo {
        let eff = e.effectiveDecision(for: app, kind: kind)
        let r = e.knownApp(app)
        let d = e.storedDecision(for: app, kind: kind)
        return AppInfo(key: app.description, displayName: r?.displayName, state: eff.state,
                       reason: eff.reason, purpose: d?.purpose ?? e.policy.declarations[app]?.purpose,
                       identifiedBy: r?.method, decidedAt: d?.decidedAt, lastUsed: d?.lastUsedAt,
                       executable: r?.executable, kind: kind, lifespan: eff.lifespan.kind,
                       expiresAt: eff.lifespan.expiresAt, afterwards: eff.afterwards,
                       strength: r?.method.defaultStrength)
    }

    func promptInfo(_ p: Prompt) -> PromptInfo {
        let entry = desktopEntries.entry(for: p.appKey, executable: p.executable)
        return PromptInfo(id: p.id.rawValue, appKey: p.appKey.description, displayName: p.displayName,
                          identifiedBy: p.method, pid: p.pid, purpose: p.purpose, source: p.source,
                          executable: p.executable, raisedAt: p.raisedAt, systemName: entry?.name, icon: entry?.icon,
                          strength: p.strength, caveat: p.caveat, kind: p.kind,
                          commandName: ProcessInspector.linkName(pid: p.pid, executable: p.executable),
                          accessOff: engine.withLock { $0.accessOff.contains(p.kind) } ? true : nil)
    }

    func clientInfo(_ c: ClientID, _ identity: ClientIdentity?) -> ClientInfo {
        let session = registry.withLock { $0.sessions[c.rawValue] }
        let id = identity ?? session?.identity
        return ClientInfo(id: c.rawValue, appKey: id?.appKey.description ?? "unknown",
                          displayName: session?.properties.withLock { $0.displayName }, pid: id?.pid,
                          identifiedBy: id?.method.rawValue ?? "unknown", executable: id?.executable,
                          strength: id?.strength, caveat: id?.caveat)
    }

    /// `stream`: the record stream, when it has already left the registry (it ended).
    func streamInfo(_ c: ClientID, _ s: StreamID, _ app: AppKey, source: String?, real: Bool?,
                    stream: RecordStream? = nil) -> StreamInfo {
        let r = stream ?? registry.withLock { $0.streams[s.rawValue] }
        let placement = r?.placement.withLock { $0 }
        return StreamInfo(client: c.rawValue, stream: r?.channel ?? UInt32(truncatingIfNeeded: s.rawValue),
                          appKey: app.description, source: source ?? placement?.source ?? "",
                          sampleSpec: r.map { specText($0.sampleSpec) } ?? "",
                          audio: (real ?? r?.isReal ?? false) ? .real : .silenced,
                          bytesReal: r?.bytesReal.load(ordering: .relaxed) ?? 0,
                          bytesSilenced: r?.bytesSilenced.load(ordering: .relaxed) ?? 0,
                          kind: placement?.kind)
    }

    /// `ended`: streams that ended in the same batch of actions, by stream id.
    func controlEvent(_ e: ConsentEvent, ended: [UInt64: RecordStream] = [:]) -> ControlEvent? {
        switch e {
        case let .clientConnected(c, identity): return .clientConnected(clientInfo(c, identity))
        case let .clientDisconnected(c, _): return .clientDisconnected(clientInfo(c, nil))
        case let .clientRefused(c, app, reason):
            Log.warn("client \(c.rawValue) (\(app)) refused: \(reason)")
            return nil
        case let .streamStarted(c, s, app, source, real): return .streamStarted(streamInfo(c, s, app, source: source, real: real))
        case let .streamAccessChanged(c, s, app, real): return .streamChanged(streamInfo(c, s, app, source: nil, real: real))
        case let .streamMoved(c, s, app, source, _, real): return .streamChanged(streamInfo(c, s, app, source: source, real: real))
        case let .streamEnded(c, s, app):
            return .streamEnded(streamInfo(c, s, app, source: nil, real: nil, stream: ended[s.rawValue]))
        case let .promptRaised(p):
            Log.info("prompt \(p.id.rawValue) raised for \(p.appKey) (\(p.displayName)), purpose: \(p.purpose ?? "none")")
            return .promptRaised(promptInfo(p))
        case let .promptResolved(p, outcome):
            let via = answeredVia.withLock { $0.removeValue(forKey: p.id.rawValue) }
            let by: String = switch outcome {
            case .answered: via?.rawValue ?? "agent"
            case .commandAnswered: "prompt-command"
            case .timedOut: "timeout"
            case .dismissed: via?.rawValue ?? "desktop"
            case .superseded: "cli"
            case .withdrawn: "withdrawn"
            }
            return .promptResolved(PromptResolution(prompt: p.id.rawValue, appKey: p.appKey.description,
                                                    outcome: controlOutcome(outcome), by: by, resolvedAt: wallClockNow()))
        case let .promptCommandGaveNoAnswer(p, status):
            Log.warn("prompt-command for prompt \(p.rawValue) exited with \(status): no answer")
            return nil
        case let .promptDeferred(app, kind, pending, perUID):
            let limit = perUID ? "max-pending-prompts-per-uid (\(configuration.maxPendingPromptsPerUID))"
                : "max-pending-prompts (\(configuration.maxPendingPrompts))"
            deferredLog.record(.info, "\(app) records \(kind.rawValue) silenced and waits for a prompt: \(pending) prompts "
                               + "are pending, as many as \(limit) allows; it is prompted when one closes, or decide it "
                               + "with 'earmuff grant' or 'earmuff deny'")
            return nil
        case let .decisionChanged(d):
            return .decisionChanged(decisionInfo(d))
        case let .accessChanged(kind, enabled):
            Log.info("\(kind.rawValue) access switched \(enabled ? "on" : "off") for every app")
            return .accessChanged(AccessInfo(kind: kind, enabled: enabled))
        case let .decisionExpired(old, after):
            return decisionEnded(after, event: "decision-expired",
                                 "the \(old.state.rawValue) decision until \(TextFormat.date(old.lifespan.expiresAt)) ended; "
                                 + "now \(after.state.rawValue) (\(after.reason.rawValue))")
        case let .decisionAutoReset(d, lastUsed):
            return decisionEnded(d, event: "auto-reset",
                                 "granted, unused since \(TextFormat.date(lastUsed)) (auto-reset-days = "
                                 + "\(configuration.autoResetDays)); now undetermined (auto-reset): it prompts on its next recording")
        }
    }
}
