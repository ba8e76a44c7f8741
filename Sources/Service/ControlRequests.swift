// The control socket's requests, answered for the consent service (on the
// control loop): status and apps from its views, decisions set through its
// Decisions (on disk before the reply), prompt answers and agents through its
// PromptAnswers, launcher sockets for `earmuff run --app-id`, and the usage
// log read from the store.
import Consent
import ConsentStore
import ControlProtocol
import LinuxSystem
import Relay
import Runtime

/// Where launcher sockets are opened and closed (the relay's accept loop).
protocol LauncherSocketHost: AnyObject, Sendable {
    func addLauncherSocket(path: String, appID: String, purpose: String?) throws(SystemError)
    func removeLauncherSocket(path: String)
}

extension Daemon: LauncherSocketHost {}

final class ControlRequests: ControlHandler, Sendable {
    private let decisions: Decisions
    private let views: ConsentViews
    private let prompts: PromptAnswers
    private let records: any ConsentRecords
    /// The usage log is read from here.
    private let store: PermissionStore
    private let launchers: LauncherSockets
    /// Where launcher sockets are opened, and what status shows of the relay.
    private let host: any LauncherSocketHost & RelayStatus
    /// The door for native PipeWire clients (nil: none), for status.
    private let pipeWire: PipeWireDoor?
    /// Who is at the other end of each control connection (for launcher sockets).
    private let peers = Locked([ControlConnectionID: ControlPeer]())

    /// The most sessions one `log` reply carries.
    static let maximumLogRows = 10_000

    init(
        parts: ConsentParts, records: any ConsentRecords, store: PermissionStore, launchers: LauncherSockets,
        host: any LauncherSocketHost & RelayStatus, pipeWire: PipeWireDoor? = nil
    ) {
        decisions = parts.decisions
        views = parts.views
        prompts = parts.prompts
        self.records = records
        self.store = store
        self.launchers = launchers
        self.host = host
        self.pipeWire = pipeWire
    }

    func handle(_ request: ControlRequest, from connection: ControlConnectionID) -> ControlResponse {
        switch request {
        case .status:
            return .status(views.status(relay: host, pipewire: pipeWire?.info))
        case .apps:
            return .apps(views.apps())
        case let .setDecision(app, state, _, kind, lifespan):
            return decide(app, kind: kind, state == .granted ? .granted : .denied, lifespan: lifespan)
        case let .reset(app, kind):
            return decide(app, kind: kind, .undetermined)
        case let .setAccess(kind, enabled):
            decisions.withEngine { e in ((), e.setAccess(kind, enabled: enabled)) }
            records.flushDecisions() // on disk before the reply, as decisions are
            return .status(views.status(relay: host, pipewire: pipeWire?.info))
        case .subscribe:
            return .ok
        case .becomeAgent:
            prompts.agentConnected(AgentID(connection.rawValue), on: connection)
            return .ok
        case let .answerPrompt(prompt, answer, lifespan):
            switch prompts.answer(prompt, answer, lifespan: lifespan, by: AgentID(connection.rawValue)) {
            case .success: return .ok
            case .failure(let err):
                if case .expiryInThePast = err { return .error(ControlError(.badRequest, err.description)) }
                return .error(ControlError(.unknownPrompt, err.description))
            }
        case let .registerLauncher(appID, purpose):
            return registerLauncher(appID: appID, purpose: purpose, connection: connection)
        case let .log(app, since, limit):
            return usageLog(app: app, since: since, limit: limit)
        }
    }

    func connectionOpened(_ connection: ControlConnectionID, peer: ControlPeer) {
        peers.withLock { $0[connection] = peer }
    }

    func connectionClosed(_ connection: ControlConnectionID) {
        peers.withLock { _ = $0.removeValue(forKey: connection) }
        prompts.connectionGone(connection)
    }

