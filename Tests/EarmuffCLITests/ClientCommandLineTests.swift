import Consent
import ControlProtocol
import ControlSamples
import EarmuffCLI
import Foundation
import Testing
import Wording

private func parse(_ s: String...) -> Result<ClientCommand, UsageError> { ClientCommandLine.parse(s) }
private func usage(_ r: Result<ClientCommand, UsageError>) -> UsageError? {
    if case .failure(let e) = r { return e }
    return nil
}

@Suite struct ClientCommandLineTests {
    @Test func helpAndVersion() {
        #expect(parse("--help") == .success(.help(topic: nil)))
        #expect(parse("-h") == .success(.help(topic: nil)))
        #expect(parse("help", "agent") == .success(.help(topic: "agent")))
        #expect(parse("status", "--help") == .success(.help(topic: "status")))
        #expect(parse("grant", "--help") == .success(.help(topic: "grant")))
        #expect(parse("run", "--help") == .success(.help(topic: "run")))
        #expect(parse("--version") == .success(.version))
    }

    @Test func noArgumentsIsAUsageError() {
        #expect(usage(ClientCommandLine.parse([]))?.subcommand == nil)
    }

    @Test func servePassesEverythingThrough() {
        #expect(parse("serve", "--listen", "/x", "--bogus") == .success(.serve(arguments: ["--listen", "/x", "--bogus"])))
    }

    @Test func setupPassesEverythingThrough() {
        #expect(parse("setup", "--undo", "--dry-run") == .success(.setup(arguments: ["--undo", "--dry-run"])))
    }

    @Test func statusAppsWatch() {
        #expect(parse("status") == .success(.status(ClientOptions())))
        #expect(parse("status", "--json") == .success(.status(ClientOptions(json: true))))
        #expect(parse("apps", "--control", "/tmp/c") == .success(.apps(ClientOptions(controlPath: "/tmp/c"))))
        #expect(parse("watch", "--control=/tmp/c", "--json") == .success(.watch(ClientOptions(controlPath: "/tmp/c", json: true))))
    }

    @Test func decisions() {
        #expect(parse("grant", "exe:/usr/bin/parecord") == .success(.setDecision(app: "exe:/usr/bin/parecord", state: .granted, ClientOptions())))
        #expect(parse("deny", "--json", "Firefox") == .success(.setDecision(app: "Firefox", state: .denied, ClientOptions(json: true))))
        #expect(parse("reset", "x:y", "--control", "/c") == .success(.reset(app: "x:y", ClientOptions(controlPath: "/c"))))
        #expect(parse("grant", "--", "-odd-name") == .success(.setDecision(app: "-odd-name", state: .granted, ClientOptions())))
    }

