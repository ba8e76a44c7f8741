// EarmuffKit without Earmuff: where it looks for the server and which properties it
// declares (as libpulse does), and what it says when there is no server or none answers.
@testable import EarmuffKit
import Glibc
import Testing
import TestSupport

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
    let env = [
        "PULSE_PROP": "application.capture.purpose='Voice memos' media.role=phone x=\"a \\\"b\\\"\" junk",
        "PULSE_PROP_application.name": "Recorder",
    ]
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

/// A server that accepts and never answers: unavailable once the handshake times out, and
/// requests do not hang.
@Test func aServerThatNeverAnswersIsUnavailable() async throws {
    let dir = try TempDir.make(prefix: "earmuff-kit")
    defer { TempDir.remove(dir) }
    let path = dir + "/native"
    let fd = try UnixSocket.listen(path)
    defer { close(fd) }
    let app = AudioApplication(environment: ["PULSE_SERVER": "unix:" + path], timeout: 1)
    #expect(app.recordPermission == .unavailable)
    #expect(app.unavailableReason?.contains("did not answer") == true, "\(app.unavailableReason ?? "")")
    #expect(await AudioApplication(environment: ["PULSE_SERVER": path], timeout: 1).requestPermission() == .unavailable)
}
