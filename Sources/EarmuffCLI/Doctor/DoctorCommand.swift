// `earmuff doctor`: gathers what DoctorChecks judges (the daemon's status,
// the session's sockets, setup's files, the session bus, the doors around
// Earmuff, the store) and prints one line per check, or JSON.
import ConsentStore
import ControlProtocol
import EarmuffClient
import Foundation
import Glibc
import Service

enum DoctorCommand {
    static func run(_ o: ClientOptions) -> Int32 {
        let checks = DoctorChecks.run(gather(o, environment: ClientCommands.environment))
        if o.json {
            Terminal.out(String(decoding: ControlCodec.encodeLine(DoctorReport(checks: checks, ok: DoctorChecks.exitStatus(checks) == 0)), as: UTF8.self))
        } else {
            Terminal.out(text(checks))
        }
        return DoctorChecks.exitStatus(checks)
    }

    /// `ok      daemon   ...` lines, with the fix indented under a check that is not ok.
    static func text(_ checks: [DoctorCheck]) -> String {
        checks.map { c in
            let head = "\(c.outcome.rawValue.padding(toLength: 5, withPad: " ", startingAt: 0)) \(c.name.padding(toLength: 9, withPad: " ", startingAt: 0)) "
            return head + ClientFormat.printable(c.message) + "\n" + (c.fix.map { "      fix: \(ClientFormat.printable($0))\n" } ?? "")
        }.joined()
    }

    struct DoctorReport: Encodable {
        let checks: [DoctorCheck]
        let ok: Bool
    }

