// The consent service: carries out what the pure ConsentEngine decides.
//
// It sits between the I/O loops, the control thread and the store:
//   - loop threads report session events (SessionObserver); the engine runs
//     under a lock for microseconds and returns actions;
//   - stream access flags are flipped while that lock is held, so flips for
//     one stream are applied in the order the engine decided them;
//   - everything slow is handed off: SQLite writes to a serial queue, the
//     prompt command and prompt timers to Dispatch, messages to the control
//     thread. The audio path only ever loads each RecordStream's atomic flag.
import CLinux
import ConsentStore
import Consent
import ControlProtocol
import Dispatch
import Glibc
import PulseWire
import Synchronization

final class ConsentService: SessionObserver, ControlHandler, @unchecked Sendable {
    // @unchecked Sendable: mutable state is inside locks; `control` and
    // `daemon` are set once during start-up before any thread can call in.
    private let engine: Locked<ConsentEngine>
    private let store: PermissionStore
    private let storeQueue = DispatchQueue(label: "earmuff.store")
    private let configuration: Configuration
    private let promptCommand: String?
    var control: ControlServer?
    weak var daemon: Daemon?
    /// snapd's say on snap connections (audio-record); nil: not checked.
    var snapGate: SnapRecordGate?
    let paths: DaemonPaths

    private struct Registry {
        var sessions: [UInt64: SessionState] = [:]
        var streams: [UInt64: RecordStream] = [:]
        var usageRows: [UInt64: Int64] = [:]
        var agents: [AgentID: ControlConnectionID] = [:]
    }
    private let registry = Locked(Registry())

    init(configuration: Configuration, declarations: [AppKey: AppDeclaration], store: PermissionStore,
         paths: DaemonPaths) throws {
        self.configuration = configuration
        self.store = store
        self.paths = paths
        promptCommand = configuration.promptCommand.isEmpty ? nil : configuration.promptCommand
        let decisions = try store.allDecisions()
        engine = Locked(ConsentEngine(policy: ConsentPolicy(configuration: configuration, declarations: declarations),
                                     decisions: decisions))
    }

    // MARK: engine calls

    /// Runs `body` on the engine; applies stream flips under the lock, the rest after.
    private func withEngine<R>(_ body: (inout ConsentEngine) -> (R, [ConsentAction])) -> R {
        let (result, deferred) = engine.withLock { e -> (R, [ConsentAction]) in
            let (r, actions) = body(&e)
            for case let .setStreamAccess(c, s, real) in actions {
                registry.withLock { $0.streams[s.rawValue] }?.setReal(real && snapAllows(c.rawValue))
            }
            return (r, actions) // flips are also logged by perform()
        }
        perform(deferred)
        return result
    }

    // MARK: SessionObserver (loop threads)

    func sessionOpened(_ session: SessionState) {
        registry.withLock { $0.sessions[session.id] = session }
        let purpose = session.properties.withLock { $0.launcherPurpose }
        withEngine { e in
            ((), e.clientConnected(ClientID(session.id), identity: session.identity, launcherPurpose: purpose,
                                   now: wallClockNow()))
        }
        snapGate?.sessionOpened(id: session.id, identity: session.identity) { [weak self] in
            self?.reapplyAccess(session: session.id)
        }
    }

    private func snapAllows(_ session: UInt64) -> Bool { snapGate?.allows(session) ?? true }

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

    func recordStreamRequested(_ session: SessionState) -> String? {
        let admission = withEngine { e in
            let a = e.recordStreamRequested(ClientID(session.id), now: wallClockNow())
            return (a, a.actions)
        }
        guard !admission.proceed else { return nil }
        for case let .disconnectClient(_, reason) in admission.actions { return reason }
        return "record stream refused"
    }

