// Lifespans through the real daemon: `earmuff grant APP --for 1h` shows in
// status and apps with its end; a session grant is gone after a restart of the
// daemon while the timed one stays; a grant for a few seconds turns a live
// recording real and then silent again when it ends, on the daemon's timer.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct LifespanEndToEndTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// Whether `rec`, once a stream was reported silenced, records only silence: it waits for
        /// 1.5 s more audio and checks what came after the first half second (frames already in
        /// flight when the state changed have arrived by then).
        static func silentFromHere(_ rec: Recording) async -> Bool {
            let at = rec.byteCount()
            let more = ConsentEndToEndTests.bytes(1.5, of: rec)
            guard await Wait.until(timeout: 60, { rec.byteCount() >= at + more || !rec.tool.process.isRunning }) else { return false }
            let audio = rec.data()
            let from = at + ConsentEndToEndTests.bytes(0.5, of: rec)
            guard audio.count > from else { return false }
            return AudioAnalysis.isUniform(audio.subdata(in: from..<audio.count), value: 0)
        }

        /// A server and a permission store that outlive the daemons a test starts and stops.
        struct Restarts {
            let server: PulseServer
            let directory: String
            var store: String { "\(directory)/permissions.sqlite" }

            init() throws {
                server = try PulseServer()
                do { directory = try Helpers.scratch() } catch { server.stop(); throw error }
            }

            /// Starts earmuff on the server and the store.
            func start(config: [String] = [], environment: [String: String] = [:]) throws -> Setup {
                try Setup(config: config, store: store, server: server, environment: environment)
            }

            /// Stops a daemon started here; the server and the store stay.
            func stop(_ s: Setup) {
                s.earmuff.stop()
                TempDir.remove(s.scratch)
            }

            func remove() {
                server.stop()
                TempDir.remove(directory)
            }
        }

        @Test func timedAndSessionDecisionsAcrossARestart() async throws {
            let r = try Restarts()
            defer { r.remove() }
            let other = "exe:/usr/bin/earmuff-test-session-app"

            let first = try r.start()
            let before = Date().timeIntervalSince1970
            let granted = try first.earmuff.control("grant", first.key, "--for", "1h", "--json")
            let after = Date().timeIntervalSince1970
            let reply = try ConsentJSON.decode(AppView.self, from: granted.stdout)
            #expect(reply.state == "granted" && reply.lifespan == "timed" && reply.afterwards == "undetermined", "\(reply)")
            let expiry = try #require(reply.expiresAt)
            #expect(expiry >= before + 3600 - 1 && expiry <= after + 3600 + 1, "\(expiry) not an hour after \(before)")
            try first.earmuff.control("deny", other, "--session")

            let app = try first.earmuff.app(first.key)
            #expect(app?.state == "granted" && app?.lifespan == "timed" && app?.expiresAt == expiry, "\(String(describing: app))")
            #expect(try first.earmuff.app(other)?.lifespan == "session")
            let status = try await first.earmuff.waitForStatus { ($0.temporary ?? []).count == 2 }
            #expect(status.temporary?.map(\.key).sorted() == [first.key, other].sorted(), "\(status)")
            let table = try first.earmuff.runCLI(["apps"]).stdoutText
            #expect(table.contains("granted until ") && table.contains("then undetermined"), "\(table)")
            #expect(table.contains("denied this session"), "\(table)")
            #expect(try first.earmuff.runCLI(["status"]).stdoutText.contains("temporary decisions: 2"))
            // The recording is real while the timed grant lasts.
            let rec = try first.record()
            #expect(await ConsentEndToEndTests.waitForToneAfterSwitch(rec, seconds: 0.5), "\(first.logs)")
            _ = rec.stop()
            r.stop(first)

            let second = try r.start()
            defer { r.stop(second) }
            let kept = try second.earmuff.app(first.key)
            #expect(kept?.state == "granted" && kept?.lifespan == "timed" && kept?.expiresAt == expiry, "\(String(describing: kept))")
            let gone = try second.earmuff.app(other)
            #expect(gone == nil || (gone?.state == "undetermined" && gone?.lifespan == "always"), "\(String(describing: gone))")
        }

        /// `deny --once` silences the clients connected now; the app's next client gets its grant.
        @Test func denyOnceCoversTheClientsConnectedNow() async throws {
            let s = try Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            #expect(try s.earmuff.runCLI(["deny", s.key, "--once"]).status == 1, "once needs a connected client")
            let rec = try s.record()
            #expect(await ConsentEndToEndTests.waitForToneAfterSwitch(rec, seconds: 0.5), "\(s.logs)")
            let reply = try ConsentJSON.decode(AppView.self, from: try s.earmuff.control("deny", s.key, "--once", "--json").stdout)
            #expect(reply.state == "denied" && reply.lifespan == "once" && reply.afterwards == "granted", "\(reply)")
            _ = try await s.earmuff.waitForStatus { $0.streams(of: s.key).first?.audio == "silenced" }
            #expect(await Self.silentFromHere(rec), "real audio after deny --once\n\(s.logs)")
            _ = rec.stop()
            #expect(try s.earmuff.app(s.key)?.state == "granted")
            let next = try s.record()
            #expect(await ConsentEndToEndTests.waitForToneAfterSwitch(next, seconds: 0.5), "the next client lost the grant\n\(s.logs)")
            _ = next.stop()
        }

        /// The prompt command's first line says how long its answer lasts.
        @Test func thePromptCommandAnswersForTheSession() async throws {
            let s = try Setup(config: ["prompt-command = echo session; exit 0"])
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            _ = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(await ConsentEndToEndTests.waitForToneAfterSwitch(rec, seconds: 0.5), "\(s.logs)")
            _ = rec.stop()
            let byCommand = try s.earmuff.app(s.key)
            #expect(
                byCommand?.state == "granted" && byCommand?.reason == "prompt-command" && byCommand?.lifespan == "session",
                "\(String(describing: byCommand))")
            // The usage log names the decision with its lifespan.
            var logged: [UsageLogTests.Session] = []
            #expect(
                await Wait.until(timeout: 60) {
                    guard let r = try? s.earmuff.runCLI(["log", "--json", "--app", s.key]),
                        let all = try? JSONDecoder().decode([UsageLogTests.Session].self, from: r.stdout)
                    else { return false }
                    logged = all
                    return all.first?.endedAt != nil
                }, "\(logged)")
            #expect(logged.first?.decision == "undetermined → granted this session (prompt-command)", "\(logged)")
        }

        /// An agent's answer says how long it lasts.
        @Test func anAgentDeniesForAnHour() async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny", "--for", "1h", "--json"])
            defer { _ = agent.stop() }
            let again = try s.record()
            let answered = try await agent.waitForLine { $0.type == "answered" }
            #expect(answered != nil, "\(agent.summary)\n\(s.logs)")
            let denied = try s.earmuff.app(s.key)
            #expect(
                denied?.state == "denied" && denied?.lifespan == "timed" && denied?.afterwards == "undetermined",
                "\(String(describing: denied))")
            #expect(await again.waitForAudio(seconds: 0.5), "\(s.logs)")
            let (_, audio) = again.stop()
            #expect(AudioAnalysis.isUniform(audio, value: 0), "the app heard the microphone while denied")
        }

        /// A grant unused for longer than auto-reset-days is undetermined when the daemon starts,
        /// says so in its log and `apps`, and the app is prompted for again.
        @Test func anUnusedGrantIsResetAtStart() async throws {
            let r = try Restarts()
            defer { r.remove() }
            let first = try r.start()
            try first.earmuff.control("grant", first.key)
            r.stop(first)
            // The grant was made, and last used, 31 days ago.
            let old = Date().timeIntervalSince1970 - 31 * 86_400
            let python = try ChildProcess.spawn(
                executable: findExecutable("python3") ?? "/usr/bin/python3",
                arguments: [
                    "-c",
                    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                        + "c.execute('UPDATE decisions SET decided_at = ?, last_used_at = ?', (float(sys.argv[2]),) * 2); c.commit()",
                    r.store, String(old),
                ],
                environment: Tool.privateEnvironment(root: r.directory), stdoutPath: "\(r.directory)/py.out",
                stderrPath: "\(r.directory)/py.out",
                maxLifetime: 60
            ).finish(timeout: 30)
            try #require(python.succeeded, "\(python)")

            let s = try r.start(config: ["auto-reset-days = 30"])
            defer { r.stop(s) }
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "undetermined" && app?.reason == "auto-reset", "\(String(describing: app))\n\(s.logs)")
            #expect(s.earmuff.log().contains("now undetermined (auto-reset)"), "\(s.logs)")
            let rec = try s.record()
            defer { _ = rec.stop() }
            let status = try await s.earmuff.waitForStatus { !$0.prompts(of: s.key).isEmpty }
            #expect(status.streams(of: s.key).map(\.audio) == ["silenced"], "\(status)")
        }

        @Test func aTimedGrantEndsWhileTheAppRecords() async throws {
            let s = try Setup()
            defer { s.stop() }
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5), "\(s.logs)")
            try s.earmuff.control("grant", s.key, "--for", "10s")
            #expect(await ConsentEndToEndTests.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone during the grant\n\(s.logs)")
            // One status reads the decisions and then each stream's access: the flip of the end may
            // fall between the two reads, so the end is waited for in both.
            let ended = try await s.earmuff.waitForStatus(timeout: 90) {
                $0.streams(of: s.key).first?.audio == "silenced" && ($0.temporary?.isEmpty ?? true)
            }
            #expect(ended.streams(of: s.key).first?.audio == "silenced" && (ended.temporary?.isEmpty ?? true), "\(ended)")
            #expect(await Self.silentFromHere(rec), "real audio after the grant ended\n\(s.logs)")
            let (_, audio) = rec.stop()
            #expect(Helpers.analyze(audio, format: .s16le).rms > 0.05, "the grant never reached the recording")
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "undetermined" && app?.lifespan == "always", "\(String(describing: app))")
            #expect(s.earmuff.log().contains("ended; now undetermined"), "\(s.logs)")
        }
    }
}
