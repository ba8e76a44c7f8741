import Testing
@testable import Consent

private let hostCgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/vte-spawn-0b7a3b5e-1c7f-4c1e-9a8e-3d2f3f0c1a2b.scope\n"

private func facts(
    exe: String? = "/usr/bin/arecord", cmdline: [String] = ["arecord"], cwd: String? = "/home/ann",
    flatpak: String? = nil, apparmor: String? = "unconfined\n", cgroup: String? = hostCgroup,
    launcher: String? = nil
) -> ProcessFacts {
    ProcessFacts(
        pid: 4242, uid: 1000, gid: 1000, exe: exe, cmdline: cmdline, cwd: cwd, flatpakInfo: flatpak,
        apparmorLabel: apparmor, cgroup: cgroup, launcherAppID: launcher)
}

private let firefoxInfo = """
    [Application]
    name=org.mozilla.firefox
    runtime=runtime/org.freedesktop.Platform/x86_64/23.08

    [Instance]
    instance-id=2316139651
    app-path=/var/lib/flatpak/app/org.mozilla.firefox/x86_64/stable/4d1e/files
    branch=stable
    arch=x86_64
    flatpak-version=1.14.4
    session-bus-proxy=true

    [Context]
    shared=network;ipc;
    sockets=x11;wayland;pulseaudio;

    """

@Suite struct IdentityPrecedence {
    @Test func flatpakBeatsEverything() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/app/lib/firefox/firefox", flatpak: firefoxInfo, apparmor: "snap.firefox.firefox (enforce)\n",
                cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.mozilla.firefox-51234.scope\n",
                launcher: "org.example.Other"))
        #expect(id.appKey == AppKey(kind: "flatpak", value: "org.mozilla.firefox"))
        #expect(id.method == .flatpak)
        #expect(id.executable == "/app/lib/firefox/firefox")
        #expect(id.pid == 4242 && id.uid == 1000 && id.gid == 1000)
    }

    @Test func snapBeatsScopeAndLauncher() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/snap/firefox/4336/usr/lib/firefox/firefox", apparmor: "snap.firefox.firefox (enforce)\n",
                cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox_firefox-9912.scope\n",
                launcher: "org.example.Other"))
        #expect(id.appKey.description == "snap:firefox")
        #expect(id.method == .snap)
    }

    @Test func launcherBeatsTheScopeItRunsIn() {
        let id = IdentityClassifier.classify(
            facts(
                cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.kde.konsole-1234.scope\n",
                launcher: "org.example.Notes"))
        #expect(id.appKey.description == "launcher:org.example.Notes")
        #expect(id.method == .launcher)
    }

    @Test func launcherBeatsExecutableAndScript() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/usr/bin/python3.12", cmdline: ["python3", "notes.py"],
                launcher: "org.example.Notes"))
        #expect(id.appKey.description == "launcher:org.example.Notes")
        #expect(id.method == .launcher)
        #expect(id.executable == "/usr/bin/python3.12")
    }

    @Test func emptyLauncherIDIsIgnored() {
        let id = IdentityClassifier.classify(facts(launcher: "  "))
        #expect(id.appKey.description == "exe:/usr/bin/arecord")
    }

    @Test func plainExecutable() {
        let id = IdentityClassifier.classify(facts(exe: "/usr/bin/pacat", cmdline: ["pacat", "-r"]))
        #expect(id.appKey.description == "exe:/usr/bin/pacat")
        #expect(id.method == .executable)
        #expect(id.script == nil)
    }

    @Test func deletedExecutableKeepsItsKey() {
        let id = IdentityClassifier.classify(facts(exe: "/usr/bin/arecord (deleted)"))
        #expect(id.appKey.description == "exe:/usr/bin/arecord")
        #expect(id.executable == "/usr/bin/arecord")
    }

    @Test func unreadableEverything() {
        let id = IdentityClassifier.classify(ProcessFacts(pid: 7, uid: 0, gid: 0))
        // Never a key that every unreadable process would share.
        #expect(id.appKey.description == "unknown:pid-7")
        #expect(id.method == .uninspectable)
        #expect(id.executable == nil)
    }

    @Test func interpreterWithoutScriptFallsBackToExecutable() {
        let id = IdentityClassifier.classify(facts(exe: "/usr/bin/python3.12", cmdline: ["python3", "-c", "import x"]))
        #expect(id.appKey.description == "exe:/usr/bin/python3.12")
        #expect(id.method == .executable)
    }

    @Test func scriptIdentity() {
        let id = IdentityClassifier.classify(
            facts(
                exe: "/usr/bin/python3.12",
                cmdline: ["/usr/bin/python3", "-u", "bin/rec.py", "--out", "x.wav"],
                cwd: "/home/ann/src"))
        #expect(id.appKey.description == "script:/home/ann/src/bin/rec.py")
        #expect(id.method == .script)
        #expect(id.script == "/home/ann/src/bin/rec.py")
    }
}