    func recordStreamStarted(_ session: SessionState, stream: RecordStream) {
        registry.withLock { $0.streams[stream.streamID] = stream }
        let source = stream.source.withLock { $0 }
        withEngine { e in
            let (real, actions) = e.recordStreamStarted(ClientID(session.id), stream: StreamID(stream.streamID),
                                                        source: source, now: wallClockNow())
            // Set under the engine lock, before any later flip for this stream.
            stream.setReal(real && snapAllows(session.id))
            return ((), actions)
        }
        Log.info("session \(session.id) (\(session.identity.appKey)): record stream on \(source), "
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
            case let .runPromptCommand(prompt):
                runPromptCommand(prompt)
            case let .schedulePromptTimeout(id, seconds):
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                    withEngine { e in ((), e.promptTimedOut(id, now: wallClockNow())) }
                }
            case let .persistDecision(d):
                storeQueue.async { [store] in
                    do { try store.setDecision(d) } catch { Log.error("store: cannot save the decision for \(d.appKey): \(error)") }
                }
            case let .recordApp(r):
                storeQueue.async { [store] in
                    do { try store.recordApp(r) } catch { Log.error("store: cannot record app \(r.appKey): \(error)") }
                }
            case let .startUsage(_, s, u):
                storeQueue.async { [self] in
                    do {
                        let row = try store.startUsage(u)
                        registry.withLock { $0.usageRows[s.rawValue] = row }
                    } catch { Log.error("store: cannot log usage of \(u.appKey): \(error)") }
                }
            case let .finishUsage(_, s, endedAt):
                let stream = registry.withLock { $0.streams.removeValue(forKey: s.rawValue) }
                let real = stream?.bytesReal.load(ordering: .relaxed) ?? 0
                let silenced = stream?.bytesSilenced.load(ordering: .relaxed) ?? 0
                storeQueue.async { [self] in
                    guard let row = registry.withLock({ $0.usageRows.removeValue(forKey: s.rawValue) }) else { return }
                    do { try store.finishUsage(id: row, endedAt: endedAt, bytesReal: real, bytesSilenced: silenced) } catch {
                        Log.error("store: cannot finish usage record \(row): \(error)")
                    }
                }
            case let .disconnectClient(c, reason):
                Log.warn("closing client \(c.rawValue): \(reason)")
                let key = engine.withLock { $0.identity(of: c)?.appKey }
                storeQueue.async { [store] in
                    _ = try? store.logEvent(kind: "disconnect", appKey: key, detail: reason, at: wallClockNow())
                }
                daemon?.disconnect(sessionID: c.rawValue, reason: reason)
            case let .emit(event):
                if let e = controlEvent(event) { control?.broadcast(e) }
            }
        }
    }

    private func runPromptCommand(_ prompt: Prompt) {
        guard let command = promptCommand else { return }
        let env: [String: String] = [
            "EARMUFF_APP_KEY": prompt.appKey.description,
            "EARMUFF_APP_NAME": prompt.displayName,
            "EARMUFF_PURPOSE": prompt.purpose ?? "",
            "EARMUFF_PID": String(prompt.pid),
            "EARMUFF_SOURCE": prompt.source,
            "EARMUFF_IDENTIFIED_BY": prompt.method.rawValue,
        ]
        DispatchQueue.global().async { [self] in
            let status = runShell(command, extraEnvironment: env)
            Log.info("prompt-command for \(prompt.appKey) exited with \(status)")
            withEngine { e in ((), e.promptCommandFinished(prompt.id, exitStatus: status, now: wallClockNow())) }
        }
    }

    // MARK: ControlHandler (control thread)

    func handle(_ request: ControlRequest, from connection: ControlConnectionID) -> ControlResponse {
        switch request {
        case .status:
            return .status(status())
        case .apps:
            do {
                return .apps(try apps())
            } catch {
                return .error(ControlError(.failed, "cannot read the permission store \(store.path): \(error)"))
            }
        case let .setDecision(app, state, _):
            return decide(app, state == .granted ? .granted : .denied)
        case let .reset(app):
            return decide(app, .undetermined)
        case .subscribe:
            return .ok
        case .becomeAgent:
            let agent = AgentID(connection.rawValue)
            registry.withLock { $0.agents[agent] = connection }
            withEngine { e in ((), e.agentConnected(agent)) }
            return .ok
        case let .answerPrompt(prompt, answer):
            let agent = AgentID(connection.rawValue)
            let mapped: Consent.PromptAnswer = switch answer {
            case .allow: .allow
            case .once: .once
            case .deny: .deny
            }
            let result = withEngine { e -> (Result<Void, ConsentError>, [ConsentAction]) in
                switch e.answer(PromptID(prompt), mapped, by: agent, now: wallClockNow()) {
                case .success(let actions): return (.success(()), actions)
                case .failure(let err): return (.failure(err), [])
                }
            }
            switch result {
            case .success: return .ok
            case .failure(let err): return .error(ControlError(.unknownPrompt, err.description))
            }
        case let .registerLauncher(appID, purpose):
            return registerLauncher(appID: appID, purpose: purpose)
        }
    }

    func connectionClosed(_ connection: ControlConnectionID) {
        let agent = AgentID(connection.rawValue)
        guard registry.withLock({ $0.agents.removeValue(forKey: agent) }) != nil else { return }
        withEngine { e in ((), e.agentDisconnected(agent)) }
    }

    private func decide(_ app: String, _ state: PermissionState) -> ControlResponse {
        let key: AppKey
        switch resolveApp(app) {
        case .success(let k): key = k
        case .failure(let e): return .error(e)
        }
        let reason: DecisionReason = state == .undetermined ? .reset : .user
        let result = withEngine { e -> (Result<Void, ConsentError>, [ConsentAction]) in
            switch e.setDecision(key, state, reason: reason, now: wallClockNow()) {
            case .success(let actions): return (.success(()), actions)
            case .failure(let err): return (.failure(err), [])
            }
        }
        if case .failure(let err) = result { return .error(ControlError(.failed, err.description)) }
        // Reply only once the decision is on disk: a crash after "granted"
        // must not lose it. (The control thread may wait; audio never does.)
        storeQueue.sync {}
        Log.info("decision for \(key): \(state.rawValue) (\(reason.rawValue))")
        let info = (try? apps())?.first { $0.key == key.description }
        return .app(info ?? AppInfo(key: key.description, state: state.rawValue, reason: reason.rawValue))
    }

    /// An app key, or an unambiguous display or executable name of a known app.
    private func resolveApp(_ text: String) -> Result<AppKey, ControlError> {
        if text.contains(":") {
            guard let key = AppKey(parsing: text) else {
                return .failure(ControlError(.badRequest, "\"\(text)\" is not an app key; write kind:value, e.g. exe:/usr/bin/parecord"))
            }
            return .success(key)
        }
        let known = (try? apps()) ?? []
        let matches = Set(known.filter { a in
            a.displayName == text || a.executable == text
                || a.executable.map { ($0.split(separator: "/").last.map(String.init) ?? $0) == text } == true
                || a.key.hasSuffix("/" + text)
        }.map(\.key))
        if matches.count == 1, let k = matches.first, let key = AppKey(parsing: k) { return .success(key) }
        if matches.isEmpty {
            return .failure(ControlError(.unknownApp, "no known app is called \"\(text)\"; list them with 'earmuff apps' or give an app key such as exe:/usr/bin/\(text)"))
        }
        return .failure(ControlError(.ambiguousApp, "\"\(text)\" matches \(matches.sorted().joined(separator: ", ")); give the app key"))
    }

    private func registerLauncher(appID: String, purpose: String?) -> ControlResponse {
        let safe = appID.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0) }
        guard safe, !appID.isEmpty, appID.count <= 200, appID.first != "." else {
            return .error(ControlError(.badRequest, "app id \"\(appID)\" must be letters, digits, '.', '_' or '-', e.g. org.example.Notes"))
        }
        let path = paths.launcherDirectory + "/" + appID
        do {
            try daemon?.addLauncherSocket(path: path, appID: appID, purpose: purpose)
        } catch {
            return .error(ControlError(.failed, "cannot open a launcher socket at \(path): \(error)"))
        }
        return .launcher(LauncherInfo(appKey: "launcher:\(appID)", socketPath: path))
    }

    // MARK: views

    private func status() -> StatusPayload {
        let (clients, streams, prompts) = engine.withLock { ($0.clientSnapshots, $0.streamSnapshots, $0.pendingPrompts) }
        let live = registry.withLock { $0.streams }
        let clientInfos = clients.map { c in
            ClientInfo(id: c.id.rawValue, appKey: c.identity.appKey.description, displayName: c.displayName,
                       pid: c.identity.pid, identifiedBy: c.identity.method.rawValue, executable: c.identity.executable)
        }
        let streamInfos: [StreamInfo] = streams.compactMap { s in
            guard let r = live[s.stream.rawValue] else { return nil }
            return StreamInfo(client: s.client.rawValue, stream: r.channel, appKey: s.appKey.description,
                              source: r.source.withLock { $0 }, sampleSpec: specText(r.sampleSpec),
                              audio: r.isReal ? .real : .silenced,
                              bytesReal: r.bytesReal.load(ordering: .relaxed),
                              bytesSilenced: r.bytesSilenced.load(ordering: .relaxed))
        }
        let d = daemon
        return StatusPayload(
            daemon: DaemonInfo(pid: getpid(), version: earmuffVersion, listenPath: paths.listen, controlPath: paths.control,
                               storePath: store.path, uptimeSeconds: wallClockNow() - (d?.startedAt ?? wallClockNow()),
                               sessionSocket: paths.isSessionSocket, socketActivated: d.map { $0.activatedListener != nil }),
            upstream: UpstreamInfo(server: d?.upstream.description ?? "", reachable: d.map { canConnect($0.upstream.path) } ?? false),
            clients: clientInfos, streams: streamInfos, prompts: prompts.map(promptInfo))
    }

    private func apps() throws -> [AppInfo] {
        let records = Dictionary(try store.apps().map { ($0.appKey, $0) }, uniquingKeysWith: { a, _ in a })
        let decisions = Dictionary(try store.allDecisions().map { ($0.appKey, $0) }, uniquingKeysWith: { a, _ in a })
        // One look at the engine: the decision in force and any apps.d purpose, per app.
        let fromEngine = engine.withLock { e in
            let keys = Set(records.keys).union(decisions.keys).union(e.policy.declarations.keys)
            return keys.sorted().map { ($0, e.effectiveDecision(for: $0), e.policy.declarations[$0]?.purpose) }
        }
        return fromEngine.map { k, eff, declaredPurpose in
            let r = records[k]
            let d = decisions[k]
            return AppInfo(key: k.description, displayName: r?.displayName, state: eff.state.rawValue, reason: eff.reason.rawValue,
                           purpose: d?.purpose ?? declaredPurpose,
                           identifiedBy: r?.method.rawValue, decidedAt: d?.decidedAt, lastUsed: d?.lastUsedAt,
                           executable: r?.executable)
        }
    }

    private func promptInfo(_ p: Prompt) -> PromptInfo {
        PromptInfo(id: p.id.rawValue, appKey: p.appKey.description, displayName: p.displayName,
                   identifiedBy: p.method.rawValue, pid: p.pid, purpose: p.purpose, source: p.source,
                   executable: p.executable, raisedAt: p.raisedAt)
    }

    private func clientInfo(_ c: ClientID, _ identity: ClientIdentity?) -> ClientInfo {
        let session = registry.withLock { $0.sessions[c.rawValue] }
        let id = identity ?? session?.identity
        return ClientInfo(id: c.rawValue, appKey: id?.appKey.description ?? "unknown",
                          displayName: session?.properties.withLock { $0.displayName }, pid: id?.pid,
                          identifiedBy: id?.method.rawValue ?? "unknown", executable: id?.executable)
    }

    private func streamInfo(_ c: ClientID, _ s: StreamID, _ app: AppKey, source: String?, real: Bool?) -> StreamInfo {
        let r = registry.withLock { $0.streams[s.rawValue] }
        return StreamInfo(client: c.rawValue, stream: r?.channel ?? UInt32(truncatingIfNeeded: s.rawValue),
                          appKey: app.description, source: source ?? r?.source.withLock { $0 } ?? "",
                          sampleSpec: r.map { specText($0.sampleSpec) } ?? "",
                          audio: (real ?? r?.isReal ?? false) ? .real : .silenced,
                          bytesReal: r?.bytesReal.load(ordering: .relaxed) ?? 0,
                          bytesSilenced: r?.bytesSilenced.load(ordering: .relaxed) ?? 0)
    }

    private func controlEvent(_ e: ConsentEvent) -> ControlEvent? {
        switch e {
        case let .clientConnected(c, identity): return .clientConnected(clientInfo(c, identity))
        case let .clientDisconnected(c, _): return .clientDisconnected(clientInfo(c, nil))
        case let .clientRefused(c, app, reason):
            Log.warn("client \(c.rawValue) (\(app)) refused: \(reason)")
            return nil
        case let .streamStarted(c, s, app, source, real): return .streamStarted(streamInfo(c, s, app, source: source, real: real))
        case let .streamAccessChanged(c, s, app, real): return .streamChanged(streamInfo(c, s, app, source: nil, real: real))
        case let .streamEnded(c, s, app): return .streamEnded(streamInfo(c, s, app, source: nil, real: nil))
        case let .promptRaised(p):
            Log.info("prompt \(p.id.rawValue) raised for \(p.appKey) (\(p.displayName)), purpose: \(p.purpose ?? "none")")
            return .promptRaised(promptInfo(p))
        case let .promptResolved(p, outcome):
            let by: String = switch outcome {
            case .answered: "agent"
            case .commandAnswered: "prompt-command"
            case .timedOut: "timeout"
            case .superseded: "cli"
            }
            return .promptResolved(PromptResolution(prompt: p.id.rawValue, appKey: p.appKey.description,
                                                    outcome: controlOutcome(outcome), by: by))
        case let .promptCommandGaveNoAnswer(p, status):
            Log.warn("prompt-command for prompt \(p.rawValue) exited with \(status): no answer")
            return nil
        case let .decisionChanged(d):
            return .decisionChanged(AppInfo(key: d.appKey.description, state: d.state.rawValue, reason: d.reason.rawValue,
                                            purpose: d.purpose, decidedAt: d.decidedAt, lastUsed: d.lastUsedAt))
        }
    }
}