    @Test func decisionLifespans() {
        let app = "exe:/usr/bin/parecord"
        #expect(parse("grant", app, "--for", "2h") == .success(.setDecision(app: app, state: .granted, ClientOptions(), lifespan: .timed(seconds: 7200))))
        #expect(parse("deny", "--for=1h30m", app) == .success(.setDecision(app: app, state: .denied, ClientOptions(), lifespan: .timed(seconds: 5400))))
        #expect(parse("grant", app, "--session") == .success(.setDecision(app: app, state: .granted, ClientOptions(), lifespan: .session)))
        #expect(parse("deny", app, "--once", "--json") == .success(.setDecision(app: app, state: .denied, ClientOptions(json: true), lifespan: .once)))
        #expect(parse("grant", app, "--always") == .success(.setDecision(app: app, state: .granted, ClientOptions(), lifespan: .always)))
        #expect(parse("grant", app, "--session", "--session") == .success(.setDecision(app: app, state: .granted, ClientOptions(), lifespan: .session)))
        #expect(
            usage(parse("grant", app, "--session", "--for", "1h"))?.message
                == "--session and --for 1h contradict each other; give one of --once, --session, --for DURATION, --always")
        #expect(usage(parse("grant", app, "--for", "soon"))?.message == "--for takes \(DurationText.help), not 'soon'")
        #expect(usage(parse("grant", app, "--for"))?.message == "--for needs a value")
        #expect(usage(parse("reset", app, "--session"))?.subcommand == "reset")
    }

    @Test func durations() {
        #expect(DurationText.parse("30m") == 1800)
        #expect(DurationText.parse("2h") == 7200)
        #expect(DurationText.parse("1d") == 86_400)
        #expect(DurationText.parse("1w") == 604_800)
        #expect(DurationText.parse("90s") == 90)
        #expect(DurationText.parse("1h30m") == 5400)
        #expect(DurationText.parse("1.5h") == 5400)
        for bad in ["", "2", "h", "0m", "-1h", "2x", "2h3", "1e9d", "٣h"] {
            #expect(DurationText.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func captureKinds() {
        #expect(
            parse("grant", "obs", "--kind", "system-audio")
                == .success(.setDecision(app: "obs", state: .granted, kind: .systemAudio, ClientOptions())))
        #expect(parse("deny", "--kind=app-audio", "obs") == .success(.setDecision(app: "obs", state: .denied, kind: .appAudio, ClientOptions())))
        #expect(parse("reset", "obs", "--kind", "microphone") == .success(.reset(app: "obs", kind: .microphone, ClientOptions())))
        guard case .failure(let e) = parse("grant", "obs", "--kind", "speakers") else {
            Issue.record("an unknown kind is a usage error")
            return
        }
        #expect(e.message.contains("microphone, system-audio, app-audio"), "\(e.message)")
    }

    @Test func agent() {
        #expect(parse("agent") == .success(.agent(answer: nil, ClientOptions())))
        #expect(parse("agent", "--answer", "once", "--json") == .success(.agent(answer: .once, ClientOptions(json: true))))
        #expect(parse("agent", "--answer=deny") == .success(.agent(answer: .deny, ClientOptions())))
        #expect(parse("agent", "--answer", "allow", "--for", "1h") == .success(.agent(answer: .allow, ClientOptions(), lifespan: .timed(seconds: 3600))))
        #expect(parse("agent", "--session", "--answer", "deny") == .success(.agent(answer: .deny, ClientOptions(), lifespan: .session)))
        #expect(usage(parse("agent", "--session"))?.subcommand == "agent")
        #expect(usage(parse("agent", "--answer", "once", "--for", "1h"))?.subcommand == "agent")
    }

    @Test func run() {
        #expect(parse("run", "--", "parecord", "--rate", "8000") == .success(.run(RunOptions(command: ["parecord", "--rate", "8000"]))))
        #expect(
            parse("run", "--app-id", "org.example.Notes", "--purpose", "voice notes", "--", "notes", "--")
                == .success(.run(RunOptions(appID: "org.example.Notes", purpose: "voice notes", command: ["notes", "--"]))))
        #expect(
            parse("run", "--listen=/s", "--control", "/c", "pacat", "-r")
                == .success(.run(RunOptions(listenPath: "/s", controlPath: "/c", command: ["pacat", "-r"]))))
    }

    @Test func log() {
        #expect(parse("log") == .success(.log(app: nil, since: nil, ClientOptions())))
        #expect(
            parse("log", "--app", "pacat", "--since", "2h", "--json")
                == .success(.log(app: "pacat", since: "2h", ClientOptions(json: true))))
        #expect(parse("log", "--since=2026-11-30 14:05") == .success(.log(app: nil, since: "2026-11-30 14:05", ClientOptions())))
    }

    @Test func usageErrorsNameTheSubcommandAndAreOneLine() {
        let cases: [([String], String?)] = [
            (["frobnicate"], nil),
            (["--json"], nil),
            (["help", "nope"], nil),
            (["status", "extra"], "status"),
            (["status", "--bogus"], "status"),
            (["status", "--json=yes"], "status"),
            (["status", "--control"], "status"),
            (["grant"], "grant"),
            (["deny", "a", "b"], "deny"),
            (["reset", ""], "reset"),
            (["agent", "--answer", "maybe"], "agent"),
            (["agent", "--answer"], "agent"),
            (["run"], "run"),
            (["run", "--"], "run"),
            (["run", "--app-id", "bad/id", "--", "x"], "run"),
            (["run", "--app-id", "", "--", "x"], "run"),
            (["run", "--purpose", "", "--", "x"], "run"),
            (["run", "--weird", "--", "x"], "run"),
            (["run", "--purpose"], "run"),
            (["log", "--since", "yesterday"], "log"),
            (["log", "--app"], "log"),
            (["log", "extra"], "log"),
        ]
        for (args, sub) in cases {
            guard let e = usage(ClientCommandLine.parse(args)) else {
                Issue.record("\(args) should be a usage error")
                continue
            }
            #expect(e.subcommand == sub, "\(args)")
            #expect(!e.message.isEmpty && !e.message.contains("\n"), "\(args)")
        }
    }

    @Test func appIDs() {
        #expect(ClientCommandLine.isValidAppID("org.example.Notes"))
        #expect(ClientCommandLine.isValidAppID("a_b-1"))
        #expect(!ClientCommandLine.isValidAppID(""))
        #expect(!ClientCommandLine.isValidAppID("../etc"))
        #expect(!ClientCommandLine.isValidAppID("-x"))
        #expect(!ClientCommandLine.isValidAppID("a b"))
        #expect(!ClientCommandLine.isValidAppID(String(repeating: "a", count: 256)))
    }

    @Test func everySubcommandHasHelp() {
        for sub in ClientCommandLine.subcommands {
            let text = ClientUsage.text(for: sub)
            #expect(text.hasPrefix("usage: earmuff \(sub)"), "\(sub)")
        }
        for sub in CommandTable.visible.map(\.name) {
            #expect(ClientUsage.overview.contains("  \(sub) "), "\(sub)")
        }
    }
}

