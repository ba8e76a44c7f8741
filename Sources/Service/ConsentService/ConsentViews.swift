// What the consent service shows: `status`, `apps`, prompt, client and stream
// infos, and the control events made from the engine's events. Read only:
// it reads the engine and the registry under their locks, on whichever
// thread asks (the control loop, or one carrying out an engine call).
import Consent
import ControlProtocol
import Glibc
import LinuxSystem
import PulseWire
import Relay
import Runtime
import StreamState
import Wording

final class ConsentViews: Sendable {
    private let engine: Locked<ConsentEngine>
    private let registry: StreamRegistry
    private let entries: any AppEntries
    private let configuration: Configuration
    private let paths: DaemonPaths
    private let storePath: String

    init(
        engine: Locked<ConsentEngine>, registry: StreamRegistry, entries: any AppEntries, configuration: Configuration,
        paths: DaemonPaths, storePath: String
    ) {
        self.engine = engine
        self.registry = registry
        self.entries = entries
        self.configuration = configuration
        self.paths = paths
        self.storePath = storePath
    }

    /// `relay`: what status shows of the relay (nil: not running); `pipewire`: the PipeWire
    /// door's state (nil: there is none).
    func status(relay d: (any RelayStatus)?, pipewire: PipeWireInfo? = nil) -> StatusPayload {
        let (clients, streams, prompts, temporary, waiting) = engine.withLock { e in
            (
                e.clientSnapshots, e.streamSnapshots, e.pendingPrompts,
                e.temporaryDecisions.map { ($0, e.effectiveDecision(for: $0.appKey, kind: $0.capability)) },
                e.waitingCaptures
            )
        }
        let live = registry.streams
        let clientInfos = clients.map { c in
            ClientInfo(
                id: c.id.rawValue, appKey: c.identity.appKey.description, displayName: c.displayName,
                pid: c.identity.pid, identifiedBy: c.identity.method.rawValue, executable: c.identity.executable,
                strength: c.identity.strength, caveat: c.identity.caveat,
                systemName: entries.entry(for: c.identity.appKey, executable: c.identity.executable)?.name,
                commandName: c.commandName)
        }
        let streamInfos: [StreamInfo] = streams.compactMap { s in
            guard let r = live[s.stream.rawValue] else { return nil }
            return StreamInfo(
                client: s.client.rawValue, stream: r.channel, appKey: s.appKey.description,
                source: r.sourceName, sampleSpec: specText(r.sampleSpec),
                audio: r.isReal ? .real : .silenced,
                bytesReal: r.bytesReal.load(ordering: .relaxed),
                bytesSilenced: r.bytesSilenced.load(ordering: .relaxed), kind: s.kind)
        }
        return StatusPayload(
            daemon: DaemonInfo(
                pid: getpid(), version: earmuffVersion, listenPath: paths.listen, controlPath: paths.control,
                storePath: storePath, uptimeSeconds: wallClockNow() - (d?.startedAt ?? wallClockNow()),
                sessionSocket: paths.isSessionSocket, socketActivated: d.map { $0.activatedListener != nil },
                promptChannels: PromptChannelsInfo(
                    via: configuration.promptVia.map(\.rawValue),
                    command: engine.withLock { $0.policy.hasPromptCommand },
                    agents: registry.agentCount),
                audioThreads: d.map { audioThreadsInfo($0.loopThreadIDs()) }),
            upstream: UpstreamInfo(server: d?.upstream.description ?? "", reachable: d.map { canConnect($0.upstream.path) } ?? false),
            clients: clientInfos, streams: streamInfos, prompts: prompts.map(promptInfo),
            temporary: temporary.map { d, eff in
                AppInfo(
                    key: d.appKey.description, state: eff.state, reason: eff.reason, purpose: d.purpose,
                    decidedAt: d.decidedAt, lifespan: eff.lifespan.kind, expiresAt: eff.lifespan.expiresAt,
                    afterwards: eff.afterwards)
            },
            waiting: waiting.map { w in
                WaitingCaptureInfo(
                    appKey: w.appKey.description, kind: w.kind, displayName: w.displayName,
                    uid: w.uid, source: w.source, since: w.since, executable: w.executable,
                    commandName: w.commandName,
                    systemName: entries.entry(for: w.appKey, executable: w.executable)?.name)
            },
            access: accessInfos(), pipewire: pipewire)
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
            return AudioThreadsInfo(
                scheduling: "realtime", policy: least.policyName, priority: least.priority,
                via: grant?.via, threads: now.count)
        }
        var note = refused
        if case .realtime = grant?.level {
            note =
                AudioThreads.demotedForSpinning
                ? "put back to normal: a loop ran too long without sleeping"
                : "put back to normal by the system (RealtimeKit's watchdog?)"
        }
        let raised = least.nice < 0
        return AudioThreadsInfo(
            scheduling: raised ? "high-priority" : "normal", policy: least.policyName,
            nice: least.nice, via: raised ? grant?.via : nil, threads: now.count, note: note)
    }

    /// The master switch of every capture kind.
    func accessInfos() -> [AccessInfo] {
        let off = engine.withLock { $0.accessOff }
        return Capability.allCases.map { AccessInfo(kind: $0, enabled: !off.contains($0)) }
    }

    /// One row per app and kind the engine lists (`ConsentEngine.listedApps`: apps that recorded,
    /// asked or have a decision; not those that only connected), from what the engine holds (it
    /// keeps what it stores).
    func apps() -> [AppInfo] {
        engine.withLock { e in e.listedApps.map { appInfo($0.app, $0.kind, in: e) } }
    }

    /// What the engine holds of `app` and `kind`: the decision in force, the stored one's purpose
    /// and times (else apps.d's purpose), what is known of the app, and the name and icon of its
    /// desktop entry (the lookup prompts use).
    func appInfo(_ app: AppKey, _ kind: Capability, in e: ConsentEngine) -> AppInfo {
        let eff = e.effectiveDecision(for: app, kind: kind)
        let r = e.knownApp(app)
        let d = e.storedDecision(for: app, kind: kind)
        let entry = entries.entry(for: app, executable: r?.executable)
        return AppInfo(
            key: app.description, displayName: r?.displayName, state: eff.state,
            reason: eff.reason, purpose: d?.purpose ?? e.policy.declarations[app]?.purpose,
            identifiedBy: r?.method, decidedAt: d?.decidedAt, lastUsed: d?.lastUsedAt,
            executable: r?.executable, kind: kind, lifespan: eff.lifespan.kind,
            expiresAt: eff.lifespan.expiresAt, afterwards: eff.afterwards,
            strength: r?.method.defaultStrength, systemName: entry?.name, icon: entry?.icon,
            commandName: e.commandName(of: app))
    }

    /// The name (and icon) an app is shown by everywhere (`AppNameResolver.shownName`).
    func shownName(_ app: AppKey, executable: String?, commandName: String?) -> (name: String, icon: String?) {
        let entry = entries.entry(for: app, executable: executable)
        return (
            AppNameResolver.shownName(
                appKey: app.description, systemName: entry?.name, commandName: commandName,
                executable: executable), entry?.icon
        )
    }

    func promptInfo(_ p: Prompt) -> PromptInfo {
        let entry = entries.entry(for: p.appKey, executable: p.executable)
        return PromptInfo(
            id: p.id.rawValue, appKey: p.appKey.description, displayName: p.displayName,
            identifiedBy: p.method, pid: p.pid, purpose: p.purpose, source: p.source,
            executable: p.executable, raisedAt: p.raisedAt, systemName: entry?.name, icon: entry?.icon,
            strength: p.strength, caveat: p.caveat, kind: p.kind,
            commandName: p.commandName,
            accessOff: engine.withLock { $0.accessOff.contains(p.kind) } ? true : nil)
    }

    func clientInfo(_ c: ClientID, _ identity: ClientIdentity?) -> ClientInfo {
        let session = registry.session(c.rawValue)
        let id = identity ?? session?.identity
        return ClientInfo(
            id: c.rawValue, appKey: id?.appKey.description ?? "unknown",
            displayName: session?.properties.withLock { $0.displayName }, pid: id?.pid,
            identifiedBy: id?.method.rawValue ?? "unknown", executable: id?.executable,
            strength: id?.strength, caveat: id?.caveat,
            commandName: id.flatMap { i in engine.withLock { $0.commandName(of: i.appKey) } })
    }

    /// `stream`: the record stream, when it has already left the registry (it ended).
    func streamInfo(
        _ c: ClientID, _ s: StreamID, _ app: AppKey, source: String?, real: Bool?,
        stream: RecordStream? = nil
    ) -> StreamInfo {
        let r = stream ?? registry.stream(s.rawValue)
        let placement = r?.placement.withLock { $0 }
        return StreamInfo(
            client: c.rawValue, stream: r?.channel ?? UInt32(truncatingIfNeeded: s.rawValue),
            appKey: app.description, source: source ?? placement?.source ?? "",
            sampleSpec: r.map { specText($0.sampleSpec) } ?? "",
            audio: (real ?? r?.isReal ?? false) ? .real : .silenced,
            bytesReal: r?.bytesReal.load(ordering: .relaxed) ?? 0,
            bytesSilenced: r?.bytesSilenced.load(ordering: .relaxed) ?? 0,
            kind: placement?.kind)
    }

    /// The control event of an engine event (nil: it is only logged). `ended`: streams that
    /// ended in the same batch of actions, by stream id; `answeredVia`: the desktop channel that
    /// answered a resolved prompt.
    func controlEvent(_ e: ConsentEvent, ended: [UInt64: RecordStream] = [:], answeredVia via: PromptChannel? = nil) -> ControlEvent? {
        switch e {
        case let .clientConnected(c, identity): return .clientConnected(clientInfo(c, identity))
        case let .clientDisconnected(c, _): return .clientDisconnected(clientInfo(c, nil))
        case .clientRefused, .promptCommandGaveNoAnswer, .promptDeferred: return nil
        case let .streamStarted(c, s, app, source, real): return .streamStarted(streamInfo(c, s, app, source: source, real: real))
        case let .streamAccessChanged(c, s, app, real): return .streamChanged(streamInfo(c, s, app, source: nil, real: real))
        case let .streamMoved(c, s, app, source, _, real): return .streamChanged(streamInfo(c, s, app, source: source, real: real))
        case let .streamEnded(c, s, app):
            return .streamEnded(streamInfo(c, s, app, source: nil, real: nil, stream: ended[s.rawValue]))
        case let .promptRaised(p): return .promptRaised(promptInfo(p))
        case let .promptResolved(p, outcome):
            let by: String =
                switch outcome {
                case .answered: via?.rawValue ?? "agent"
                case .commandAnswered: "prompt-command"
                case .timedOut: "timeout"
                case .dismissed: via?.rawValue ?? "desktop"
                case .superseded: "cli"
                case .withdrawn: "withdrawn"
                }
            return .promptResolved(
                PromptResolution(
                    prompt: p.id.rawValue, appKey: p.appKey.description,
                    outcome: controlOutcome(outcome), by: by, resolvedAt: wallClockNow()))
        case let .decisionChanged(d): return .decisionChanged(decisionInfo(d))
        case let .accessChanged(kind, enabled): return .accessChanged(AccessInfo(kind: kind, enabled: enabled))
        case let .decisionExpired(_, after): return .decisionChanged(decisionInfo(after))
        case let .decisionAutoReset(d, _): return .decisionChanged(decisionInfo(d))
        }
    }
}

