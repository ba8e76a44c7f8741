// A web page's microphone: Chromium's getUserMedia, through Earmuff, held while the
// browser may not record and promoted on a grant in the same running page. Chromium
// records through libpulse (its audio service, a process of Chromium's own executable),
// asks for s16le stereo at the server's default rate with a 1024-frame fragment,
// adjusts latency, and polls GET_RECORD_LATENCY (10 ms doubling to 1.5 s) and
// GET_SOURCE_INFO. The page reads the track's frames (MediaStreamTrackProcessor, so
// "no data" is never taken for silence) and prints, every 100 ms, `LEVEL <peak> <frames>`
// or `NODATA <frames>`, which Chromium copies to stderr.
//
// Only in front of pipewire-pulse: PulseAudio's test microphone (module-sine-source)
// hands out its audio in 2 s blocks, of which Chromium drops most.

import Foundation
import Glibc
import Testing
import TestSupport

private let pipeWireSelected = (try? ServerKind.selected()) == .pipewire

extension EndToEnd {
    @Suite(
        .enabled(
            if: pipeWireSelected && findExecutable(ChromiumPage.binary) != nil,
            "Chromium records through pipewire-pulse in the EARMUFF_TEST_SERVER=pipewire pass"))
    struct ChromiumCaptureTests {
        typealias E2E = ConsentEndToEndTests
        typealias Claims = VolumeControlClaimTests
        typealias Held = HeldStreamTests

        @Test func aWebPageThatMayNotRecordOpensNoDevice() async throws {
            let s = try E2E.Setup()
            defer { s.stop() }
            let watch = try await Held.watchServer(s)
            defer { watch.cleanup() }
            let page = try ChromiumPage.open(server: s.earmuff.serverString)
            defer { page.close() }
            let key = "exe:\(ChromiumPage.binary)"
            // Undetermined: a second of frames, all exact zeros, in about a second.
            #expect(await page.waitForFrames(page.rate / 2), "the page records nothing\n\(page.log)\n\(s.logs)")
            let start = Date(), first = page.frames
            #expect(await page.waitForFrames(first + page.rate), "the held recording does not grow\n\(page.log)")
            let seconds = Date().timeIntervalSince(start)
            let audio = Double(page.frames - first) / Double(page.rate)
            print("held stream, chromium: \(String(format: "%.2f", audio)) s of audio in \(String(format: "%.2f", seconds)) s")
            #expect(audio <= seconds + 0.25, "\(audio) s of audio in \(seconds) s")
            #expect(page.peak(since: 0) == 0, "an undetermined page heard something\n\(page.log)")
            let status = try await s.earmuff.waitForStatus { $0.prompts(of: key).count == 1 }
            #expect(status.prompts(of: key).count == 1, "\(status)")
            let events = String(decoding: watch.process.stdoutData(), as: UTF8.self)
            #expect(!events.contains("source-output"), "the server had a source-output of an undetermined page:\n\(events)")
            let outputs = try Claims.sourceOutputs(s.server)
            #expect(outputs.isEmpty && !Claims.indicatorOn(outputs) && !Claims.kdeIndicatorOn(outputs), "\(outputs)")
            #expect(try Held.microphoneState(s.server) != "RUNNING", "the microphone runs for an undetermined page")

            let granted = Date(), atGrant = page.frames
            try s.earmuff.control("grant", key)
            let tone = await Wait.until(timeout: 30, interval: 0.005) { page.peak(since: atGrant) > 0.1 } ? Date().timeIntervalSince(granted) : nil
            let running = await Held.waitForServer(s, outputs: 1, running: true, since: granted)
            #expect(tone != nil && running != nil, "granted, but no tone or no source-output\n\(page.log)\n\(s.logs)")
            print("held stream, chromium: granted → tone in the page after \(ms(tone)), microphone RUNNING after \(ms(running))")
            let shown = try Claims.sourceOutputs(s.server)
            #expect(Claims.indicatorOn(shown) && Claims.kdeIndicatorOn(shown), "granted, the desktop's indicator would not light: \(shown)")

            let denied = Date()
            try s.earmuff.control("deny", key)
            let released = await Held.waitForServer(s, outputs: 0, running: false, since: denied)
            #expect(released != nil, "denied, the server still records for it\n\(s.logs)")
            print("held stream, chromium: denied → source-output gone and microphone idle after \(ms(released))")
            let atDeny = page.frames
            #expect(await page.waitForFrames(atDeny + page.rate), "the page stopped receiving frames\n\(page.log)")
            let quiet = page.frames
            #expect(await page.waitForFrames(quiet + page.rate / 2), "the page stopped receiving frames\n\(page.log)")
            #expect(page.peak(since: quiet) == 0, "denied, the page still hears something\n\(page.log)")
            #expect(page.isRunning, "Chromium ended\n\(page.log)")
        }
    }
}

