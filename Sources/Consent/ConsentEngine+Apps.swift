// What the consent engine knows of each app besides its decisions: the name it
// last called itself, the command it was last started as (a link to its executable),
// its executable and how it was identified, kept the way the
// store keeps them (a name or executable not given keeps the one known), so that
// replies and name lookups are answered from memory, never by reading the store back.
// Every app that connected is known (status, names), but only those that recorded, asked or
// have a decision are listed (`listedApps`).

extension ConsentEngine {
    /// Notes `r` and returns the action that stores it.
    @discardableResult
    mutating func remember(_ r: AppRecord) -> ConsentAction {
        var merged = r
        if let known = apps[r.appKey] {
            merged.displayName = r.displayName ?? known.displayName
            merged.executable = r.executable ?? known.executable
            merged.commandName = r.commandName ?? known.commandName
            merged.firstSeenAt = known.firstSeenAt
        }
        apps[r.appKey] = merged
        return .recordApp(r)
    }

    /// What is known of `app` besides its decisions, or nil when it was never seen.
    public func knownApp(_ app: AppKey) -> AppRecord? { apps[app] }

    /// The command `app` was last started as, when that is a link to its executable (pw-record
    /// for exe:/usr/bin/pw-cat), which its name is shown from (`AppNameResolver.shownName`);
    /// kept as the store keeps it, so the name survives a restart.
    public func commandName(of app: AppKey) -> String? { apps[app]?.commandName }

    /// The lasting decision stored for `app` and `kind` (undetermined ones kept for their use too).
    public func storedDecision(for app: AppKey, kind: Capability) -> Decision? {
        decisions[Subject(app: app, kind: kind)]
    }

    /// The rows `earmuff apps` lists (and the settings window, from the same reply), by app and
    /// kind: each decision the engine holds (lasting ones, including the undetermined ones kept
    /// for an app that recorded or asked, and temporary ones), each kind apps.d fixes, and a
    /// microphone row for an app capturing now from a source not known yet. An app that only
    /// connected (pactl, pw-cli, pw-metadata) never recorded nor asked: it is known, not listed.
    public var listedApps: [ListedApp] {
        var rows = Set(decisions.keys.map { ListedApp(app: $0.app, kind: $0.kind) })
        rows.formUnion(temporary.keys.map { ListedApp(app: $0.app, kind: $0.kind) })
        for (app, declaration) in policy.declarations {
            rows.formUnion(declaration.decisions.keys.map { ListedApp(app: app, kind: $0) })
        }
        let listed = Set(rows.map(\.app))
        for c in clients.values where !c.streams.isEmpty && !listed.contains(c.identity.appKey) {
            rows.insert(ListedApp(app: c.identity.appKey, kind: .microphone))
        }
        return rows.sorted()
    }

    /// Notes that the client's app asked for `kind` (the permission API): as for a capture, an
    /// undetermined decision is kept (with the purpose it gave), so `apps` lists it after a
    /// prompt that nobody answered, and after a restart.
    mutating func noteAsked(_ s: ClientState, _ kind: Capability) -> [ConsentAction] {
        let subject = Subject(app: s.identity.appKey, kind: kind)
        guard decisions[subject] == nil, !s.identity.isUninspectable else { return [] }
        let d = Decision(appKey: subject.app, capability: kind, state: .undetermined, reason: .none, purpose: purpose(of: s))
        decisions[subject] = d
        return [.persistDecision(d)]
    }

    /// Every app a person may name: seen, decided (lasting or for a while), or declared in apps.d;
    /// with the connected clients' own names. Each app once, by key; live clients after.
    public var nameableApps: [AppNameResolver.Candidate] {
        var keys = Set(apps.keys).union(decisions.keys.map(\.app)).union(temporary.keys.map(\.app))
        keys.formUnion(policy.declarations.keys)
        let known = keys.sorted().map { key in
            AppNameResolver.Candidate(
                key: key, displayName: apps[key]?.displayName, method: apps[key]?.method,
                executable: apps[key]?.executable)
        }
        let live = clientSnapshots.map { c in
            AppNameResolver.Candidate(
                key: c.identity.appKey, displayName: c.displayName, method: c.identity.method,
                executable: c.identity.executable)
        }
        return known + live
    }
}

/// One row of `earmuff apps`: an app and a capture kind.
public struct ListedApp: Hashable, Comparable, Sendable {
    public var app: AppKey
    public var kind: Capability

    public init(app: AppKey, kind: Capability) {
        self.app = app
        self.kind = kind
    }

    public static func < (a: ListedApp, b: ListedApp) -> Bool { (a.app, a.kind) < (b.app, b.kind) }
}