    static func gather(_ o: ClientOptions, environment env: [String: String]) -> DoctorFacts {
        let runtime = env["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        let controlPath = ClientCommands.controlPath(o.controlPath)
        var status: StatusPayload?
        var daemonError: String?
        do {
            let client = try ControlClient(path: controlPath, startHint: SessionTakeover.startHint(environment: env))
            if case .status(let s) = try client.request(.status) { status = s } else { daemonError = "it sent an unexpected reply" }
        } catch {
            daemonError = error.message
        }
        let dirs = SetupPlan.directories(environment: env)
        let setUpFor = dirs.flatMap { SessionTakeover.setUpServer(configHome: $0.configHome) }
        var upstreamServer = status?.upstream.server
        if upstreamServer == nil, setUpFor != nil, let runtime { upstreamServer = "unix:\(runtime)/\(SetupPlan.upstreamSocket)" }
        let upstreamAnswers =
            status?.upstream.reachable ?? upstreamServer.map { s in
                canConnect(s.hasPrefix("unix:") ? String(s.dropFirst(5)) : s)
            } ?? false
        let desktop = DesktopChannels.probe()
        var pipewire: String?
        if let runtime, unsafe access("\(runtime)/pipewire-0", W_OK) == 0 { pipewire = "\(runtime)/pipewire-0" }
        let devices = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev/snd")) ?? []).sorted()
            .filter { $0.hasPrefix("pcm") && $0.hasSuffix("c") }.map { (name: String) in "/dev/snd/" + name }
            .filter { (path: String) in unsafe access(path, R_OK | W_OK) == 0 }
        let storePath = status?.daemon.storePath ?? PermissionStore.defaultPath(environment: env)
        return DoctorFacts(
            runtimeDirectory: runtime, controlPath: controlPath, status: status, daemonError: daemonError,
            setUpFor: setUpFor, socketUnit: SessionTakeover.installedSocketUnit(environment: env),
            sessionSocketExists: runtime.map { unsafe access("\($0)/\(SetupPlan.sessionSocket)", F_OK) == 0 } ?? false,
            upstreamAnswers: upstreamAnswers, upstreamServer: upstreamServer,
            desktop: DesktopChannelsFacts(
                busError: desktop.busError, portalBackend: desktop.portalBackend,
                notificationActions: desktop.notificationsHaveActions),
            pipewireSocket: pipewire, captureDevices: devices,
            unitProblems: unitProblems(environment: env, setUpFor: setUpFor),
            storePath: storePath, storeCheck: storeCheck(storePath))
    }

    static func storeCheck(_ path: String) -> DoctorFacts.StoreCheck {
        guard unsafe access(path, F_OK) == 0 else { return .missing }
        do {
            let result = try PermissionStore.quickCheck(path: path)
            return result == "ok" ? .ok : .damaged(result)
        } catch {
            return .unreadable("\(error)")
        }
    }

    /// Stale units of an earlier setup, units and drop-ins setup did not write that fight it.
    static func unitProblems(
        environment env: [String: String], setUpFor: SessionServer?,
        setup options: SetupCommand.Options = SetupCommand.Options()
    ) -> [DoctorFacts.UnitProblem] {
        let runner = SetupRunner(options: options, environment: env)
        guard let c = try? runner.context() else { return [] }
        var problems: [DoctorFacts.UnitProblem] = []
        let units = SetupPlan.unitDirectory(c)
        for name in SetupPlan.unitNames where c.packagedUnits && runner.ownedByUs("\(units)/\(name)") {
            problems.append(
                .init(
                    problem: "\(units)/\(name), written by an earlier earmuff setup, hides the packaged \(options.packagedUnitDirectory)/\(name)",
                    fix: "run 'earmuff setup' again: it removes its own copy and uses the packaged unit"))
        }
        // The earmuff.service the session starts (setup's own, which systemd prefers, else the
        // package's once setup moved the server) must run a program that is there; one that is
        // gone (the package removed, a copy deleted) leaves the session without sound.
        let own = "\(units)/earmuff.service"
        let service =
            runner.ownedByUs(own)
            ? own
            : setUpFor != nil && c.packagedUnits ? "\(options.packagedUnitDirectory)/earmuff.service" : nil
        if let service, let binary = execBinary(of: service), unsafe access(binary, X_OK) != 0 {
            problems.append(DoctorChecks.missingProgram(service: service, binary: binary, server: setUpFor))
        }
        // systemd finds the unit by the link's name: where it points does not matter.
        var link = stat()
        if setUpFor == .pipewire, unsafe lstat(SetupPlan.startedWithPipeWire(c), &link) != 0 {
            problems.append(
                .init(
                    problem: "earmuff.service is not started with PipeWire: after login, a native PipeWire client waits until some Pulse app starts Earmuff",
                    fix: "systemctl --user enable earmuff.service"))
        }
        if let setUpFor {
            for other in SessionServer.allCases where other != setUpFor && runner.ownedByUs(SetupPlan.socketDropIn(c, other)) {
                problems.append(
                    .init(
                        problem: "\(SetupPlan.socketDropIn(c, other)) is left from setting up for \(other.displayName)",
                        fix: "run 'earmuff setup' again: it removes what belongs to the other server"))
            }
        }
        for server in setUpFor.map({ [$0] }) ?? SessionServer.allCases {
            guard let files = try? SetupPlan.files(c, server: server) else { continue }
            do {
                try runner.refuseForeign(c, server: server, files: files)
            } catch {
                let text = "\(error)"
                let (problem, fix) =
                    text.firstRange(of: "; ").map { (String(text[..<$0.lowerBound]), String(text[$0.upperBound...])) } ?? (
                        text, "see 'earmuff setup --dry-run'"
                    )
                if !problems.contains(where: { $0.problem == problem }) {
                    problems.append(.init(problem: problem, fix: fix))
                }
            }
        }
        return problems
    }

    /// The executable of a unit's ExecStart= line.
    static func execBinary(of unit: String) -> String? {
        guard let text = try? String(contentsOfFile: unit, encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ExecStart=") })
        else { return nil }
        let command = line.dropFirst("ExecStart=".count)
        if command.hasPrefix("\"") {
            return command.dropFirst().split(separator: "\"").first.map { $0.replacingOccurrences(of: "%%", with: "%") }
        }
        return command.split(separator: " ").first.map { $0.replacingOccurrences(of: "%%", with: "%") }
    }
}
