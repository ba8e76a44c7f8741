// `earmuff doctor`'s judgement over observed facts: each check's outcome,
// and the fix it names.
import ConsentStore
import ControlProtocol
import Foundation
import Testing
@testable import EarmuffCLI

private func status(
    session: Bool = true, reachable: Bool = true, via: [String] = ["portal", "notification", "command", "agent"],
    command: Bool = false, agents: Int = 0
) -> StatusPayload {
    StatusPayload(
        daemon: DaemonInfo(
            pid: 42, version: "0.1.0", listenPath: session ? "/run/user/7/pulse/native" : "/run/user/7/earmuff/native",
            controlPath: "/run/user/7/earmuff/control", storePath: "/s.sqlite", uptimeSeconds: 3,
            sessionSocket: session, socketActivated: session,
            promptChannels: PromptChannelsInfo(via: via, command: command, agents: agents)),
        upstream: UpstreamInfo(server: "unix:/run/user/7/pulse/upstream", reachable: reachable))
}

private func facts(_ s: StatusPayload? = status(), setUpFor: SessionServer? = .pipewire) -> DoctorFacts {
    DoctorFacts(
        runtimeDirectory: "/run/user/7", controlPath: "/run/user/7/earmuff/control", status: s,
        daemonError: s == nil ? "cannot reach the daemon at /run/user/7/earmuff/control (No such file or directory)" : nil,
        setUpFor: setUpFor, socketUnit: setUpFor == nil ? nil : "/usr/lib/systemd/user/earmuff.socket",
        sessionSocketExists: true, upstreamAnswers: s?.upstream.reachable ?? false,
        upstreamServer: s?.upstream.server,
        desktop: DesktopChannelsFacts(busError: nil, portalBackend: nil, notificationActions: false),
        pipewireSocket: nil, captureDevices: [], unitProblems: [], storePath: "/s.sqlite", storeCheck: .ok)
}

private func check(_ name: String, _ f: DoctorFacts) -> DoctorCheck? {
    DoctorChecks.run(f).first { $0.name == name }
}

@Suite struct DoctorChecksTests {
    @Test func aTakenOverSessionWithAnAgentPassesEverything() {
        let checks = DoctorChecks.run(facts(status(agents: 1)))
        #expect(checks.map(\.name) == ["daemon", "session", "upstream", "prompts", "pipewire", "devices", "units", "store"])
        #expect(checks.allSatisfy { $0.outcome == .ok }, "\(checks)")
        #expect(DoctorChecks.exitStatus(checks) == 0)
        #expect(check("prompts", facts(status(agents: 1)))?.message.contains("agent (1 connected)") == true)
    }

    @Test func notTakenOverNamesSetup() {
        let c = check("session", facts(status(session: false), setUpFor: nil))
        #expect(c?.outcome == .fail)
        #expect(c?.fix?.contains("earmuff setup") == true)
        #expect(c?.message.contains("/run/user/7/earmuff/native") == true)
    }

    /// The package removed under a session setup moved: no earmuff.socket, and how to get the sound back.
    @Test func setUpWithoutEarmuffsUnitsSaysHowToUndo() {
        var f = facts(nil)
        f.socketUnit = nil
        let c = check("session", f)
        #expect(c?.outcome == .fail)
        #expect(c?.message.contains("no earmuff.socket unit is installed (was the earmuff package removed?)") == true, "\(String(describing: c))")
        #expect(c?.fix?.hasPrefix("'earmuff setup --undo' gives the session back to pipewire-pulse") == true, "\(String(describing: c))")
    }

    @Test func setUpButNoDaemonSaysHowToStartIt() {
        let f = facts(nil)
        #expect(check("daemon", f)?.outcome == .fail)
        #expect(check("daemon", f)?.fix?.contains("systemctl --user start earmuff.socket") == true)
        // systemd holds the socket: Earmuff starts with the first app.
        #expect(check("session", f)?.outcome == .warn)
        var gone = f
        gone.sessionSocketExists = false
        #expect(check("session", gone)?.outcome == .fail)
        #expect(check("session", gone)?.fix == "systemctl --user enable --now earmuff.socket")
    }

    @Test func anUnreachableUpstreamFailsWithTheServersUnit() {
        let c = check("upstream", facts(status(reachable: false), setUpFor: .pulseaudio))
        #expect(c?.outcome == .fail)
        #expect(c?.message.contains("unix:/run/user/7/pulse/upstream") == true)
        #expect(c?.fix?.contains("systemctl --user restart pulseaudio.socket") == true)
    }

