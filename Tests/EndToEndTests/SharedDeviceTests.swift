// Hardening of what an app without consent may do to what every app shares,
// against a real server (the bench of HardeningTests.swift: pactl is denied,
// the recorder granted): the microphone's mute, volume and suspension, and
// protocol versions old enough to negotiate shared memory behind Earmuff's back.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct SharedDeviceTests {
        /// Muting, turning down or suspending the microphone would silence a granted app's
        /// recording: refused for a denied app, and the recording keeps the tone.
        @Test func deniedAppCannotMuteTheSharedMicrophone() async throws {
            let bench = try HardeningBench.shared()
            let rec = try await PolicyTests.startMicRecording(bench)
            defer { rec.tool.cleanup() }
            let source = PulseServer.sourceName
            let attempts: [(args: [String], command: String)] = [
                (["set-source-mute", source, "1"], "SET_SOURCE_MUTE"),
                (["set-source-volume", source, "0"], "SET_SOURCE_VOLUME"),
                (["suspend-source", source, "1"], "SUSPEND_SOURCE"),
                (["set-sink-mute", PulseServer.sinkName, "1"], "SET_SINK_MUTE"),
            ]
            for attempt in attempts {
                let mark = bench.logBytes().count
                let result = try PolicyTests.proxiedPactl(bench, attempt.args)
                await PolicyTests.expectRefused(result, attempt.command, bench: bench, since: mark)
            }
            let info = try PolicyTests.directPactl(bench, ["get-source-mute", source])
            #expect(info.stdoutText.contains("no"), "the microphone was muted: \(info)")
            await PolicyTests.expectStillTheTone(rec, bench: bench)
        }

        /// Protocol versions before 13 negotiate shared memory from the version alone: refused,
        /// with or without the flag bits that versions from 13 on carry.
        @Test(arguments: [UInt32(12), 10, 0x8000_000C, 0xC000_000B])
        func versionsBefore13AreRefused(word: UInt32) async throws {
            let bench = try HardeningBench.shared()
            try await bench.expectClientClosed(["protocol violation from the client", "is older than 13"]) { c in
                try c.send(RawClient.auth(tag: 0, versionWord: word))
            }
        }
    }
}
