// What the consent service is told of clients and their record streams, by the Pulse relay
// (each session's filters) and by the PipeWire door (the gate's events) alike.
import PulseWire

/// Receives session events the consent layer cares about. Called on loop
/// threads: implementations must not block (no SQLite, no prompts inline).
public protocol SessionObserver: AnyObject, Sendable {
    /// A client connected (identity fixed).
    func sessionOpened(_ session: SessionState)
    /// The client's connection is gone.
    func sessionClosed(_ session: SessionState)
    /// The client's self-description changed (display only).
    func clientPropertiesChanged(_ session: SessionState)
    /// A CREATE_RECORD_STREAM request is about to be forwarded; nil to proceed,
    /// or the reason to close the connection.
    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String?
    /// Whether Earmuff holds the stream the request asks for (answers it itself and sends it
    /// silence, with no stream on the server, until it may record) and where it says the stream
    /// records from; nil to forward the request.
    func holdPlacement(_ session: SessionState, request: CreateRecordStreamRequest) -> HeldPlacement?
    /// Whether the server's source-output `index` is a recording that may not record, hidden
    /// from the server's clients (a native stream of the PipeWire door): left out of what the
    /// app is told of the server's source-outputs.
    func conceals(sourceOutput index: UInt32) -> Bool
    /// A record stream exists now; the observer sets its initial access.
    func recordStreamStarted(_ session: SessionState, stream: RecordStream)
    /// A record stream records from another source now (its placement says which); the
    /// observer sets its access before the stream's next frame is handled.
    func recordStreamMoved(_ session: SessionState, stream: RecordStream)
    /// A record stream went away.
    func recordStreamEnded(_ session: SessionState, stream: RecordStream)
    /// The policy decision for a client request (e.g. LOAD_MODULE); nil to forward, or the reason to refuse with ERROR(ACCESS).
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String?
    /// A request to Earmuff's own permission extension (never forwarded): the observer replies on
    /// the session (now or once the person answers). Nil, or the reason to close the connection.
    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String?
}

extension SessionObserver {
    /// Every request is forwarded.
    public func holdPlacement(_ session: SessionState, request: CreateRecordStreamRequest) -> HeldPlacement? { nil }
    public func conceals(sourceOutput index: UInt32) -> Bool { false }
}
