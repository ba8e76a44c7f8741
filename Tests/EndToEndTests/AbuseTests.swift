// Abuse that must only hurt the abuser, through the real daemon in front of a
// private PulseAudio: a client renaming itself without end must not make the
// daemon queue work for the store, nor keep other apps' decisions waiting.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct AbuseTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// UPDATE_CLIENT_PROPLIST (mode replace) with a new application.name.
        static func rename(tag: UInt32, to name: String) -> [UInt8] {
            var props = Proplist()
            props.set(Proplist.Key.applicationName, string: name)
            return RawClient.packet(.updateClientProplist, tag: tag) { w in
                w.writeU32(2)
                w.writeProplist(props)
            }
        }

        /// 300,000 renames, each of which changes the display name the store keeps.
        @Test func renamingFloodQueuesNoStoreWork() async throws {
            let s = try Setup()
            defer { s.stop() }
            let pid = s.earmuff.process.pid
            let client = try RawClient(path: s.earmuff.listenPath)
            defer { client.close() }
            try client.handshake(name: "renamer")
            let peakBefore = ProcessStats.peakResidentKiB(pid)
            var tag: UInt32 = 10
            for round in 0..<300 {
                var batch: [UInt8] = []
                for i in 0..<1000 {
                    batch += Self.rename(tag: tag, to: "renamer \(round)-\(i)")
                    tag += 1
                }
                try client.send(batch)
                guard try client.reply(tag: tag - 1, timeout: 60) != nil else {
                    Issue.record("no reply to rename \(tag - 1)\n\(s.logs)")
                    return
                }
            }
            // Another app's decision is answered, and it is on disk when it is.
            try s.earmuff.control("grant", "exe:/usr/bin/earmuff-abuse-probe")
            #expect(try s.earmuff.app("exe:/usr/bin/earmuff-abuse-probe")?.state == "granted")
            let grown = ProcessStats.peakResidentKiB(pid) - peakBefore
            #expect(grown < 24 * 1024, "earmuff's peak memory grew by \(grown) KiB during the renames")
            // The last name is the one the store keeps (an app is listed once it has a decision).
            let named = try await s.earmuff.waitForStatus { $0.clients.contains { $0.displayName == "renamer 299-999" } }
            let renamer = try #require(named.clients.first { $0.displayName == "renamer 299-999" }?.appKey, "\(s.logs)")
            try s.earmuff.control("deny", renamer)
            let shown = await Wait.until(timeout: 60) {
                (try? s.earmuff.apps().contains { $0.displayName == "renamer 299-999" }) == true
            }
            #expect(shown, "\(s.logs)")
        }

        /// Idle authenticated clients fill earmuff's own limits, never the server's 64 slots:
        /// the refused client hears "Connection refused", and others still reach the server.
        /// (No slots are reserved for small apps here, so that one app can reach max-clients.)
        @Test func clientsCannotFillTheServersSlots() async throws {
            let s = try Setup(config: ["max-clients-per-app = 64", "reserved-clients = 0"])
            defer { s.stop() }
            var clients: [RawClient] = []
            defer { for c in clients { c.close() } }
            var refused = 0
            for _ in 0..<64 {
                let c = try RawClient(path: s.earmuff.listenPath)
                clients.append(c)
                do { try c.handshake() } catch { refused += 1 }
            }
            #expect(refused == 64 - 56, "\(refused) refused\n\(s.logs)")
            #expect(s.earmuff.log().contains("max-clients (56) clients are connected"))
            let through = try Tool.run("pactl", args: ["info"], server: s.earmuff.serverString, timeout: 20)
            #expect(!through.succeeded && through.stderr.contains("Connection refused"), "\(through)")
            let direct = try Tool.run("pactl", args: ["info"], server: s.server.serverString, timeout: 20)
            #expect(direct.succeeded, "the server has no slot left: \(direct)")
        }

        @Test func oneAppCannotTakeEveryClient() async throws {
            let s = try Setup(config: ["max-clients-per-app = 3"])
            defer { s.stop() }
            var clients: [RawClient] = []
            defer { for c in clients { c.close() } }
            for _ in 0..<3 {
                let c = try RawClient(path: s.earmuff.listenPath)
                try c.handshake()
                clients.append(c)
            }
            let fourth = try RawClient(path: s.earmuff.listenPath)
            defer { fourth.close() }
            #expect(throws: (any Error).self) { try fourth.handshake() }
            #expect(s.earmuff.log().contains("max-clients-per-app (3)"), "\(s.logs)")
            let other = try Tool.run("pactl", args: ["info"], server: s.earmuff.serverString, timeout: 20)
            #expect(other.succeeded, "another app was refused: \(other)")
        }

        /// A socket that another uid can reach (a mode set wrong) still serves only the daemon's uid.
        @Test func otherUIDsAreRefused() async throws {
            guard getuid() == 0 else { return } // only root can act as another uid here
            let s = try Setup()
            defer { s.stop() }
            unsafe chmod(s.earmuff.directory, 0o755)
            unsafe chmod(s.earmuff.listenPath, 0o777)
            guard let setpriv = findExecutable("setpriv"), let pactl = findExecutable("pactl") else {
                throw TestSupportError("setpriv (util-linux) and pactl are needed")
            }
            let r = try Tool.run(
                setpriv, args: ["--reuid=65534", "--regid=65534", "--clear-groups", pactl, "info"],
                server: s.earmuff.serverString, timeout: 20)
            #expect(!r.succeeded, "another uid used the sound server: \(r)")
            let line = await Wait.until(timeout: 30) { s.earmuff.log().contains("uid 65534 on \(s.earmuff.listenPath)") }
            #expect(line, "\(s.logs)")
        }

        /// Two requests with one tag: the server's two replies could not be told apart.
        @Test func aTagStillAwaitingItsReplyClosesTheClient() async throws {
            let s = try Setup()
            defer { s.stop() }
            let c = try RawClient(path: s.earmuff.listenPath)
            defer { c.close() }
            try c.handshake()
            try c.send(
                RawClient.setClientName(tag: 5, name: "me")
                    + RawClient.packet(.playSample, tag: 5) { w in
                        w.writeU32(0xFFFF_FFFF); w.writeString(nil); w.writeU32(0x10000); w.writeString("bell")
                        w.writeProplist(Proplist())
                    })
            #expect(c.waitUntilClosed(timeout: 30), "\(s.logs)")
            let logged = await Wait.until(timeout: 30) { s.earmuff.log().contains("tag 5 is still waiting for its reply") }
            #expect(logged, "\(s.logs)")
            // AUTH's tag too.
            let d = try RawClient(path: s.earmuff.listenPath)
            defer { d.close() }
            try d.send(RawClient.auth(tag: 0) + RawClient.packet(.getServerInfo, tag: 0))
            #expect(d.waitUntilClosed(timeout: 30), "\(s.logs)")
        }

        /// A client that sends refused requests, or questions to the permission extension, and
        /// never reads their replies (all made by Earmuff): few log lines, bounded memory, and it
        /// is closed.
        @Test(arguments: ["refused", "permission"])
        func refusedRequestsFromAClientThatNeverReads(_ asking: String) async throws {
            let s = try Setup()
            defer { s.stop() }
            let pid = s.earmuff.process.pid
            let c = try RawClient(path: s.earmuff.listenPath)
            defer { c.close() }
            try c.handshake()
            let peakBefore = ProcessStats.peakResidentKiB(pid)
            var batch: [UInt8] = []
            for tag in UInt32(10)..<UInt32(1010) {
                batch +=
                    asking == "refused"
                    ? RawClient.packet(.loadModule, tag: tag) {
                        $0.writeString("module-null-sink"); $0.writeString("")
                    }
                    : RawClient.frame(PermissionCall.get(kind: "microphone").packet(tag: tag))
            }
            var tag: UInt32 = 10
            for _ in 0..<200 {
                do { try c.send(batch) } catch { break } // closed by earmuff: done
                tag += 1000
            }
            #expect(c.waitUntilClosed(timeout: 60), "earmuff kept a client whose refusals pile up\n\(s.logs)")
            let closed = await Wait.until(timeout: 30) { s.earmuff.log().contains("the client does not read what it asks for") }
            #expect(closed, "\(s.logs)")
            let lines = s.earmuff.log().split(separator: "\n").filter { $0.contains("refused LOAD_MODULE") }.count
            #expect(lines <= 10, "\(lines) refusal lines")
            let grown = ProcessStats.peakResidentKiB(pid) - peakBefore
            #expect(grown < 24 * 1024, "peak memory grew by \(grown) KiB")
            let other = try Tool.run("pactl", args: ["info"], server: s.earmuff.serverString, timeout: 20)
            #expect(other.succeeded, "\(other)")
        }
    }
}