/// A decision as the control protocol shows it.
func decisionInfo(_ d: Decision) -> AppInfo {
    AppInfo(
        key: d.appKey.description, state: d.state, reason: d.reason, purpose: d.purpose,
        decidedAt: d.decidedAt, lastUsed: d.lastUsedAt, kind: d.capability, lifespan: d.lifespan.kind,
        expiresAt: d.lifespan.expiresAt)
}

func controlOutcome(_ o: Consent.PromptOutcome) -> ControlProtocol.PromptOutcome {
    switch o {
    case let .answered(a, _), let .commandAnswered(a):
        switch a {
        case .allow: .allow
        case .once: .once
        case .deny: .deny
        }
    case .timedOut: .timeout
    case .dismissed: .dismissed
    case .superseded, .withdrawn: .cancelled
    }
}

func outcomeName(_ o: Consent.PromptOutcome) -> String { controlOutcome(o).rawValue }

/// Whether a connection to the unix socket at `path` succeeds (`status`' upstream.reachable, `earmuff doctor`).
public func canConnect(_ path: String) -> Bool {
    do throws(Errno) {
        try FileDescriptor.unixSocket().connect(to: path)
        return true
    } catch {
        return false
    }
}

/// `s16le 2ch 44100Hz`, as pactl writes it.
/// A stream's spec as status and the log show it; a native PipeWire stream's may not be
/// negotiated yet, or be partly known (a JACK client's rate is the graph's).
func specText(_ s: SampleSpec) -> String {
    if s.format == .invalid && s.channels == 0 && s.rate == 0 { return "not negotiated yet" }
    return [
        s.format == .invalid ? "unknown format" : s.format.name, s.channels == 0 ? nil : "\(s.channels)ch",
        s.rate == 0 ? nil : "\(s.rate)Hz",
    ].compactMap { $0 }.joined(separator: " ")
}
