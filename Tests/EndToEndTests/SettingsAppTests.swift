// Earmuff Settings on the desktop a person has: the real earmuff-settings window on a
// private Xvfb, with its session bus and the accessibility bus, in front of a real
// daemon and sound server. The person reads it through the accessibility tree and
// clicks it with the pointer (Tests/Fixtures/desktop/person.py); what a click did is
// judged by the running recordings' audio and by `earmuff apps`.
//
// EARMUFF_SCREENSHOTS=DIR keeps the screenshots of the pages (the README's pictures).

import Foundation
import Glibc
import Testing
import SettingsModel
import TestSupport

extension EndToEnd {
    @Suite(.serialized) struct SettingsAppTests {
        typealias Setup = ConsentEndToEndTests.Setup
        typealias E2E = ConsentEndToEndTests
        typealias Desktop = RealDesktopPromptTests

        static let flatpakID = "org.example.Recorder"
        static let notes = MasterSwitchTests.notes

        /// A desktop, Earmuff in front of a fresh server on it, and the window open on it.
        struct Open {
            let desktop: TestDesktop
            let s: Setup
            let window: ChildProcess

            init(config: [String] = [], services: (TestDesktop) throws -> Void = { _ in }) throws {
                let (desktop, s) = try Desktop.start(services, config: config)
                self.desktop = desktop
                self.s = s
                do {
                    window = try desktop.startSettings(controlPath: s.earmuff.controlPath)
                } catch {
                    s.stop()
                    desktop.stop()
                    throw error
                }
            }

            func stop() {
                window.terminate(signal: SIGTERM, grace: 5)
                s.stop()
                desktop.stop()
            }

            var logs: String { "\(s.logs)\nearmuff-settings:\n\(desktop.settingsLog)" }
        }

        /// The title a row shows for an app of `earmuff apps --json`.
        /// (What the app calls itself, but the ID for apps that have one.)
        static func title(_ app: AppView) -> String {
            let ownID = ["flatpak:", "snap:", "launcher:"].contains { app.key.hasPrefix($0) }
            if !ownID, let n = app.displayName, !n.isEmpty { return n }
            let tail = app.key.split(separator: ":", maxSplits: 1).last.map(String.init) ?? app.key
            return tail.split(separator: "/").last.map(String.init) ?? tail
        }