@Suite struct ClientPresentationTests {
    @Test func defaultPaths() {
        #expect(ClientPaths.controlSocket(environment: ["XDG_RUNTIME_DIR": "/run/user/7"], uid: 7) == "/run/user/7/earmuff/control")
        #expect(ClientPaths.clientSocket(environment: [:], uid: 1000) == "/run/user/1000/earmuff/native")
        #expect(ClientPaths.controlSocket(environment: ["XDG_RUNTIME_DIR": "relative"], uid: 5) == "/run/user/5/earmuff/control")
    }

    @Test func pulsePropQuotesLikeLibpulse() {
        #expect(PulseProp.pair("application.capture.purpose", "voice notes") == #"application.capture.purpose="voice notes""#)
        #expect(PulseProp.pair("k", #"say "hi" \ bye"#) == #"k="say \"hi\" \\ bye""#)
        #expect(PulseProp.appending("k", "v", to: nil) == #"k="v""#)
        #expect(PulseProp.appending("k", "v", to: "  ") == #"k="v""#)
        #expect(PulseProp.appending("k", "v", to: "media.role=phone") == #"media.role=phone k="v""#)
    }

    @Test func tablesAlignColumns() {
        var t = TextTable(["APP", "STATE", "REASON"])
        t.add(["exe:/usr/bin/parecord", "granted", "user"])
        t.add(["x:y", "denied", ""])
        #expect(
            t.render() == """
                APP                    STATE    REASON
                exe:/usr/bin/parecord  granted  user
                x:y                    denied

                """)
    }

    @Test func durationsAndSizes() {
        #expect(ClientFormat.duration(42) == "42s")
        #expect(ClientFormat.duration(307) == "5m 07s")
        #expect(ClientFormat.duration(3723) == "1h 02m")
        #expect(ClientFormat.duration(3 * 86400 + 4 * 3600 + 5) == "3d 4h")
        #expect(ClientFormat.bytes(512) == "512 B")
        #expect(ClientFormat.bytes(1536) == "1.5 KiB")
        #expect(ClientFormat.cell("a\nb") == "a b")
        #expect(ClientFormat.cell(nil) == "-")
        #expect(ClientFormat.cell(String(repeating: "x", count: 10), max: 5) == "xxxx…")
    }

    @Test func statusReportShowsEverySection() {
        let out = ClientFormat.status(Sample.status)
        #expect(out.contains("pid 42, version 0.1.0, up 1h 02m"))
        #expect(out.contains("unix:/run/user/1000/pulse/native (reachable)"))
        #expect(out.contains("clients: 1"))
        #expect(out.contains("capture streams: 1"))
        #expect(out.contains("silenced"))
        #expect(out.contains("86.1 KiB"))
        #expect(out.contains("pending prompts: 1"))
        #expect(out.contains("test \"quotes\" and newline"))
    }

    @Test func appsTable() {
        let utc = TimeZone(identifier: "UTC")! // a fixed, always-present zone
        let out = ClientFormat.apps([Sample.app], timeZone: utc)
        let lines = out.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("APP"))
        #expect(lines[1].contains("flatpak:org.mozilla.firefox"))
        #expect(lines[1].contains("2023-11-14 22:15"))
        #expect(ClientFormat.apps([]) == "no known apps\n")
    }

    @Test func lifespansInTablesAndDecisions() {
        let utc = TimeZone(identifier: "UTC")! // a fixed, always-present zone
        let timed = AppInfo(
            key: "exe:/usr/bin/pacat", state: .granted, reason: .user, lifespan: .timed,
            expiresAt: 1_700_000_000, afterwards: .denied)
        #expect(ClientFormat.state(timed, timeZone: utc) == "granted until 2023-11-14 22:13, then denied")
        #expect(
            ClientFormat.decision(timed, timeZone: utc)
                == "exe:/usr/bin/pacat: microphone granted until 2023-11-14 22:13 (user), then denied\n")
        let session = AppInfo(key: "x:y", state: .denied, reason: .user, lifespan: .session, afterwards: .undetermined)
        #expect(ClientFormat.decision(session) == "x:y: microphone denied this session (user), then undetermined\n")
        let always = AppInfo(key: "x:y", state: .granted, reason: .user, lifespan: .always)
        #expect(ClientFormat.decision(always) == "x:y: microphone granted (user)\n")
        #expect(ClientFormat.apps([timed], timeZone: utc).contains("granted until 2023-11-14 22:13, then denied"))
        var status = Sample.status
        status.temporary = [timed, session]
        let out = ClientFormat.status(status)
        #expect(out.contains("temporary decisions: 2"), "\(out)")
        #expect(out.contains("this session"), "\(out)")
    }

    @Test func promptShowsWhatTheSpecAsks() {
        let p = Sample.status.prompts[0]
        let out = ClientFormat.prompt(p)
        for needle in ["parecord", "exe:/usr/bin/parecord", "identified by exe", "1234", "test \"quotes\"", "sine"] {
            #expect(out.contains(needle), "\(needle)")
        }
    }
}

