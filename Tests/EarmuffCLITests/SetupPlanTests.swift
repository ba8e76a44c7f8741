// Setup's plan with the package's units installed, and those units: the same
// SetupPlan functions print both, the packaged ones for either server.
import Foundation
import Testing
@testable import EarmuffCLI

@Suite struct SetupPlanTests {
    let context = SetupContext(
        configHome: "/h/.config", home: "/h", binary: "/usr/bin/earmuff",
        pulseSystemScript: ("/etc/pulse/default.pa", "load-module module-native-protocol-unix\n"),
        pipewireSystemConfig: ("/usr/share/pipewire/pipewire.conf", "context.modules = [ { name = libpipewire-module-access } ]\n"))

    /// module-access's entry, and only it, is replaced: braces in its comments and strings do not end it early.
    @Test func theHoldReplacesOnlyModuleAccessesEntry() throws {
        let system = """
            context.modules = [
                { name = libpipewire-module-protocol-native }
                { name = libpipewire-module-access
                    args = {
                        # a comment with a } in it
                        access.allowed = [ "/opt/x}y" ]
                    }
                }
                { name = libpipewire-module-adapter }
            ]

            """
        let out = try SetupPlan.pipewireHoldConfig(from: system, path: "/s", binary: "/opt/earmuff")
        #expect(out.hasPrefix(SetupPlan.marker + "\n"))
        #expect(out.contains("    { name = libpipewire-module-protocol-native }\n"), "\(out)")
        #expect(out.contains("}\n    { name = libpipewire-module-adapter }\n]\n"), "\(out)")
        #expect(out.contains("access.force = earmuff\n"), "\(out)")
        #expect(out.contains("\"/opt/earmuff\" \"earmuff\""), "\(out)")
        #expect(!out.contains("x}y") && !out.contains("a comment"), "\(out)")
        #expect(throws: SetupError.self) { try SetupPlan.pipewireHoldConfig(from: system + system, path: "/s", binary: "/e") }
    }

    /// The silent source is the first of the configuration's objects, or in a section of its own.
    @Test func theSilentSourceIsOneOfTheServersOwnObjects() throws {
        let objects = "context.objects = [\n    { factory = spa-node-factory args = { node.name = Dummy-Driver } }\n]\n"
        let module = "context.modules = [ { name = libpipewire-module-access } ]\n"
        let out = try SetupPlan.pipewireHoldConfig(from: module + objects, path: "/s", binary: "/e")
        let at = try #require(out.range(of: "context.objects = [\n"))
        let silent = try #require(out.range(of: "node.name = \"earmuff.silence\""))
        let driver = try #require(out.range(of: "Dummy-Driver"))
        #expect(at.upperBound < silent.lowerBound && silent.upperBound < driver.lowerBound, "\(out)")
        for line in [
            "{ factory = adapter", "factory.name = \"support.null-audio-sink\"", "media.class = \"Audio/Source/Virtual\"",
            "audio.position = [ MONO ]", "object.linger = \"true\"", "node.description = \"Earmuff (silenced)\"",
        ] {
            #expect(out.contains(line), "\(line): \(out)")
        }
        #expect(out.components(separatedBy: "earmuff.silence").count == 2, "one silent source: \(out)")
        // A configuration with no objects gets a section.
        let bare = try SetupPlan.pipewireHoldConfig(from: module, path: "/s", binary: "/e")
        #expect(bare.hasSuffix("]\n") && bare.contains("\ncontext.objects = [\n    # earmuff setup: the silent source"), "\(bare)")
        // PipeWire starts Earmuff: its service is wanted by PipeWire's.
        for server in [SessionServer.pipewire, .pulseaudio, nil] {
            #expect(SetupPlan.serviceUnit(server, binary: "/b").contains("WantedBy=pipewire.service\nAlso=earmuff.socket\n"))
        }
    }

