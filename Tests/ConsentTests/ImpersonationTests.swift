// Identities that must not be borrowed: code loaded from outside a program,
// processes that hide from /proc, mount namespaces without sandbox metadata,
// and Flatpak metadata that the user's systemd does not confirm.
import Testing
@testable import Consent

private let userScope = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/vte-spawn-0b7a3b5e.scope\n"

private func facts(
    exe: String = "/usr/bin/pacat", cmdline: [String] = ["pacat"], env: [String: String] = [:],
    complete: Bool = true, cgroup: String? = userScope
) -> ProcessFacts {
    ProcessFacts(
        pid: 4242, uid: 1000, gid: 1000, exe: exe, cmdline: cmdline, cwd: "/home/ann",
        apparmorLabel: "unconfined\n", cgroup: cgroup, environment: env, environmentComplete: complete)
}

@Suite struct CodeLoadedFromOutside {
    @Test func cleanProgramKeepsItsKey() {
        let id = IdentityClassifier.classify(facts(env: ["HOME": "/home/ann"]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat")
        #expect(id.caveat == nil)
        #expect(id.strength == .weak)
    }

    @Test(arguments: ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GST_PLUGIN_PATH", "GTK3_MODULES"])
    func linkerAndToolkitVariablesChangeTheKey(name: String) {
        let id = IdentityClassifier.classify(facts(env: [name: "/tmp/evil"]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat?\(name)=/tmp/evil")
        #expect(id.caveat?.contains(name) == true)
    }

    @Test(arguments: [
        "/usr/${LIB}/pipewire-0.3/jack", "/usr/lib/x86_64-linux-gnu/pipewire-0.3/jack",
        "/usr/lib64/pipewire-0.3/jack",
    ])
    func pwJacksLibraryDirectoryKeepsTheKey(path: String) {
        let id = IdentityClassifier.classify(facts(env: ["LD_LIBRARY_PATH": path]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat")
    }

    @Test(arguments: [
        "/usr/${LIB}/pipewire-0.3/jack:/tmp/evil", "/home/ann/pipewire-0.3/jack",
        "/usr/lib/../../tmp/pipewire-0.3/jack", "/usr/lib/x/../../../tmp/pipewire-0.3/jack",
    ])
    func anythingBesidePwJacksDirectoryChangesTheKey(path: String) {
        let id = IdentityClassifier.classify(facts(env: ["LD_LIBRARY_PATH": path]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat?LD_LIBRARY_PATH=\(path)")
    }

    @Test func anEmptyVariableLoadsNothing() {
        #expect(IdentityClassifier.classify(facts(env: ["LD_PRELOAD": ""])).appKey.description == "exe:/usr/bin/pacat")
    }

    @Test func findingsAreSortedSoTheKeyIsStable() {
        let id = IdentityClassifier.classify(facts(env: ["LD_PRELOAD": "/a.so", "LD_AUDIT": "/b.so"]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat?LD_AUDIT=/b.so&LD_PRELOAD=/a.so")
    }

    @Test func anEnvironmentTooLargeToReadIsAFinding() {
        let id = IdentityClassifier.classify(facts(complete: false))
        #expect(id.appKey.description == "exe:/usr/bin/pacat?environment-unreadable")
    }

    @Test func pythonPathBeforeTheScript() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/usr/bin/python3.11", cmdline: ["python3", "/srv/memo.py"],
                env: ["PYTHONPATH": "/tmp/dir"]))
        #expect(id.appKey.description == "script:/srv/memo.py?PYTHONPATH=/tmp/dir")
        #expect(id.script == "/srv/memo.py")
        #expect(id.method == .script)
    }

    @Test func pythonIgnoringItsEnvironmentKeepsTheKey() {
        for flag in ["-E", "-I", "-Es"] {
            let id = IdentityClassifier.classify(
                facts(
                    exe: "/usr/bin/python3.11", cmdline: ["python3", flag, "/srv/memo.py"],
                    env: ["PYTHONPATH": "/tmp/dir"]))
            #expect(id.appKey.description == "script:/srv/memo.py", "\(flag)")
        }
    }

    @Test func anotherLanguagesVariablesDoNotCount() {
        let id = IdentityClassifier.classify(facts(env: ["PYTHONPATH": "/tmp/dir", "NODE_OPTIONS": "-r x"]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat")
    }

    @Test(arguments: [
        (["node", "--require", "/tmp/evil.js", "/srv/app.js"], "/usr/bin/node", "script:/srv/app.js?--require /tmp/evil.js"),
        (["node", "-r", "/tmp/evil.js", "/srv/app.js"], "/usr/bin/node", "script:/srv/app.js?-r/tmp/evil.js"),
        (["node", "--import=/tmp/evil.mjs", "/srv/app.js"], "/usr/bin/node", "script:/srv/app.js?--import=/tmp/evil.mjs"),
        (["perl", "-I/tmp/dir", "-MEvil", "/srv/app.pl"], "/usr/bin/perl", "script:/srv/app.pl?-I/tmp/dir&-MEvil"),
        (["perl", "-I", "/tmp/dir", "/srv/app.pl"], "/usr/bin/perl", "script:/srv/app.pl?-I/tmp/dir"),
        (["ruby", "-r", "evil", "/srv/app.rb"], "/usr/bin/ruby3.1", "script:/srv/app.rb?-revil"),
        (["java", "-javaagent:/tmp/a.jar", "-jar", "/srv/app.jar"], "/usr/bin/java", "script:/srv/app.jar?-javaagent:/tmp/a.jar"),
        (["lua", "-l", "evil", "/srv/app.lua"], "/usr/bin/lua5.4", "script:/srv/app.lua?-levil"),
    ])
    func interpreterOptionsThatLoadCode(cmdline: [String], exe: String, key: String) {
        #expect(IdentityClassifier.classify(facts(exe: exe, cmdline: cmdline)).appKey.description == key)
    }

    @Test func perlEnvironmentAndOptionsTogether() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/usr/bin/perl", cmdline: ["perl", "-MEvil", "/srv/app.pl"],
                env: ["PERL5LIB": "/tmp/lib"]))
        #expect(id.appKey.description == "script:/srv/app.pl?PERL5LIB=/tmp/lib&-MEvil")
    }

    @Test func ordinaryOptionsLoadNothing() {
        let id = IdentityClassifier.classify(facts(exe: "/usr/bin/perl", cmdline: ["perl", "-w", "-l", "/srv/app.pl"]))
        #expect(id.appKey.description == "script:/srv/app.pl")
    }

    @Test func relevantVariableNames() {
        #expect(CodeInjection.isRelevant("LD_PRELOAD"))
        #expect(CodeInjection.isRelevant("PYTHONSTARTUP"))
        #expect(CodeInjection.isRelevant("LUA_INIT_5_4"))
        #expect(!CodeInjection.isRelevant("HOME"))
        #expect(!CodeInjection.isRelevant("PYTHONDONTWRITEBYTECODE"))
    }
}

@Suite struct ProcessesThatHide {
    @Test func uninspectableGetsAKeyOfItsOwn() {
        let a = IdentityClassifier.classify(ProcessFacts(pid: 10, uid: 1000, gid: 1000, inspectable: false, startTime: 555))
        let b = IdentityClassifier.classify(ProcessFacts(pid: 11, uid: 1000, gid: 1000, inspectable: false, startTime: 556))
        #expect(a.appKey.description == "unknown:pid-10-555")
        #expect(a.appKey != b.appKey)
        #expect(a.isUninspectable && a.strength == .weak)
        #expect(a.appKey != AppKey(kind: "exe", value: "unknown"))
        // /proc its own, but the exe link unreadable (made non-dumpable after start): hidden too.
        let late = IdentityClassifier.classify(
            ProcessFacts(
                pid: 12, uid: 1000, gid: 1000, exe: nil, cmdline: ["memo"],
                startTime: 557))
        #expect(late.appKey.description == "unknown:pid-12-557" && late.isUninspectable)
    }

    @Test func aLauncherSocketStillVouches() {
        let id = IdentityClassifier.classify(
            ProcessFacts(
                pid: 10, uid: 1000, gid: 1000, launcherAppID: "org.example.Notes",
                inspectable: false))
        #expect(id.appKey.description == "launcher:org.example.Notes")
        #expect(id.strength == .sandbox)
    }

    @Test func anotherMountNamespaceShowsNoHostPaths() {
        var f = facts()
        f.foreignMountNamespace = true
        let id = IdentityClassifier.classify(f)
        #expect(id.appKey == IdentityClassifier.unknownSandboxKey)
        #expect(id.method == .sandboxed)
        f.launcherAppID = "org.example.Sandboxed"
        #expect(IdentityClassifier.classify(f).appKey.description == "launcher:org.example.Sandboxed")
    }
}

@Suite struct FlatpakCrossCheck {
    private static let info = "[Application]\nname=org.victim.Recorder\n"

    private func classify(cgroup: String?) -> ClientIdentity {
        var f = facts(exe: "/app/bin/recorder", cgroup: cgroup)
        f.flatpakInfo = Self.info
        f.foreignMountNamespace = true
        return IdentityClassifier.classify(f)
    }

    @Test func confirmedByItsScopeHoldsAgainstItsSandboxOnly() {
        let id = classify(cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.victim.Recorder-4242.scope\n")
        #expect(id.appKey.description == "flatpak:org.victim.Recorder")
        #expect(id.strength == .sandbox && id.caveat == nil)
    }

    @Test func forgedFromAHostShellIsNotTheApp() {
        // bubblewrap started from a terminal with a made-up /.flatpak-info: systemd runs it in the terminal's scope.
        let id = classify(cgroup: userScope)
        #expect(id.appKey == IdentityClassifier.unknownSandboxKey)
        #expect(id.caveat?.contains("org.victim.Recorder") == true)
        #expect(id.caveat?.contains("vte-spawn") == true)
    }

    @Test func anotherAppsFlatpakScopeDoesNotConfirm() {
        let id = classify(cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.other.App-1.scope\n")
        #expect(id.appKey == IdentityClassifier.unknownSandboxKey)
    }

    @Test func withoutAUserSystemdItIsWeak() {
        let id = classify(cgroup: "0::/\n")
        #expect(id.appKey.description == "flatpak:org.victim.Recorder")
        #expect(id.strength == .weak)
        #expect(id.caveat != nil)
    }
}

/// A volume control's `application.id` hides a recording from the desktop's indicator: only
/// the volume control itself, by its clean app key, may claim it.
@Suite struct VolumeControlClaims {
    static func key(exe: String, env: [String: String] = [:]) -> AppKey {
        IdentityClassifier.classify(facts(exe: exe, env: env)).appKey
    }

    @Test func theVolumeControlItselfMayClaimItsID() {
        #expect(VolumeControls.mayClaim("org.PulseAudio.pavucontrol", appKey: Self.key(exe: "/usr/bin/pavucontrol")))
        #expect(VolumeControls.mayClaim("org.gnome.VolumeControl", appKey: Self.key(exe: "/usr/bin/gnome-shell")))
        #expect(VolumeControls.mayClaim("org.kde.kmixd", appKey: Self.key(exe: "/usr/bin/kmix")))
    }

    @Test func anotherProgramMayNot() {
        #expect(!VolumeControls.mayClaim("org.PulseAudio.pavucontrol", appKey: Self.key(exe: "/usr/bin/pacat")))
        #expect(
            !VolumeControls.mayClaim("org.gnome.VolumeControl", appKey: Self.key(exe: "/usr/bin/pavucontrol")),
            "one volume control's id is not another's")
        #expect(
            !VolumeControls.mayClaim(
                "org.PulseAudio.pavucontrol",
                appKey: Self.key(exe: "/usr/bin/pavucontrol", env: ["LD_PRELOAD": "/tmp/rec.so"])),
            "code loaded into the volume control makes it another app")
    }

    @Test func anIDThatIsNoVolumeControlsIsAnyonesToClaim() {
        #expect(VolumeControls.mayClaim("org.example.Recorder", appKey: Self.key(exe: "/usr/bin/pacat")))
        #expect(VolumeControls.disownedKey.utf8.count == VolumeControls.claimKey.utf8.count, "a renamed claim keeps the packet's length")
    }
}
