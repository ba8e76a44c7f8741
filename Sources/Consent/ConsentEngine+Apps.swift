// What the consent engine knows of each app besides its decisions: the name it
// last called itself, its executable and how it was identified, kept the way the
// store keeps them (a name or executable not given keeps the one known), so that
// replies and name lookups are answered from memory, never by reading the store back.

extension ConsentEngine {
    /// Notes `r` and returns the action that stores it.
    @discardableResult
    mutating func remember(_ r: AppRecord) -> ConsentAction {
        var merged = r
        if let known = apps[r.appKey] {
            merged.displayName = r.displayName ?? known.displayName
            merged.executable = r.executable ?? known.executable
            merged.firstSeenAt = known.firstSeenAt
        }
        apps[r.appKey] = merged
        return .recordApp(r)
    }

    /// What is known of `app` besides its decisions, or nil when it was never seen.
    public func knownApp(_ app: AppKey) -> AppRecord? { apps[app] }

    /// The lasting decision stored for `app` and `kind` (undetermined ones kept for their use too).
    public func storedDecision(for app: AppKey, kind: Capability) -> Decision? {
        decisions[Subject(app: app, kind: kind)]
    }

    /// Every app a person may name: seen, decided (lasting or for a while), or declared in apps.d;
    /// with the connected clients' own names. Each app once, by key; live clients after.
    public var nameableApps: [AppNameResolver.Candidate] {
        var keys = Set(apps.keys).union(decisions.keys.map(\.app)).union(temporary.keys.map(\.app))
        keys.formUnion(policy.declarations.keys)
        let known = keys.sorted().map { key in
            AppNameResolver.Candidate(key: key, displayName: apps[key]?.displayName, method: apps[key]?.method,
                                      executable: apps[key]?.executable)
        }
        let live = clientSnapshots.map { c in
            AppNameResolver.Candidate(key: c.identity.appKey, displayName: c.displayName, method: c.identity.method,
                                      executable: c.identity.executable)
        }
        return known + live
    }
}
