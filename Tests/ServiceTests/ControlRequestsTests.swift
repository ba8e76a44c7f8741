// The control socket's requests as the consent service answers them, without a
// socket: a real engine and store in a scratch directory, and a host that only
// records the launcher sockets it is asked to open.
import Consent
import ConsentStore
import ControlProtocol
import Glibc
@testable import Relay
import Runtime
import StreamState
import Synchronization
import Testing
import TestSupport
@testable import Service

@Suite struct ControlRequestsTests {
    final class Fixture {
        let dir: String
        let store: PermissionStore
        let consent: ConsentService
        /// The relay: what the service sends its clients, and the launcher sockets it opens.
        let host = FakeRelay()
        let control = FakeControl()
        let sources = EditableSources.micAndMonitor()
        let requests: ControlRequests
        let connection = ControlConnectionID(rawValue: 7)

        init(declarations: [AppKey: AppDeclaration] = [:]) throws {
            dir = try TempDir.make(prefix: "earmuff-control-requests")
            store = try PermissionStore(path: "\(dir)/permissions.sqlite")
            let paths = DaemonPaths(
                listen: "\(dir)/native", control: "\(dir)/control", store: "\(dir)/permissions.sqlite",
                launcherDirectory: "\(dir)/app")
            consent = try ConsentService(
                configuration: Configuration(), declarations: declarations, store: store, paths: paths,
                clients: host, control: control, catalog: sources)
            requests = ControlRequests(
                parts: consent.parts, records: consent.writer, store: store,
                launchers: consent.launchers, host: host)
        }

        var parts: ConsentParts { consent.parts }

        func ask(_ r: ControlRequest) -> ControlResponse { requests.handle(r, from: connection) }

        /// A client of `app` connected now, as the relay reports one.
        func connect(_ app: AppKey, id: UInt64 = 1, executable: String? = nil) {
            let identity = ClientIdentity(
                pid: getpid(), uid: getuid(), gid: getgid(), appKey: app, method: .executable,
                executable: executable ?? app.value)
            parts.observer.sessionOpened(SessionState(id: id, identity: identity, launcherAppID: nil, connectedAt: wallClockNow()))
        }

        deinit {
            consent.launchers.removeAll()
            consent.flushStore()
            store.close()
            TempDir.remove(dir)
        }
    }

    private let pacat = AppKey(kind: "exe", value: "/usr/bin/pacat")

    @Test func aGrantIsOnDiskBeforeItsReplyAndTheReplyIsTheEnginesState() throws {
        let f = try Fixture()
        f.connect(pacat)
        guard case .app(let info) = f.ask(.setDecision(app: "pacat", state: .granted, reason: nil, kind: .systemAudio)) else {
            Issue.record("no app reply")
            return
        }
        #expect(info.key == pacat.description && info.state == .granted && info.reason == .user && info.kind == .systemAudio)
        #expect(info.identifiedBy == .executable && info.executable == pacat.value && info.lifespan == .always)
        #expect(try f.store.decision(for: pacat, capability: .systemAudio)?.state == .granted)
        guard case .app(let reset) = f.ask(.reset(app: pacat.description, kind: .systemAudio)) else {
            Issue.record("no reset reply")
            return
        }
        #expect(reset.state == .undetermined && reset.reason == .reset)
        #expect(try f.store.decision(for: pacat, capability: .systemAudio)?.state == .undetermined)
    }

