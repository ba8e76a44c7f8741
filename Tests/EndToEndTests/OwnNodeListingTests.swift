// Earmuff's own nodes (the PipeWire gate's silent source and valves) are no one's
// source: through Earmuff's socket, on PulseAudio and (in the PipeWire pass)
// pipewire-pulse, a source under one of their names is left out of every source
// list, asked for by name it does not exist, and no stream records from it. The
// source is made on the server directly (Earmuff refuses LOAD_MODULE to its
// clients), so the check holds whatever the server itself shows.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct OwnNodeListingTests {
        typealias Setup = ConsentEndToEndTests.Setup

        @Test func aSourceUnderEarmuffsNamesIsNoClientsSource() async throws {
            let s = try Setup()
            defer { s.stop() }
            let name = "earmuff.silence"
            let made =
                (try? ServerKind.selected()) == .pipewire
                ? ["module-null-sink", "sink_name=\(name)", "media.class=Audio/Source/Virtual"]
                : ["module-null-source", "source_name=\(name)"]
            try MonitorFedSourceTests.load(s, made)
            let direct = try s.server.pactl("list", "sources", "short")
            #expect(direct.stdoutText.contains(name), "the server does not list \(name): \(direct)")

            // The short list and the long one (every field of every record, at the client's version).
            for form in [["list", "sources", "short"], ["list", "sources"]] {
                let through = try Tool.run("pactl", args: form, server: s.earmuff.serverString, timeout: 30)
                #expect(through.succeeded, "pactl \(form.joined(separator: " ")): \(through)")
                #expect(!through.stdoutText.contains(name), "pactl \(form.joined(separator: " ")) lists \(name):\n\(through.stdoutText)")
                #expect(
                    through.stdoutText.contains(PulseServer.sourceName) && through.stdoutText.contains("\(PulseServer.sinkName).monitor"),
                    "pactl \(form.joined(separator: " ")) lost the other sources:\n\(through.stdoutText)")
            }
            let asked = try Tool.run("pactl", args: ["get-source-volume", name], server: s.earmuff.serverString, timeout: 30)
            #expect(!asked.succeeded && asked.stderr.contains("No such entity"), "GET_SOURCE_INFO \(name): \(asked)")
            let recorded = try Tool.run("parecord", args: ["--device=\(name)", "/dev/null"], server: s.earmuff.serverString, timeout: 30)
            #expect(!recorded.succeeded && recorded.stderr.contains("No such entity"), "parecord --device=\(name): \(recorded)")
        }
    }
}
