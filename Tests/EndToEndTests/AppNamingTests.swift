// Naming apps the way people do: `earmuff grant COMMAND`, a path, or an exe:
// key through a link, all decide the key the app's processes really get; a
// name that only an app's claim matches decides nothing.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct AppNamingTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// A directory for PATH with `rec` → pacat (a link, as Debian's arecord → aplay) and a Python script.
        static func programs(_ s: Setup) throws -> (dir: String, pacat: String) {
            let dir = "\(s.scratch)/bin"
            try TempDir.makeDirectory(dir)
            let pacat = String(s.key.dropFirst("exe:".count))
            guard unsafe symlink(pacat, "\(dir)/rec") == 0 else { throw TestSupportError("symlink: \(errno)") }
            try "#!/usr/bin/env python3\nprint('memo')\n".write(toFile: "\(dir)/memo", atomically: true, encoding: .utf8)
            unsafe chmod("\(dir)/memo", 0o755)
            return (dir, pacat)
        }

        @Test func commandsPathsAndLinkedKeysDecideTheKeyThatMatches() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (dir, pacat) = try Self.programs(s)
            let env = ["PATH": "\(dir):/usr/bin:/bin"]
            for (typed, key) in [
                ("rec", "exe:\(pacat)"), ("\(dir)/rec", "exe:\(pacat)"), ("exe:\(dir)/rec", "exe:\(pacat)"),
                ("memo", "script:\(dir)/memo"),
            ] {
                let r = try s.earmuff.runCLI(["grant", typed, "--json"], extraEnvironment: env)
                #expect(r.status == 0, "\(typed): \(r)")
                #expect(r.stderr.contains("deciding for \(key)"), "\(typed): \(r)")
                let app = try? ConsentJSON.decode(AppView.self, from: r.stdout)
                #expect(app?.key == key && app?.state == "granted", "\(typed): \(r)")
                try s.earmuff.control("reset", key)
            }
            let missing = try s.earmuff.runCLI(["grant", "\(dir)/nothing-here"], extraEnvironment: env)
            #expect(missing.status == 1 && missing.stderr.contains("no file at"), "\(missing)")
            // A granted command records the tone through its link.
            let granted = try s.earmuff.runCLI(["grant", "rec"], extraEnvironment: env)
            #expect(granted.status == 0, "\(granted)")
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5))
            let (_, audio) = rec.stop()
            #expect(!AudioAnalysis.isUniform(audio, value: 0), "the granted command recorded silence")
        }

        /// A client that calls itself "zoom" cannot make `earmuff grant zoom` grant it.
        @Test func aClaimedNameAloneDecidesNothing() async throws {
            let s = try Setup()
            defer { s.stop() }
            let client = try RawClient(path: s.earmuff.listenPath)
            defer { client.close() }
            try client.handshake(name: "zoom")
            _ = try await s.earmuff.waitForStatus { st in st.clients.contains { $0.displayName == "zoom" } }
            let r = try s.earmuff.runCLI(["grant", "zoom"], extraEnvironment: ["PATH": "/usr/bin:/bin"])
            #expect(r.status == 1, "\(r)")
            #expect(r.stderr.contains("calls itself"), "\(r)")
            let apps = try s.earmuff.apps()
            #expect(!apps.contains { $0.state == "granted" }, "\(apps)")
        }

        /// `earmuff apps` shows the purpose an undetermined app gave with `earmuff run --purpose`.
        @Test func appsShowThePurposeGiven() async throws {
            let s = try Setup()
            defer { s.stop() }
            let rec = try Tool.startRecordingThroughRun(
                earmuffBinary: s.earmuff.binary, runArguments: ["--purpose", "Voice memos", "--listen", s.earmuff.listenPath],
                server: "unix:/nonexistent/pulse/native")
            #expect(await rec.waitForAudio(seconds: 0.2), "\(s.logs)")
            _ = rec.stop()
            let shown = await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key)?.purpose) == "Voice memos" }
            #expect(shown, "\(String(describing: try? s.earmuff.app(s.key)))")
            let table = try s.earmuff.runCLI(["apps"])
            #expect(table.stdoutText.contains("Voice memos"), "\(table)")
        }
    }
}
