// What the PipeWire gate's decisions ask of the server: the reconciler
// (GateReconciler) returns these, in the order it decided them, and the gate
// (PipeWireGate) makes each one a call on its connection, in that order (the
// server handles one connection's requests in order, and some decisions rely
// on it: a client's permissions before its release, a stream's route before
// the session manager sees it again).

/// One request to the server, or a timer, as the reconciler decided it.
public enum GateAction: Sendable, Equatable {
    /// Make the silent source (again), under the silent source's tag.
    case createSilentSource
    /// Make a valve: a null sink of the gate's own under `tag`, named `name`, with `channels`.
    case createValve(tag: UInt32, name: String, channels: [String])
    /// Drop the connection's proxy of the node made under `tag` (the node itself lingers).
    case forgetNode(tag: UInt32)
    /// Destroy global `id`: a link, or a node of the gate's.
    case destroy(UInt32)
    /// Bind node `id`, for its full properties and its format.
    case bindNode(UInt32)
    /// Bind the `default` metadata, `id`.
    case bindMetadata(UInt32)
    /// Set `key` of `subject` in the `default` metadata (nil: remove it).
    case setMetadata(subject: UInt32, key: String, value: String?)
    /// Link port `outputPort` of `outputNode` to port `inputPort` of `inputNode`.
    case link(outputNode: UInt32, outputPort: UInt32, inputNode: UInt32, inputPort: UInt32)
    /// Hide `object` from `client`.
    case hide(UInt32, from: UInt32)
    /// Show `object`, hidden before, to `client`.
    case show(UInt32, to: UInt32)
    /// Let `client` only read `object`.
    case readOnly(UInt32, for: UInt32)
    /// What `client` sees of what it could record from: hide `hide`, then show `show` with what
    /// its release gave it ("rx" when `restricted`). The show is not sent if the hide failed.
    case withhold(client: UInt32, hide: [UInt32], show: [UInt32], restricted: Bool)
    /// End module-access's hold on `client` ("rx" when `restricted`).
    case release(client: UInt32, restricted: Bool)
    /// Hand `timer` back to the reconciler after `seconds`.
    case after(Double, GateTimer)
}

/// A check the reconciler asks to make later, on the gate's thread.
public enum GateTimer: Sendable, Equatable {
    /// Show `stream`, hidden from the session managers at birth, if it is not routed by then
    /// and is still the node of that `serial`.
    case showUnrouted(stream: UInt32, serial: String)
    /// Link `stream` itself if the session manager left it with no link (same `serial`).
    case checkUnlinked(stream: UInt32, serial: String)
}