    @Test func withPackagedUnitsSetupWritesOnlyTheServersFiles() throws {
        var packaged = context
        packaged.packagedUnits = true
        for server in SessionServer.allCases {
            let own = try SetupPlan.files(context, server: server).map(\.path)
            let files = try SetupPlan.files(packaged, server: server).map(\.path)
            #expect(own.contains("/h/.config/systemd/user/earmuff.socket") && own.contains("/h/.config/systemd/user/earmuff.service"))
            #expect(files == own.filter { !$0.hasSuffix("/earmuff.socket") && !$0.hasSuffix("/earmuff.service") }, "\(server)")
            #expect(files.contains(SetupPlan.socketDropIn(packaged, server)))
        }
    }

    @Test func thePackagedUnitsFitEitherServerAndAreNeverSetupsOwn() {
        let socket = SetupPlan.socketUnit(nil)
        let service = SetupPlan.serviceUnit(nil, binary: SetupPlan.packagedBinary)
        for unit in [socket, service] {
            #expect(!unit.hasPrefix(SetupPlan.marker), "setup --undo must never remove a packaged unit")
            #expect(unit.contains("Documentation=man:earmuff(1)\n"))
        }
        #expect(socket.contains("ListenStream=%t/pulse/native\n"))
        #expect(service.contains("ExecStart=/usr/bin/earmuff serve --listen %t/pulse/native --upstream unix:%t/pulse/upstream\n"))
        #expect(service.contains("After=pipewire-pulse.socket pulseaudio.socket\n"))
        #expect(!service.contains("Wants="), "the package starts no server of its own accord")
        // Setup's own units stay as they were: for one server, with the marker.
        #expect(SetupPlan.serviceUnit(.pipewire, binary: "/b").contains("Wants=pipewire-pulse.socket\nAfter=pipewire-pulse.socket\n"))
        #expect(SetupPlan.socketUnit(.pulseaudio).hasPrefix(SetupPlan.marker + "\n"))
        #expect(SetupPlan.socketUnit(.pulseaudio).contains("Description=Earmuff consent proxy: the session's PulseAudio socket\n\n[Socket]"))
    }
}

/// Setup run for real in a scratch home, with packaged units in a scratch directory.
@Suite struct PackagedUnitsSetupTests {
    @Test func setupRemovesItsOwnUnitsOnceThePackageHasThemAndDoctorSaysSoBefore() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("earmuff-setup-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = ["HOME": "\(dir)/home", "XDG_CONFIG_HOME": "\(dir)/config", "XDG_RUNTIME_DIR": "\(dir)/run", "PATH": "/usr/bin:/bin"]
        let units = "\(dir)/config/systemd/user"
        var options = SetupCommand.Options()
        options.server = .pipewire
        options.noSystemctl = true
        options.packagedUnitDirectory = "\(dir)/packaged"

        // Before the package: setup writes units of its own.
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        #expect(FileManager.default.fileExists(atPath: "\(units)/earmuff.socket"))
        // Without systemctl nothing enabled earmuff.service: PipeWire does not start it.
        let unstarted = DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options)
        #expect(unstarted.map(\.fix) == ["systemctl --user enable earmuff.service"], "\(unstarted)")
        try FileManager.default.createDirectory(atPath: "\(units)/pipewire.service.wants", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: "\(units)/pipewire.service.wants/earmuff.service", withDestinationPath: "../earmuff.service")
        #expect(DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options).isEmpty)

