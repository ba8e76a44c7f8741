// Step 2 of the app-name rules: the daemon matches a name with the apps it knows,
// by what the kernel said, never by what an app calls itself alone.
import Testing
@testable import Consent

@Suite struct AppNameMatchTests {
    private func app(
        _ key: String, name: String? = nil, exe: String? = nil,
        method: IdentificationMethod? = .executable
    ) -> AppNameResolver.Candidate {
        AppNameResolver.Candidate(key: AppKey(parsing: key)!, displayName: name, method: method, executable: exe)
    }

    @Test func anAppKeyIsTakenAsItIs() {
        #expect(AppNameResolver.match("exe:/usr/bin/pacat", among: []) == .success(AppKey(parsing: "exe:/usr/bin/pacat")!))
        #expect(AppNameResolver.match("nonsense:", among: []) == .failure(.notAnAppKey("nonsense:")))
    }

    @Test func aNameIsTheExecutableOrTheKeysLastComponent() {
        let apps = [
            app("exe:/usr/bin/aplay", name: "arecord", exe: "/usr/bin/aplay"),
            app("flatpak:org.mozilla.firefox", name: "Firefox", method: .flatpak),
        ]
        #expect(AppNameResolver.match("aplay", among: apps) == .success(apps[0].key))
        #expect(AppNameResolver.match("/usr/bin/aplay", among: apps) == .success(apps[0].key))
        #expect(AppNameResolver.match("org.mozilla.firefox", among: apps) == .success(apps[1].key))
    }

    @Test func whatAnAppCallsItselfNeverPicksIt() {
        let apps = [app("exe:/tmp/evil", name: "Firefox", exe: "/tmp/evil")]
        let r = AppNameResolver.match("Firefox", among: apps)
        #expect(r == .failure(.onlyClaimed("Firefox", apps)))
        #expect(
            r.failure?.description == "\"Firefox\" is only what exe:/tmp/evil (identified by exe, calls itself Firefox) "
                + "calls itself, which any app can claim; give the app key")
    }

    @Test func twoAppsOfOneNameAreAmbiguousAndAKeyTwiceIsOne() {
        let stored = app("exe:/usr/bin/python3", exe: "/usr/bin/python3")
        let live = app("exe:/usr/bin/python3", name: "py", exe: "/usr/bin/python3")
        #expect(AppNameResolver.match("python3", among: [stored, live]) == .success(stored.key))
        let other = app("exe:/opt/python3", exe: "/opt/python3", method: nil)
        let r = AppNameResolver.match("python3", among: [stored, other, live])
        #expect(r == .failure(.ambiguous("python3", [stored, other])))
        #expect(
            r.failure?.description == "\"python3\" matches exe:/opt/python3 (identified by ?), exe:/usr/bin/python3 "
                + "(identified by exe); give the app key")
        #expect(
            AppNameResolver.match("zoom", among: [stored]).failure?.description
                == "no known app is called \"zoom\"; list them with 'earmuff apps' or give an app key such as exe:/usr/bin/zoom")
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}

/// What the engine keeps of apps, for replies and name lookups without reading the store back.
@Suite struct KnownAppTests {
    private let aplay = AppKey(kind: "exe", value: "/usr/bin/aplay")
    private let declared = AppKey(kind: "flatpak", value: "org.example.Notes")

    @Test func recordsMergeAsTheStoreMergesThem() {
        let stored = AppRecord(
            appKey: aplay, displayName: "arecord", executable: "/usr/bin/aplay", method: .executable,
            firstSeenAt: 10, lastSeenAt: 20)
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [], apps: [stored])
        let identity = ClientIdentity(pid: 5, uid: 1000, gid: 1000, appKey: aplay, method: .executable, executable: nil)
        let actions = e.clientConnected(ClientID(1), identity: identity, launcherPurpose: nil, now: 30)
        // The store is told what the client said; the engine keeps the name and executable it knew.
        #expect(
            actions.contains(
                .recordApp(
                    AppRecord(
                        appKey: aplay, displayName: nil, executable: nil, method: .executable,
                        firstSeenAt: 30, lastSeenAt: 30))))
        #expect(
            e.knownApp(aplay)
                == AppRecord(
                    appKey: aplay, displayName: "arecord", executable: "/usr/bin/aplay",
                    method: .executable, firstSeenAt: 10, lastSeenAt: 30))
        _ = e.clientPropertiesChanged(ClientID(1), applicationName: "Voice Memo", processBinary: nil, capturePurpose: nil, now: 40)
        #expect(e.knownApp(aplay)?.displayName == "Voice Memo")
        #expect(e.knownApp(declared) == nil)
    }

    @Test func everySeenDecidedOrDeclaredAppCanBeNamed() throws {
        let policy = ConsentPolicy(declarations: [declared: AppDeclaration(purpose: "notes")])
        let decided = AppKey(kind: "exe", value: "/usr/bin/pacat")
        var e = ConsentEngine(policy: policy, decisions: [Decision(appKey: decided, state: .granted, reason: .user)])
        let identity = ClientIdentity(pid: 5, uid: 1000, gid: 1000, appKey: aplay, method: .executable, executable: "/usr/bin/aplay")
        _ = e.clientConnected(ClientID(1), identity: identity, launcherPurpose: nil, now: 1)
        let keys = e.nameableApps.map(\.key)
        // Each known app once by key, then each live client.
        #expect(keys == [declared, aplay, decided].sorted() + [aplay])
        #expect(AppNameResolver.match("pacat", among: e.nameableApps) == .success(decided))
        #expect(AppNameResolver.match("aplay", among: e.nameableApps) == .success(aplay))
        #expect(e.storedDecision(for: decided, kind: .microphone)?.state == .granted)
        #expect(e.storedDecision(for: decided, kind: .systemAudio) == nil)
    }
}

