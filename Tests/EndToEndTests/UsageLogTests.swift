// `earmuff log` through the real daemon: three recordings of parecord (granted,
// denied, and flipped from undetermined to granted half-way) are three
// sessions whose real and silenced seconds match what the recordings hold.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct UsageLogTests {
        typealias Setup = ConsentEndToEndTests.Setup

        struct Session: Decodable {
            var appKey: String
            var kind: String
            var source: String
            var startedAt: Double
            var endedAt: Double?
            var realSeconds: Double?
            var silencedSeconds: Double?
            var decision: String?
        }

        /// Records until at least `seconds` of audio are in, then stops; returns the audio.
        static func record(_ s: Setup, seconds: Double) async throws -> Data {
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: seconds), "\(s.logs)")
            return rec.stop().audio
        }

        @Test func threeRecordingsAreThreeSessions() async throws {
            let s = try Setup()
            defer { s.stop() }
            let bytesPerSecond = Double(PulseServer.toneRate * 2)

            try s.earmuff.control("grant", s.key)
            let granted = try await Self.record(s, seconds: 1)
            try s.earmuff.control("deny", s.key)
            let denied = try await Self.record(s, seconds: 1)

            try s.earmuff.control("reset", s.key)
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5), "\(s.logs)")
            try s.earmuff.control("grant", s.key)
            let atGrant = rec.byteCount()
            _ = await Wait.until(timeout: 60) { rec.byteCount() >= atGrant + Int(bytesPerSecond) || !rec.tool.process.isRunning }
            let flipped = rec.stop().audio

            var sessions: [Session] = []
            let logged = await Wait.until(timeout: 60) {
                guard let r = try? s.earmuff.runCLI(["log", "--json", "--app", s.key]), r.status == 0,
                    let all = try? JSONDecoder().decode([Session].self, from: r.stdout)
                else { return false }
                sessions = all
                return all.count == 3 && all.allSatisfy { $0.endedAt != nil }
            }
            #expect(logged, "\(sessions)\n\(s.logs)")
            guard sessions.count == 3 else { return }
            // Newest first.
            let (f, d, g) = (sessions[0], sessions[1], sessions[2])
            #expect(sessions.allSatisfy { $0.appKey == s.key && $0.kind == "microphone" })

            // Earmuff counts what it relayed; parecord may not have written the last of it when
            // it was stopped, so the log may hold more than the file: up to one memblock of the
            // sine source, which hands out as much as 2 s at a time (see FineMicrophone.swift).
            let lastBlock = 2.0
            func close(_ logged: Double?, _ recorded: Double, _ what: String) {
                guard let logged else { Issue.record("\(what): no seconds logged"); return }
                #expect(
                    logged >= recorded - 0.05 && logged <= recorded + lastBlock + 0.05,
                    "\(what): logged \(logged) s, recorded \(recorded) s")
            }
            close(g.realSeconds, Double(granted.count) / bytesPerSecond, "granted, real")
            #expect(g.silencedSeconds == 0, "\(g)")
            #expect(g.decision == "granted (user)", "\(g)")

            #expect(d.realSeconds == 0, "\(d)")
            close(d.silencedSeconds, Double(denied.count) / bytesPerSecond, "denied, silenced")
            #expect(d.decision == "denied (user)", "\(d)")

            let silentPrefix = Double(flipped.firstIndex { $0 != 0 }.map { $0 - flipped.startIndex } ?? flipped.count) / bytesPerSecond
            close(f.silencedSeconds, silentPrefix, "flipped, silenced")
            close(f.realSeconds, Double(flipped.count) / bytesPerSecond - silentPrefix, "flipped, real")
            #expect(f.decision == "undetermined → granted (user)", "\(f)")

            let table = try s.earmuff.runCLI(["log"])
            #expect(table.stdoutText.contains("undetermined → granted (user)"), "\(table)")
        }
    }
}
