// The consent service: carries out what the pure ConsentEngine decides.
//
// It sits between the I/O loops, the control thread and the store:
//   - loop threads report session events (SessionObserver); the engine runs
//     under a lock for microseconds and returns actions;
//   - stream access flags are flipped while that lock is held, so flips for
//     one stream are applied in the order the engine decided them;
//   - everything slow is handed off: SQLite writes to the coalescing
//     StoreWriter; prompt timers, desktop dialogs and the prompt command to
//     PromptDelivery (a timer thread, a D-Bus thread, a command thread);
//     messages to the control thread. The audio path only ever loads each
//     RecordStream's atomic flag.
import CLinux
import Consent
import ConsentStore
import ControlProtocol
import Dispatch
import Glibc
import LinuxSystem
import PulseWire
import Synchronization
import Wording

final class ConsentService: SessionObserver, @unchecked Sendable {
    // @unchecked Sendable: mutable state is inside locks; `control`, `relay` and
    // `catalog` are set once during start-up before any thread can call in.
    let engine: Locked<ConsentEngine>
    let store: PermissionStore
    let writer: StoreWriter
    /// The sockets of `earmuff run --app-id` and the processes that own them.
    let launchers: LauncherSockets
    let configuration: Configuration
    private let promptCommand: String?
    /// Set at the end of init (its handlers call back into the service).
    private(set) var delivery: PromptDelivery!
    /// The desktop channel that answered a prompt, for the `by` of its resolution.
    let answeredVia = Locked([UInt64: PromptChannel]())
    /// Captures deferred under the prompt caps: a storm would log one line each.
    let deferredLog = RateLimitedLog()
    /// Desktop entries, for the name and icon a prompt shows.
    let desktopEntries: DesktopEntries
    /// The desktop's microphone switches of Flatpak apps (xdg permission store); set at the end of init.
    private(set) var desktopPermissions: DesktopPermissions!
    var control: ControlServer?
    /// The relay, for packets Earmuff sends a client itself, closing clients, and status.
    weak var relay: (any RelayLink)?
    /// snapd's say on snap connections (audio-record); nil: not checked.
    let snapGate: SnapRecordGate?
    /// What each source of the server is (set before apps can connect); nil: no source is
    /// known, so every stream stays silent.
    var catalog: SourceDirectory?
    let paths: DaemonPaths

    struct Registry {
        var sessions: [UInt64: SessionState] = [:]
        var streams: [UInt64: RecordStream] = [:]
        var agents: [AgentID: ControlConnectionID] = [:]
    }
    let registry = Locked(Registry())

    init(configuration: Configuration, declarations: [AppKey: AppDeclaration], store: PermissionStore,
         paths: DaemonPaths, snapGate: SnapRecordGate? = nil) throws {
        self.configuration = configuration
        self.snapGate = snapGate
        self.store = store
        writer = try StoreWriter(store: store)
        desktopEntries = try DesktopEntries()
        launchers = try LauncherSockets(directory: paths.launcherDirectory)
        self.paths = paths
        promptCommand = configuration.promptCommand.isEmpty ? nil : configuration.promptCommand
        let decisions = try store.allDecisions() + store.timedDecisions()
        engine = Locked(ConsentEngine(policy: ConsentPolicy(configuration: configuration, declarations: declarations),
                                     decisions: decisions, apps: try store.apps(), accessOff: try store.accessOff()))
        delivery = try PromptDelivery(via: configuration.promptVia, command: promptCommand, handlers: .init(
            answered: { [unowned self] prompt, answer, lifespan, via in
                answerFromDesktop(prompt, answer, lifespan: lifespan, via: via)
            },
            timedOut: { [unowned self] prompt in
                withEngine { e in ((), e.promptTimedOut(PromptID(prompt), now: wallClockNow())) }
            },
            dismissed: { [unowned self] prompt, via in
                answeredVia.withLock { $0[prompt] = via }
                withEngine { e in ((), e.promptDismissed(PromptID(prompt), now: wallClockNow())) }
            },
            commandExited: { [unowned self] prompt, status, output in
                let now = wallClockNow()
                let lifespan = Self.commandLifespan(output, now: now)
                withEngine { e in
                    ((), e.promptCommandFinished(PromptID(prompt), exitStatus: status, lifespan: lifespan, now: now))
                }
            }))
        desktopPermissions = try DesktopPermissions(handlers: .init(
            changed: { [unowned self] appID, state in decideFromDesktop(appID, state) },
            current: { [unowned self] in lastingFlatpakDecisions() }))
    }

    /// Indexes desktop entries and starts the prompt threads (timers, desktop, prompt
    /// command). Call before apps can connect.
    func start() {
        desktopEntries.build()
        delivery.start()
        expireLapsed()
        desktopPermissions.start()
    }