        // The package installs its units (running its binary, here a copy of true): setup's own now hide them.
        try FileManager.default.createDirectory(atPath: options.packagedUnitDirectory, withIntermediateDirectories: true)
        let packagedBinary = "\(options.packagedUnitDirectory)/earmuff"
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: packagedBinary)
        try SetupPlan.socketUnit(nil).write(toFile: "\(options.packagedUnitDirectory)/earmuff.socket", atomically: true, encoding: .utf8)
        try SetupPlan.serviceUnit(nil, binary: packagedBinary)
            .write(toFile: "\(options.packagedUnitDirectory)/earmuff.service", atomically: true, encoding: .utf8)
        let stale = DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options)
        #expect(stale.count == 2 && stale.allSatisfy { $0.problem.contains("hides the packaged") }, "\(stale)")
        #expect(stale.first?.fix.contains("earmuff setup") == true)

        // Setup again: its own units go, the server's drop-ins stay, and nothing is stale.
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        #expect(!FileManager.default.fileExists(atPath: "\(units)/earmuff.socket"))
        #expect(!FileManager.default.fileExists(atPath: "\(units)/earmuff.service"))
        #expect(FileManager.default.fileExists(atPath: "\(units)/pipewire-pulse.socket.d/earmuff.conf"))
        #expect(DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options).isEmpty)

        // The package's binary is gone while setup has the session: it says so, and how to undo.
        try FileManager.default.removeItem(atPath: packagedBinary)
        let gone = DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options)
        #expect(
            gone.map(\.problem) == [
                "\(options.packagedUnitDirectory)/earmuff.service runs \(packagedBinary), which is not there any more: nothing answers behind the session's sound socket"
            ])
        #expect(gone.first?.fix.hasPrefix("'earmuff setup --undo' gives the session back to pipewire-pulse;") == true, "\(gone)")
        #expect(DoctorChecks.units(DoctorFacts.sample(unitProblems: gone)).outcome == .fail)
        // Not set up: the package's units are nobody's business.
        #expect(DoctorCommand.unitProblems(environment: env, setUpFor: nil, setup: options).isEmpty)

        // Setup's own units running a program that is gone: the same.
        options.binary = "\(dir)/gone/earmuff"
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        let own = DoctorCommand.unitProblems(environment: env, setUpFor: .pipewire, setup: options)
        #expect(
            own.map(\.problem) == [
                "\(units)/earmuff.service runs \(dir)/gone/earmuff, which is not there any more: nothing answers behind the session's sound socket"
            ])
        #expect(own.first?.fix.contains("earmuff setup --undo") == true)
    }
}

/// What a command says when no daemon answers: after `earmuff setup` the session starts it
/// (earmuff.socket), so 'earmuff serve' is advised only where setup's units are not in place.
@Suite struct DaemonStartHintTests {
    @Test func theAdviceFollowsWhetherSetupsUnitsAreInPlace() throws {
        #expect(SessionTakeover.startHint(setUp: false) == "start it with 'earmuff serve'")
        let setUp = SessionTakeover.startHint(setUp: true)
        #expect(setUp.contains("systemctl --user start earmuff.socket") && setUp.contains("when an app connects"), "\(setUp)")
        #expect(!setUp.contains("earmuff serve"), "\(setUp)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("earmuff-hint-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = ["HOME": "\(dir)/home", "XDG_CONFIG_HOME": "\(dir)/config", "XDG_RUNTIME_DIR": "\(dir)/run", "PATH": "/usr/bin:/bin"]
        func message() -> String {
            do {
                _ = try ClientCommands.connect("\(dir)/run/earmuff/control", environment: env)
                return "connected"
            } catch {
                return error.message
            }
        }
        #expect(message().hasSuffix("; start it with 'earmuff serve'"), "\(message())")

        var options = SetupCommand.Options()
        options.server = .pipewire
        options.noSystemctl = true
        options.packagedUnitDirectory = "\(dir)/packaged"
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        #expect(SessionTakeover.startHint(environment: env) == setUp)
        #expect(
            message().hasPrefix("cannot reach the daemon at \(dir)/run/earmuff/control") && message().hasSuffix("; " + setUp),
            "\(message())")

        options.undo = true
        #expect(try SetupRunner(options: options, environment: env).undo() == 0)
        #expect(SessionTakeover.startHint(environment: env) == SessionTakeover.startHint(setUp: false))
    }
}

