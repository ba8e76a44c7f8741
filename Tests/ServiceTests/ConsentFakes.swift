// Fakes of what the consent service's parts reach outside themselves: each
// records what it is asked, so a test can check what a part did. Real
// sessions and streams (the objects the halves report), a real engine.
import Consent
import ControlProtocol
import Glibc
import LinuxSystem
import PulseWire
@testable import Relay
import Runtime
import StreamState
import Synchronization
@testable import Service

/// A catalog whose table the test sets; counts its wake-ups.
final class EditableSources: SourceDirectory {
    let table = Locked(SourceTable())
    let wakes = Atomic<Int>(0)
    var snapshot: SourceTable { table.withLock { $0 } }
    func wake() { wakes.add(1, ordering: .relaxed) }

    /// A microphone at index 1 ("mic") and the monitor of sink "out" at index 2 ("out.monitor").
    static func micAndMonitor() -> EditableSources {
        let s = EditableSources()
        s.table.withLock { t in
            t.update(SourceInfo(index: 1, name: "mic"))
            t.update(SourceInfo(index: 2, name: "out.monitor", monitorOfSink: 0, monitorOfSinkName: "out"))
        }
        return s
    }
}

/// A relay that records what the service sends its clients and which it closes.
final class FakeRelay: ClientLink, RelayStatus, LauncherSocketHost {
    let sent = Locked<[(UInt64, [UInt8])]>([])
    let closed = Locked<[(UInt64, String)]>([])
    let opened = Locked<[String]>([])
    let removed = Locked<[String]>([])
    let startedAt = 1000.0
    let activatedListener: Int32? = nil
    let upstream = UpstreamAddress.unix("/nonexistent/pulse/native")
    func inject(sessionID: UInt64, packet: [UInt8]) { sent.withLock { $0.append((sessionID, packet)) } }
    func disconnect(sessionID: UInt64, reason: String) { closed.withLock { $0.append((sessionID, reason)) } }
    func loopThreadIDs() -> [pid_t] { [] }
    func addLauncherSocket(path: String, appID: String, purpose: String?) throws(SystemError) {
        opened.withLock { $0.append(path) }
    }
    func removeLauncherSocket(path: String) { removed.withLock { $0.append(path) } }

    /// The permission state in each status reply sent so far, by tag (SUBSCRIBE's reply is empty).
    func replies(version: UInt32) -> [UInt32: String] {
        var out: [UInt32: String] = [:]
        for (_, packet) in sent.withLock({ $0 }) {
            if let (tag, status) = try? PermissionStatus.decodePacket(packet, version: version) { out[tag] = status.state }
        }
        return out
    }

    var events: [PermissionEvent] { sent.withLock { $0 }.compactMap { try? PermissionEvent.decode($0.1) } }
}

/// Control connections: what was sent to each, and what was broadcast.
final class FakeControl: ControlOutput {
    let sent = Locked<[(ServerMessage, ControlConnectionID)]>([])
    let broadcasts = Locked<[ControlEvent]>([])
    func send(_ message: ServerMessage, to connection: ControlConnectionID) { sent.withLock { $0.append((message, connection)) } }
    func broadcast(_ event: ControlEvent) { broadcasts.withLock { $0.append(event) } }

    var resolutions: [PromptResolution] {
        broadcasts.withLock { $0 }.compactMap { if case let .promptResolved(r) = $0 { r } else { nil } }
    }
    var raised: [PromptInfo] {
        broadcasts.withLock { $0 }.compactMap { if case let .promptRaised(p) = $0 { p } else { nil } }
    }
}

/// The store writer: what would be written.
final class FakeRecords: ConsentRecords {
    let saved = Locked<[Decision]>([])
    let events = Locked<[(kind: String, app: AppKey?)]>([])
    let usageStarted = Locked<[UInt64]>([])
    let usageFinished = Locked<[(stream: UInt64, decision: String?)]>([])
    /// Every usage call in the order it came: true for a start, false for a finish.
    let usageCalls = Locked<[Bool]>([])
    let flushes = Atomic<Int>(0)
    func save(_ d: Decision) { saved.withLock { $0.append(d) } }
    func setAccess(_ kind: Capability, enabled: Bool, at: Double) {}
    func removeTimed(_ app: AppKey, _ capability: Capability) {}
    func record(_ r: AppRecord) {}
    func startUsage(stream: UInt64, _ u: UsageRecord) {
        usageStarted.withLock { $0.append(stream) }
        usageCalls.withLock { $0.append(true) }
    }
    func finishUsage(stream: UInt64, endedAt: Double, bytesReal: UInt64, bytesSilenced: UInt64, decision: String?) {
        usageFinished.withLock { $0.append((stream, decision)) }
        usageCalls.withLock { $0.append(false) }
    }
    func logEvent(kind: String, app: AppKey?, detail: String, at: Double) { events.withLock { $0.append((kind, app)) } }
    func flushDecisions() { flushes.add(1, ordering: .relaxed) }
}