    func stop() {
        desktopPermissions.stopAndJoin()
        delivery.stop()
    }

    private func answerFromDesktop(_ prompt: UInt64, _ answer: Consent.PromptAnswer, lifespan: RequestedLifespan?,
                                   via: PromptChannel) {
        answeredVia.withLock { $0[prompt] = via }
        let ok = withEngine { e -> (Bool, [ConsentAction]) in
            let now = wallClockNow()
            switch e.answer(PromptID(prompt), answer, lifespan: Self.lifespan(lifespan, now: now), by: nil, now: now) {
            case .success(let actions): return (true, actions)
            case .failure: return (false, [])
            }
        }
        if !ok { answeredVia.withLock { _ = $0.removeValue(forKey: prompt) } }
    }

    /// The usage row of a live stream: the decision logged at its start (to tell a change at
    /// its end), and the stream's byte counts when the row started (a move starts a new row).
    private struct UsageRow {
        var decision: String?
        var kind: Capability?
        var realBefore: UInt64 = 0
        var silencedBefore: UInt64 = 0
    }
    private let usageRows = Locked([UInt64: UsageRow]())

    /// "granted (user)", "denied this session (user)", "granted until 2026-11-30 14:05 (user)",
    /// "undetermined", or "once" for a stream real by an "allow once".
    private func decisionText(_ app: AppKey, _ kind: Capability?, real: Bool) -> String {
        guard let kind else { return "source not known" }
        let d = engine.withLock { $0.effectiveDecision(for: app, kind: kind) }
        switch d.state {
        case .undetermined: return real ? "once" : "undetermined"
        case .granted, .denied:
            let lasts: String = switch d.lifespan {
            case .always, .once: ""
            case .session: " this session"
            case let .until(t): " until \(TextFormat.date(t))"
            }
            return "\(d.state.rawValue)\(lasts) (\(d.reason.rawValue))"
        }
    }

    /// Writes everything queued for the store (before it is closed).
    func flushStore() { writer.flush() }

    // MARK: engine calls

    /// Runs `body` on the engine; applies stream flips under the lock, the rest after.
    func withEngine<R>(_ body: (inout ConsentEngine) -> (R, [ConsentAction])) -> R {
        let (result, deferred) = engine.withLock { e -> (R, [ConsentAction]) in
            var (r, actions) = body(&e)
            actions += e.settlePermissions()
            for a in actions {
                switch a {
                case let .setStreamAccess(c, s, real):
                    registry.withLock { $0.streams[s.rawValue] }?.setReal(real && snapAllows(c.rawValue))
                case let .answerPermission(c, tag, kind, state):
                    // Queued under the lock too, so a client hears of its changes in decision order.
                    answerPermission(c, tag: tag, kind: kind, state)
                case let .notifyPermission(c, kind, state):
                    relay?.inject(sessionID: c.rawValue, packet: PermissionEvent(kind: kind.rawValue, state: state.rawValue).packet)
                default:
                    break
                }
            }
            return (r, actions) // flips are also logged by perform()
        }
        perform(deferred)
        return result
    }

    // MARK: SessionObserver (loop threads)

    func sessionOpened(_ session: SessionState) {
        registry.withLock { $0.sessions[session.id] = session }
        // A catalog waiting to reconnect (the server went away) tries again now, ahead of this
        // client's first record stream, which stays silent until its source is known.
        catalog?.wake()
        let purpose = session.properties.withLock { $0.launcherPurpose }
        withEngine { e in
            ((), e.clientConnected(ClientID(session.id), identity: session.identity, launcherPurpose: purpose,
                                   now: wallClockNow()))
        }
        snapGate?.sessionOpened(id: session.id, identity: session.identity) { [weak self] in
            self?.reapplyAccess(session: session.id)
        }
    }

    func snapAllows(_ session: UInt64) -> Bool { snapGate?.allows(session) ?? true }

    /// Sets every live stream of `session` to what the engine says, snapd permitting.
    private func reapplyAccess(session: UInt64) {
        engine.withLock { e in
            for stream in registry.withLock({ $0.streams.values.filter { $0.sessionID == session } }) {
                let real = e.isStreamReal(ClientID(session), StreamID(stream.streamID)) ?? false
                stream.setReal(real && snapAllows(session))
            }
        }
    }

    func sessionClosed(_ session: SessionState) {
        snapGate?.sessionClosed(id: session.id)
        withEngine { e in ((), e.clientDisconnected(ClientID(session.id), now: wallClockNow())) }
        registry.withLock { $0.sessions[session.id] = nil }
    }