/// The directories setup makes are recorded in the files it writes, and `--undo` removes them
/// once empty: never one that was there before, nor one that holds anything else.
@Suite struct MadeDirectoriesTests {
    @Test func eachFileRecordsTheDirectoriesAboveItThatSetupMade() {
        let f = SetupFile(path: "/h/.config/systemd/user/pipewire-pulse.socket.d/earmuff.conf", contents: SetupPlan.marker + "\n[Socket]\n")
        #expect(
            SetupPlan.ancestors(of: f.path) == [
                "/h/.config/systemd/user/pipewire-pulse.socket.d", "/h/.config/systemd/user",
                "/h/.config/systemd", "/h/.config", "/h",
            ])
        let made: Set = [
            "/h/.config/systemd", "/h/.config/systemd/user", "/h/.config/systemd/user/pipewire-pulse.socket.d",
            "/h/.config/pipewire",
        ]
        let text = SetupPlan.recording(f, made: made)
        #expect(text.hasPrefix(f.contents), "the file as setup writes it comes first: \(text)")
        #expect(
            SetupPlan.madeDirectories(in: text) == [
                "/h/.config/systemd", "/h/.config/systemd/user",
                "/h/.config/systemd/user/pipewire-pulse.socket.d",
            ])
        #expect(SetupPlan.withoutRecord(text) == f.contents)
        #expect(SetupPlan.recording(f, made: []) == f.contents)
        #expect(SetupPlan.madeDirectories(in: SetupPlan.marker + "\n# earmuff setup made the directory relative; x\n").isEmpty)
    }

    @Test func undoRemovesTheEmptyDirectoriesSetupMadeAndNoOther() throws {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("earmuff-dirs-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? fm.removeItem(atPath: dir) }
        let config = "\(dir)/config"
        let env = ["HOME": "\(dir)/home", "XDG_CONFIG_HOME": config, "XDG_RUNTIME_DIR": "\(dir)/run", "PATH": "/usr/bin:/bin"]
        // There before setup: the config directory, and the user's own PipeWire directory with a file.
        try fm.createDirectory(atPath: "\(config)/pipewire", withIntermediateDirectories: true)
        try "context.properties = { }\n".write(toFile: "\(config)/pipewire/mine.conf", atomically: true, encoding: .utf8)
        var options = SetupCommand.Options()
        options.server = .pipewire
        options.noSystemctl = true
        options.packagedUnitDirectory = "\(dir)/packaged"
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        let units = "\(config)/systemd/user"
        #expect(fm.fileExists(atPath: "\(units)/earmuff.socket"))
        // A second run changes nothing: the record is not a difference.
        let socket = try String(contentsOfFile: "\(units)/earmuff.socket", encoding: .utf8)
        #expect(SetupPlan.madeDirectories(in: socket) == ["\(config)/systemd", units], "\(socket)")
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        #expect(try String(contentsOfFile: "\(units)/earmuff.socket", encoding: .utf8) == socket)

        options.undo = true
        #expect(try SetupRunner(options: options, environment: env).undo() == 0)
        #expect(!fm.fileExists(atPath: "\(config)/systemd"), "left: \(String(describing: try? fm.subpathsOfDirectory(atPath: config)))")
        #expect(!fm.fileExists(atPath: "\(config)/pipewire/pipewire-pulse.conf.d"))
        #expect(try fm.contentsOfDirectory(atPath: "\(config)/pipewire") == ["mine.conf"], "the user's directory and file stay")
        #expect(fm.fileExists(atPath: config), "there before setup")

        // A directory setup made that now holds another file stays, with that file.
        options.undo = false
        #expect(try SetupRunner(options: options, environment: env).setup() == 0)
        try "[Unit]\n".write(toFile: "\(units)/mine.service", atomically: true, encoding: .utf8)
        options.undo = true
        #expect(try SetupRunner(options: options, environment: env).undo() == 0)
        #expect(try fm.contentsOfDirectory(atPath: units) == ["mine.service"])
        #expect(!fm.fileExists(atPath: "\(units)/pipewire-pulse.socket.d"), "made and emptied: removed")
    }
}