@Suite struct CaptureKindWording {
    static func prompt(kind: Capability?, source: String) -> PromptInfo {
        PromptInfo(id: 1, appKey: "exe:/usr/bin/obs", identifiedBy: .executable, source: source, executable: "/usr/bin/obs", kind: kind)
    }

    @Test func promptsNameWhatIsCaptured() {
        let mic = Self.prompt(kind: .microphone, source: "mic")
        #expect(PromptWording.title(mic) == "obs wants to use your microphone")
        #expect(PromptWording.device(mic) == "microphone mic")
        let system = Self.prompt(kind: .systemAudio, source: "out.monitor")
        #expect(PromptWording.title(system) == "obs wants to record what your computer plays")
        #expect(PromptWording.device(system) == "system audio (out.monitor)")
        let app = Self.prompt(kind: .appAudio, source: "out.monitor")
        #expect(PromptWording.title(app) == "obs wants to record another app's audio")
        #expect(PromptWording.device(app) == "another app's audio (out.monitor)")
        // From a daemon that does not say the kind, a monitor is still named as system audio.
        #expect(PromptWording.kind(Self.prompt(kind: nil, source: "out.monitor")) == .systemAudio)
    }

    @Test func tablesShowTheKind() {
        let apps = ClientFormat.apps([AppInfo(key: "exe:/usr/bin/obs", state: .granted, reason: .user, kind: .systemAudio)])
        #expect(apps.contains("KIND") && apps.contains("system-audio"), "\(apps)")
        #expect(
            ClientFormat.decision(AppInfo(key: "exe:/usr/bin/obs", state: .denied, reason: .user, kind: .appAudio))
                == "exe:/usr/bin/obs: app-audio denied (user)\n")
        let line = ClientFormat.event(
            .streamChanged(
                StreamInfo(
                    client: 1, stream: 0, appKey: "exe:/usr/bin/obs",
                    source: "out.monitor", sampleSpec: "s16le 1ch 48000Hz",
                    audio: .silenced, kind: .systemAudio)), at: 0)
        #expect(line.contains("system-audio from out.monitor now silenced"), "\(line)")
    }
}

/// Each identity says what it resists: the app's own sandbox at most, never a program of yours outside it.
@Suite struct IdentityStrengthWording {
    static func prompt(_ method: String, _ strength: String) -> PromptInfo {
        PromptInfo(
            id: 1, appKey: "\(method):x", identifiedBy: IdentificationMethod(rawValue: method)!, source: "mic",
            strength: IdentityStrength(rawValue: strength)!)
    }

    @Test func sandboxIdentitiesSayWhoElseCanBuildThem() {
        let flatpak = PromptWording.identity(Self.prompt("flatpak", "sandbox"))
        #expect(
            flatpak.contains("strong against its sandbox only") && flatpak.contains("app-flatpak-ID-N.scope")
                && flatpak.contains("/.flatpak-info"), "\(flatpak)")
        #expect(PromptWording.identity(Self.prompt("snap", "sandbox")).contains("aa-exec"))
        #expect(PromptWording.identity(Self.prompt("launcher", "sandbox")).contains("earmuff run with the same --app-id"))
        #expect(PromptWording.identity(Self.prompt("exe", "weak")).contains("weak: any program of yours could pose as it"))
        for method in ["flatpak", "snap", "launcher", "exe"] {
            #expect(!PromptWording.identity(Self.prompt(method, "sandbox")).contains("strong:"))
        }
    }

    @Test func tablesLabelTheStrength() {
        let apps = ClientFormat.apps([
            AppInfo(
                key: "flatpak:org.example.App", state: .granted, reason: .user,
                identifiedBy: .flatpak, strength: .sandbox)
        ])
        #expect(apps.contains("flatpak, strong against its sandbox only"), "\(apps)")
        let line = ClientFormat.event(
            .clientConnected(
                ClientInfo(
                    id: 1, appKey: "exe:/usr/bin/obs", identifiedBy: "exe",
                    strength: .weak)), at: 0)
        #expect(line.contains("by exe, weak"), "\(line)")
    }
}