private func controlOutcome(_ o: Consent.PromptOutcome) -> ControlProtocol.PromptOutcome {
    switch o {
    case let .answered(a, _), let .commandAnswered(a):
        switch a {
        case .allow: .allow
        case .once: .once
        case .deny: .deny
        }
    case .timedOut: .timeout
    case .superseded: .cancelled
    }
}

private func outcomeName(_ o: Consent.PromptOutcome) -> String { controlOutcome(o).rawValue }

/// True when a Unix socket at `path` accepts a connection now.
func canConnect(_ path: String) -> Bool {
    let fd = earmuff_unix_socket()
    guard fd >= 0 else { return false }
    defer { closeFD(fd) }
    return earmuff_unix_connect(fd, path) == 0
}

/// `s16le 2ch 44100Hz`, as pactl writes it.
func specText(_ s: SampleSpec) -> String { "\(s.format.name) \(s.channels)ch \(s.rate)Hz" }

/// Runs `/bin/sh -c command` and returns its exit status (or 128+signal).
func runShell(_ command: String, extraEnvironment: [String: String]) -> Int32 {
    var env = currentEnvironment()
    for (k, v) in extraEnvironment { env[k] = v }
    let argv: [String] = ["/bin/sh", "-c", command]
    let envStrings = env.map { "\($0.key)=\($0.value)" }
    var cArgs = argv.map { strdup($0) } + [nil]
    var cEnv = envStrings.map { strdup($0) } + [nil]
    defer {
        for p in cArgs { free(p) }
        for p in cEnv { free(p) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, "/bin/sh", nil, nil, &cArgs, &cEnv)
    guard rc == 0 else { return 127 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if status & 0x7f == 0 { return (status >> 8) & 0xff }
    return 128 + (status & 0x7f)
}
