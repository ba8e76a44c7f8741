// The permission extension (`module-earmuff`, docs/permission-api.md), answered on
// the app's own connection (on its session's loop): GET and TEST at once, REQUEST at once when
// the app is decided and otherwise once its prompt settles, SUBSCRIBE for events of the
// caller's own state. The caller is always the connection's identity; nothing in a request
// names an app, and nothing an app sends decides anything.
import Consent
import PulseWire
import Runtime
import StreamState

final class PermissionCalls: Sendable {
    private let decisions: Decisions
    private let clients: any ClientLink

    init(decisions: Decisions, clients: any ClientLink) {
        self.decisions = decisions
        self.clients = clients
    }

    /// Nil, or the reason to close the connection.
    func call(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? {
        // As for record streams: a process that exec'd another program, or left its connection
        // to another, is no longer what was identified.
        if let changed = ProcessInspector.change(since: session.identity) {
            return "its identity changed since it connected: \(changed)"
        }
        // Each answer waits in memory until the client reads it.
        guard session.injectionBacklog < SessionState.maximumInjections else {
            return "\(session.injectionBacklog) of Earmuff's replies are unread: the client does not read what it asks for"
        }
        let c = ClientID(session.id)
        let version = session.protocolVersion
        func reply(_ packet: [UInt8]) { clients.inject(sessionID: session.id, packet: packet) }
        func fail(_ code: ErrorCode, _ why: String) {
            Log.info("session \(session.id) (\(session.identity.appKey)): permission extension: \(why)")
            reply(ErrorReply(code: code).packet(tag: tag, version: version))
        }
        func capability(_ name: String) -> Capability? {
            if let kind = Capability(rawValue: name) { return kind }
            fail(.invalid, "unknown capture kind \"\(name.prefix(80))\" (use \(PermissionExtension.kinds.joined(separator: ", ")))")
            return nil
        }
        switch call {
        case .test:
            reply(PermissionTestReply().packet(tag: tag, version: version))
        case let .get(name):
            guard let kind = capability(name) else { return nil }
            let state = decisions.engine.withLock { $0.permission(of: c, kind: kind) } ?? .denied
            reply(session.permissionStatus(state).packet(tag: tag, version: version))
        case let .request(name, purpose):
            guard let kind = capability(name) else { return nil }
            if let purpose, purpose.utf8.count > PermissionExtension.maximumPurposeBytes {
                fail(.tooLarge, "a purpose of \(purpose.utf8.count) bytes (at most \(PermissionExtension.maximumPurposeBytes))")
                return nil
            }
            guard session.holdPermissionTag(tag) else {
                return "more than \(SessionState.maximumPermissionRequests) permission requests wait for an answer"
            }
            let outcome = decisions.withEngine { e in
                e.permissionRequested(c, tag: tag, kind: kind, purpose: purpose, now: wallClockNow())
            }
            switch outcome {
            case let .answered(state):
                session.releasePermissionTag(tag)
                reply(session.permissionStatus(state).packet(tag: tag, version: version))
            case .waiting:
                Log.info("session \(session.id) (\(session.identity.appKey)): asks for \(kind.rawValue); waiting for the prompt")
            case .refused:
                session.releasePermissionTag(tag) // the connection is being closed
            }
        case let .subscribe(on):
            decisions.withEngine { e in
                e.permissionSubscription(c, enabled: on)
                return ((), [])
            }
            reply(Reply(tag: tag).packet)
        case let .unknown(sub):
            fail(.notSupported, "subcommand \(sub) is not one of this version's (\(PermissionExtension.version))")
        }
        return nil
    }
}