        /// Three known apps (parecord recording now, a Flatpak that recorded, a launcher app
        /// decided from the CLI): each page lists exactly the apps `earmuff apps --json` lists
        /// for its kind; Allow on parecord's row turns its running recording from exact silence
        /// to the tone and marks it recording, Deny silences it again and the mark says so.
        @Test func pagesListTheKnownAppsAndAClickDecidesTheRunningRecording() async throws {
            let o = try Open()
            defer { o.stop() }
            defer { if !o.window.isRunning { Issue.record("earmuff-settings exited (\(o.window.poll() ?? 0)):\n\(o.desktop.settingsLog)") } }
            let (s, desktop) = (o.s, o.desktop)
            let flatpak = try Sandbox.startFlatpakRecording(appID: Self.flatpakID, sessionSocket: s.earmuff.listenPath,
                                                            purpose: "Records podcasts")
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: "flatpak:\(Self.flatpakID)").isEmpty }
            _ = flatpak.stop()
            try s.earmuff.control("deny", Self.notes)
            try s.earmuff.control("grant", Self.notes, "--kind", "system-audio")
            let rec = try s.record()
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: s.key).isEmpty }

            try desktop.settings("resize", "440", "1000")
            let apps = try s.earmuff.apps()
            #expect(apps.count == 4, "\(apps)")
            let shown = try desktop.settings("show", "Allow \(Self.title(apps.first { $0.key == s.key }!))")
            let microphone = apps.filter { ($0.kind ?? "microphone") == "microphone" }
            #expect(microphone.count == 3, "\(microphone)")
            for app in microphone {
                #expect(shown.contains("push button: Allow \(Self.title(app))"), "no row for \(app.key):\n\(shown)\n\(o.logs)")
            }
            #expect(shown.split(separator: "\n").filter { $0.hasPrefix("push button: Allow ") }.count == microphone.count,
                    "rows that apps --json does not list:\n\(shown)")
            try Desktop.keepScreenshot(desktop, "settings-microphone.png", of: shown)

            let parecord = Self.title(apps.first { $0.key == s.key }!)
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio before the click")
            try desktop.settings("wait", parecord, "Recording silence now")
            try desktop.settings("click", "Allow \(parecord)")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after Allow\n\(o.logs)")
            let live = try desktop.settings("wait", parecord, "Recording now")
            print("settings: the row said \"Recording now\" \(live.replacingOccurrences(of: "after ", with: "").trimmingCharacters(in: .whitespacesAndNewlines)) s after the test saw the tone (the person's start-up included)")
            #expect(try s.earmuff.app(s.key)?.state == "granted")

            try desktop.settings("click", "Deny \(parecord)")
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio after Deny\n\(o.logs)")
            try desktop.settings("wait", parecord, "Recording silence now")
            #expect(try s.earmuff.app(s.key)?.state == "denied")
            let (_, audio) = rec.stop()
            #expect(audio.contains { $0 != 0 }, "the tone never came")
            try desktop.settings("wait", parecord, "Recording", "gone")

            try desktop.settings("click", "System audio")
            let system = try desktop.settings("show", SettingsKind.systemAudio.explanation)
            let systemApps = apps.filter { $0.kind == "system-audio" }
            #expect(system.split(separator: "\n").filter { $0.hasPrefix("push button: Allow ") }.count == systemApps.count,
                    "\(system)")
            try Desktop.keepScreenshot(desktop, "settings-system-audio.png", of: system)
            try desktop.settings("click", "History")
            let history = try desktop.settings("show", "Microphone")
            #expect(history.contains("\(parecord) · Microphone"), "no recording of parecord in History:\n\(history)")
            try Desktop.keepScreenshot(desktop, "settings-history.png", of: history)
        }

        /// Seconds of audio from `click` (a byte offset in `rec`) to where `rec` turns to exact
        /// silence for good (at least 0.3 s of zeros), searching from a second before the click.
        static func secondsToSilence(_ rec: Recording, after click: Int) -> Double? {
            let audio = rec.data()
            let run = E2E.bytes(0.3, of: rec)
            var at = max(0, click - E2E.bytes(1, of: rec)) / 2 * 2
            while at + run <= audio.count {
                if let loud = audio[at..<(at + run)].lastIndex(where: { $0 != 0 }) {
                    at = (loud + 2) / 2 * 2
                } else {
                    return Double(at - click) / Double(rec.bytesPerSecond)
                }
            }
            return nil
        }

        /// The time (seconds since 1970) of the daemon's log line containing `text` that is
        /// nearest after `near`; the log's stamps are UTC times of day.
        static func logTime(of text: String, in log: String, near: Double) -> Double? {
            let day = (near / 86400).rounded(.down) * 86400
            return log.split(separator: "\n").filter { $0.contains(text) }.compactMap { line -> Double? in
                let parts = line.prefix(12).split(separator: ":")
                guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let sec = Double(parts[2]) else { return nil }
                return day + h * 3600 + m * 60 + sec
            }.filter { $0 >= near - 1 }.min()
        }

        /// Two granted apps recording: the header's "Microphone access" switch, clicked off,
        /// silences both: the daemon switches right after the click, and the recordings turn
        /// to exact silence from the next block of the tone; on brings
        /// both back. Off survives a restart of the daemon (the window says it is not running
        /// meanwhile, and comes back by itself), and `earmuff access on` shows in the window.
        @Test func theMasterSwitchSilencesEveryAppAtOnceAndSurvivesARestart() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            let r = try LifespanEndToEndTests.Restarts()
            defer { r.remove() }
            // The window's socket path stays while daemons come and go, as $XDG_RUNTIME_DIR's does.
            let control = "\(r.directory)/control"
            var s = try r.start()
            try FileManager.default.createSymbolicLink(atPath: control, withDestinationPath: s.earmuff.controlPath)
            let recs = try MasterSwitchTests.twoGrantedRecordings(s)
            defer { for rec in recs { _ = rec.stop() } }
            for rec in recs { #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)") }
            let window = try desktop.startSettings(controlPath: control)
            defer { window.terminate(signal: SIGTERM, grace: 5) }
            var logs: String { "\(s.logs)\nearmuff-settings:\n\(desktop.settingsLog)" }
            try desktop.settings("show", "check box: Microphone access [on]")

            let before = recs.map { (bytes: $0.byteCount(), at: Date().timeIntervalSince1970) }
            let clicked = try desktop.settings("click", "Microphone access")
            let at = try #require(Desktop.clickTime(clicked), "\(clicked)")
            for rec in recs { #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio with access off\n\(logs)") }
            // The daemon's log says when it switched every stream (its clock is the test's).
            let switched = try #require(Self.logTime(of: "microphone access switched off", in: s.earmuff.log(), near: at),
                                        "\(logs)")
            print("settings: master switch off, the daemon switched \(String(format: "%.3f", switched - at)) s after the click")
            // 0.1 s is the aim; the bound leaves room for a machine busy with other work.
            #expect(switched - at < 0.5, "the daemon switched \(switched - at) s after the click\n\(logs)")
            for (rec, b) in zip(recs, before) {
                // The test tone reaches recordings in blocks of up to 2 s (module-sine-source's
                // latency), so the recordings place the switch no closer than a block.
                let click = b.bytes + Int((at - b.at) * Double(rec.bytesPerSecond))
                let delay = Self.secondsToSilence(rec, after: click)
                print("settings: master switch off, silence \(delay.map { String(format: "%.3f", $0) } ?? "-") s of audio after the click")
                #expect((delay ?? .infinity) < 2.5, "silence came \(String(describing: delay)) s after the click\n\(logs)")
            }
            #expect(try s.earmuff.status().accessEnabled("microphone") == false)
            #expect(try s.earmuff.app(s.key)?.state == "granted", "the decision was not kept")
            let off = try desktop.settings("show", "Microphone access is off")
            #expect(off.contains("check box: Microphone access\n"), "the switch still shows on:\n\(off)")

            let marks = recs.map { $0.byteCount() }
            try desktop.settings("click", "Microphone access")
            for (rec, mark) in zip(recs, marks) {
                let back = await Wait.until(timeout: 60) {
                    let audio = rec.data()
                    guard audio.count > mark + E2E.bytes(1, of: rec) else { return false }
                    return audio.subdata(in: (audio.count - E2E.bytes(0.3, of: rec))..<audio.count).contains { $0 != 0 }
                }
                #expect(back, "no tone once access is on\n\(logs)")
            }
            #expect(try s.earmuff.status().accessEnabled("microphone") == true)

            // Off, then the daemon goes away and comes back: the window follows without a restart.
            try desktop.settings("show", "check box: Microphone access [on]")
            try desktop.settings("click", "Microphone access")
            _ = try await s.earmuff.waitForStatus { $0.accessEnabled("microphone") == false }
            r.stop(s)
            let down = try desktop.settings("show", "Earmuff is not running")
            #expect(down.contains("earmuff serve"), "\(down)")
            s = try r.start()
            try FileManager.default.removeItem(atPath: control)
            try FileManager.default.createSymbolicLink(atPath: control, withDestinationPath: s.earmuff.controlPath)
            let back = try desktop.settings("show", "Microphone access is off")
            #expect(back.contains("push button: Allow parecord"), "\(back)")
            try s.earmuff.control("access", "on")
            try desktop.settings("show", "check box: Microphone access [on]")
            r.stop(s)
        }

        /// A prompt shown on the desktop (the GTK portal's dialog) and in the window: Allow in
        /// the window resolves it everywhere, the dialog is withdrawn, the recording gets the tone.
        @Test func aPromptAnsweredInTheWindowIsWithdrawnFromTheDesktop() async throws {
            let o = try Open { try $0.startGTKPortal() }
            defer { o.stop() }
            let (s, desktop) = (o.s, o.desktop)
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            defer { _ = rec.stop() }
            try desktop.person("dialog", "wants to use the microphone")
            try desktop.settings("resize", "440", "1000")
            let shown = try desktop.settings("show", "parecord wants to use the microphone")
            #expect(shown.contains("push button: Allow: parecord wants to use the microphone"), "\(shown)")
            try Desktop.keepScreenshot(desktop, "settings-prompt.png", of: shown)
            try desktop.settings("click", "Allow: parecord wants to use the microphone")
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(resolved?.resolution?.outcome == "allow", "\(watch.summary)\n\(o.logs)")
            try desktop.person("dialog", "wants to use the microphone", "gone")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after Allow in the window\n\(o.logs)")
            #expect(try s.earmuff.status().prompts.isEmpty)
            #expect(try s.earmuff.app(s.key)?.state == "granted")
            try desktop.settings("wait", "parecord", "Recording now")
        }

        /// Pointed at a socket that is no Earmuff control socket (the sound server's own), the
        /// window says it was refused and why, and shows no page.
        @Test func aSocketThatIsNotEarmuffIsRefused() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            let server = try PulseServer()
            defer { server.stop() }
            let window = try desktop.startSettings(controlPath: server.socketPath)
            defer { window.terminate(signal: SIGTERM, grace: 5) }
            let shown = try desktop.settings("show", "Earmuff refused this window")
            #expect(shown.contains("did not greet like an earmuff daemon"), "\(shown)\n\(desktop.settingsLog)")
            #expect(!shown.contains("push button: Allow"), "\(shown)")
        }
    }
}
