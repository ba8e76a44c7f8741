// What the settings window shows for control payloads, and which request a click sends.
import ControlProtocol
import SettingsModel
import Testing

@Suite struct SettingsViewTests {
    static let now = 1_800_000_000.0
    static let daemon = DaemonInfo(
        pid: 1, version: "0.1.0", listenPath: "/run/user/1000/pulse/native",
        controlPath: "/run/user/1000/earmuff/control", storePath: "/s", uptimeSeconds: 5,
        sessionSocket: true)

    static func state(
        apps: [AppInfo], streams: [StreamInfo] = [], prompts: [PromptInfo] = [],
        access: [AccessInfo] = [], daemon: DaemonInfo = daemon
    ) -> SettingsState {
        var s = SettingsState()
        s.load(
            status: StatusPayload(
                daemon: daemon, upstream: UpstreamInfo(server: "unix:/x", reachable: true),
                streams: streams, prompts: prompts, access: access))
        s.apps = apps
        return s
    }

    static let firefox = AppInfo(
        key: "flatpak:org.mozilla.firefox", displayName: "Firefox", state: .granted, reason: .user,
        purpose: "Video calls", identifiedBy: .flatpak, lastUsed: now - 300, executable: "/app/lib/firefox/firefox",
        strength: .sandbox)
    static let recorder = AppInfo(
        key: "exe:/usr/bin/pacat", state: .undetermined, reason: .none, identifiedBy: .executable,
        executable: "/usr/bin/pacat", kind: .microphone, strength: .weak)
    static let monitor = AppInfo(
        key: "exe:/usr/bin/obs", displayName: "OBS", state: .denied, reason: .user,
        identifiedBy: .executable, kind: .systemAudio, lifespan: .session)

    @Test func eachKindPageListsItsAppsWithTheirChoice() {
        let v = SettingsView(Self.state(apps: [Self.firefox, Self.recorder, Self.monitor]), now: Self.now)
        #expect(v.pages.map(\.kind) == [.microphone, .systemAudio, .appAudio])
        #expect(v.pages[0].rows.map(\.title) == ["org.mozilla.firefox", "pacat"], "a Flatpak is not named by its ID")
        #expect(v.pages[0].rows.map(\.choice) == [.allow, .ask])
        #expect(v.pages[1].rows.map(\.title) == ["obs"], "a program is not named as it calls itself")
        #expect(v.pages[0].rows[0].subtitle == "“Video calls”\nLast recorded 5 minutes ago")
        #expect(v.pages[0].rows[0].icon == "org.mozilla.firefox")
        #expect(v.pages[0].rows[1].subtitle == "Never recorded")
        #expect(v.pages[1].rows[0].choice == .deny && v.pages[1].rows[0].lifespanNote == "Denied until you log out")
        #expect(v.pages[2].rows.isEmpty && v.pages[2].empty == "No app has asked to record other apps' audio yet.")
        #expect(v.notice == nil)
    }

    @Test func identityDetailsAreOneClickAway() {
        let row = SettingsView(Self.state(apps: [Self.recorder]), now: Self.now).pages[0].rows[0]
        #expect(row.details.map(\.0) == ["Identified as", "How", "How sure", "Program"])
        #expect(row.details[0].1 == "exe:/usr/bin/pacat")
        #expect(row.details[2].1 == "Any program of yours could pass for it")
    }

    @Test func liveMarksFollowTheStreamsOfTheirKind() {
        let stream = StreamInfo(
            client: 1, stream: 0, appKey: Self.firefox.key, source: "mic", sampleSpec: "s16le 1ch 48000Hz",
            audio: .real, kind: .microphone)
        var s = Self.state(apps: [Self.firefox, Self.monitor])
        #expect(SettingsView(s, now: Self.now).pages[0].rows[0].live == nil)
        #expect(s.apply(.streamStarted(stream)).isEmpty)
        var v = SettingsView(s, now: Self.now)
        #expect(v.pages[0].rows[0].live == .real)
        #expect(v.pages[0].rows[0].subtitle == "“Video calls”", "no last-recorded line while it records")
        #expect(v.pages[1].rows[0].live == nil, "a microphone stream marks the system audio row")
        var silenced = stream
        silenced.audio = .silenced
        _ = s.apply(.streamChanged(silenced))
        v = SettingsView(s, now: Self.now)
        #expect(v.pages[0].rows[0].live == .silenced)
        #expect(s.apply(.streamEnded(silenced)) == [.apps, .usage])
        #expect(SettingsView(s, now: Self.now).pages[0].rows[0].live == nil)

        _ = s.apply(.streamStarted(stream))
        var renamed = stream
        renamed.stream = 99
        #expect(s.apply(.streamEnded(renamed)) == [.apps, .usage, .streams], "an end it cannot place is not refetched")
        _ = s.apply(.clientDisconnected(ClientInfo(id: 1, appKey: stream.appKey, identifiedBy: "flatpak")))
        #expect(s.streams.isEmpty, "a disconnected client's streams are still live")
    }

