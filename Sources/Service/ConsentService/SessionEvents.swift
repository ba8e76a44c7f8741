// The relay's session observer: what the halves report on the loop threads
// (sessions, record streams, requests to check, the permission extension),
// each handed to the part that decides it. Nothing here may block: the engine
// runs for microseconds under its lock, and the rest is queued.
import Consent
import PulseWire
import Runtime
import StreamState

final class SessionEvents: SessionObserver {
    private let decisions: Decisions
    private let registry: StreamRegistry
    private let kinds: CaptureKinds
    private let permissions: PermissionCalls
    private let snap: (any SnapAccess)?
    private let configuration: Configuration

    init(
        decisions: Decisions, registry: StreamRegistry, kinds: CaptureKinds, permissions: PermissionCalls,
        snap: (any SnapAccess)?, configuration: Configuration
    ) {
        self.decisions = decisions
        self.registry = registry
        self.kinds = kinds
        self.permissions = permissions
        self.snap = snap
        self.configuration = configuration
    }

    func sessionOpened(_ session: SessionState) {
        registry.add(session)
        // A catalog waiting to reconnect (the server went away) tries again now, ahead of this
        // client's first record stream, which stays silent until its source is known.
        kinds.catalog.wake()
        let purpose = session.properties.withLock { $0.launcherPurpose }
        // The name it was started by when that is a link to its executable (pw-record, parecord):
        // the name the person typed, which every view shows it by.
        let identity = session.identity
        let command =
            identity.isUninspectable || identity.pid <= 0
            ? nil
            : ProcessInspector.linkName(pid: identity.pid, executable: identity.executable)
        decisions.withEngine { e in
            let actions = e.clientConnected(
                ClientID(session.id), identity: identity, launcherPurpose: purpose,
                commandName: command, now: wallClockNow())
            if let watch = session.grantWatch {
                // From its state now; changes come as the permission API's notifications.
                e.permissionSubscription(ClientID(session.id), enabled: true)
                for kind in Capability.allCases { watch(kind, e.permission(of: ClientID(session.id), kind: kind) == .granted) }
            }
            return ((), actions)
        }
        snap?.sessionOpened(id: session.id, identity: session.identity) { [decisions] in
            decisions.reapplyAccess(session: session.id)
        }
    }

    func sessionClosed(_ session: SessionState) {
        snap?.sessionClosed(id: session.id)
        decisions.withEngine { e in ((), e.clientDisconnected(ClientID(session.id), now: wallClockNow())) }
        registry.removeSession(session.id)
    }

    func clientPropertiesChanged(_ session: SessionState) {
        let p = session.properties.withLock { $0 }
        decisions.withEngine { e in
            (
                (),
                e.clientPropertiesChanged(
                    ClientID(session.id), applicationName: p.applicationName,
                    processBinary: p.processBinary, capturePurpose: p.capturePurpose,
                    now: wallClockNow())
            )
        }
    }

    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? {
        // The identity was read when the client connected; a process that connected and then
        // exec'd another program, or exited leaving its connection to another, is not it.
        if let changed = ProcessInspector.change(since: session.identity) {
            return "its identity changed since it connected: \(changed)"
        }
        let kind = kinds.expectedKind(request)
        let admission = decisions.withEngine { e in
            let a = e.recordStreamRequested(ClientID(session.id), kind: kind, now: wallClockNow())
            return (a, a.actions)
        }
        guard !admission.proceed else { return nil }
        for case let .disconnectClient(_, reason) in admission.actions { return reason }
        return "record stream refused"
    }

    /// A stream that would not hear real samples from its start is held: no stream on the
    /// server, so no device opens for it and no indicator counts it.
    func holdPlacement(_ session: SessionState, request: CreateRecordStreamRequest) -> HeldPlacement? {
        let kind = kinds.expectedKind(request)
        let records =
            decisions.engine.withLock { $0.wouldRecord(ClientID(session.id), kind: kind) }
            && decisions.snapAllows(session.id)
        return records ? nil : kinds.placement(request)
    }

    /// A native stream (the PipeWire door's, a source-output of pipewire-pulse) that may not
    /// record: the gate hides it from the server's connections.
    func conceals(sourceOutput index: UInt32) -> Bool {
        registry.stream(sourceOutput: index).map { $0.placedByGraph && !$0.isReal } ?? false
    }

    func recordStreamStarted(_ session: SessionState, stream: RecordStream) {
        registry.add(stream)
        kinds.catalog.wake()
        let (source, kind) = kinds.classify(stream)
        decisions.withEngine { e in
            let (real, actions) = e.recordStreamStarted(
                ClientID(session.id), stream: StreamID(stream.streamID),
                source: source, kind: kind, now: wallClockNow())
            // Set under the engine lock, before any later flip for this stream.
            decisions.setAccess(stream, real: real)
            return ((), actions)
        }
        Log.info(
            "session \(session.id) (\(session.identity.appKey)): record stream on \(source) "
                + "(\(kind?.rawValue ?? "source not known yet")), "
                + "\(specText(stream.sampleSpec)), "
                + (stream.isReal ? "real" : "silenced"))
    }

    func recordStreamMoved(_ session: SessionState, stream: RecordStream) {
        kinds.moved(stream)
    }

    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {
        decisions.withEngine { e in
            ((), e.recordStreamEnded(ClientID(session.id), stream: StreamID(stream.streamID), now: wallClockNow()))
        }
    }

    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? {
        CommandPolicy.refusal(
            for: command, payload: payload, session: session,
            trusted: configuration.isTrusted(session.identity.appKey)
        ) {
            decisions.engine.withLock { $0.effectiveDecision(for: session.identity.appKey).state == .granted }
        }
    }

    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? {
        permissions.call(session, tag: tag, call: call)
    }
}
