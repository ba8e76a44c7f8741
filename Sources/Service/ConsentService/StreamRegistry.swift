// The live sessions, record streams and prompt agents the consent service
// knows, by id. Any thread, behind its own lock; the engine's lock may be held
// when it is taken (never the other way round).
import Consent
import ControlProtocol
import LinuxSystem
import StreamState

final class StreamRegistry: Sendable {
    private struct Tables {
        var sessions: [UInt64: SessionState] = [:]
        var streams: [UInt64: RecordStream] = [:]
        var agents: [AgentID: ControlConnectionID] = [:]
    }
    private let tables = Locked(Tables())

    init() {}

    func add(_ session: SessionState) { tables.withLock { $0.sessions[session.id] = session } }
    func removeSession(_ id: UInt64) { tables.withLock { $0.sessions[id] = nil } }
    func session(_ id: UInt64) -> SessionState? { tables.withLock { $0.sessions[id] } }

    func add(_ stream: RecordStream) { tables.withLock { $0.streams[stream.streamID] = stream } }
    func removeStream(_ id: UInt64) -> RecordStream? { tables.withLock { $0.streams.removeValue(forKey: id) } }
    func stream(_ id: UInt64) -> RecordStream? { tables.withLock { $0.streams[id] } }
    var streams: [UInt64: RecordStream] { tables.withLock { $0.streams } }
    func streams(of session: UInt64) -> [RecordStream] {
        tables.withLock { $0.streams.values.filter { $0.sessionID == session } }
    }
    func stream(sourceOutput index: UInt32) -> RecordStream? {
        tables.withLock { $0.streams.values.first { $0.serverOutput.load(ordering: .relaxed) == index } }
    }
    var hasStreams: Bool { tables.withLock { !$0.streams.isEmpty } }

    func addAgent(_ agent: AgentID, on connection: ControlConnectionID) { tables.withLock { $0.agents[agent] = connection } }
    /// Whether `agent` was one.
    func removeAgent(_ agent: AgentID) -> Bool { tables.withLock { $0.agents.removeValue(forKey: agent) } != nil }
    /// The control connections of `agents` that are still connected.
    func connections(of agents: [AgentID]) -> [ControlConnectionID] { tables.withLock { t in agents.compactMap { t.agents[$0] } } }
    var agentCount: Int { tables.withLock { $0.agents.count } }
}
