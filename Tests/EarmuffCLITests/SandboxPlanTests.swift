// The bubblewrap command line of `earmuff run --sandbox`, from options, an
// environment and a made-up host (the real run is SandboxRunTests).
import Testing
@testable import EarmuffCLI

@Suite struct SandboxPlanTests {
    /// A host where /usr and /etc are directories, /bin and /lib links into /usr, and `extra` exist.
    private func plan(
        _ options: SandboxOptions = SandboxOptions(), env: [String: String] = [:], uid: UInt32 = 1000,
        cwd: String = "/home/u/src", purpose: String? = nil, extra: Set<String> = []
    ) -> SandboxPlan {
        var environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"]
        environment.merge(env) { _, new in new }
        return SandboxPlan(
            options: options, launcherSocket: "/run/user/1000/earmuff/launch/x", privateHome: "/home/u/.local/share/earmuff/homes/x",
            purpose: purpose, environment: environment, uid: uid, workingDirectory: cwd,
            command: ["/usr/bin/parecord", "out.wav"],
            lookup: { path in
                switch path {
                case "/usr", "/etc": .directory
                case "/bin": .symlink(target: "usr/bin")
                case "/lib": .symlink(target: "usr/lib")
                default: extra.contains(path) ? .other : nil
                }
            })
    }

    /// The value after each `flag` in `args`, as pairs for flags with two operands.
    private func pairs(_ args: [String], _ flag: String) -> [[String]] {
        args.indices.filter { args[$0] == flag && $0 + 2 < args.count }.map { [args[$0 + 1], args[$0 + 2]] }
    }