    @Test func onceCoversTheClientsConnectedNowAndLeavesTheAppsDecision() throws {
        let f = try Fixture()
        #expect(
            f.ask(.setDecision(app: pacat.description, state: .granted, reason: nil, lifespan: .once))
                == .error(ControlError(.failed, ConsentError.noClientForOnce(pacat).description)))
        f.connect(pacat)
        guard case .app(let info) = f.ask(.setDecision(app: pacat.description, state: .granted, reason: nil, lifespan: .once)) else {
            Issue.record("no app reply")
            return
        }
        #expect(info.state == .granted && info.lifespan == .once && info.afterwards == .undetermined)
        #expect(try f.store.decision(for: pacat, capability: .microphone)?.state ?? .undetermined == .undetermined)
    }

    @Test func namesAreResolvedAmongTheAppsTheEngineKnows() throws {
        let f = try Fixture()
        #expect(
            f.ask(.setDecision(app: "pacat", state: .denied, reason: nil))
                == .error(ControlError(.unknownApp, AppNameResolver.Failure.unknown("pacat").description)))
        f.connect(pacat, id: 1)
        f.connect(AppKey(kind: "exe", value: "/opt/pacat"), id: 2)
        guard case .error(let e) = f.ask(.setDecision(app: "pacat", state: .denied, reason: nil)) else {
            Issue.record("two apps called pacat were not ambiguous")
            return
        }
        #expect(e.code == .ambiguousApp && e.message.contains("exe:/opt/pacat") && e.message.contains("exe:/usr/bin/pacat"))
        #expect(f.ask(.log(app: "x:", since: nil, limit: nil)) == .error(ControlError(.badRequest, AppNameResolver.Failure.notAnAppKey("x:").description)))
        #expect(f.ask(.log(app: pacat.description, since: nil, limit: nil)) == .usage([]))
    }

    @Test func aPolicyDecisionCannotBeChanged() throws {
        let f = try Fixture(declarations: [pacat: AppDeclaration(decision: .denied)])
        guard case .error(let e) = f.ask(.setDecision(app: pacat.description, state: .granted, reason: nil)) else {
            Issue.record("apps.d was overridden")
            return
        }
        #expect(e.code == .failed)
        guard case .apps(let apps) = f.ask(.apps) else { return }
        #expect(apps.map(\.key) == [pacat.description] && apps[0].state == .denied && apps[0].reason == .adminPolicy)
    }

    @Test func theMasterSwitchAndAgentsShowInStatus() throws {
        let f = try Fixture()
        guard case .status(let off) = f.ask(.setAccess(kind: .appAudio, enabled: false)) else {
            Issue.record("no status reply")
            return
        }
        #expect(off.access?.first { $0.kind == .appAudio }?.enabled == false)
        #expect(try f.store.accessOff() == [.appAudio])
        #expect(f.ask(.becomeAgent) == .ok)
        guard case .status(let s) = f.ask(.status) else { return }
        #expect(s.daemon.promptChannels?.agents == 1)
        f.requests.connectionClosed(f.connection)
        guard case .status(let after) = f.ask(.status) else { return }
        #expect(after.daemon.promptChannels?.agents == 0)
        guard case .error(let e) = f.ask(.answerPrompt(prompt: 99, answer: .allow)) else { return }
        #expect(e.code == .unknownPrompt)
    }

    @Test func launcherSocketsGoOnlyToACheckedPeer() throws {
        let f = try Fixture()
        #expect(f.ask(.registerLauncher(appID: "../etc", purpose: nil)).isError(.badRequest))
        #expect(f.ask(.registerLauncher(appID: "org.example.Notes", purpose: nil)).isError(.failed), "a peer never seen")
        // This process is the same program as itself, as `earmuff run` is as the daemon.
        f.requests.connectionOpened(f.connection, peer: ControlPeer(pid: getpid(), uid: getuid(), gid: getgid()))
        guard case .launcher(let info) = f.ask(.registerLauncher(appID: "org.example.Notes", purpose: "notes")) else {
            Issue.record("no launcher socket")
            return
        }
        #expect(info.appKey == "launcher:org.example.Notes" && info.socketPath == "\(f.dir)/app/org.example.Notes@\(getpid())")
        #expect(f.host.opened.withLock { $0 } == [info.socketPath])
        f.requests.connectionClosed(f.connection)
        #expect(f.ask(.registerLauncher(appID: "org.example.Notes", purpose: nil)).isError(.failed), "its peer is gone")
    }
}

extension ControlResponse {
    func isError(_ code: ControlErrorCode) -> Bool {
        if case .error(let e) = self { return e.code == code }
        return false
    }
}
