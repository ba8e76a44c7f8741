// The source catalog against a real server (PulseAudio, or pipewire-pulse in
// the PipeWire pass): it learns the test server's microphone and monitor, follows
// a null sink loaded and unloaded behind its back, and reports where a
// recording's source output records from.
import Consent
import Foundation
@testable import Service
import PulseWire
@testable import Relay
import Synchronization
import TestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(5))) struct SourceCatalogTests {
    /// What the catalog reported, for the test to wait on. (`Locked`, not `Mutex`: the thread
    /// sanitizer, which runs these tests in CI, sees the ordering of pthread mutexes only.)
    final class Reports: Sendable {
        let changes = Atomic<Int>(0)
        let outputs = Locked<[UInt32: UInt32]>([:])
        let watching = Atomic<Bool>(false)
    }

    static func start(_ server: PulseServer, _ reports: Reports) throws -> SourceCatalog {
        let catalog = try SourceCatalog(
            upstream: try UpstreamAddress.parse(server.serverString),
            onChange: { reports.changes.add(1, ordering: .relaxed) },
            onSourceOutput: { index, source, _ in reports.outputs.withLock { $0[index] = source } },
            watching: { reports.watching.load(ordering: .relaxed) })
        catalog.start()
        return catalog
    }

    @Test func learnsSourcesAndFollowsTheirChanges() async throws {
        let server = try PulseServer()
        defer { server.stop() }
        let reports = Reports()
        let catalog = try Self.start(server, reports)
        defer { catalog.stop() }

        func kind(_ name: String) -> Capability? { catalog.snapshot.kind(sourceIndex: invalidIndex, sourceName: name) }
        #expect(await Wait.until(timeout: 30) { kind(PulseServer.sourceName) != nil && kind("\(PulseServer.sinkName).monitor") != nil })
        #expect(kind(PulseServer.sourceName) == .microphone)
        #expect(kind("\(PulseServer.sinkName).monitor") == .systemAudio)
        #expect(catalog.isReady)

        // A sink loaded straight on the server: its monitor appears, then goes with it.
        let load = try server.pactl("load-module", "module-null-sink", "sink_name=extra")
        #expect(load.succeeded, "\(load)")
        #expect(await Wait.until(timeout: 30) { kind("extra.monitor") == .systemAudio }, "\(catalog.snapshot)")
        let module = load.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try server.pactl("unload-module", module).succeeded)
        #expect(await Wait.until(timeout: 30) { kind("extra.monitor") == nil }, "\(catalog.snapshot)")
        #expect(reports.changes.load(ordering: .relaxed) >= 3)
    }

    @Test func saysWhereARecordingRecordsFromWhileStreamsAreWatched() async throws {
        let server = try PulseServer()
        defer { server.stop() }
        let reports = Reports()
        let catalog = try Self.start(server, reports)
        defer { catalog.stop() }
        // (pipewire-pulse may answer the first list before it knows its own objects; events follow.)
        func micIndex() -> UInt32? { catalog.snapshot.sources.first { $0.value.name == PulseServer.sourceName }?.key }
        #expect(await Wait.until(timeout: 30) { micIndex() != nil })
        let mic = try #require(micIndex())

        let rec = try Tool.startRecording(server: server.serverString, rate: PulseServer.toneRate, device: PulseServer.sourceName)
        defer { _ = rec.stop() }
        #expect(await rec.waitForAudio(seconds: 0.1, timeout: 30))
        reports.watching.store(true, ordering: .relaxed)
        catalog.wake()
        // The recording's source output, reported as recording from the mic.
        #expect(
            await Wait.until(timeout: 30) { reports.outputs.withLock { $0.values.contains(mic) } },
            "\(reports.outputs.withLock { $0 })")
    }
}
