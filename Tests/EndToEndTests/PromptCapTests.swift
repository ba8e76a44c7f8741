// A prompt storm of made-up identities (copies of parecord at their own paths, each its
// own app) must not bury the prompt of the app the person is using: at most
// max-pending-prompts-per-uid (8) prompts are pending at once, a prompt of an app that
// recorded and left makes room at once, and the real app's prompt is raised.
// Captures over the cap record silence and are listed in status.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct PromptCapTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// The most prompts pending at once, from the raised and resolved events seen so far.
        static func mostPending(_ lines: [ControlLine]) -> Int {
            var open = 0, most = 0
            for l in lines {
                if l.event == "prompt-raised" { open += 1 }
                if l.event == "prompt-resolved" { open -= 1 }
                most = max(most, open)
            }
            return most
        }

        static func start(_ s: Setup, _ tool: String) throws -> Recording {
            try Tool.startPurposefulRecording(server: s.earmuff.serverString, purpose: "Storm", latencyMsec: 200, tool: tool)
        }

        /// 24 identities record and leave, one after another; then the real parecord records.
        @Test func aStormOfAppsThatLeaveDoesNotBuryTheRealPrompt() async throws {
            let s = try Setup()
            defer { s.stop() }
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let fakes = try PromptStormTests.recorders(in: scratch, count: 24)
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            for tool in fakes {
                let rec = try Self.start(s, tool)
                let prompted = await Wait.until(timeout: 60) {
                    ((try? watch.lines()) ?? []).contains { $0.event == "prompt-raised" && $0.prompt?.appKey == "exe:\(tool)" }
                }
                _ = rec.stop()
                #expect(prompted, "no prompt for \(tool)\n\(s.logs)")
            }
            let status = try s.earmuff.status()
            #expect(status.prompts.count == 8, "\(status.prompts.count) prompts pending")
            let real = try s.record()
            defer { _ = real.stop() }
            let prompted = await Wait.until(timeout: 60) {
                ((try? watch.lines()) ?? []).contains { $0.event == "prompt-raised" && $0.prompt?.appKey == s.key }
            }
            #expect(prompted, "the real app's prompt was not raised\n\(s.logs)")
            #expect(await real.waitForAudio(seconds: 0.5), "\(s.logs)")
            #expect(real.isExactSilence(), "the undetermined app heard something")
            let lines = try watch.lines()
            #expect(Self.mostPending(lines) <= 8, "\(Self.mostPending(lines)) prompts were pending at once")
            #expect(try s.earmuff.status().prompts(of: s.key).count == 1)
        }

        /// 10 identities that keep recording: 8 are prompted, 2 wait, silenced and listed in
        /// status; when a prompt is settled, the oldest waiting one is prompted.
        @Test func capturesOverTheCapWaitListedInStatus() async throws {
            let s = try Setup()
            defer { s.stop() }
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            let fakes = try PromptStormTests.recorders(in: scratch, count: 10)
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            var recordings: [Recording] = []
            defer { for r in recordings { _ = r.stop() } }
            for tool in fakes {
                recordings.append(try Self.start(s, tool))
                // One at a time, so that which ones wait is known.
                let known = await Wait.until(timeout: 60) {
                    (try? s.earmuff.status()).map { st in
                        st.prompts(of: "exe:\(tool)").count + (st.waiting ?? []).filter { $0.appKey == "exe:\(tool)" }.count == 1
                    } ?? false
                }
                #expect(known, "\(tool) neither prompted nor waiting\n\(s.logs)")
            }
            let status = try s.earmuff.status()
            #expect(status.prompts.map(\.appKey) == fakes.prefix(8).map { "exe:\($0)" }, "\(status.prompts)")
            #expect(status.waiting?.map(\.appKey) == fakes.suffix(2).map { "exe:\($0)" }, "\(String(describing: status.waiting))")
            #expect(status.waiting?.allSatisfy { $0.kind == "microphone" } == true)
            for r in recordings.suffix(2) { #expect(await r.waitForAudio(seconds: 0.5) && r.isExactSilence()) }
            let text = String(decoding: try s.earmuff.control("status").stdout, as: UTF8.self)
            #expect(text.contains("waiting for a prompt") && text.contains(fakes[8]), "\(text)")
            #expect(s.earmuff.log().contains("waits for a prompt"), "\(s.logs)")
            // Denying the first app settles its prompt: the ninth is prompted now.
            try s.earmuff.control("deny", "exe:\(fakes[0])")
            let next = await Wait.until(timeout: 60) {
                ((try? watch.lines()) ?? []).contains { $0.event == "prompt-raised" && $0.prompt?.appKey == "exe:\(fakes[8])" }
            }
            #expect(next, "\(s.logs)")
            #expect(try s.earmuff.status().waiting?.map(\.appKey) == ["exe:\(fakes[9])"])
        }
    }
}
