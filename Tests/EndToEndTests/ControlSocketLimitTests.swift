// The control socket under a flood of idle connections from a local process: the CLI's
// one-shot requests (status, grant) and an agent still get a slot, the idle connections
// time out, few lines are logged, and one uid cannot subscribe without end.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct ControlSocketLimitTests {
        typealias Setup = ConsentEndToEndTests.Setup

        @Test func idleConnectionsDoNotLockOutTheCLI() async throws {
            let s = try Setup()
            defer { s.stop() }
            var idle: [RawClient] = []
            defer { for c in idle { c.close() } }
            for _ in 0..<200 { idle.append(try RawClient(path: s.earmuff.controlPath)) }
            let status = try s.earmuff.control("status")
            #expect(status.succeeded, "\(status)\n\(s.logs)")
            let grant = try s.earmuff.control("grant", "exe:/usr/bin/earmuff-control-probe")
            #expect(grant.succeeded, "\(grant)\n\(s.logs)")
            // An agent connects too, and gets the prompt of an app that records now.
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny", "--json"])
            defer { agent.stop() }
            let rec = try s.record()
            defer { _ = rec.stop() }
            let answered = try await agent.waitForLine { $0.type == "answered" || $0.type == "prompt" }
            #expect(answered != nil, "\(agent.output())\n\(s.logs)")
            let lines = s.earmuff.log().split(separator: "\n").filter { $0.contains("control:") && $0.contains("room") }.count
            #expect(lines <= 10, "\(lines) log lines for the flood")
            // The idle ones are closed after the idle timeout (10 s).
            let closed = await Wait.until(timeout: 60) { idle.suffix(60).allSatisfy { $0.waitUntilClosed(timeout: 0.05) } }
            #expect(closed, "idle control connections stay open\n\(s.logs)")
        }

        /// Another process of the uid (this test's) may hold 16 subscriptions, no more, and may
        /// not become an agent; the person's own `earmuff watch` and `earmuff agent` are let in all
        /// the same, and the agent, alone, gets the prompt of an app that records.
        @Test func oneUIDCannotSubscribeWithoutEndNorLockOutEarmuffsOwnTools() async throws {
            let s = try Setup()
            defer { s.stop() }
            var subscribers: [ControlConnection] = []
            for i in 0..<16 {
                let c = try ControlConnection(path: s.earmuff.controlPath)
                let ok = try c.request(["type": "subscribe"], id: i)
                #expect(ok?["type"] as? String == "ok", "\(String(describing: ok))")
                subscribers.append(c)
            }
            let extra = try ControlConnection(path: s.earmuff.controlPath)
            let refused = try extra.request(["type": "subscribe"], id: 99)
            #expect(refused?["code"] as? String == "too-many", "\(String(describing: refused))")
            let fake = try extra.request(["type": "become-agent"], id: 100)
            #expect(fake?["code"] as? String == "not-earmuff", "\(String(describing: fake))")
            let status = try s.earmuff.control("status")
            #expect(status.succeeded, "\(status)")

            // Subscribed (it reported a probe decision) before anything is recorded.
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny", "--json"])
            defer { agent.stop() }
            let rec = try s.record()
            defer { _ = rec.stop() }
            let prompted = try await agent.waitForLine { $0.type == "prompt" || $0.type == "answered" }
            #expect(prompted != nil, "the agent got no prompt: \(agent.output())\n\(s.logs)")
            let event = try await watch.waitForLine { $0.event == "prompt-raised" }
            #expect(event != nil && watch.process.isRunning, "earmuff watch: \(watch.output())\n\(s.logs)")
        }
    }
}
