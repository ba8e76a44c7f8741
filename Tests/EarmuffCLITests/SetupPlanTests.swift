// Setup's plan with the package's units installed, and those units: the same
// SetupPlan functions print both, the packaged ones for either server.
import Testing
@testable import EarmuffCLI

@Suite struct SetupPlanTests {
    let context = SetupContext(configHome: "/h/.config", home: "/h", binary: "/usr/bin/earmuff",
                               pulseSystemScript: ("/etc/pulse/default.pa", "load-module module-native-protocol-unix\n"))

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
