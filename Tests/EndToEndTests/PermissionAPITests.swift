// The permission API through the real daemon: the two example apps (the Swift one on
// EarmuffKit, which then records with libpulse; the Python one speaking the documented
// wire with the standard library) ask for permission before they record, against a real
// server with Earmuff in front of it and a scripted agent as the person. Undetermined,
// a request raises one prompt and returns the answer; a decided app is answered at
// once; the change stream follows `earmuff grant/deny/reset`; inside `earmuff run
// --sandbox` and a Flatpak-shaped sandbox the app is the sandboxed app; with no Earmuff
// in front of the server the API says unavailable. What the Swift example records after
// the answer is judged by content: exact silence after deny, the tone after allow.

import EarmuffKit
import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct PermissionAPITests {
        typealias Setup = ConsentEndToEndTests.Setup
        static let purpose = "Permission API test"

        /// The two example apps.
        enum Example: String, CaseIterable, CustomTestStringConvertible, Sendable {
            case swift, python

            var testDescription: String { rawValue }

            /// The example's file on the host.
            var file: String {
                get throws {
                    switch self {
                    case .swift:
                        return URL(fileURLWithPath: try EarmuffProcess.locateBinary()).deletingLastPathComponent()
                            .appendingPathComponent("earmuff-request-permission").path
                    case .python:
                        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                            .deletingLastPathComponent().appendingPathComponent("examples/request-permission.py").path
                    }
                }
            }

            /// What a sandbox needs of the host beyond its /usr: the example, and for the Swift one
            /// the toolchain's runtime libraries it links (found next to it through `$ORIGIN`).
            var files: [String] {
                get throws {
                    let program = try file
                    guard self == .swift else { return [program] }
                    let ldd = try Tool.run("ldd", args: [program], server: "")
                    guard ldd.succeeded else { throw TestSupportError("ldd \(program): \(ldd)") }
                    let libraries = ldd.stdoutText.split(separator: "\n").compactMap { line -> String? in
                        guard let arrow = line.range(of: " => ") else { return nil }
                        let path = line[arrow.upperBound...].split(separator: " ").first.map(String.init) ?? ""
                        let system = ["/lib/", "/lib64/", "/usr/"].contains { path.hasPrefix($0) }
                        return path.hasPrefix("/") && !system ? path : nil
                    }
                    return [program] + libraries
                }
            }

            /// The command line running it with `args`: from `directory` when given (a copy there,
            /// for sandboxes), else from where it was built. The Swift example records `seconds`.
            func command(_ args: [String], seconds: Double = 1, from directory: String? = nil) throws -> [String] {
                let path = try directory.map { "\($0)/" + URL(fileURLWithPath: try file).lastPathComponent } ?? file
                switch self {
                case .swift: return [path, "--seconds", String(seconds)] + args
                case .python: return ["python3", path] + args
                }
            }

            /// Starts it against `server`.
            func start(
                _ server: String, _ args: [String], seconds: Double = 1,
                environment: [String: String] = [:]
            ) throws -> RunningTool {
                let c = try command(args, seconds: seconds)
                return try Tool.start(c[0], args: Array(c.dropFirst()), server: server, environment: environment)
            }
        }

        /// What a run printed: the last value of each `field: value` line, and every `changed:`.
        struct Printed {
            var fields: [String: String] = [:]
            var changes: [String] = []

            init(_ text: String) {
                for line in text.split(separator: "\n") {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    let key = String(line[..<colon])
                    let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    if key == "changed" { changes.append(value) } else { fields[key] = value }
                }
            }

            var state: String? { fields["state"] }
            /// The app key of `identity: KEY (identified by …)`.
            var appKey: String? { fields["identity"].flatMap { $0.split(separator: " ").first.map(String.init) } }
        }

        /// Waits until `tool` printed a line starting with `prefix`; what it printed by then.
        static func waitForLine(_ tool: RunningTool, _ prefix: String, timeout: Double = 90) async -> Printed {
            var text = ""
            _ = await Wait.until(timeout: timeout, interval: 0.05) {
                text = String(decoding: tool.process.stdoutData(), as: UTF8.self)
                return text.split(separator: "\n").contains { $0.hasPrefix(prefix) } || !tool.process.isRunning
            }
            return Printed(text)
        }

        /// The prompts `watch` reported for `key`.
        static func promptsRaised(_ watch: RunningCLI, key: String) throws -> [PromptView] {
            try watch.lines().filter { $0.event == "prompt-raised" && $0.prompt?.appKey == key }.compactMap(\.prompt)
        }

        /// Runs `example` to the end; its result and what it printed.
        static func run(
            _ example: Example, _ s: Setup, _ args: [String], seconds: Double = 1,
            server: String? = nil, environment: [String: String] = [:]
        ) throws -> (ToolResult, Printed) {
            let tool = try example.start(server ?? s.earmuff.serverString, args, seconds: seconds, environment: environment)
            let result = tool.outcome(timeout: 120)
            return (result, Printed(result.stdoutText))
        }

        // MARK: asking

        /// Undetermined: the request raises one prompt showing the purpose passed, and returns
        /// what the agent answered; the Swift example then records the tone or exact silence.
        /// Asked again, the app is answered at once and no prompt is raised.
        @Test(arguments: Example.allCases, ["allow", "deny"])
        func aRequestRaisesOnePromptAndReturnsTheAnswer(example: Example, answer: String) async throws {
            let s = try Setup()
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", answer, "--json"])
            defer { agent.stop() }
            let granted = answer == "allow"

            let (first, printed) = try Self.run(example, s, ["--purpose", Self.purpose])
            #expect(first.status == (granted ? 0 : 1) && !first.timedOut, "\(first)\n\(s.logs)")
            #expect(printed.state == (granted ? "granted" : "denied"), "\(first)")
            let key = try #require(printed.appKey, "\(first)")
            #expect(key.hasPrefix(example == .swift ? "exe:" : "script:"), "\(first)")
            // (The watcher may print a moment after the app exits.)
            let raised = try await watch.waitForLine { $0.event == "prompt-raised" && $0.prompt?.appKey == key }
            #expect(raised?.prompt?.purpose == Self.purpose, "\(String(describing: raised))")
            #expect(try s.earmuff.app(key)?.state == (granted ? "granted" : "denied"))
            if example == .swift {
                let recorded = printed.fields["recorded"] ?? ""
                #expect(recorded.contains(granted ? "sound" : "silence"), "\(first)\n\(s.logs)")
            }

            // Decided: answered at once, no prompt.
            agent.stop()
            let (again, printedAgain) = try Self.run(example, s, ["--purpose", Self.purpose], seconds: 0)
            #expect(again.status == first.status, "\(again)\n\(s.logs)")
            #expect(printedAgain.state == printed.state, "\(again)")
            try s.earmuff.control("deny", "exe:/nonexistent/earmuff-permission-probe")
            _ = try await watch.waitForLine { $0.app?.key == "exe:/nonexistent/earmuff-permission-probe" }
            let prompts = try Self.promptsRaised(watch, key: key)
            #expect(prompts.count == 1, "one prompt in all: \(prompts)")
            #expect(try s.earmuff.status().prompts(of: key).isEmpty)
        }

        /// The change stream follows decisions made elsewhere: deny, grant, reset.
        @Test(arguments: Example.allCases)
        func thePermissionFollowsGrantDenyAndResetLive(example: Example) async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "allow", "--json"])
            defer { agent.stop() }
            let tool = try example.start(s.earmuff.serverString, ["--purpose", Self.purpose, "--watch", "3"], seconds: 0)
            defer { tool.cleanup() }
            let watching = await Self.waitForLine(tool, "watching:")
            #expect(watching.fields["watching"] == "granted", "\(tool.process.stderrText())\n\(s.logs)")
            let key = try #require(watching.appKey)
            var expected: [String] = []
            for (command, state) in [("deny", "denied"), ("grant", "granted"), ("reset", "undetermined")] {
                try s.earmuff.control(command, key)
                expected.append(state)
                let now = await Wait.until(timeout: 60) {
                    Printed(String(decoding: tool.process.stdoutData(), as: UTF8.self)).changes == expected
                }
                #expect(now, "after \(command): \(String(decoding: tool.process.stdoutData(), as: UTF8.self))\n\(s.logs)")
            }
            let result = tool.wait(timeout: 60)
            #expect(result.status == 0, "\(result)")
        }

        /// `missing-purpose = disconnect` refuses a request without a purpose as it refuses a
        /// stream (the connection closes: the app is told the API is unavailable); a purpose
        /// the app declares in its client properties is what the prompt shows.
        @Test(arguments: Example.allCases)
        func strictModeRefusesARequestWithoutAPurpose(example: Example) async throws {
            let s = try Setup(config: ["missing-purpose = disconnect"])
            defer { s.stop() }
            let (refused, printed) = try Self.run(example, s, [], seconds: 0)
            #expect(refused.status == 2 && printed.state == "unavailable", "\(refused)\n\(s.logs)")
            #expect(s.earmuff.log().contains("asked for permission without a purpose string"), "\(s.logs)")

            let agent = try s.earmuff.startCLI(["agent", "--answer", "allow", "--json"])
            defer { agent.stop() }
            let declared = "Declared in PULSE_PROP"
            // The Python example sends no client properties of its own but its name; it declares by the request.
            let args = example == .python ? ["--purpose", declared] : []
            let (asked, printedAsked) = try Self.run(
                example, s, args, seconds: 0,
                environment: ["PULSE_PROP": Tool.purposeProperty(declared)])
            #expect(asked.status == 0 && printedAsked.state == "granted", "\(asked)\n\(s.logs)")
            let prompt = try await agent.waitForLine { $0.type == "prompt" }
            #expect(prompt?.prompt?.purpose == declared, "\(agent.summary)")
        }

        /// The library itself, in this process: the completion-handler form, kinds decided on
        /// their own, the identity, and the change stream.
        @Test func theLibraryAsksPerKindAndFollowsChanges() async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "allow", "--json"])
            defer { agent.stop() }
            let app = AudioApplication(environment: ["PULSE_SERVER": s.earmuff.serverString])
            #expect(app.recordPermission == .undetermined, "\(app.unavailableReason ?? "")\n\(s.logs)")
            let identity = try #require(app.identity)
            #expect(identity.appKey.hasPrefix("exe:") && identity.identifiedBy == "exe" && identity.strength == "weak", "\(identity)")

            let granted = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
                app.requestPermission(for: .systemAudio, purpose: Self.purpose) { done.resume(returning: $0 == .granted) }
            }
            #expect(granted, "\(agent.summary)\n\(s.logs)")
            let prompt = try await agent.waitForLine { $0.type == "prompt" }
            #expect(prompt?.prompt?.kind == "system-audio" && prompt?.prompt?.appKey == identity.appKey, "\(agent.summary)")
            #expect(app.recordPermission(for: .systemAudio) == .granted)
            #expect(app.recordPermission == .undetermined, "a grant of one kind says nothing about the others")

            var changes = app.recordPermissionChanges().makeAsyncIterator()
            #expect(await changes.next() == .undetermined)
            try s.earmuff.control("deny", identity.appKey)
            #expect(await changes.next() == .denied)
            // Decided: the request returns at once.
            #expect(await app.requestPermission(purpose: Self.purpose) == .denied)
        }

        // MARK: sandboxes

        /// Inside `earmuff run --sandbox` the request is the launcher's (strength sandbox), and so is the prompt.
        @Test(arguments: Example.allCases)
        func insideEarmuffRunTheAppIsTheLauncher(example: Example) async throws {
            let s = try Setup()
            defer { s.stop() }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "allow", "--json"])
            defer { agent.stop() }
            let home = try Helpers.scratch()
            defer { TempDir.remove(home) }
            for file in try example.files {
                try FileManager.default.copyItem(atPath: file, toPath: "\(home)/\(URL(fileURLWithPath: file).lastPathComponent)")
            }
            let appID = "org.example.Asker"
            let run = try s.earmuff.startSandboxed(
                ["--home", home, "--app-id", appID, "--purpose", Self.purpose],
                command: try example.command([], from: "."))
            let result = run.outcome(timeout: 120)
            let printed = Printed(result.stdoutText)
            #expect(result.status == 0 && printed.state == "granted", "\(result)\n\(s.logs)")
            #expect(printed.fields["identity"] == "launcher:\(appID) (identified by launcher, sandbox)", "\(result)")
            let prompt = try await agent.waitForLine { $0.type == "prompt" }
            #expect(prompt?.prompt?.appKey == "launcher:\(appID)", "\(agent.summary)")
            if example == .swift {
                #expect(printed.fields["recorded"]?.contains("sound") == true, "\(result)\n\(s.logs)")
            }
        }

        /// In a Flatpak-shaped sandbox (only the Pulse socket visible) the request is the Flatpak's.
        @Test(arguments: Example.allCases)
        func inAFlatpakSandboxTheAppIsTheFlatpak(example: Example) async throws {
            let s = try Setup()
            defer { s.stop() }
            let appID = "org.example.FlatAsker"
            try s.earmuff.control("grant", "flatpak:\(appID)")
            let run = try Sandbox.startFlatpak(
                appID: appID, sessionSocket: s.earmuff.listenPath, purpose: Self.purpose,
                command: try example.command([], from: "."), files: try example.files)
            let result = run.outcome(timeout: 120)
            let printed = Printed(result.stdoutText)
            #expect(result.status == 0 && printed.state == "granted", "\(result)\n\(s.logs)")
            // (Weak here: a test's sandbox runs in no app-flatpak-ID scope, which Earmuff says.)
            #expect(printed.fields["identity"]?.hasPrefix("flatpak:\(appID) (identified by flatpak, ") == true, "\(result)")
            if example == .swift {
                #expect(printed.fields["recorded"]?.contains("sound") == true, "\(result)\n\(s.logs)")
            }
        }

        // MARK: without Earmuff

        /// Straight to the server, no Earmuff in front: unavailable, exit 2, without waiting.
        @Test(arguments: Example.allCases)
        func withoutEarmuffTheAPIIsUnavailable(example: Example) async throws {
            let s = try Setup()
            defer { s.stop() }
            let (result, printed) = try Self.run(
                example, s, ["--purpose", Self.purpose], seconds: 0,
                server: s.server.serverString)
            #expect(result.status == 2 && !result.timedOut, "\(result)")
            #expect(printed.state == "unavailable", "\(result)")
            // The server itself said it has no such module (not: no server there).
            #expect(printed.fields["why"]?.contains("Earmuff is not in front of it") == true, "\(result)")
        }
    }
}