@Suite struct FlatpakInfo {
    @Test func readsApplicationName() {
        #expect(IdentityClassifier.flatpakAppID(fromInfo: firefoxInfo) == "org.mozilla.firefox")
    }

    @Test func crlfAndSpacesAroundEquals() {
        let text = "[Application]\r\nname = org.example.App\r\n"
        #expect(IdentityClassifier.flatpakAppID(fromInfo: text) == "org.example.App")
    }

    @Test func nameInAnotherGroupDoesNotCount() {
        let text = "[Runtime]\nname=org.freedesktop.Platform\n\n[Instance]\nname=x\n"
        #expect(IdentityClassifier.flatpakAppID(fromInfo: text) == nil)
    }

    @Test func emptyOrGarbage() {
        #expect(IdentityClassifier.flatpakAppID(fromInfo: "") == nil)
        #expect(IdentityClassifier.flatpakAppID(fromInfo: "[Application]\nname=\n") == nil)
        #expect(IdentityClassifier.flatpakAppID(fromInfo: "[Application]\nname=../../etc\n") == nil)
        #expect(IdentityClassifier.flatpakAppID(fromInfo: "\u{0}\u{1}binary") == nil)
    }
}

@Suite struct SnapLabels {
    @Test(arguments: [
        ("snap.firefox.firefox (enforce)\n", "firefox"),
        ("snap.audacity.audacity (complain)", "audacity"),
        ("snap.obs-studio.obs-studio (enforce)\n", "obs-studio"),
        ("snap.firefox_esr.firefox (enforce)\n", "firefox_esr"),
        ("snap.discord.hook.configure (enforce)\n", "discord"),
        ("snap.zoom-client.zoom-client (enforce)\u{0}", "zoom-client"),
    ])
    func snapNames(label: String, name: String) {
        #expect(IdentityClassifier.snapName(fromLabel: label) == name)
    }

    @Test(arguments: [
        "unconfined\n",
        "unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023\n",
        "/usr/bin/man (enforce)\n",
        "snap.firefox (enforce)\n",
        "snap..x (enforce)\n",
        "snapd.firefox.firefox (enforce)\n",
        "snap.Fire/fox.x (enforce)\n",
        "",
    ])
    func notSnaps(label: String) {
        #expect(IdentityClassifier.snapName(fromLabel: label) == nil)
    }
}

@Suite struct SystemdScopes {
    private func v2(_ leaf: String) -> String {
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/\(leaf)\n"
    }

    @Test(arguments: [
        ("app-gnome-org.gnome.Nautilus-1234.scope", "org.gnome.Nautilus"),
        ("app-flatpak-org.mozilla.firefox-51234.scope", "org.mozilla.firefox"),
        ("app-org.kde.dolphin-a8c2d7f3e9b84cd0b2a1.scope", "org.kde.dolphin"),
        ("app-gnome-firefox-22013.scope", "firefox"),
        ("app-gnome-xdg\\x2duser\\x2ddirs-1702.scope", "xdg-user-dirs"),
        ("app-org.gnome.Terminal.service", "org.gnome.Terminal"),
        ("app-gnome-org.gnome.Evolution\\x2dalarm\\x2dnotify@autostart.service", "org.gnome.Evolution-alarm-notify"),
        ("app-kde-org.kde.kalendarac@0c9e.service", "org.kde.kalendarac"),
    ])
    func appIDs(leaf: String, id: String) {
        #expect(IdentityClassifier.systemdAppID(fromCgroup: v2(leaf)) == id)
    }