/// The prompt threads: prompts shown, timeouts set, prompts closed; timers kept, not run.
final class FakePrompts: PromptChannels, Timers {
    let shown = Locked<[PromptInfo]>([])
    let commands = Locked<[UInt64]>([])
    let timeouts = Locked<[UInt64]>([])
    let closedPrompts = Locked<[UInt64]>([])
    let timers = Locked<[UInt64: Double]>([:])
    func raised(_ p: PromptInfo) { shown.withLock { $0.append(p) } }
    func wantsCommand(_ prompt: UInt64, environment: [String: String]) { commands.withLock { $0.append(prompt) } }
    func scheduleTimeout(_ prompt: UInt64, after seconds: Double) { timeouts.withLock { $0.append(prompt) } }
    func closed(_ prompt: UInt64) { closedPrompts.withLock { $0.append(prompt) } }
    let notices = Locked<[String]>([])
    func notice(_ app: AppKey, name: String, icon: String?) { notices.withLock { $0.append(name) } }
    func schedule(key: UInt64, after seconds: Double, _ action: @escaping @Sendable () -> Void) {
        timers.withLock { $0[key] = seconds }
    }
}

/// The desktop's switches: what was mirrored there.
final class FakeDesktop: DesktopSwitches {
    let mirrored = Locked<[String: PermissionState]>([:])
    func mirror(appID: String, _ state: PermissionState) { mirrored.withLock { $0[appID] = state } }
    func mirrorMicrophoneAccess(enabled: Bool) {}
}

/// snapd, answering when the test says so.
final class FakeSnap: SnapAccess {
    let allowed = Locked<Set<UInt64>>([])
    let asking = Locked<[UInt64: @Sendable () -> Void]>([:])
    func sessionOpened(id: UInt64, identity: ClientIdentity, onAllowed: @escaping @Sendable () -> Void) {
        if identity.appKey.kind == "snap" { asking.withLock { $0[id] = onAllowed } } else { allowed.withLock { _ = $0.insert(id) } }
    }
    func sessionClosed(id: UInt64) {}
    func allows(_ id: UInt64) -> Bool { allowed.withLock { $0.contains(id) } }
    /// snapd says the session's audio-record plug is connected.
    func connect(_ id: UInt64) {
        allowed.withLock { _ = $0.insert(id) }
        asking.withLock { $0[id] }?()
    }
}

/// No desktop entries.
final class NoEntries: AppEntries {
    func entry(for key: AppKey, executable: String?) -> DesktopEntries.Entry? { nil }
}

/// The consent parts over fakes, with helpers that act as the relay's halves do.
final class PartsFixture {
    let relay = FakeRelay()
    let control = FakeControl()
    let records = FakeRecords()
    let prompts = FakePrompts()
    let desktop = FakeDesktop()
    let snap = FakeSnap()
    let sources = EditableSources.micAndMonitor()
    let parts: ConsentParts
    private var nextStream: UInt64 = 1

    init(
        configuration: Configuration = Configuration(), declarations: [AppKey: AppDeclaration] = [:],
        decisions: [Decision] = [], apps: [AppRecord] = []
    ) {
        let engine = ConsentEngine(
            policy: ConsentPolicy(configuration: configuration, declarations: declarations),
            decisions: decisions, apps: apps)
        let paths = DaemonPaths(
            listen: "/nonexistent/native", control: "/nonexistent/control",
            store: "/nonexistent/permissions.sqlite", launcherDirectory: "/nonexistent/app")
        parts = ConsentParts(
            engine: engine, configuration: configuration, paths: paths, storePath: paths.store,
            records: records, channels: prompts, timers: prompts, desktop: desktop, entries: NoEntries(),
            clients: relay, control: control, catalog: sources, snap: snap)
    }

    /// A client of `app` connected now, as the relay reports one.
    @discardableResult
    func connect(_ app: AppKey, id: UInt64, method: IdentificationMethod = .executable) -> SessionState {
        let identity = ClientIdentity(
            pid: getpid(), uid: getuid(), gid: getgid(), appKey: app, method: method,
            executable: "/usr/bin/parecord")
        let session = SessionState(id: id, identity: identity, launcherAppID: nil, connectedAt: wallClockNow())
        parts.observer.sessionOpened(session)
        return session
    }

    /// A record stream of `session` on source `index`, started as the upstream half reports it.
    func startStream(_ session: SessionState, on index: UInt32, name: String) -> RecordStream {
        let id = nextStream
        nextStream += 1
        let stream = RecordStream(
            sessionID: session.id, streamID: id, channel: UInt32(id), sourceOutputIndex: 40 + UInt32(id),
            sampleSpec: SampleSpec(format: .s16le, channels: 2, rate: 44100), source: name,
            sourceIndex: index, real: false, startedAt: wallClockNow())
        parts.observer.recordStreamStarted(session, stream: stream)
        return stream
    }

    /// `earmuff grant/deny/reset`, as the control requests set it.
    func decide(_ app: AppKey, _ state: PermissionState, _ kind: Capability = .microphone, lifespan: Lifespan = .always) {
        parts.decisions.withEngine { e in
            ((), (try? e.setDecision(app, kind: kind, state, reason: .user, lifespan: lifespan, now: wallClockNow()).get()) ?? [])
        }
    }
}
