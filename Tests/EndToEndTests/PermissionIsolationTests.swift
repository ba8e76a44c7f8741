// The permission extension answers only for the connection that asks: raw clients try
// to learn or change another app's state (its key in the payload, a kind naming it), to
// answer their own request (a forged REPLY), to reuse a waiting tag, and to ask on a
// connection whose process is no longer the one that connected. The real daemon, in front
// of a real server; what it decided is read back with the CLI.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct PermissionIsolationTests {
        typealias Setup = ConsentEndToEndTests.Setup
        static let victim = "exe:/nonexistent/earmuff-victim"

        /// An EXTENSION request to module-earmuff, with `extra` written after the call's fields.
        static func frame(_ call: PermissionCall, tag: UInt32, extra: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
            var w = TagStructWriter()
            extra(&w)
            return RawClient.frame(call.packet(tag: tag) + w.bytes)
        }

        /// A handshaken raw client and the app key Earmuff gave it.
        static func connect(_ s: Setup) async throws -> (RawClient, String) {
            let raw = try RawClient(path: s.earmuff.listenPath)
            try raw.handshake(name: "permission-prober")
            let status = try await s.earmuff.waitForStatus { $0.clients.contains { $0.pid == getpid() } }
            return (raw, try #require(status.clients.first { $0.pid == getpid() }).appKey)
        }

        @Test func anAppLearnsOnlyItsOwnStateAndCannotNameAnother() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", Self.victim)
            let (raw, own) = try await Self.connect(s)

            // GET answers for the connection itself.
            let got = try #require(try raw.request(Self.frame(.get(kind: "microphone"), tag: 2), tag: 2), "\(s.logs)")
            #expect(got.command == Command.reply.rawValue)
            var r = got.reader
            let status = try PermissionStatus.decode(from: &r, version: Limits.protocolVersion)
            #expect(status.appKey == own && status.state == "undetermined", "\(status)")

            // A "kind" naming the other app: an error, and nothing about it.
            let named = try #require(try raw.request(Self.frame(.get(kind: Self.victim), tag: 3), tag: 3))
            #expect(named.command == Command.error.rawValue)
            var e = named.reader
            #expect(try e.readU32() == ErrorCode.invalid.rawValue)

            // TEST says the version; what this version does not know, or too long a purpose, is an error.
            let test = try #require(try raw.request(Self.frame(.test, tag: 10), tag: 10))
            var t = test.reader
            #expect(test.command == Command.reply.rawValue && (try? t.readU32()) == PermissionExtension.version)
            for (call, code) in [
                (PermissionCall.unknown(99), ErrorCode.notSupported),
                (.request(kind: "microphone", purpose: String(repeating: "x", count: 5000)), .tooLarge),
            ] {
                let answer = try #require(try raw.request(Self.frame(call, tag: 11), tag: 11))
                var a = answer.reader
                #expect(answer.command == Command.error.rawValue && (try? a.readU32()) == code.rawValue, "\(call)")
            }

            // The other app's key after the kind: not the documented request; the connection closes.
            try raw.send(Self.frame(.get(kind: "microphone"), tag: 4) { $0.writeString(Self.victim) })
            #expect(raw.waitUntilClosed(timeout: 30), "\(s.logs)")
            let logged = await Wait.until(timeout: 30) { s.earmuff.log().contains("malformed EXTENSION") }
            #expect(logged, "\(s.logs)")
            #expect(try s.earmuff.app(Self.victim)?.state == "granted")
        }

        /// A client that answers its own waiting request with a REPLY claiming "granted", sends a
        /// second request on the waiting tag, or leaves too many waiting, is closed; nothing is decided.
        @Test func aForgedReplyOrAReusedTagDecidesNothing() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (forger, own) = try await Self.connect(s)
            try forger.send(Self.frame(.request(kind: "microphone", purpose: "forgery"), tag: 5))
            _ = try await s.earmuff.waitForStatus { !$0.prompts(of: own).isEmpty }
            try forger.send(
                RawClient.frame(
                    PermissionStatus(state: "granted", appKey: own, identifiedBy: "exe", strength: "sandbox")
                        .packet(tag: 5, version: Limits.protocolVersion)))
            #expect(forger.waitUntilClosed(timeout: 30), "\(s.logs)")
            #expect(await Wait.until(timeout: 30) { s.earmuff.log().contains("REPLY is sent only by servers") }, "\(s.logs)")

            let (reuser, _) = try await Self.connect(s)
            try reuser.send(Self.frame(.request(kind: "microphone", purpose: "reuse"), tag: 6))
            try reuser.send(Self.frame(.request(kind: "microphone", purpose: "reuse"), tag: 6))
            #expect(reuser.waitUntilClosed(timeout: 30), "\(s.logs)")
            #expect(await Wait.until(timeout: 30) { s.earmuff.log().contains("tag 6 is still waiting for its reply") }, "\(s.logs)")

            // Requests that wait are bounded per connection.
            let (flooder, _) = try await Self.connect(s)
            for tag in UInt32(10)..<UInt32(10 + 65) {
                try flooder.send(Self.frame(.request(kind: "microphone", purpose: "flood"), tag: tag))
            }
            #expect(flooder.waitUntilClosed(timeout: 30), "\(s.logs)")
            #expect(await Wait.until(timeout: 30) { s.earmuff.log().contains("permission requests wait for an answer") }, "\(s.logs)")

            #expect(try s.earmuff.app(own)?.state != "granted", "\(s.logs)")
        }

        /// A request sent by a child the connection was handed to, after its parent exec'd,
        /// closes the connection before any answer, even for a granted script.
        @Test func aRequestOnAHandedOverConnectionIsRefused() async throws {
            let s = try Setup()
            defer { s.stop() }
            let request = RawClient.frame(PermissionCall.request(kind: "microphone", purpose: "handed over").packet(tag: 2))
            let (received, tool) = try await ImpersonationTests.handOver(s, mode: "exec", request: request)
            defer { _ = tool.stop(signal: SIGKILL) }
            #expect(received.isEmpty, "the child got \(received.count) bytes of answer")
            #expect(await Wait.until(timeout: 30) { s.earmuff.log().contains("EXTENSION was sent by pid") }, "\(s.logs)")
        }

        /// The process that connected exec's another program in place (same pid), which asks on
        /// the connection: refused as changed since it connected, and no prompt is raised.
        @Test func aRequestAfterAnExecInPlaceIsRefused() async throws {
            let s = try Setup()
            defer { s.stop() }
            let request = RawClient.frame(PermissionCall.request(kind: "microphone", purpose: "exec").packet(tag: 2))
            let (_, tool) = try await ImpersonationTests.handOver(s, mode: "inplace", request: request)
            defer { _ = tool.stop(signal: SIGKILL) }
            let refused = await Wait.until(timeout: 60) { s.earmuff.log().contains("its identity changed since it connected") }
            #expect(refused, "\(tool.process.stderrText())\n\(s.logs)")
            #expect(try s.earmuff.status().prompts.isEmpty, "\(s.logs)")
        }
    }
}
