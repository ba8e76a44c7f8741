// Where EarmuffKit looks for the server and which properties it declares, as libpulse does.
@testable import EarmuffKit
import Testing

@Test func pulseServerEntriesOfUnixSocketsAreTriedInOrder() {
    let env = ["PULSE_SERVER": "tcp:host:4713 {abc}unix:/run/a /run/b unix:/run/c", "XDG_RUNTIME_DIR": "/run/user/1"]
    #expect(ClientEnvironment.serverPaths(env) == ["/run/a", "/run/b", "/run/c"])
}

@Test func withoutPulseServerTheRuntimeDirectorysSocket() {
    #expect(ClientEnvironment.serverPaths(["XDG_RUNTIME_DIR": "/run/user/1000"]) == ["/run/user/1000/pulse/native"])
    #expect(ClientEnvironment.serverPaths(["PULSE_SERVER": " ", "XDG_RUNTIME_DIR": "/run/user/7"]) == ["/run/user/7/pulse/native"])
    #expect(ClientEnvironment.serverPaths([:]).isEmpty)
    #expect(ClientEnvironment.serverPaths(["XDG_RUNTIME_DIR": "relative"]).isEmpty)
}

@Test func declaredPropertiesFromPulseProp() {
    let env = ["PULSE_PROP": "application.capture.purpose='Voice memos' media.role=phone x=\"a \\\"b\\\"\" junk",
               "PULSE_PROP_application.name": "Recorder"]
    let p = ClientEnvironment.declaredProperties(env)
    #expect(p["application.capture.purpose"] == "Voice memos")
    #expect(p["media.role"] == "phone")
    #expect(p["x"] == "a \"b\"")
    #expect(p["application.name"] == "Recorder")
    #expect(p["junk"] == nil)
}

@Test func unavailableWithoutAServer() async {
    let app = AudioApplication(environment: ["PULSE_SERVER": "unix:/nonexistent/earmuff-kit-test/native"])
    #expect(app.recordPermission == .unavailable)
    #expect(app.unavailableReason?.contains("/nonexistent/earmuff-kit-test/native") == true, "\(app.unavailableReason ?? "")")
    #expect(await app.requestPermission() == .unavailable)
    var changes: [AudioApplication.RecordPermission] = []
    for await p in app.recordPermissionChanges() { changes.append(p) }
    #expect(changes == [.unavailable])
}
