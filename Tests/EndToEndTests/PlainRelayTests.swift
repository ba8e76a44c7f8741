// The relay alone (`earmuff-relay`: the Relay target with a gate that lets every stream
// be real), between stock clients and a real server. What it links is checked by
// scripts/check-relay-links; here it runs.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct PlainRelayTests {
        @Test func parecordHearsTheToneWithoutAnyConsentService() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let relay = try EarmuffProcess(upstream: server.serverString, relayOnly: true)
            defer { relay.stop() }
            #expect(await Wait.until(timeout: 30) { relay.printedServerLine }, "stdout: \(relay.stdoutText())")
            let (result, audio) = try await Helpers.recordMic(server: relay.serverString)
            #expect(result.status == 0, "\(result)\nrelay log:\n\(relay.log())")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(report)\nrelay log:\n\(relay.log())")
            #expect(relay.process.isRunning, "relay log:\n\(relay.log())")
        }

        @Test func pactlSeesTheSameServerThroughIt() throws {
            let server = try PulseServer()
            defer { server.stop() }
            let relay = try EarmuffProcess(upstream: server.serverString, relayOnly: true)
            defer { relay.stop() }
            try Helpers.expectSamePactl(["list"], server: server.serverString, relay: relay.serverString, log: { relay.log() })
        }
    }
}