    @Test(arguments: [
        "vte-spawn-0b7a3b5e-1c7f-4c1e-9a8e-3d2f3f0c1a2b.scope",
        "session-2.scope",
        "init.scope",
        "gnome-terminal-server.service",
        "pipewire.service",
        "app.slice",
        "app-org.gnome.Terminal.slice",
        "snap.firefox.firefox-2f1e9a1c-77d4-4b0e-9d2e-0123456789ab.scope",
        "app-.scope",
        "app-gnome--1234.scope",
        "app-gnome-bad\\x2zescape-1.scope",
        "appgnome-org.x-1.scope",
    ])
    func notApps(leaf: String) {
        #expect(IdentityClassifier.systemdAppID(fromCgroup: v2(leaf)) == nil)
    }

    @Test func onlyTheLeafCounts() {
        // A terminal's slice above a per-tab scope must not name the process.
        let text = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-5a9f.scope\n"
        #expect(IdentityClassifier.systemdAppID(fromCgroup: text) == nil)
    }

    /// The unit a user manager placed a process in itself: only slices between the manager and
    /// the unit; a cgroup a unit's process made under itself, or a scope's, is none.
    @Test func aUserUnitIsOneTheManagerPlacedItsProcessIn() {
        let manager = "/user.slice/user-1000.slice/user@1000.service"
        func unit(_ path: String) -> String? {
            IdentityClassifier.userUnit(fromCgroup: "0::\(path)\n").map { $0.manager == manager ? $0.unit : "other manager" }
        }
        #expect(unit("\(manager)/session.slice/pipewire-pulse.service") == "pipewire-pulse.service")
        #expect(unit("\(manager)/app.slice/app-gnome.slice/wireplumber.service") == "wireplumber.service")
        #expect(unit("\(manager)/app.slice/evil.service/wireplumber.service") == nil, "made under another unit")
        #expect(unit("\(manager)/app.slice/app-x-1.scope/y.slice/pipewire.service") == nil, "made under a scope")
        #expect(unit("\(manager)/app.slice/app-gnome-x-1.scope") == nil, "a scope")
        #expect(unit("\(manager)") == nil)
        #expect(unit("/system.slice/pipewire.service") == nil, "no user manager")
        #expect(IdentityClassifier.userManager(fromCgroup: "0::\(manager)/app.slice/app-x-1.scope\n") == manager)
        #expect(IdentityClassifier.userManager(fromCgroup: "0::/\n") == nil)
    }

    @Test func cgroupV1Hybrid() {
        let text = """
            12:pids:/user.slice/user-1000.slice/user@1000.service
            5:cpu,cpuacct:/user.slice
            1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Rhythmbox3-77.scope
            0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Rhythmbox3-77.scope

            """
        #expect(IdentityClassifier.systemdAppID(fromCgroup: text) == "org.gnome.Rhythmbox3")
    }

    @Test func cgroupV1OnlyNamedSystemd() {
        let text = "3:memory:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Cheese-9.scope\n"
        #expect(IdentityClassifier.systemdAppID(fromCgroup: text) == "org.gnome.Cheese")
    }

    @Test func systemServiceOrEmpty() {
        #expect(IdentityClassifier.systemdAppID(fromCgroup: "0::/system.slice/pulseaudio.service\n") == nil)
        #expect(IdentityClassifier.systemdAppID(fromCgroup: "0::/\n") == nil)
        #expect(IdentityClassifier.systemdAppID(fromCgroup: "") == nil)
    }
}

@Suite struct Interpreters {
    @Test(arguments: [
        ("/usr/bin/python3.12", IdentityClassifier.Interpreter.python),
        ("/usr/bin/python", .python), ("/usr/bin/python2.7", .python), ("/usr/bin/pypy3", .python),
        ("/usr/bin/node", .node), ("/usr/bin/nodejs", .node),
        ("/usr/bin/perl", .perl), ("/usr/bin/perl5.36.0", .perl),
        ("/usr/bin/ruby3.1", .ruby), ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java", .java),
        ("/usr/bin/bash", .shell), ("/usr/bin/dash", .shell), ("/bin/sh", .shell), ("/usr/bin/zsh", .shell),
        ("/usr/bin/lua5.4", .lua), ("/usr/bin/php8.2", .php),
    ])
    func recognised(exe: String, kind: IdentityClassifier.Interpreter) {
        #expect(IdentityClassifier.interpreter(forExecutable: exe) == kind)
    }

