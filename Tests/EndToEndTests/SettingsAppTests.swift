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
        static let notes = "launcher:org.example.Notes"

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
            print("settings: the live mark said recording \(live.trimmingCharacters(in: .whitespacesAndNewlines)) s after the tone came")
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
    }
}