    func clientPropertiesChanged(_ session: SessionState) {
        let p = session.properties.withLock { $0 }
        withEngine { e in
            ((), e.clientPropertiesChanged(ClientID(session.id), applicationName: p.applicationName,
                                           processBinary: p.processBinary, capturePurpose: p.capturePurpose,
                                           now: wallClockNow()))
        }
    }

    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? {
        // The identity was read when the client connected; a process that connected and then
        // exec'd another program, or exited leaving its connection to another, is not it.
        if let changed = ProcessInspector.change(since: session.identity) {
            return "its identity changed since it connected: \(changed)"
        }
        let kind = (catalog?.snapshot ?? SourceTable()).expectedKind(
            sourceIndex: request.sourceIndex, sourceName: request.sourceName,
            directOnInput: request.directOnInput != invalidIndex)
        let admission = withEngine { e in
            let a = e.recordStreamRequested(ClientID(session.id), kind: kind, now: wallClockNow())
            return (a, a.actions)
        }
        guard !admission.proceed else { return nil }
        for case let .disconnectClient(_, reason) in admission.actions { return reason }
        return "record stream refused"
    }

    func recordStreamStarted(_ session: SessionState, stream: RecordStream) {
        registry.withLock { $0.streams[stream.streamID] = stream }
        catalog?.wake()
        let (source, kind) = classify(stream)
        withEngine { e in
            let (real, actions) = e.recordStreamStarted(ClientID(session.id), stream: StreamID(stream.streamID),
                                                        source: source, kind: kind, now: wallClockNow())
            // Set under the engine lock, before any later flip for this stream.
            stream.setReal(real && snapAllows(session.id))
            return ((), actions)
        }
        Log.info("session \(session.id) (\(session.identity.appKey)): record stream on \(source) "
                 + "(\(kind?.rawValue ?? "source not known yet")), "
                 + "\(stream.sampleSpec.format.name) \(stream.sampleSpec.channels)ch \(stream.sampleSpec.rate)Hz, "
                 + (stream.isReal ? "real" : "silenced"))
    }

    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {
        withEngine { e in
            ((), e.recordStreamEnded(ClientID(session.id), stream: StreamID(stream.streamID), now: wallClockNow()))
        }
    }

    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? {
        CommandPolicy.refusal(for: command, payload: payload, session: session,
                              trusted: configuration.isTrusted(session.identity.appKey)) {
            engine.withLock { $0.effectiveDecision(for: session.identity.appKey).state == .granted }
        }
    }

    // MARK: actions

    private func perform(_ actions: [ConsentAction]) {
        // Streams that ended in this batch: their `stream-ended` events still name them by channel.
        var ended: [UInt64: RecordStream] = [:]
        for a in actions {
            switch a {
            case let .setStreamAccess(c, s, real):
                if let key = engine.withLock({ $0.identity(of: c)?.appKey }) {
                    Log.info("stream \(s.rawValue) of \(key): now \(real ? "real" : "silenced")")
                }
            case let .deliverPrompt(prompt, agents):
                let info = promptInfo(prompt)
                let conns = registry.withLock { r in agents.compactMap { r.agents[$0] } }
                for c in conns { control?.send(.prompt(info), to: c) }
            case let .closePrompt(prompt, outcome, _):
                Log.info("prompt \(prompt.id.rawValue) for \(prompt.appKey) resolved: \(outcomeName(outcome))")
                delivery.closed(prompt.id.rawValue)
            case let .runPromptCommand(prompt):
                delivery.wantsCommand(prompt.id.rawValue, environment: promptCommandEnvironment(prompt))
            case let .schedulePromptTimeout(id, seconds):
                delivery.scheduleTimeout(id.rawValue, after: seconds)
            case let .persistDecision(d):
                writer.save(d)
                if d.lifespan.expiresAt != nil { timedDecisionMade() }
                // The desktop's switch is the microphone's: lasting microphone decisions of Flatpak apps.
                if d.lifespan == .always, d.capability == .microphone, d.appKey.kind == "flatpak" {
                    desktopPermissions.mirror(appID: d.appKey.value, d.state)
                }
            case let .removeTimedDecision(app, capability):
                writer.removeTimed(app, capability)
            case let .persistAccess(kind, enabled):
                writer.setAccess(kind, enabled: enabled, at: wallClockNow())
            case let .recordApp(r):
                writer.record(r)
            case let .startUsage(_, s, u):
                startUsage(s, u)
            case let .finishUsage(c, s, endedAt):
                let stream = registry.withLock { $0.streams.removeValue(forKey: s.rawValue) }
                ended[s.rawValue] = stream
                finishUsage(c, s, stream: stream, endedAt: endedAt)
            case let .splitUsage(c, s, u):
                let stream = registry.withLock { $0.streams[s.rawValue] }
                finishUsage(c, s, stream: stream, endedAt: u.startedAt)
                startUsage(s, u)
            case let .disconnectClient(c, reason):
                Log.warn("closing client \(c.rawValue): \(reason)")
                let key = engine.withLock { $0.identity(of: c)?.appKey }
                writer.logEvent(kind: "disconnect", app: key, detail: reason, at: wallClockNow())
                relay?.disconnect(sessionID: c.rawValue, reason: reason)
            case let .emit(event):
                if case let .promptRaised(p) = event { delivery.raised(promptInfo(p)) }
                if let e = controlEvent(event, ended: ended) { control?.broadcast(e) }
            case .answerPermission, .notifyPermission:
                break // sent under the engine lock (withEngine)
            }
        }
    }

