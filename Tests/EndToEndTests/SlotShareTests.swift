// One app's connections must not lock others out of Earmuff: idle connections of two
// apps (this test process and a Python script, two app keys) fill what they can, and
// parecord still connects and records as its decision says; connections that never
// finish their handshake are closed after handshake-timeout.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SlotShareTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// `idle.py SOCKET COUNT HANDSHAKE|- OUT`: opens COUNT connections, sends the bytes of
        /// HANDSHAKE on each (none with -), writes how many were accepted (a REPLY came
        /// first; with no handshake: how many are still open after a moment) to OUT, then idles.
        static let idleScript = """
            import socket, struct, sys, time
            path, count, handshake, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
            data = open(handshake, "rb").read() if handshake != "-" else b""
            conns, accepted = [], 0
            for _ in range(count):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                conns.append(s)
                if data:
                    s.sendall(data)
                    s.settimeout(20)
                    head = b""
                    try:
                        while len(head) < 25:
                            chunk = s.recv(25 - len(head))
                            if not chunk:
                                break
                            head += chunk
                    except OSError:
                        pass
                    # descriptor (20 bytes), then 'L' and the command: 2 is REPLY, 0 ERROR
                    if len(head) == 25 and struct.unpack(">I", head[21:25])[0] == 2:
                        accepted += 1
            if not data:
                time.sleep(0.5)
                for s in conns:
                    s.setblocking(False)
                    try:
                        s.recv(1)  # a refusal (ERROR, then end of file) or a reset
                    except BlockingIOError:
                        accepted += 1
                    except OSError:
                        pass
            with open(out + ".tmp", "w") as f:
                f.write(str(accepted))
            import os
            os.rename(out + ".tmp", out)
            time.sleep(600)
            """

        /// Starts the script with `count` connections; returns it and how many were accepted.
        static func idleConnections(_ s: Setup, count: Int, handshake: Bool) async throws -> (RunningTool, Int) {
            let script = "\(s.scratch)/idle.py"
            try Self.idleScript.write(toFile: script, atomically: true, encoding: .utf8)
            let bytes = "\(s.scratch)/handshake"
            try Data(RawClient.auth(tag: 0) + RawClient.setClientName(tag: 1, name: "idle")).write(to: URL(fileURLWithPath: bytes))
            let out = "\(s.scratch)/accepted"
            let tool = try Tool.start(
                "python3", args: [script, s.earmuff.listenPath, String(count), handshake ? bytes : "-", out],
                server: s.earmuff.serverString)
            let done = await Wait.until(timeout: 120) { FileManager.default.fileExists(atPath: out) }
            #expect(done, "the script did not finish\n\(tool.process.stderrText())\n\(s.logs)")
            let n = Int((try? String(contentsOfFile: out, encoding: .utf8)) ?? "") ?? -1
            return (tool, n)
        }

        /// The granted parecord records the tone through earmuff.
        static func grantedRecorderGetsTheTone(_ s: Setup) async throws {
            try s.earmuff.control("grant", s.key)
            let (result, audio) = try await Helpers.recordMic(server: s.earmuff.serverString)
            #expect(result.status == 0, "\(result)\n\(s.logs)")
            let report = Helpers.analyze(audio, format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS), "\(report)\n\(s.logs)")
        }

        /// 28 idle authenticated clients of this process, then 28 of a script: two apps would
        /// fill max-clients (56); the last 8 slots stay for apps with fewer than 4 clients.
        @Test func idleClientsOfTwoAppsLeaveRoomForAThird() async throws {
            let s = try Setup()
            defer { s.stop() }
            var mine: [RawClient] = []
            defer { for c in mine { c.close() } }
            for _ in 0..<28 {
                let c = try RawClient(path: s.earmuff.listenPath)
                try c.handshake()
                mine.append(c)
            }
            let (script, accepted) = try await Self.idleConnections(s, count: 28, handshake: true)
            defer { _ = script.stop(signal: SIGKILL) }
            #expect(accepted == 56 - 8 - 28, "the script's clients accepted: \(accepted)\n\(s.logs)")
            #expect(s.earmuff.log().contains("(reserved-clients)"), "\(s.logs)")
            let refusals = s.earmuff.log().split(separator: "\n").filter { $0.contains("refused script:") }.count
            #expect(refusals <= 5, "\(refusals) refusal lines for 8 refusals")
            try await Self.grantedRecorderGetsTheTone(s)
            // pactl too (a fourth app), while parecord's slot is free again.
            let info = try Tool.run("pactl", args: ["info"], server: s.earmuff.serverString, timeout: 20)
            #expect(info.succeeded, "\(info)")
        }

        /// 20 made-up identities (one script at 20 paths) with 3 idle connections each, all with
        /// their handshake done: they take every slot (max-clients, 56), each under the reserve's
        /// 4. parecord still
        /// gets in, in the place of the one that held nothing and was silent the longest, records
        /// (silence: it is undetermined) and raises its prompt; what is closed is logged.
        @Test func idleConnectionsUnderMadeUpNamesDoNotLockOutANewApp() async throws {
            let s = try Setup(config: ["handshake-timeout = 1"])
            defer { s.stop() }
            let bytes = "\(s.scratch)/handshake"
            try Data(RawClient.auth(tag: 0) + RawClient.setClientName(tag: 1, name: "idle")).write(to: URL(fileURLWithPath: bytes))
            // A recording already running holds its stream: never closed to make room.
            let first = try s.record()
            defer { _ = first.stop() }
            #expect(await first.waitForAudio(seconds: 0.2), "\(s.logs)")
            var scripts: [RunningTool] = []
            defer { for t in scripts { _ = t.stop(signal: SIGKILL) } }
            var accepted = 0
            for n in 0..<20 {
                let script = "\(s.scratch)/idle\(n).py", out = "\(s.scratch)/accepted\(n)"
                try Self.idleScript.write(toFile: script, atomically: true, encoding: .utf8)
                scripts.append(try Tool.start("python3", args: [script, s.earmuff.listenPath, "3", bytes, out], server: s.earmuff.serverString))
                #expect(await Wait.until(timeout: 120) { FileManager.default.fileExists(atPath: out) }, "idle\(n).py did not finish\n\(s.logs)")
                accepted += Int((try? String(contentsOfFile: out, encoding: .utf8)) ?? "") ?? 0
            }
            // Later ones may have been let in in the places of earlier ones silent long enough.
            #expect(accepted >= 55, "the made-up apps got \(accepted) of their 60 connections in\n\(s.logs)")
            let full = try await s.earmuff.waitForStatus { $0.clients.count == 56 }
            #expect(full.clients.count == 56, "\(full.clients.count) clients\n\(s.logs)")
            let rec = try s.record()
            defer { _ = rec.stop() }
            #expect(await rec.waitForAudio(seconds: 0.5), "parecord: \(rec.tool.process.stderrText())\n\(s.logs)")
            #expect(rec.isExactSilence(), "the undetermined app heard something")
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: s.key).count == 1 }
            #expect(status.prompts(of: s.key).count == 1, "no prompt for parecord: \(status)\n\(s.logs)")
            // Logged, a few lines however many were closed.
            let lines = s.earmuff.log().split(separator: "\n").filter { $0.contains("to make room for") }.count
            #expect(lines >= 1 && lines <= 10, "\(lines) lines\n\(s.logs)")
            let before = first.byteCount()
            #expect(
                await Wait.until(timeout: 30) { first.byteCount() > before } && first.tool.process.isRunning,
                "the first recording was closed: \(first.tool.process.stderrText())\n\(s.logs)")
        }

        /// Silent connections of two apps (none sends a byte): parecord gets in at once, and the
        /// silent ones are closed after handshake-timeout, which frees their slots.
        @Test func silentConnectionsAreClosedAfterTheHandshakeTimeout() async throws {
            let s = try Setup(config: ["handshake-timeout = 3"])
            defer { s.stop() }
            let named = try RawClient(path: s.earmuff.listenPath)
            defer { named.close() }
            try named.handshake()
            var silent: [RawClient] = []
            defer { for c in silent { c.close() } }
            for _ in 0..<27 { silent.append(try RawClient(path: s.earmuff.listenPath)) }
            let (script, open) = try await Self.idleConnections(s, count: 36, handshake: false)
            defer { _ = script.stop(signal: SIGKILL) }
            #expect(open <= 56 - 8 - 28, "the script kept \(open) silent connections\n\(s.logs)")
            try await Self.grantedRecorderGetsTheTone(s)
            for c in silent { #expect(c.waitUntilClosed(timeout: 60), "a silent connection stayed open\n\(s.logs)") }
            let logged = await Wait.until(timeout: 30) {
                s.earmuff.log().split(separator: "\n").contains {
                    $0.contains("closed session") && $0.contains("did not send AUTH and SET_CLIENT_NAME within handshake-timeout (3.0 s)")
                }
            }
            #expect(logged, "\(s.logs)")
            let lines = s.earmuff.log().split(separator: "\n").filter { $0.contains("closed session") && $0.contains("within handshake-timeout") }.count
            #expect(lines <= 10, "\(lines) timeout lines")
            // The client that finished its handshake is still served.
            let reply = try named.request(RawClient.packet(.getServerInfo, tag: 5), tag: 5)
            #expect(reply?.command == Command.reply.rawValue, "\(String(describing: reply))\n\(s.logs)")
            let status = try await s.earmuff.waitForStatus { $0.clients.count <= 2 }
            #expect(status.clients.count <= 2, "\(status.clients.count) clients left")
        }
    }
}