    /// An app granted before it ever ran is named by its key until its first stream, after
    /// which the daemon knows the command it runs as: that stream asks for the app list.
    @Test func theFirstStreamOfAnAppDecidedBeforeItRanAsksForItsName() {
        var s = Self.state(apps: [Self.recorder])
        let stream = StreamInfo(client: 2, stream: 0, appKey: Self.recorder.key, source: "mic", sampleSpec: "", audio: .real)
        #expect(s.apply(.streamStarted(stream)) == .apps)
        var named = Self.recorder
        named.commandName = "parecord"
        s.apps = [named]
        #expect(s.apply(.streamStarted(stream)).isEmpty)
    }

    @Test func anEventOfAnUnknownAppAsksForTheAppList() {
        var s = Self.state(apps: [Self.firefox])
        let other = StreamInfo(client: 2, stream: 0, appKey: "exe:/usr/bin/new", source: "mic", sampleSpec: "", audio: .silenced)
        #expect(s.apply(.streamStarted(other)) == .apps)
        var decided = Self.firefox
        decided.state = .denied
        #expect(s.apply(.decisionChanged(decided)).isEmpty)
        #expect(SettingsView(s, now: Self.now).pages[0].rows[0].choice == .deny)
        var otherKind = Self.firefox
        otherKind.kind = .appAudio
        #expect(s.apply(.decisionChanged(otherKind)) == .apps, "a decision of another kind replaced the microphone's")
    }

    @Test func aDesktopEntryNamesTheRowAndGivesItsIcon() {
        var recorder = Self.recorder
        recorder.systemName = "Sound Recorder"
        recorder.icon = "org.gnome.SoundRecorder"
        var flatpak = Self.firefox
        flatpak.systemName = "Firefox Web Browser"
        var s = Self.state(apps: [recorder, flatpak])
        var rows = SettingsView(s, now: Self.now).pages[0].rows
        #expect(rows.map(\.title) == ["Firefox Web Browser", "Sound Recorder"], "the system's name, even for a Flatpak")
        #expect(rows.map(\.icon) == ["org.mozilla.firefox", "org.gnome.SoundRecorder"])
        #expect(rows.map(\.fallbackIcon) == ["org.mozilla.firefox", "application-x-executable"])

        // A decision's event says nothing of the app: the row keeps its name, icon and details.
        let decided = AppInfo(key: recorder.key, state: .granted, reason: .user, kind: .microphone, lifespan: .always)
        #expect(s.apply(.decisionChanged(decided)).isEmpty)
        rows = SettingsView(s, now: Self.now).pages[0].rows
        #expect(rows[1].title == "Sound Recorder" && rows[1].icon == "org.gnome.SoundRecorder" && rows[1].choice == .allow)
        #expect(rows[1].details.map(\.0) == ["Identified as", "How", "How sure", "Program"])
    }

    /// The window names an app as its prompt, `status` and `apps` do: pw-record, a link to pw-cat.
    @Test func rowsPromptsAndHistoryNameAnAppAsEverythingElseDoes() {
        let key = "exe:/usr/bin/pw-cat"
        let app = AppInfo(
            key: key, displayName: "PipeWire Record", state: .undetermined, reason: .none,
            identifiedBy: .executable, executable: "/usr/bin/pw-cat", kind: .microphone, commandName: "pw-record")
        let prompt = PromptInfo(
            id: 3, appKey: key, displayName: "PipeWire Record", identifiedBy: .executable,
            executable: "/usr/bin/pw-cat", kind: .microphone, commandName: "pw-record")
        var s = Self.state(apps: [app], prompts: [prompt])
        s.usage = [UsageInfo(appKey: key, kind: "microphone", source: "mic", startedAt: Self.now - 60, endedAt: Self.now - 30)]
        let v = SettingsView(s, now: Self.now)
        #expect(v.pages[0].rows.map(\.title) == ["pw-record"])
        #expect(v.prompts.map(\.title) == ["pw-record wants to use your microphone"])
        #expect(v.history.first?.title == "pw-record · Microphone")
        #expect(v.pages[0].rows[0].title == app.shownName && prompt.shownName == app.shownName)
    }

    @Test func theMasterSwitchIsShownPerKind() {
        var s = Self.state(apps: [Self.firefox], access: [AccessInfo(kind: .microphone, enabled: false)])
        var v = SettingsView(s, now: Self.now)
        #expect(!v.pages[0].accessOn && v.pages[0].accessNote != nil)
        #expect(v.pages[1].accessOn && v.pages[1].accessNote == nil)
        _ = s.apply(.accessChanged(AccessInfo(kind: .microphone, enabled: true)))
        v = SettingsView(s, now: Self.now)
        #expect(v.pages[0].accessOn)
    }