    @Test(arguments: [
        "/usr/bin/arecord", "/usr/bin/python3-config", "/usr/bin/pythonista", "/usr/bin/shotwell",
        "/usr/bin/nodemon", "/usr/bin/javac", "/usr/bin/bashbug",
    ])
    func notInterpreters(exe: String) {
        #expect(IdentityClassifier.interpreter(forExecutable: exe) == nil)
    }

    private func target(_ exe: String, _ args: [String], cwd: String? = "/home/ann") -> String? {
        IdentityClassifier.scriptTarget(exe: exe, cmdline: args, cwd: cwd)
    }

    @Test func python() {
        let py = "/usr/bin/python3.12"
        #expect(target(py, ["python3", "/opt/rec/rec.py"]) == "/opt/rec/rec.py")
        #expect(target(py, ["python3", "./rec.py", "-c", "x"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-u", "-B", "rec.py"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-uB", "rec.py"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-W", "ignore", "rec.py"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-Wignore", "rec.py"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-X", "dev", "-X", "utf8", "../x/../rec.py"]) == "/home/rec.py")
        #expect(target(py, ["python3", "--check-hash-based-pycs", "never", "rec.py"]) == "/home/ann/rec.py")
        #expect(target(py, ["python3", "-m", "voice.recorder", "--fast"]) == "module:voice.recorder")
        #expect(target(py, ["python3", "-mvoice"]) == "module:voice")
        #expect(target(py, ["python3", "-I", "-m", "voice"]) == "module:voice")
        #expect(target(py, ["python3", "-c", "import sounddevice"]) == nil)
        #expect(target(py, ["python3", "-uc", "print(1)"]) == nil)
        #expect(target(py, ["python3"]) == nil)
        #expect(target(py, ["python3", "-"]) == nil)
        #expect(target(py, ["python3", "-u"]) == nil)
        #expect(target(py, ["python3", "-m"]) == nil)
        #expect(target(py, ["python3", "--", "-weird.py"]) == "/home/ann/-weird.py")
    }

    @Test func pipesAndDescriptorsAreNoScript() {
        #expect(target("/usr/bin/bash", ["bash", "/dev/fd/3"]) == nil)
        #expect(target("/usr/bin/python3", ["python3", "/proc/self/fd/0"]) == nil)
        #expect(target("/usr/bin/python3", ["python3", "../../dev/stdin"], cwd: "/home/ann") == nil)
        let id = IdentityClassifier.classify(facts(exe: "/usr/bin/bash", cmdline: ["bash", "/dev/fd/63"]))
        #expect(id.appKey.description == "exe:/usr/bin/bash")
    }

    @Test func relativeScriptWithoutCwdIsUnknown() {
        #expect(target("/usr/bin/python3", ["python3", "rec.py"], cwd: nil) == nil)
        #expect(target("/usr/bin/python3", ["python3", "/abs/rec.py"], cwd: nil) == "/abs/rec.py")
    }

