// Virtual sources fed from a monitor, end to end against PulseAudio and (in the
// PipeWire pass) pipewire-pulse: a source that is not a monitor itself but reads
// one (module-remap-source, module-virtual-source, a virtual source's uplink sink
// fed by module-loopback, a PipeWire loopback whose capture side records a
// sink's monitor) carries system audio, and an app granted only the microphone
// records silence from it until system audio is granted. A filter over the mic
// stays a microphone, until its capture side is moved onto the monitor. The
// modules are loaded on the server directly: Earmuff refuses LOAD_MODULE to its
// clients.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct MonitorFedSourceTests {
        typealias Setup = ConsentEndToEndTests.Setup
        typealias Kinds = CaptureKindTests

        /// Loads a module straight on the server; returns its index.
        @discardableResult
        static func load(_ s: Setup, _ args: [String]) throws -> String {
            let r = try Tool.run("pactl", args: ["load-module"] + args, server: s.server.serverString)
            try #require(r.succeeded, "pactl load-module \(args.joined(separator: " ")): \(r)")
            return r.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// The source output owned by module `module` (a filter's capture side), asked of the server.
        static func output(_ s: Setup, ownedBy module: String) async throws -> String {
            var found: String?
            await Wait.until(timeout: 60, interval: 0.1) {
                var current: String?
                for line in ((try? s.server.pactl("list", "source-outputs"))?.stdoutText ?? "").split(separator: "\n") {
                    if line.hasPrefix("Source Output #") { current = String(line.dropFirst("Source Output #".count)) }
                    if line.trimmingCharacters(in: .whitespaces) == "Owner Module: \(module)" { found = current }
                }
                return found != nil
            }
            return try #require(found, "no source output of module \(module)")
        }

        /// `rec` of `source`: in status as system audio, silenced, and exact silence while the
        /// other app's tone plays into the sink.
        static func expectSilencedSystemAudio(_ s: Setup, _ rec: Recording, source: String) async throws {
            let view = try await Kinds.stream(s) { $0.source == source && $0.kind == "system-audio" }
            #expect(view?.audio == "silenced", "\(String(describing: view))\n\(s.logs)")
            let audio = await Kinds.next(0.5, of: rec)
            #expect(
                audio.count > 0 && AudioAnalysis.isUniform(audio, value: 0),
                "\(source) heard with only the microphone granted: \(Helpers.analyze(audio, format: .s16le, frequency: Kinds.otherFrequency))\n\(s.logs)")
        }

        /// Grants system audio: `rec` of `source` turns real and carries the other app's tone.
        static func expectOtherAppOnceSystemAudioIsGranted(_ s: Setup, _ rec: Recording, source: String) async throws {
            try s.earmuff.control("grant", s.key, "--kind", "system-audio")
            _ = try await Kinds.stream(s) { $0.source == source && $0.audio == "real" }
            let after = await Kinds.next(0.5, of: rec)
            #expect(
                Kinds.isTone(after, Kinds.otherFrequency),
                "\(source) with system audio granted: \(Helpers.analyze(after, format: .s16le, frequency: Kinds.otherFrequency))")
        }

        @Test func aSourceRemappedFromTheMonitorIsSystemAudio() async throws {
            let s = try Setup()
            defer { s.stop() }
            let (player, _) = try await Kinds.playOtherApp(s)
            defer { player.cleanup() }
            try Self.load(s, ["module-remap-source", "master=\(PulseServer.sinkName).monitor", "source_name=remapped"])
            let micFilter = try Self.load(s, ["module-remap-source", "master=\(PulseServer.sourceName)", "source_name=micremap"])
            try s.earmuff.control("grant", s.key)

            let remapped = try s.record(device: "remapped")
            let overMic = try s.record(device: "micremap")
            defer { for r in [remapped, overMic] { _ = r.stop() } }
            try await Self.expectSilencedSystemAudio(s, remapped, source: "remapped")
            // A filter over the microphone is the microphone.
            let mic = try await Kinds.stream(s) { $0.source == "micremap" && $0.kind == "microphone" && $0.audio == "real" }
            #expect(mic != nil, "\(s.logs)")
            let micAudio = await Kinds.next(0.5, of: overMic)
            #expect(Kinds.isTone(micAudio, PulseServer.toneFrequency), "micremap: \(Helpers.analyze(micAudio, format: .s16le))")
            // The log says what feeds it (on PipeWire first what its unlinked capture side targets).
            #expect(await Wait.until(timeout: 60) { s.earmuff.log().contains("source catalog: remapped is system-audio: ") }, "\(s.logs)")

            // Its capture side moved onto the monitor (as pavucontrol would): the live recording turns silent.
            let capture = try await Self.output(s, ownedBy: micFilter)
            try await Kinds.move(s, output: capture, to: "\(PulseServer.sinkName).monitor")
            try await Self.expectSilencedSystemAudio(s, overMic, source: "micremap")

            // System audio granted: the remapped monitor carries the other app's tone.
            try await Self.expectOtherAppOnceSystemAudioIsGranted(s, remapped, source: "remapped")
        }

        /// A tunnel source (module-tunnel-source) to this server's monitor names no master, only
        /// the source it reads: it is system audio. A tunnel to the microphone is the microphone.
        /// (pipewire-pulse 0.3.65 cannot tunnel to itself: its load-module times out.)
        @Test func aTunnelToTheMonitorIsSystemAudio() async throws {
            guard (try? ServerKind.selected()) != .pipewire else { return }
            let s = try Setup()
            defer { s.stop() }
            let (player, _) = try await Kinds.playOtherApp(s)
            defer { player.cleanup() }
            try Self.load(
                s,
                [
                    "module-tunnel-source", "server=\(s.server.serverString)", "source=\(PulseServer.sinkName).monitor",
                    "source_name=tunneled",
                ])
            try Self.load(
                s,
                [
                    "module-tunnel-source", "server=\(s.server.serverString)", "source=\(PulseServer.sourceName)",
                    "source_name=tunmic",
                ])
            try s.earmuff.control("grant", s.key)
            let tunneled = try s.record(device: "tunneled")
            let overMic = try s.record(device: "tunmic")
            defer { for r in [tunneled, overMic] { _ = r.stop() } }
            try await Self.expectSilencedSystemAudio(s, tunneled, source: "tunneled")
            #expect(await Wait.until(timeout: 60) { s.earmuff.log().contains("source catalog: tunneled is system-audio: ") }, "\(s.logs)")
            let mic = try await Kinds.stream(s) { $0.source == "tunmic" && $0.kind == "microphone" && $0.audio == "real" }
            #expect(mic != nil, "\(s.logs)")
            try await Self.expectOtherAppOnceSystemAudioIsGranted(s, tunneled, source: "tunneled")
        }

        /// PulseAudio's module-virtual-source on the monitor, and one on the mic whose uplink sink
        /// a module-loopback feeds from the monitor. (pipewire-pulse 0.3.65 has no module-virtual-source.)
        @Test func aVirtualSourceOnTheMonitorOrItsUplinkIsSystemAudio() async throws {
            guard (try? ServerKind.selected()) != .pipewire else { return }
            let s = try Setup()
            defer { s.stop() }
            let (player, _) = try await Kinds.playOtherApp(s)
            defer { player.cleanup() }
            try Self.load(s, ["module-virtual-source", "master=\(PulseServer.sinkName).monitor", "source_name=virt"])
            try Self.load(s, ["module-virtual-source", "master=\(PulseServer.sourceName)", "uplink_sink=up", "source_name=uplinked"])
            try Self.load(s, ["module-loopback", "source=\(PulseServer.sinkName).monitor", "sink=up"])
            try s.earmuff.control("grant", s.key)

            let virt = try s.record(device: "virt")
            let uplinked = try s.record(device: "uplinked")
            defer { for r in [virt, uplinked] { _ = r.stop() } }
            try await Self.expectSilencedSystemAudio(s, virt, source: "virt")
            try await Self.expectSilencedSystemAudio(s, uplinked, source: "uplinked")

            try await Self.expectOtherAppOnceSystemAudioIsGranted(s, virt, source: "virt")
        }

        /// PipeWire's own loopback (`pw-loopback`, a native client) recording the sink's monitor into a
        /// source, and a null sink made an `Audio/Source/Virtual` that anything may be linked into.
        @Test func aPipeWireLoopbackOrVirtualSourceIsSystemAudio() async throws {
            guard (try? ServerKind.selected()) == .pipewire, findExecutable("pw-loopback") != nil else { return }
            let s = try Setup()
            defer { s.stop() }
            let pw = try #require(s.server.pipeWire)
            let (player, _) = try await Kinds.playOtherApp(s)
            defer { player.cleanup() }
            let loopback = try Tool.start(
                "pw-loopback",
                args: [
                    "--capture-props=stream.capture.sink=true target.object=\(PulseServer.sinkName)",
                    "--playback-props=media.class=Audio/Source node.name=looped",
                ],
                server: s.server.serverString, environment: pw.nativeClientEnvironment)
            defer { loopback.cleanup() }
            try Self.load(s, ["module-null-sink", "sink_name=virtual-mic", "media.class=Audio/Source/Virtual"])
            #expect(await Wait.until(timeout: 60) { Kinds.sourceIndex(s, "looped") != nil }, "\(loopback.process.stderrText())")
            try s.earmuff.control("grant", s.key)

            let looped = try s.record(device: "looped")
            let virtual = try s.record(device: "virtual-mic")
            defer { for r in [looped, virtual] { _ = r.stop() } }
            try await Self.expectSilencedSystemAudio(s, looped, source: "looped")
            let view = try await Kinds.stream(s) { $0.source == "virtual-mic" && $0.kind == "system-audio" }
            #expect(view?.audio == "silenced", "\(String(describing: view))\n\(s.logs)")

            try await Self.expectOtherAppOnceSystemAudioIsGranted(s, looped, source: "looped")
        }
        /// A loopback whose capture side is a virtual sink: its source carries what is played into
        /// that sink. An app granted the microphone records the mic through Earmuff with the
        /// loopback's `node.link-group` (a client property pipewire-pulse passes on to the stream),
        /// posing as the loopback's capture side: the loopback's source stays system audio.
        @Test func anAppsRecordingDoesNotPassForALoopbacksCaptureSide() async throws {
            guard (try? ServerKind.selected()) == .pipewire, findExecutable("pw-loopback") != nil else { return }
            let s = try Setup()
            defer { s.stop() }
            let pw = try #require(s.server.pipeWire)
            let loopback = try Tool.start(
                "pw-loopback",
                args: [
                    "--capture-props=media.class=Audio/Sink node.name=played",
                    "--playback-props=media.class=Audio/Source node.name=looped",
                ],
                server: s.server.serverString, environment: pw.nativeClientEnvironment)
            defer { loopback.cleanup() }
            var group: String?
            await Wait.until(timeout: 60, interval: 0.1) {
                let sources = (try? s.server.pactl("list", "sources"))?.stdoutText ?? ""
                guard let block = sources.components(separatedBy: "\n\n").first(where: { $0.contains("Name: looped\n") }),
                    let line = block.split(separator: "\n").first(where: { $0.contains("node.link-group = ") })
                else { return false }
                group = line.components(separatedBy: "\"").dropFirst().first
                return group != nil
            }
            let linkGroup = try #require(group, "no source of pw-loopback: \(loopback.process.stderrText())")
            let wav = "\(s.scratch)/played.wav"
            try AudioAnalysis.sineWAV(frequency: Kinds.otherFrequency, seconds: 120, sampleRate: 48000, channels: 1, amplitude: 0.5)
                .write(to: URL(fileURLWithPath: wav))
            let player = try Tool.start("paplay", args: ["--device=played", wav], server: s.server.serverString)
            defer { player.cleanup() }
            try s.earmuff.control("grant", s.key)

            let impostor = try Tool.startPurposefulRecording(
                server: s.earmuff.serverString, purpose: nil, device: PulseServer.sourceName,
                environment: ["PULSE_PROP": Tool.purposeProperty(ConsentEndToEndTests.purpose) + " node.link-group=\(linkGroup)"])
            defer { _ = impostor.stop() }
            _ = try await Kinds.stream(s) { $0.source == PulseServer.sourceName && $0.audio == "real" }
            // The server took the claim: the app's source output is in the loopback's group.
            let claimed = await Wait.until(timeout: 60) {
                let outputs = (try? s.server.pactl("list", "source-outputs"))?.stdoutText ?? ""
                return outputs.components(separatedBy: "\n\n").contains {
                    $0.contains("node.link-group = \"\(linkGroup)\"") && $0.contains("application.name = \"parecord\"")
                }
            }
            #expect(claimed, "the app's stream is not in \(linkGroup)")

            let looped = try s.record(device: "looped")
            defer { _ = looped.stop() }
            try await Self.expectSilencedSystemAudio(s, looped, source: "looped")
            try await Self.expectOtherAppOnceSystemAudioIsGranted(s, looped, source: "looped")
        }
    }
}