/// The one name every view gives an app (`AppNameResolver.shownName`).
@Suite struct ShownNameTests {
    private func name(_ key: String, system: String? = nil, command: String? = nil, exe: String? = nil) -> String {
        AppNameResolver.shownName(appKey: key, systemName: system, commandName: command, executable: exe)
    }

    @Test func theDesktopEntryThenTheIDOrScriptThenTheLinkThenTheExecutable() {
        // pw-record is a link to pw-cat: named as it was started, not by the file the kernel reports.
        #expect(name("exe:/usr/bin/pw-cat", command: "pw-record", exe: "/usr/bin/pw-cat") == "pw-record")
        #expect(name("exe:/usr/bin/pw-cat", exe: "/usr/bin/pw-cat") == "pw-cat")
        #expect(name("exe:/usr/bin/pacat", system: "Sound Recorder", command: "parecord", exe: "/usr/bin/pacat") == "Sound Recorder")
        // An ID the sandbox gave, rather than whatever binary runs inside it.
        #expect(name("flatpak:org.mozilla.firefox", exe: "/app/lib/firefox/firefox") == "org.mozilla.firefox")
        #expect(name("launcher:memo", command: "rec", exe: "/usr/bin/pacat") == "memo")
        // A script, not its interpreter (nor what was preloaded into it).
        #expect(name("script:/home/u/bin/memo.py?LD_PRELOAD=/tmp/x.so", command: "python3", exe: "/usr/bin/python3.11") == "memo.py")
        #expect(name("exe:/usr/bin/pacat?LD_PRELOAD=/tmp/x.so") == "pacat")
        // Never empty, and never "-": the key names it when nothing else does.
        #expect(name("exe:/usr/bin/pacat", system: "", command: "", exe: "") == "pacat")
        #expect(name("unknown:pid-7-42") == "pid-7-42")
        #expect(name("nonsense") == "nonsense")
    }

    @Test func theEngineKeepsTheCommandEachAppWasLastStartedAs() throws {
        let pwcat = AppKey(kind: "exe", value: "/usr/bin/pw-cat")
        var e = ConsentEngine(policy: ConsentPolicy(), decisions: [])
        let identity = ClientIdentity(pid: 5, uid: 1000, gid: 1000, appKey: pwcat, method: .executable, executable: pwcat.value)
        _ = e.clientConnected(ClientID(1), identity: identity, launcherPurpose: "memo", commandName: "pw-record", now: 1)
        #expect(e.clientSnapshots.first?.commandName == "pw-record")
        #expect(e.commandName(of: pwcat) == "pw-record")
        let started = e.recordStreamStarted(ClientID(1), stream: StreamID(1), source: "mic", kind: .microphone, now: 2)
        let prompt = try #require(prompts(in: started.actions).first)
        #expect(prompt.commandName == "pw-record", "the prompt names it as status and apps do")
        _ = e.clientDisconnected(ClientID(1), now: 3)
        #expect(e.commandName(of: pwcat) == "pw-record", "still its name once it is gone")
        _ = e.clientConnected(ClientID(2), identity: identity, launcherPurpose: "memo", commandName: "pw-play", now: 4)
        #expect(e.commandName(of: pwcat) == "pw-play", "the command it was last started as")
        _ = e.clientConnected(ClientID(3), identity: identity, launcherPurpose: "memo", commandName: nil, now: 5)
        #expect(e.commandName(of: pwcat) == "pw-play", "kept as the store keeps it")
        let restarted = ConsentEngine(policy: ConsentPolicy(), decisions: [], apps: [try #require(e.knownApp(pwcat))])
        #expect(restarted.commandName(of: pwcat) == "pw-play")
    }
}