    @Test func shebangScript() {
        // A `#!/usr/bin/env python3` script run as ./rec.py: env execs python3 with the path.
        #expect(
            target("/usr/bin/python3.11", ["python3", "./rec.py", "--seconds", "5"], cwd: "/srv/app")
                == "/srv/app/rec.py")
    }

    @Test func node() {
        let n = "/usr/bin/node"
        #expect(target(n, ["node", "server.js"]) == "/home/ann/server.js")
        #expect(target(n, ["node", "--inspect=9229", "--enable-source-maps", "/srv/app/index.mjs"]) == "/srv/app/index.mjs")
        #expect(target(n, ["node", "-r", "dotenv/config", "app.js"]) == "/home/ann/app.js")
        #expect(target(n, ["node", "--require", "ts-node/register", "app.ts"]) == "/home/ann/app.ts")
        #expect(target(n, ["node", "--import=tsx", "app.ts"]) == "/home/ann/app.ts")
        #expect(target(n, ["node", "-e", "console.log(1)"]) == nil)
        #expect(target(n, ["node", "--eval=1"]) == nil)
        #expect(target(n, ["node", "-p", "1+1"]) == nil)
        #expect(target(n, ["node"]) == nil)
    }

    @Test func perl() {
        let p = "/usr/bin/perl"
        #expect(target(p, ["perl", "-w", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-Ilib", "-MFoo::Bar", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-I", "lib", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-l", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-wle", "print 1"]) == nil)
        #expect(target(p, ["perl", "-E", "say 1"]) == nil)
        #expect(target(p, ["perl", "-0777", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-0777ne", "print"]) == nil)
        #expect(target(p, ["perl", "-l012", "-w", "rec.pl"]) == "/home/ann/rec.pl")
        #expect(target(p, ["perl", "-i.bak", "rec.pl"]) == "/home/ann/rec.pl")
    }

    @Test func ruby() {
        let r = "/usr/bin/ruby3.1"
        #expect(target(r, ["ruby", "-w", "rec.rb"]) == "/home/ann/rec.rb")
        #expect(target(r, ["ruby", "-r", "bundler/setup", "-I", "lib", "bin/rec"]) == "/home/ann/bin/rec")
        #expect(target(r, ["ruby", "-e", "puts 1"]) == nil)
    }

    @Test func java() {
        let j = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
        #expect(target(j, ["java", "-Xmx512m", "-jar", "/opt/rec/rec.jar", "--gui"]) == "/opt/rec/rec.jar")
        #expect(target(j, ["java", "-jar", "rec.jar"]) == "/home/ann/rec.jar")
        #expect(target(j, ["java", "-cp", "lib/*:rec.jar", "-Dsun.audio=1", "org.example.Rec"]) == "class:org.example.Rec")
        #expect(target(j, ["java", "--class-path=rec.jar", "org.example.Rec"]) == "class:org.example.Rec")
        #expect(target(j, ["java", "-m", "org.example/org.example.Rec"]) == "module:org.example/org.example.Rec")
        #expect(target(j, ["java", "--module", "org.example/org.example.Rec"]) == "module:org.example/org.example.Rec")
        #expect(target(j, ["java", "Rec.java"]) == "/home/ann/Rec.java")
        #expect(target(j, ["java", "-version"]) == nil)
        #expect(target(j, ["java", "-jar"]) == nil)
    }

    @Test func shells() {
        #expect(target("/usr/bin/bash", ["bash", "/usr/local/bin/rec.sh", "x"]) == "/usr/local/bin/rec.sh")
        #expect(target("/usr/bin/bash", ["/bin/bash", "-e", "-o", "pipefail", "rec.sh"]) == "/home/ann/rec.sh")
        #expect(target("/usr/bin/bash", ["bash", "+o", "posix", "rec.sh"]) == "/home/ann/rec.sh")
        #expect(target("/usr/bin/bash", ["bash", "--norc", "--rcfile", "x", "rec.sh"]) == "/home/ann/rec.sh")
        #expect(target("/usr/bin/dash", ["sh", "-c", "arecord x.wav"]) == nil)
        #expect(target("/usr/bin/dash", ["sh", "-ec", "arecord x.wav"]) == nil)
        #expect(target("/usr/bin/bash", ["-bash"]) == nil)
        #expect(target("/usr/bin/bash", ["bash", "-s", "arg"]) == nil)
        #expect(target("/usr/bin/zsh", ["zsh", "-l", "bin/rec.zsh"]) == "/home/ann/bin/rec.zsh")
    }

    @Test func luaAndPhp() {
        #expect(target("/usr/bin/lua5.4", ["lua", "-l", "socket", "rec.lua"]) == "/home/ann/rec.lua")
        #expect(target("/usr/bin/php8.2", ["php", "-d", "memory_limit=1G", "-f", "rec.php"]) == "/home/ann/rec.php")
        #expect(target("/usr/bin/php8.2", ["php", "rec.php"]) == "/home/ann/rec.php")
        #expect(target("/usr/bin/php8.2", ["php", "-r", "echo 1;"]) == nil)
    }

    @Test func nonInterpreterHasNoTarget() {
        #expect(target("/usr/bin/arecord", ["arecord", "x.wav"]) == nil)
    }

    @Test func pathNormalisation() {
        #expect(IdentityClassifier.absolute("a//b/./c/../d", cwd: "/x/y/") == "/x/y/a/b/d")
        #expect(IdentityClassifier.absolute("/../../etc/x", cwd: nil) == "/etc/x")
        #expect(IdentityClassifier.absolute("", cwd: "/x") == nil)
        #expect(IdentityClassifier.absolute("a", cwd: "relative") == nil)
    }
}
