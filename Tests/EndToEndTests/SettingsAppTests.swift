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

            /// `environment` is the daemon's and the window's (the desktop's is theirs too).
            init(
                config: [String] = [], environment: [String: String] = [:],
                services: (TestDesktop) throws -> Void = { _ in }
            ) throws {
                let desktop = try TestDesktop()
                self.desktop = desktop
                do {
                    try services(desktop)
                    s = try Setup(config: config, environment: desktop.environment.merging(environment) { $1 })
                } catch {
                    desktop.stop()
                    throw error
                }
                do {
                    window = try desktop.startSettings(controlPath: s.earmuff.controlPath, environment: environment)
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

        /// The title a row shows for an app of `earmuff apps --json`, the name its prompt shows.
        /// (Its desktop entry's name, else the ID of an app that has one, else the command it was
        /// started as, else its executable's name; never what the app calls itself.)
        static func title(_ app: AppView) -> String {
            if let n = app.systemName, !n.isEmpty { return n }
            let tail = app.key.split(separator: ":", maxSplits: 1).last.map(String.init) ?? app.key
            if ["flatpak:", "snap:", "launcher:"].contains(where: { app.key.hasPrefix($0) }) { return tail }
            if let n = app.commandName, !n.isEmpty { return n }
            if let e = app.executable, let n = e.split(separator: "/").last { return String(n) }
            return tail.split(separator: "/").last.map(String.init) ?? tail
        }

        /// The Flatpak's desktop entry, as it would export it: its name, and its icon (a magenta
        /// square, found by the icon theme among the unthemed icons of `XDG_DATA_DIRS`).
        static let recorderName = "Podcast Recorder"
        static let recorderColour: (UInt8, UInt8, UInt8) = (255, 0, 255)

        /// A data directory holding the Flatpak's desktop entry and icon; `XDG_DATA_DIRS` with it.
        static func recorderEntry() throws -> (directory: String, environment: [String: String]) {
            let share = try TempDir.make(prefix: "earmuff-share")
            try TempDir.makeDirectory("\(share)/applications")
            try TempDir.makeDirectory("\(share)/icons")
            try """
            [Desktop Entry]
            Type=Application
            Name=\(Self.recorderName)
            Exec=podcast-recorder
            Icon=\(Self.flatpakID)

            """.write(toFile: "\(share)/applications/\(Self.flatpakID).desktop", atomically: true, encoding: .utf8)
            try ##"<svg xmlns="http://www.w3.org/2000/svg" width="48" height="48"><rect width="48" height="48" fill="#ff00ff"/></svg>"##
                .write(toFile: "\(share)/icons/\(Self.flatpakID).svg", atomically: true, encoding: .utf8)
            return (share, ["XDG_DATA_DIRS": "\(share):/usr/local/share:/usr/share"])
        }

        /// Three known apps (parecord recording now, a Flatpak that recorded, a launcher app
        /// decided from the CLI): each page lists exactly the apps `earmuff apps --json` lists
        /// for its kind, the Flatpak by its desktop entry's name with its icon; Allow on
        /// parecord's row turns its running recording from exact silence to the tone and marks
        /// it recording, Deny silences it again and the mark says so.
        @Test func pagesListTheKnownAppsAndAClickDecidesTheRunningRecording() async throws {
            let entry = try Self.recorderEntry()
            defer { TempDir.remove(entry.directory) }
            let o = try Open(environment: entry.environment)
            defer { o.stop() }
            defer { if !o.window.isRunning { Issue.record("earmuff-settings exited (\(o.window.poll() ?? 0)):\n\(o.desktop.settingsLog)") } }
            let (s, desktop) = (o.s, o.desktop)
            let flatpak = try Sandbox.startFlatpakRecording(
                appID: Self.flatpakID, sessionSocket: s.earmuff.listenPath,
                purpose: "Records podcasts")
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: "flatpak:\(Self.flatpakID)").isEmpty }
            _ = flatpak.stop()
            try s.earmuff.control("deny", Self.notes)
            try s.earmuff.control("grant", Self.notes, "--kind", "system-audio")
            let rec = try s.record()
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: s.key).isEmpty }

            try desktop.settings("resize", "440", "1000")
            let apps = try s.earmuff.apps()
            #expect(apps.count == 4, "\(apps)\n\(o.logs)")
            let shown = try desktop.settings("show", "Allow \(Self.title(apps.first { $0.key == s.key }!))")
            let microphone = apps.filter { ($0.kind ?? "microphone") == "microphone" }
            #expect(microphone.count == 3, "\(microphone)")
            for app in microphone {
                #expect(shown.contains("push button: Allow \(Self.title(app))"), "no row for \(app.key):\n\(shown)\n\(o.logs)")
            }
            #expect(
                shown.split(separator: "\n").filter { $0.hasPrefix("push button: Allow ") }.count == microphone.count,
                "rows that apps --json does not list:\n\(shown)")
            try Desktop.keepScreenshot(desktop, "settings-microphone.png", of: shown)
            let recorder = try #require(apps.first { $0.key == "flatpak:\(Self.flatpakID)" }, "\(apps)")
            #expect(recorder.systemName == Self.recorderName && recorder.icon == Self.flatpakID, "\(recorder)")
            #expect(shown.contains("label: \(Self.recorderName)\n"), "the Flatpak's row is not named as its entry:\n\(shown)")
            let magenta = try Self.pixels(of: Self.recorderColour, desktop, shown)
            #expect(magenta >= 16 * 16, "the entry's icon is not shown (\(magenta) pixels of its colour)\n\(o.logs)")

            let parecord = Self.title(apps.first { $0.key == s.key }!)
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio before the click")
            try desktop.settings("wait", parecord, "Recording silence now")
            try desktop.settings("click", "Allow \(parecord)")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after Allow\n\(o.logs)")
            let live = try desktop.settings("wait", parecord, "Recording now")
            print(
                "settings: the row said \"Recording now\" \(live.replacingOccurrences(of: "after ", with: "").trimmingCharacters(in: .whitespacesAndNewlines)) s after the test saw the tone (the person's start-up included)"
            )
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
            #expect(
                system.split(separator: "\n").filter { $0.hasPrefix("push button: Allow ") }.count == systemApps.count,
                "\(system)")
            try Desktop.keepScreenshot(desktop, "settings-system-audio.png", of: system)
            try desktop.settings("click", "History")
            let history = try desktop.settings("show", "Microphone")
            #expect(history.contains("\(parecord) · Microphone"), "no recording of parecord in History:\n\(history)")
            try Desktop.keepScreenshot(desktop, "settings-history.png", of: history)
        }

        /// The window's pixels (`shown`'s geometry), in RGB.
        static func pixels(_ desktop: TestDesktop, _ shown: String) throws -> [(UInt8, UInt8, UInt8)] {
            let path = "\(desktop.bus.directory)/pixels.ppm"
            let geometry = shown.split(separator: "\n").first { $0.hasPrefix("geometry: ") }?.dropFirst(10)
            try desktop.screenshot(to: path, crop: geometry.map(String.init))
            let ppm = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            // P6, width, height and the largest value, each followed by one blank, then RGB
            // triples of one byte each, or of two (big-endian) when the largest value is over 255.
            var fields: [String] = [], at = 0
            while fields.count < 4, at < ppm.count {
                let start = at
                while at < ppm.count, ppm[at] != 0x20, ppm[at] != 0x0A { at += 1 }
                fields.append(String(decoding: ppm[start..<at], as: UTF8.self))
                at += 1
            }
            let width = (Int(fields.last ?? "") ?? 255) > 255 ? 2 : 1
            return stride(from: at, to: ppm.count - 3 * width + 1, by: 3 * width).map { i in
                (ppm[i], ppm[i + width], ppm[i + 2 * width])
            }
        }

        /// How many pixels of the window (`shown`'s geometry) are exactly `colour`.
        static func pixels(of colour: (UInt8, UInt8, UInt8), _ desktop: TestDesktop, _ shown: String) throws -> Int {
            try pixels(desktop, shown).count { $0 == colour }
        }

        /// Where `rec` turns to exact silence for good (at least 0.3 s of zeros), searching
        /// from byte `from`.
        static func silenceStart(_ rec: Recording, from: Int) -> Int? {
            let audio = rec.data()
            let run = E2E.bytes(0.3, of: rec)
            var at = from / 2 * 2
            while at + run <= audio.count {
                guard let loud = audio[at..<(at + run)].lastIndex(where: { $0 != 0 }) else { return at }
                at = (loud + 2) / 2 * 2
            }
            return nil
        }

        /// Seconds from `click` until byte `offset` of recording `index` reached its file.
        static func arrival(_ offset: Int?, _ index: Int, _ times: ArrivalTimes, after click: Double) -> Double? {
            offset.flatMap { times.arrival(of: $0, in: index) }.map { $0 - click }
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

        /// Two granted apps recording from a microphone whose tone comes in 5 ms blocks: the
        /// header's "Microphone access" switch, clicked off, silences both within 100 ms of the
        /// click (when the recordings' first silent sample reached their files); on brings
        /// both back. Off survives a restart of the daemon (the window says it is not running
        /// meanwhile, and comes back by itself), and `earmuff access on` shows in the window.
        @Test func theMasterSwitchSilencesEveryAppAtOnceAndSurvivesARestart() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            let r = try LifespanEndToEndTests.Restarts()
            defer { r.remove() }
            try r.server.startFineMicrophone()
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

            let times = ArrivalTimes(recs)
            defer { times.stop() }
            let before = recs.map { $0.byteCount() }
            let clicked = try desktop.settings("click", "Microphone access")
            let at = try #require(Desktop.clickTime(clicked), "\(clicked)")
            for rec in recs { #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio with access off\n\(logs)") }
            // The daemon's log says when it switched every stream (its clock is the test's).
            let switched = try #require(
                Self.logTime(of: "microphone access switched off", in: s.earmuff.log(), near: at),
                "\(logs)")
            print("settings: master switch off, the daemon switched \(String(format: "%.3f", switched - at)) s after the click")
            for (i, rec) in recs.enumerated() {
                let delay = Self.arrival(Self.silenceStart(rec, from: before[i]), i, times, after: at)
                print("settings: master switch off, recording \(i + 1) silent \(delay.map { String(format: "%.3f", $0) } ?? "-") s after the click")
                #expect((delay ?? .infinity) < 0.1, "recording \(i + 1) silent \(String(describing: delay)) s after the click\n\(logs)")
            }
            #expect(try s.earmuff.status().accessEnabled("microphone") == false)
            #expect(try s.earmuff.app(s.key)?.state == "granted", "the decision was not kept")
            let off = try desktop.settings("show", "Microphone access is off")
            #expect(off.contains("check box: Microphone access\n"), "the switch still shows on:\n\(off)")

            let marks = recs.map { $0.byteCount() }
            let onClick = try #require(Desktop.clickTime(try desktop.settings("click", "Microphone access")))
            for (i, (rec, mark)) in zip(recs, marks).enumerated() {
                let back = await Wait.until(timeout: 60) {
                    let audio = rec.data()
                    guard audio.count > mark + E2E.bytes(1, of: rec) else { return false }
                    return audio.subdata(in: (audio.count - E2E.bytes(0.3, of: rec))..<audio.count).contains { $0 != 0 }
                }
                #expect(back, "no tone once access is on\n\(logs)")
                let tone = rec.data()[mark...].firstIndex { $0 != 0 }
                let delay = Self.arrival(tone, i, times, after: onClick)
                print("settings: master switch on, recording \(i + 1) had the tone \(delay.map { String(format: "%.3f", $0) } ?? "-") s after the click")
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
            // The switch's state and the apps come in apart: each is waited for.
            try desktop.settings("show", "Microphone access is off")
            let back = try desktop.settings("show", "push button: Allow parecord")
            #expect(back.contains("Microphone access is off"), "\(back)")
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
            try desktop.person("dialog", "wants to use your microphone")
            try desktop.settings("resize", "440", "1000")
            let shown = try desktop.settings("show", "parecord wants to use your microphone")
            #expect(shown.contains("push button: Allow: parecord wants to use your microphone"), "\(shown)")
            try Desktop.keepScreenshot(desktop, "settings-prompt.png", of: shown)
            try desktop.settings("click", "Allow: parecord wants to use your microphone")
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(resolved?.resolution?.outcome == "allow", "\(watch.summary)\n\(o.logs)")
            try desktop.person("dialog", "wants to use your microphone", "gone")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after Allow in the window\n\(o.logs)")
            #expect(try s.earmuff.status().prompts.isEmpty)
            #expect(try s.earmuff.app(s.key)?.state == "granted")
            do {
                try desktop.settings("wait", "parecord", "Recording now")
            } catch {
                Issue.record("\(error)\nstatus: \(try s.earmuff.runCLI(["status"]).stdoutText)\nevents:\n\(watch.summary)\n\(o.logs)")
            }
        }

        /// At 360 px wide (the narrowest a phone gives) and in the dark style, every label and
        /// control of each page, and the header's switch, lies within the window, and the
        /// window is dark.
        @Test func readableAt360PixelsWideInTheDarkStyle() async throws {
            let entry = try Self.recorderEntry()
            defer { TempDir.remove(entry.directory) }
            let o = try Open(environment: entry.environment.merging(["ADW_DEBUG_COLOR_SCHEME": "prefer-dark"]) { $1 })
            defer { o.stop() }
            let (s, desktop) = (o.s, o.desktop)
            let flatpak = try Sandbox.startFlatpakRecording(
                appID: Self.flatpakID, sessionSocket: s.earmuff.listenPath,
                purpose: "Records podcasts and interviews for the weekly show")
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: "flatpak:\(Self.flatpakID)").isEmpty }
            _ = flatpak.stop()
            try s.earmuff.control("deny", Self.notes, "--session")
            try s.earmuff.control("grant", Self.notes, "--kind", "system-audio")
            let rec = try s.record()
            defer { _ = rec.stop() }

            try desktop.settings("resize", "360", "900")
            for page in ["Microphone", "System audio", "History"] {
                try desktop.settings("click", page)
                let shown = try desktop.settings("show", page == "History" ? "Recordings" : "push button: Allow org.example.Notes")
                let fits = try desktop.settings("fits")
                let checked = fits.split(separator: "\n").first.flatMap { Int($0.replacingOccurrences(of: "checked ", with: "")) }
                #expect((checked ?? 0) >= (page == "History" ? 4 : 8), "\(page): too little checked\n\(fits)\n\(shown)")
                #expect(!fits.contains("cut off:") && !fits.contains("squeezed:"), "\(page) at 360 px:\n\(fits)\n\(o.logs)")
                let pixels = try Self.pixels(desktop, shown)
                let dark = pixels.count { Int($0.0) + Int($0.1) + Int($0.2) < 3 * 80 }
                #expect(dark * 2 > pixels.count, "\(page) is not dark: \(dark) of \(pixels.count) pixels")
                try Desktop.keepScreenshot(
                    desktop, "settings-\(page.lowercased().replacingOccurrences(of: " ", with: "-"))-narrow-dark.png",
                    of: shown)
            }
        }

        /// A daemon that does not answer (stopped with SIGSTOP) while the window is open: the
        /// click's request waits off the GTK loop, so the window still draws and answers (a
        /// page is switched and read through the accessibility tree while the daemon is still
        /// stopped); once the daemon runs again the click is carried out.
        @Test func aDaemonThatDoesNotAnswerNeverHoldsUpTheWindow() async throws {
            let o = try Open()
            defer { o.stop() }
            let (s, desktop) = (o.s, o.desktop)
            let rec = try s.record()
            defer { _ = rec.stop() }
            try desktop.settings("wait", "parecord", "Recording silence now")
            let pid = s.earmuff.process.pid
            #expect(kill(pid, SIGSTOP) == 0)
            var stopped = true
            defer { if stopped { kill(pid, SIGCONT) } }
            try desktop.settings("click", "Allow parecord")
            try desktop.settings("click", "System audio")
            let shown = try desktop.settings("show", SettingsKind.systemAudio.explanation)
            #expect(!shown.contains("Earmuff is not running"), "\(shown)")
            let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
            #expect(stat.split(separator: ")").last?.split(separator: " ").first == "T", "the daemon ran meanwhile: \(stat)")
            #expect(rec.isExactSilence(), "audio before the daemon ran again")

            #expect(kill(pid, SIGCONT) == 0)
            stopped = false
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "the click was lost\n\(o.logs)")
            #expect(try s.earmuff.app(s.key)?.state == "granted")
            try desktop.settings("click", "Microphone")
            do {
                try desktop.settings("wait", "parecord", "Recording now")
            } catch {
                Issue.record("\(error)\nstatus: \(try s.earmuff.runCLI(["status"]).stdoutText)\n\(o.logs)")
            }
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
            let shown = try desktop.settings("show", "did not greet like an earmuff daemon")
            #expect(shown.contains("label: Earmuff refused this window"), "\(shown)\n\(desktop.settingsLog)")
            #expect(!shown.contains("push button: Allow"), "\(shown)")
        }
    }
}