/// A headless Chromium showing a page that records the default source (getUserMedia, the
/// permission granted by the browser's fake prompt) and prints the level it receives.
struct ChromiumPage {
    /// The browser itself (/usr/bin/chromium is a script that runs it).
    static let binary = "/usr/lib/chromium/chromium"
    let tool: RunningTool
    let directory: String
    /// The rate it records at: the server's default (pipewire-pulse's 48 kHz).
    let rate = 48000

    static func open(server: String) throws -> ChromiumPage {
        let dir = try TempDir.make(prefix: "earmuff-chromium")
        try page.write(toFile: "\(dir)/level.html", atomically: true, encoding: .utf8)
        try TempDir.makeDirectory("\(dir)/tmp")
        let tool = try Tool.start(
            binary,
            args: [
                "--headless=new", "--no-sandbox", "--use-fake-ui-for-media-stream", "--enable-logging=stderr",
                "--user-data-dir=\(dir)/profile", "file://\(dir)/level.html",
            ], server: server, environment: ["TMPDIR": "\(dir)/tmp"])
        return ChromiumPage(tool: tool, directory: dir)
    }

    var isRunning: Bool { tool.process.isRunning }
    var log: String { "Chromium's page:\n" + lines.suffix(20).joined(separator: "\n") }

    /// What the page printed, in order.
    var lines: [String] {
        tool.process.stderrText().split(separator: "\n").compactMap { line in
            guard let at = line.range(of: ":CONSOLE"), let open = line[at.upperBound...].firstIndex(of: "\""),
                let close = line[line.index(after: open)...].firstIndex(of: "\"")
            else { return nil }
            return String(line[line.index(after: open)..<close])
        }
    }

    /// Each LEVEL line: its peak and the frames received by then.
    var levels: [(peak: Double, frames: Int)] {
        lines.compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 3, words[0] == "LEVEL", let peak = Double(words[1]), let frames = Int(words[2]) else { return nil }
            return (peak, frames)
        }
    }

    /// The frames received so far.
    var frames: Int { levels.last?.frames ?? 0 }

    /// The highest peak of the windows that ended after `frames` frames.
    func peak(since frames: Int) -> Double { levels.filter { $0.frames > frames }.map(\.peak).max() ?? 0 }

    func waitForFrames(_ count: Int, timeout: Double = 30) async -> Bool {
        await Wait.until(timeout: timeout, interval: 0.02) { frames >= count }
    }

    /// Ends the browser (SIGTERM takes its processes down with it) and removes its files.
    func close() {
        tool.process.terminate(signal: SIGTERM, grace: 10)
        tool.cleanup()
        TempDir.remove(directory)
    }

    static let page = """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>level</title></head><body><script>
        // Prints, every 100 ms: LEVEL <peak of the frames received in the window> <frames so far>,
        // or NODATA <frames so far> when none came; ERROR <what> when recording fails.
        let peak = 0, total = 0, last = 0;
        setInterval(() => {
          console.log(total === last ? 'NODATA ' + total : 'LEVEL ' + peak + ' ' + total);
          peak = 0; last = total;
        }, 100);
        (async () => {
          const stream = await navigator.mediaDevices.getUserMedia({audio: {
            echoCancellation: false, noiseSuppression: false, autoGainControl: false}});
          const reader = new MediaStreamTrackProcessor({track: stream.getAudioTracks()[0]}).readable.getReader();
          for (;;) {
            const {value, done} = await reader.read();
            if (done) { console.log('ERROR the track ended'); return; }
            const samples = new Float32Array(value.numberOfFrames);
            for (let c = 0; c < value.numberOfChannels; c++) {
              value.copyTo(samples, {planeIndex: c, format: 'f32-planar'});
              for (const x of samples) peak = Math.max(peak, Math.abs(x));
            }
            total += value.numberOfFrames;
            value.close();
          }
        })().catch(e => console.log('ERROR ' + e.name + ': ' + e.message));
        </script></body></html>
        """
}

private func ms(_ seconds: Double?) -> String {
    seconds.map { String(format: "%.0f ms", $0 * 1000) } ?? "never"
}
