// The master switch: `earmuff access off` silences every app's recordings of a
// kind at once, granted or not, and `on` gives each back what it was decided;
// it survives a restart of the daemon, other kinds are untouched, and a prompt
// raised meanwhile says that access is off.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct MasterSwitchTests {
        typealias E2E = ConsentEndToEndTests
        typealias Restarts = LifespanEndToEndTests.Restarts

        static let notes = "launcher:org.example.Notes"

        /// parecord and the launcher app Notes, both granted, recording.
        static func twoGrantedRecordings(_ s: E2E.Setup) throws -> [Recording] {
            try s.earmuff.control("grant", s.key)
            try s.earmuff.control("grant", Self.notes)
            return [
                try s.record(),
                try Tool.startRecordingThroughRun(
                    earmuffBinary: s.earmuff.binary,
                    runArguments: ["--app-id", "org.example.Notes", "--purpose", "Voice notes", "--control", s.earmuff.controlPath],
                    server: "unix:/nonexistent/pulse/native"),
            ]
        }

        /// Two granted apps recording: off silences both from their next frames, on brings the
        /// tone back to both; the switch is kept across a restart of the daemon.
        @Test func offSilencesEveryAppAndOnGivesBackWhatWasDecided() async throws {
            let r = try Restarts()
            defer { r.remove() }
            let s = try r.start()
            let recs = try Self.twoGrantedRecordings(s)
            for rec in recs { #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)") }

            let off = try s.earmuff.control("access", "off")
            #expect(off.stdoutText.contains("microphone access: off"), "\(off)")
            let marks = recs.map { $0.byteCount() }
            for rec in recs { #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio with access off\n\(s.logs)") }
            let status = try s.earmuff.status()
            #expect(status.accessEnabled("microphone") == false && status.accessEnabled("system-audio") == true, "\(status)")
            #expect(status.streams.allSatisfy { $0.audio == "silenced" }, "\(status)")
            #expect(try s.earmuff.app(s.key)?.state == "granted", "the decision was not kept")

            try s.earmuff.control("access", "on")
            for (rec, mark) in zip(recs, marks) {
                let back = await Wait.until(timeout: 60) {
                    let audio = rec.data()
                    guard audio.count > mark + E2E.bytes(1.5, of: rec) else { return false }
                    return audio.subdata(in: (audio.count - E2E.bytes(0.5, of: rec))..<audio.count).contains { $0 != 0 }
                }
                #expect(back, "no tone once access is on\n\(s.logs)")
            }
            for rec in recs { _ = rec.stop() }

            // Off survives a restart; a prompt raised meanwhile says so.
            try s.earmuff.control("access", "off")
            r.stop(s)
            let again = try r.start()
            defer { r.stop(again) }
            #expect(try again.earmuff.status().accessEnabled("microphone") == false)
            try again.earmuff.control("reset", again.key)
            let rec = try again.record()
            defer { _ = rec.stop() }
            let prompted = try await again.earmuff.waitForStatus { !$0.prompts(of: again.key).isEmpty }
            #expect(prompted.prompts(of: again.key).first?.accessOff == true, "\(prompted)")
            try again.earmuff.control("grant", again.key)
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "a grant while access is off let audio through")
            let on = try again.earmuff.control("access", "on", "--json")
            #expect(on.stdoutText.contains("\"enabled\":true"), "\(on)")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone once access is on\n\(again.logs)")
        }

        /// Off for the microphone leaves system audio alone: a monitor recording granted its
        /// kind keeps its audio.
        @Test func onlyTheKindSwitchedOff() async throws {
            let s = try E2E.Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key, "--kind", "system-audio")
            try s.earmuff.control("access", "off", "--kind", "microphone")
            let (player, _) = try await CaptureKindTests.playOtherApp(s)
            defer { player.cleanup() }
            let rec = try s.record(device: PulseServer.sinkName + ".monitor")
            defer { _ = rec.stop() }
            #expect(await Wait.until(timeout: 60) { rec.firstNonSilentOffset() != nil }, "system audio silenced by the microphone's switch\n\(s.logs)")
            try s.earmuff.control("access", "off", "--kind", "system-audio")
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "system audio with its access off")
        }
    }
}