    @Test func promptChannelsInTheDaemonsOrder() {
        let desktop = DesktopChannelsFacts(busError: nil, portalBackend: "org.freedesktop.impl.portal.desktop.gtk", notificationActions: true)
        let info = PromptChannelsInfo(via: ["notification", "portal"], command: false, agents: 0)
        #expect(DoctorChecks.promptChannel(info, desktop: desktop) == "notification")
        #expect(
            DoctorChecks.promptChannel(PromptChannelsInfo(via: ["portal"], command: false, agents: 0), desktop: desktop)
                == "portal (org.freedesktop.impl.portal.desktop.gtk)")
        let none = DesktopChannelsFacts(busError: nil, portalBackend: nil, notificationActions: false)
        #expect(
            DoctorChecks.promptChannel(PromptChannelsInfo(via: ["portal", "command", "agent"], command: true, agents: 0), desktop: none)
                == "command (prompt-command)")
        // A connected agent keeps the command from running.
        #expect(
            DoctorChecks.promptChannel(PromptChannelsInfo(via: ["command", "agent"], command: true, agents: 2), desktop: none)?
                .hasPrefix("agent") == true)
        // Channels not in prompt-via are not used.
        #expect(DoctorChecks.promptChannel(PromptChannelsInfo(via: ["agent"], command: false, agents: 0), desktop: desktop) == nil)
    }

    @Test func noPromptChannelFailsAndSaysWhatIsMissing() {
        let c = check("prompts", facts())
        #expect(c?.outcome == .fail)
        #expect(c?.message.contains("no prompt channel") == true)
        #expect(c?.message.contains("agent: none connected") == true)
        #expect(c?.fix?.contains("earmuff agent") == true)
    }

    @Test func theDoorsAroundEarmuffWarnWithTheReadmesAnswer() {
        var f = facts(status(agents: 1))
        f.pipewireSocket = "/run/user/7/pipewire-0"
        f.captureDevices = ["/dev/snd/pcmC0D0c"]
        let checks = DoctorChecks.run(f)
        for name in ["pipewire", "devices"] {
            let c = checks.first { $0.name == name }
            #expect(c?.outcome == .warn)
            #expect(c?.fix?.contains("earmuff run --sandbox") == true)
        }
        #expect(DoctorChecks.exitStatus(checks) == 0, "warnings do not fail")
    }

    @Test func aPipeWireSocketTheDaemonGatesIsNoDoorAroundIt() {
        var gated = status(agents: 1)
        gated.pipewire = PipeWireInfo(socket: "/run/user/7/pipewire-0", gating: true, clients: 2)
        var f = facts(gated)
        f.pipewireSocket = "/run/user/7/pipewire-0"
        #expect(check("pipewire", f)?.outcome == .ok)
        #expect(check("pipewire", f)?.message.contains("gated by the daemon") == true)
        gated.pipewire = PipeWireInfo(socket: "/run/user/7/pipewire-0", gating: false, reason: "connection refused")
        f = facts(gated)
        f.pipewireSocket = "/run/user/7/pipewire-0"
        #expect(check("pipewire", f)?.outcome == .warn)
        #expect(check("pipewire", f)?.message.contains("connection refused") == true)
    }

    /// A gate that lost its connection while it gated and is back: said, with when and why, but
    /// no warning (PipeWire's own restart cuts it too, and the gate is back).
    @Test func aGateThatWasCutSaysSo() {
        var gated = status(agents: 1)
        gated.pipewire = PipeWireInfo(
            socket: "/run/user/7/pipewire-0", gating: true, clients: 2,
            cuts: 3, lastCut: "the PipeWire connection closed", lastCutAt: 1_800_000_000)
        var f = facts(gated)
        f.pipewireSocket = "/run/user/7/pipewire-0"
        let c = check("pipewire", f)
        #expect(c?.outcome == .ok)
        #expect(
            c?.message.contains("cut 3 times, last at ") == true && c?.message.contains("the PipeWire connection closed") == true
                && c?.message.contains("journalctl") == true, "\(String(describing: c))")
        #expect(ClientFormat.pipeWire(gated.pipewire!).hasPrefix("gating 2 clients (/run/user/7/pipewire-0); cut 3 times"))
    }

    @Test func unitProblemsAndADamagedStoreFail() {
        var f = facts(status(agents: 1))
        f.unitProblems = [.init(problem: "~/.config/systemd/user/earmuff.service hides the packaged one", fix: "run 'earmuff setup' again")]
        f.storeCheck = .damaged("*** in database main ***")
        #expect(check("units", f)?.outcome == .fail)
        #expect(check("units", f)?.fix == "run 'earmuff setup' again")
        #expect(check("store", f)?.outcome == .fail)
        #expect(check("store", f)?.fix?.contains("permissions") == false)
        #expect(check("store", f)?.fix?.contains("/s.sqlite.damaged") == true)
        #expect(DoctorChecks.exitStatus(DoctorChecks.run(f)) == 1)
    }
}

@Suite struct DoctorStoreCheckTests {
    @Test func aRealStorePassesAndGarbageIsDamagedOrUnreadable() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("earmuff-doctor-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(DoctorCommand.storeCheck("\(dir)/none.sqlite") == .missing)
        let store = try PermissionStore(path: "\(dir)/permissions.sqlite")
        store.close()
        #expect(DoctorCommand.storeCheck("\(dir)/permissions.sqlite") == .ok)
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: "\(dir)/garbage.sqlite"))
        switch DoctorCommand.storeCheck("\(dir)/garbage.sqlite") {
        case .damaged, .unreadable: break
        case let other: Issue.record("a file of garbage is \(other)")
        }
    }
}

extension DoctorFacts {
    /// Facts of a session set up and running well, but for `unitProblems`.
    static func sample(unitProblems: [UnitProblem]) -> DoctorFacts {
        var f = facts()
        f.unitProblems = unitProblems
        return f
    }
}
