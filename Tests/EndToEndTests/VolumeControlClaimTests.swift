// An app that calls itself a volume control to hide its recording from the desktop's
// microphone indicator. GNOME Shell lights it while the server has a source-output whose
// `application.id` is not a volume control's (pavucontrol's, GNOME's own mixer's, which
// record every source to draw its level); other mixers skip KMix's id too. KDE Plasma's
// lights for any source-output of a client. Judged by that
// rule on the real server's own list of source-outputs, read directly (not through Earmuff).

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct VolumeControlClaimTests {
        typealias E2E = ConsentEndToEndTests

        static let volumeControls: Set<String> = ["org.PulseAudio.pavucontrol", "org.gnome.VolumeControl", "org.kde.kmixd"]

        /// Each source-output's properties, as the real server lists them (`pactl list source-outputs`).
        static func sourceOutputs(_ server: PulseServer) throws -> [[String: String]] {
            try sourceOutputs(server: server.serverString)
        }

        /// Each source-output's properties, as the Pulse server at `server` lists them.
        static func sourceOutputs(server: String) throws -> [[String: String]] {
            let r = try Tool.run("pactl", args: ["list", "source-outputs"], server: server, timeout: 30)
            guard r.succeeded else { throw TestSupportError("pactl list source-outputs: \(r)") }
            var outputs: [[String: String]] = []
            for line in r.stdoutText.split(separator: "\n") {
                if line.hasPrefix("Source Output #") { outputs.append([:]); continue }
                // Its client's index, or "n/a" for a module's stream, as the pseudo-key `client`.
                if line.hasPrefix("\tClient: "), !outputs.isEmpty {
                    outputs[outputs.count - 1]["client"] = String(line.dropFirst("\tClient: ".count))
                    continue
                }
                let parts = line.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                guard parts.count == 2, !outputs.isEmpty else { continue }
                let value = parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                outputs[outputs.count - 1][parts[0].trimmingCharacters(in: .whitespaces)] = value
            }
            return outputs
        }

        /// GNOME Shell's rule: some source-output that is not a volume control's.
        static func indicatorOn(_ outputs: [[String: String]]) -> Bool {
            outputs.contains { !volumeControls.contains($0["application.id"] ?? "") }
        }

        /// KDE Plasma's rule (plasma-pa): some source-output of a client (a module's own stream,
        /// with no client, is not counted), named by its client.
        static func kdeIndicatorOn(_ outputs: [[String: String]]) -> Bool {
            outputs.contains { ($0["client"] ?? "n/a") != "n/a" }
        }

        /// A granted parecord that claims pavucontrol's id, for itself and for its stream: the
        /// real server's source-output carries the claim as `earmuff.app.id`, not as its
        /// `application.id`, so the indicator rule sees a recording; the recording itself is
        /// the tone, unchanged.
        @Test(arguments: ["org.PulseAudio.pavucontrol", "org.gnome.VolumeControl"])
        func aClaimedVolumeControlIDDoesNotHideARecording(_ id: String) async throws {
            let s = try E2E.Setup()
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let rec = try s.record(extraArguments: ["--property=application.id=\(id)"])
            defer { _ = rec.stop() }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)")
            let outputs = try Self.sourceOutputs(s.server)
            let mine = outputs.filter { $0["earmuff.app.id"] == id }
            #expect(mine.count == 1, "the claim is not on the server's source-output as earmuff.app.id: \(outputs)")
            #expect(mine.allSatisfy { $0["application.id"] != id }, "\(mine)")
            #expect(Self.indicatorOn(outputs) && Self.kdeIndicatorOn(outputs), "the desktop's indicator would not light: \(outputs)")
            #expect(s.earmuff.log().contains("claims to be the volume control \(id)"), "\(s.logs)")
        }
    }
}