    private func decide(
        _ app: String, kind: Capability?, _ state: PermissionState,
        lifespan requested: RequestedLifespan? = nil
    ) -> ControlResponse {
        let kind = kind ?? .microphone
        let key: AppKey
        switch resolveApp(app) {
        case .success(let k): key = k
        case .failure(let e): return .error(e)
        }
        let reason: DecisionReason = state == .undetermined ? .reset : .user
        let now = wallClockNow()
        let lifespan = PromptAnswers.lifespan(requested, now: now) ?? .always
        let result = decisions.withEngine { e -> (Result<AppInfo, ConsentError>, [ConsentAction]) in
            switch e.setDecision(key, kind: kind, state, reason: reason, lifespan: lifespan, now: now) {
            case .success(let actions): return (.success(views.appInfo(key, kind, in: e)), actions)
            case .failure(let err): return (.failure(err), [])
            }
        }
        var info: AppInfo
        switch result {
        case .success(let i): info = i
        case .failure(let err): return .error(ControlError(.failed, err.description))
        }
        // Reply only once the decision is on disk: a crash after "granted"
        // must not lose it. (The control thread may wait; audio never does.)
        records.flushDecisions()
        Log.info("decision for \(key), \(kind.rawValue): \(state.rawValue) (\(reason.rawValue)), \(lifespan)")
        if lifespan == .once {
            // "Once" covers the clients connected now; the app's own decision is unchanged.
            info.afterwards = info.state
            info.state = state
            info.reason = reason
            info.lifespan = .once
        }
        return .app(info)
    }

    private func usageLog(app: String?, since: Double?, limit: Int?) -> ControlResponse {
        var key: AppKey?
        if let app {
            switch resolveApp(app) {
            case .success(let k): key = k
            case .failure(let e): return .error(e)
            }
        }
        do {
            let rows = try store.usage(for: key, since: since, limit: min(max(limit ?? 1000, 0), Self.maximumLogRows))
            return .usage(
                rows.map { u in
                    UsageInfo(
                        appKey: u.appKey.description, kind: u.kind, source: u.source, startedAt: u.startedAt,
                        endedAt: u.endedAt, realSeconds: u.realSeconds, silencedSeconds: u.silencedSeconds,
                        decision: u.decision)
                })
        } catch {
            return .error(ControlError(.failed, "cannot read the usage log in \(store.path): \(error)"))
        }
    }

    /// An app key, or an unambiguous executable name of an app the engine knows (AppNameResolver).
    private func resolveApp(_ text: String) -> Result<AppKey, ControlError> {
        switch AppNameResolver.match(text, among: decisions.engine.withLock { $0.nameableApps }) {
        case .success(let key): return .success(key)
        case .failure(let f):
            let code: ControlErrorCode =
                switch f {
                case .notAnAppKey: .badRequest
                case .ambiguous, .onlyClaimed: .ambiguousApp
                case .unknown, .noSuchFile, .notExecutable: .unknownApp
                }
            return .failure(ControlError(code, f.description))
        }
    }

    private func registerLauncher(appID: String, purpose: String?, connection: ControlConnectionID) -> ControlResponse {
        let safe = appID.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0) }
        guard safe, !appID.isEmpty, appID.count <= 200, appID.first != "." else {
            return .error(ControlError(.badRequest, "app id \"\(appID)\" must be letters, digits, '.', '_' or '-', e.g. org.example.Notes"))
        }
        guard let peer = peers.withLock({ $0[connection] }) else {
            return .error(ControlError(.failed, "the daemon is not ready for launcher sockets"))
        }
        let host = host
        do {
            let path = try launchers.register(
                appID: appID, peerPID: peer.pid,
                open: { path in
                    try host.addLauncherSocket(path: path, appID: appID, purpose: purpose)
                }, close: { [weak host] path in host?.removeLauncherSocket(path: path) })
            return .launcher(LauncherInfo(appKey: "launcher:\(appID)", socketPath: path))
        } catch {
            Log.warn("refused a launcher socket for \(appID): \(error)")
            return .error(ControlError(.failed, error.description))
        }
    }
}