    @Test func theSystemIsReadOnlyTheRuntimeDirectoryHoldsOnlyTheLauncherSocket() throws {
        let a = try plan().arguments()
        #expect(a.prefix(3) == ["--unshare-all", "--die-with-parent", "--new-session"])
        #expect(!a.contains("--share-net") && !a.contains("--cap-drop"))
        #expect(pairs(a, "--ro-bind").contains(["/usr", "/usr"]) && pairs(a, "--ro-bind").contains(["/etc", "/etc"]))
        #expect(pairs(a, "--symlink").contains(["usr/bin", "/bin"]) && pairs(a, "--symlink").contains(["usr/lib", "/lib"]))
        #expect(!a.contains("/opt"), "a directory the host lacks is not bound")
        #expect(pairs(a, "--bind") == [["/home/u/.local/share/earmuff/homes/x", "/home/u"]])
        // The runtime directory is a fresh tmpfs, after the home, with the launcher socket at pulse/native.
        let tmpfs = try #require(a.firstIndex(of: "/run/user/1000"))
        #expect(a[tmpfs - 1] == "--tmpfs" && tmpfs > a.firstIndex(of: "--bind")!)
        #expect(pairs(a, "--ro-bind").contains(["/run/user/1000/earmuff/launch/x", "/run/user/1000/pulse/native"]))
        #expect(pairs(a, "--setenv").contains(["PULSE_SERVER", "unix:/run/user/1000/pulse/native"]))
        for name in SandboxPlan.removedVariables { #expect(a.contains(name), "\(name) is unset inside") }
        #expect(Array(a.suffix(4)) == ["/home/u", "--", "/usr/bin/parecord", "out.wav"], "a cwd outside the private home starts at home")
    }

    @Test func rootLosesItsCapabilitiesAndNetShowsTheResolver() throws {
        let a = try plan(SandboxOptions(network: true), uid: 0).arguments()
        #expect(a.contains("--share-net"))
        #expect(a.firstIndex(of: "--cap-drop").map { a[$0 + 1] } == "ALL")
        #expect(pairs(a, "--ro-bind-try").contains(["/run/systemd/resolve", "/run/systemd/resolve"]))
    }

    @Test func theSharedHomeKeepsTheWorkingDirectory() throws {
        let a = try plan(SandboxOptions(home: .shared)).arguments()
        #expect(pairs(a, "--bind") == [["/home/u", "/home/u"]])
        #expect(Array(a.suffix(4)).first == "/home/u/src")
        let chosen = try plan(SandboxOptions(home: .directory("/srv/h")), cwd: "/srv/h/w").arguments()
        #expect(pairs(chosen, "--bind") == [["/srv/h", "/home/u"]])
        #expect(Array(chosen.suffix(4)).first == "/home/u/w", "a cwd inside the chosen home is its place inside")
    }

    @Test func aPurposeIsAddedToTheCallersPulseProp() throws {
        let a = try plan(env: ["PULSE_PROP": "media.role=phone"], purpose: "say \"hi\"").arguments()
        #expect(pairs(a, "--setenv").contains(["PULSE_PROP", #"media.role=phone application.capture.purpose="say \"hi\"""#]))
    }

    @Test func aLocalDisplayIsShownAndARemoteOneIsNot() throws {
        let a = try plan(
            env: ["DISPLAY": ":3", "WAYLAND_DISPLAY": "wayland-0"],
            extra: ["/tmp/.X11-unix/X3", "/home/u/.Xauthority", "/run/user/1000/wayland-0"]
        ).arguments()
        #expect(pairs(a, "--ro-bind").contains(["/tmp/.X11-unix/X3", "/tmp/.X11-unix/X3"]))
        // The private home hides ~/.Xauthority: it is bound into the runtime directory instead.
        #expect(pairs(a, "--ro-bind").contains(["/home/u/.Xauthority", "/run/user/1000/Xauthority"]))
        #expect(pairs(a, "--setenv").contains(["XAUTHORITY", "/run/user/1000/Xauthority"]))
        #expect(pairs(a, "--ro-bind").contains(["/run/user/1000/wayland-0", "/run/user/1000/wayland-0"]))
        let remote = try plan(env: ["DISPLAY": "host:0"], extra: ["/tmp/.X11-unix/X0"]).arguments()
        #expect(!remote.contains("/tmp/.X11-unix/X0"))
        #expect(SandboxPlan.localDisplayNumber("unix:1.0") == "1" && SandboxPlan.localDisplayNumber(":x") == nil)
    }

    @Test func theSessionBusIsPassedOnlyWhereTheSandboxCanReachIt() throws {
        let byPath = try plan(SandboxOptions(sessionBus: true), env: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/b%75s,guid=1"]).arguments()
        #expect(pairs(byPath, "--ro-bind").contains(["/run/user/1000/bus", "/run/user/1000/bus"]))
        #expect(pairs(byPath, "--setenv").contains(["DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"]))
        #expect(throws: SandboxPlan.PlanError.self) {
            try plan(SandboxOptions(sessionBus: true), env: ["DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x"]).arguments()
        }
        let abstract = try plan(
            SandboxOptions(network: true, sessionBus: true),
            env: ["DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x"]
        ).arguments()
        #expect(pairs(abstract, "--setenv").contains(["DBUS_SESSION_BUS_ADDRESS", "unix:abstract=/tmp/dbus-x"]))
        #expect(throws: SandboxPlan.PlanError.self) { try plan(SandboxOptions(sessionBus: true)).arguments() }
    }

    @Test func aMissingHomeIsRefusedWithItsFix() {
        #expect(throws: SandboxPlan.PlanError(message: "HOME is unset or not an absolute directory other than /; set HOME to your home directory")) {
            try plan(env: ["HOME": "relative"]).arguments()
        }
    }

    @Test func appIDsAndShellLines() {
        #expect(SandboxPlan.defaultAppID(command: "/usr/bin/.hidden tool") == "hidden_tool")
        #expect(SandboxPlan.defaultAppID(command: "...") == "app")
        #expect(SandboxPlan.shellLine(["bwrap", "--setenv", "X", "it's"]) == #"bwrap --setenv X 'it'\''s'"#)
    }
}