    private func startUsage(_ s: StreamID, _ u: UsageRecord) {
        var u = u
        var row = UsageRow(kind: Capability(rawValue: u.kind))
        if let stream = registry.withLock({ $0.streams[s.rawValue] }) {
            u.bytesPerSecond = UInt32(clamping: stream.sampleSpec.frameSize * Int(stream.sampleSpec.rate))
            u.decision = decisionText(u.appKey, row.kind, real: stream.isReal)
            row.realBefore = stream.bytesReal.load(ordering: .relaxed)
            row.silencedBefore = stream.bytesSilenced.load(ordering: .relaxed)
        }
        row.decision = u.decision
        usageRows.withLock { $0[s.rawValue] = row }
        writer.startUsage(stream: s.rawValue, u)
    }

    /// Ends the usage row of `s` with the bytes counted since it started.
    private func finishUsage(_ c: ClientID, _ s: StreamID, stream: RecordStream?, endedAt: Double) {
        let key = registry.withLock { $0.sessions[c.rawValue]?.identity.appKey }
        let row = usageRows.withLock { $0.removeValue(forKey: s.rawValue) } ?? UsageRow()
        let atEnd = key.map { decisionText($0, row.kind, real: stream?.isReal ?? false) }
        let real = stream?.bytesReal.load(ordering: .relaxed) ?? 0
        let silenced = stream?.bytesSilenced.load(ordering: .relaxed) ?? 0
        writer.finishUsage(stream: s.rawValue, endedAt: endedAt,
                           bytesReal: real &- min(real, row.realBefore),
                           bytesSilenced: silenced &- min(silenced, row.silencedBefore),
                           decision: atEnd.flatMap { $0 == row.decision ? nil : "\(row.decision ?? "?") → \($0)" })
    }

    private func promptCommandEnvironment(_ prompt: Prompt) -> [String: String] {
        [
            "EARMUFF_APP_KEY": prompt.appKey.description,
            "EARMUFF_APP_NAME": prompt.displayName,
            "EARMUFF_PURPOSE": prompt.purpose ?? "",
            "EARMUFF_PID": String(prompt.pid),
            "EARMUFF_SOURCE": prompt.source,
            "EARMUFF_KIND": prompt.kind.rawValue,
            "EARMUFF_IDENTIFIED_BY": prompt.method.rawValue,
        ]
    }

    // MARK: agents (control thread)

    /// A control connection became a prompt agent: pending prompts go to it now.
    func agentConnected(_ agent: AgentID, on connection: ControlConnectionID) {
        registry.withLock { $0.agents[agent] = connection }
        withEngine { e in ((), e.agentConnected(agent)) }
    }

    /// A control connection closed; if it was an agent, its prompts may go elsewhere.
    func connectionGone(_ connection: ControlConnectionID) {
        let agent = AgentID(connection.rawValue)
        guard registry.withLock({ $0.agents.removeValue(forKey: agent) }) != nil else { return }
        withEngine { e in ((), e.agentDisconnected(agent)) }
    }
}

/// What the consent service asks of the relay (the Daemon; a fake in tests). Safe from any thread.
protocol RelayLink: AnyObject, Sendable {
    /// Queues a packet Earmuff sends the client itself (a permission reply or event).
    func inject(sessionID: UInt64, packet: [UInt8])
    /// Asks a session to close.
    func disconnect(sessionID: UInt64, reason: String)
    /// For status: when the relay started, the socket passed by the service manager, the real server.
    var startedAt: Double { get }
    var activatedListener: Int32? { get }
    var upstream: UpstreamAddress { get }
    /// The audio threads' kernel ids (for their scheduling in status).
    func loopThreadIDs() -> [pid_t]
}

extension Daemon: RelayLink {}

/// A decision as the control protocol shows it.
func decisionInfo(_ d: Decision) -> AppInfo {
    AppInfo(key: d.appKey.description, state: d.state, reason: d.reason, purpose: d.purpose,
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

/// True when a Unix socket at `path` accepts a connection now.
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
func specText(_ s: SampleSpec) -> String { "\(s.format.name) \(s.channels)ch \(s.rate)Hz" }
