// The installed package's /usr/bin/earmuff in front of a private PulseAudio,
// with the Swift toolchain neither on PATH nor on the library path: an app
// records silence until `earmuff grant`, then the tone. Runs from
// scripts/package-check after installing the package
// (EARMUFF_TEST_INSTALLED=1 EARMUFF_BINARY=/usr/bin/earmuff).
import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite(
        .enabled(
            if: ProcessInfo.processInfo.environment["EARMUFF_TEST_INSTALLED"] == "1",
            "checks the installed package (scripts/package-check)"))
    struct PackageSmokeTests {
        /// PATH without the toolchain; the daemon and the CLI get no LD_LIBRARY_PATH either.
        static let systemPath = "/usr/bin:/bin"

        @Test func installedBinaryGivesSilenceUntilGrantedThenTheTone() async throws {
            #expect(try EarmuffProcess.locateBinary() == "/usr/bin/earmuff")
            let s = try ConsentEndToEndTests.Setup(environment: ["PATH": Self.systemPath])
            defer { s.stop() }
            #expect(s.earmuff.environment["LD_LIBRARY_PATH"] == nil)
            #expect(!(s.earmuff.environment["PATH"] ?? "").contains("swift"))

            // What the running daemon has mapped: no Swift runtime or Foundation library.
            let maps = try String(contentsOfFile: "/proc/\(s.earmuff.process.pid)/maps", encoding: .utf8)
            #expect(!maps.contains("libswift") && !maps.contains("libFoundation"), "the daemon maps a Swift library")

            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 1, timeout: 60), "\(s.logs)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "undetermined, yet not silence\n\(s.logs)")
            let grant = try s.earmuff.runCLI(["grant", s.key])
            #expect(grant.succeeded, "\(grant)")
            let atGrant = rec.byteCount()
            await Wait.until(timeout: 60) {
                rec.byteCount() >= atGrant + ConsentEndToEndTests.bytes(2, of: rec) || !rec.tool.process.isRunning
            }
            let (result, audio) = rec.stop()
            #expect(result.status == 0, "\(result)")
            let after = audio.suffix(from: min(audio.count, atGrant + ConsentEndToEndTests.bytes(1, of: rec)) / 2 * 2)
            let report = Helpers.analyze(Data(after), format: .s16le)
            #expect(report.isTone(expectedRMS: Helpers.micRMS, minimumSeconds: 0.5), "after grant: \(report)\n\(s.logs)")
        }
    }
}