    @Test func pendingPromptsAreAnswerable() {
        let p = PromptInfo(
            id: 7, appKey: "exe:/usr/bin/pacat", displayName: "pacat", identifiedBy: .executable,
            purpose: "Dictation", systemName: "Sound Recorder", kind: .microphone, accessOff: true)
        var s = Self.state(apps: [Self.recorder], prompts: [p])
        let v = SettingsView(s, now: Self.now)
        #expect(v.prompts.map(\.id) == [7] && v.prompts.map(\.kind) == [.microphone])
        #expect(v.prompts.first?.title == "Sound Recorder wants to use your microphone")
        // Worded as the dialog and the notification word it.
        #expect(
            v.prompts.first?.subtitle
                == [
                    "“Dictation”", "From your default microphone.",
                    "Not verified: any program of yours could use this name.",
                    "It calls itself “pacat”.",
                    "Access to the microphone is off: it records silence whatever you answer.",
                ]
                .joined(separator: "\n"))
        #expect(v.pages[0].rows[0].title == "Sound Recorder", "the system's name is not used for the row")
        #expect(s.apply(.promptResolved(PromptResolution(prompt: 7, appKey: p.appKey, outcome: .allow))) == .apps)
        #expect(SettingsView(s, now: Self.now).prompts.isEmpty)
    }

    @Test func clicksBecomeTheRequestsTheCLISends() {
        #expect(
            SettingsIntent.choose(key: "k", kind: .microphone, .allow).request
                == .setDecision(app: "k", state: .granted, reason: nil, kind: .microphone, lifespan: nil))
        #expect(
            SettingsIntent.choose(key: "k", kind: .systemAudio, .deny, .hour).request
                == .setDecision(app: "k", state: .denied, reason: nil, kind: .systemAudio, lifespan: .timed(seconds: 3600)))
        #expect(
            SettingsIntent.choose(key: "k", kind: .appAudio, .allow, .session).request
                == .setDecision(app: "k", state: .granted, reason: nil, kind: .appAudio, lifespan: .session))
        #expect(SettingsIntent.choose(key: "k", kind: .microphone, .ask).request == .reset(app: "k", kind: .microphone))
        #expect(SettingsIntent.setAccess(.microphone, on: false).request == .setAccess(kind: .microphone, enabled: false))
        #expect(SettingsIntent.answer(prompt: 3, allow: false).request == .answerPrompt(prompt: 3, answer: .deny, lifespan: nil))
    }

    @Test func honestNotices() {
        var s = SettingsState()
        #expect(SettingsView(s, now: Self.now).notice?.title == "Connecting to Earmuff…")
        s.lost(.notRunning(path: "/run/user/1000/earmuff/control"))
        let down = SettingsView(s, now: Self.now).notice
        #expect(down?.title == "Earmuff is not running")
        #expect(down?.detail.contains("/run/user/1000/earmuff/control") == true && down?.detail.contains("earmuff serve") == true)
        #expect(SettingsView(s, now: Self.now).pages.allSatisfy { $0.rows.isEmpty }, "stale rows while the daemon is away")
        s.lost(.refused(message: "too many subscribers"))
        let refused = SettingsView(s, now: Self.now).notice
        #expect(refused?.title == "Earmuff refused this window" && refused?.detail == "too many subscribers")
        var daemon = Self.daemon
        daemon.sessionSocket = false
        let bypassed = SettingsView(Self.state(apps: [], daemon: daemon), now: Self.now).notice
        #expect(bypassed?.title == "Apps do not go through Earmuff yet")
        #expect(bypassed?.detail.contains("earmuff setup") == true)
    }

    @Test func historyRowsSayWhatWasRecorded() {
        var s = Self.state(apps: [Self.firefox])
        s.usage = [
            UsageInfo(
                appKey: Self.firefox.key, kind: "microphone", source: "alsa_input.mic", startedAt: Self.now - 100,
                endedAt: Self.now - 10, realSeconds: 60, silencedSeconds: 30)
        ]
        let row = SettingsView(s, now: Self.now).history[0]
        #expect(row.title == "org.mozilla.firefox · Microphone")
        #expect(row.subtitle.hasSuffix("alsa_input.mic · 1 min real · 30 s silenced"), "\(row.subtitle)")
        #expect(TimeText.seconds(3725) == "1 h 2 min" && TimeText.ago(Self.now - 7200, now: Self.now) == "2 hours ago")
    }
}

@Suite struct SettingsCommandLineTests {
    @Test func optionsAreParsedAndBadOnesNamed() throws {
        let none = try SettingsCommandLine.parse([]).get()
        #expect(none.controlPath == nil && !none.help)
        #expect(try SettingsCommandLine.parse(["--control", "/run/x/control"]).get().controlPath == "/run/x/control")
        #expect(try SettingsCommandLine.parse(["-h"]).get().help)
        #expect(SettingsCommandLine.parse(["--control"]) == .failure(.init(message: "--control needs the control socket's path")))
        guard case .failure(let e) = SettingsCommandLine.parse(["--verbose"]) else {
            Issue.record("--verbose was accepted")
            return
        }
        #expect(e.message == "unknown argument '--verbose'")
        // Every option the parser takes is documented (the manual page is printed from the list).
        #expect(SettingsCommandLine.options.flatMap(\.names).sorted() == ["--control", "--help", "-h"])
    }
}
