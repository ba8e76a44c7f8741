// The master switch: one capture kind off for every app at once.
//
// As Android's and Windows' "Microphone access" switch: while a kind is off,
// every stream of that kind is silent whatever is granted (apps.d included),
// from its next frame. Decisions stay as they are and apply again when the
// kind is on; prompts are still raised (their answer counts for later) and
// say that access is off.

extension ConsentEngine {
    /// Switches `kind` on or off for every app; live streams of that kind follow on their next
    /// frame. Nothing happens when it already is so.
    public mutating func setAccess(_ kind: Capability, enabled: Bool) -> [ConsentAction] {
        guard accessOff.contains(kind) == enabled else { return [] }
        if enabled { accessOff.remove(kind) } else { accessOff.insert(kind) }
        var actions: [ConsentAction] = [.persistAccess(kind, enabled: enabled), .emit(.accessChanged(kind, enabled: enabled))]
        for app in Set(clients.values.map(\.identity.appKey)).sorted() {
            actions += refreshStreams(of: app)
        }
        return actions
    }

    /// Whether `kind` is on (the master switch).
    public func accessEnabled(_ kind: Capability) -> Bool { !accessOff.contains(kind) }
}
