// Prompts on the desktop a person has: the real xdg-desktop-portal-gtk dialog
// and the real dunst, on a private Xvfb and session bus, answered as a person
// answers them (a pointer click on the widget the accessibility tree shows;
// dunst's middle click and its menu of actions). Judged by the running
// recording's audio and by `earmuff apps`.
//
// EARMUFF_SCREENSHOTS=DIR keeps the screenshots these tests take (the README's
// pictures of the dialog and the notification come from here).

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite(.serialized) struct RealDesktopPromptTests {
        typealias Setup = EndToEnd.ConsentEndToEndTests.Setup
        typealias E2E = EndToEnd.ConsentEndToEndTests

        /// A desktop with `services` started, and Earmuff in front of a fresh server on it.
        static func start(
            _ services: (TestDesktop) throws -> Void, config: [String] = []
        )
            throws -> (TestDesktop, Setup)
        {
            let desktop = try TestDesktop()
            do {
                try services(desktop)
                return (desktop, try Setup(config: config, environment: desktop.environment))
            } catch {
                desktop.stop()
                throw error
            }
        }

        /// A screenshot of the window whose `geometry:` line `shown` has (person.py's output);
        /// kept when EARMUFF_SCREENSHOTS names a directory.
        static func keepScreenshot(_ desktop: TestDesktop, _ name: String, of shown: String) throws {
            let geometry = shown.split(separator: "\n").first { $0.hasPrefix("geometry: ") }?.dropFirst(10)
            let path = "\(desktop.bus.directory)/\(name)"
            try desktop.screenshot(to: path, crop: geometry.map(String.init))
            #expect(FileManager.default.fileExists(atPath: path))
            if let dir = ProcessInfo.processInfo.environment["EARMUFF_SCREENSHOTS"] {
                try? FileManager.default.removeItem(atPath: "\(dir)/\(name)")
                try FileManager.default.copyItem(atPath: path, toPath: "\(dir)/\(name)")
            }
        }

        /// Clicks `button` in the dialog and returns where in `rec`'s audio the click fell:
        /// the bytes recorded before the call, plus the audio of the time until the click.
        static func click(_ button: String, _ desktop: TestDesktop, during rec: Recording) throws -> Int {
            try click(["click", button], desktop, during: [rec])[0]
        }

        /// Runs `person.py ARGUMENTS` (a click) and returns where in each recording's audio the
        /// click fell, as `click(_:_:during:)` does for one.
        static func click(_ arguments: [String], _ desktop: TestDesktop, during recs: [Recording]) throws -> [Int] {
            let before = recs.map { (bytes: $0.byteCount(), at: Date().timeIntervalSince1970) }
            let out = try desktop.person(arguments)
            guard let at = out.split(separator: "\n").last.flatMap({ Double($0.replacingOccurrences(of: "clicked at ", with: "")) })
            else { throw TestSupportError("person.py did not say when it clicked: \(out)") }
            return zip(recs, before).map { rec, b in b.bytes + Int((at - b.at) * Double(rec.bytesPerSecond)) }
        }

        /// When person.py's last click was (its "clicked at" line), in seconds since 1970.
        static func clickTime(_ out: String) -> Double? {
            out.split(separator: "\n").last.flatMap { Double($0.replacingOccurrences(of: "clicked at ", with: "")) }
        }

        /// Seconds of audio between `bytes` and the first non-silent sample of `rec`.
        static func secondsToTone(_ rec: Recording, after bytes: Int) -> Double? {
            rec.firstNonSilentOffset().map { Double($0 - bytes) / Double(rec.bytesPerSecond) }
        }

        /// Allow in the GTK dialog, with each Remember choice: the same running recording turns
        /// from exact silence to the tone within 0.5 s of audio, and the app is granted for as
        /// long as the choice says ("Only this time": for its connected clients only).
        @Test(arguments: ["Always", "Until I log out", "For an hour", "Only this time"])
        func allowInTheGTKDialog(_ remember: String) async throws {
            let (desktop, s) = try Self.start { try $0.startGTKPortal() }
            defer { desktop.stop(); s.stop() }
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5), "\(s.logs)")
            let dialog = try desktop.person("dialog", "wants to use your microphone")
            for needle in [
                "label: parecord wants to use your microphone", "radio button: \(remember)", "push button: Allow",
                "push button: Deny", E2E.purpose, "From ", "Not verified: any program of yours",
            ] {
                #expect(dialog.contains(needle), "\(needle) is not in the dialog:\n\(dialog)")
            }
            #expect(!dialog.contains(s.key), "the app key is a detail, not for the dialog:\n\(dialog)")
            if remember == "Always" { try Self.keepScreenshot(desktop, "prompt-portal-gtk.png", of: dialog) }
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio before the answer")

            if remember != "Always" { try desktop.person("click", remember) }
            let clickedAt = try Self.click("Allow", desktop, during: rec)
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 1), "no tone after Allow\n\(s.logs)")
            let delay = Self.secondsToTone(rec, after: clickedAt)
            print("allow (\(remember)) in the GTK dialog: tone \(delay.map { String(format: "%.3f", $0) } ?? "-") s of audio after the click")
            #expect((delay ?? .infinity) < 0.5, "the tone came \(String(describing: delay)) s after the click\n\(s.logs)")
            #expect(E2E.isSilenceThenTone(rec.stop().1), "not silence, then the tone")

            let app = try s.earmuff.app(s.key)
            switch remember {
            case "Only this time":
                #expect(app?.state == "undetermined" && app?.reason == "user-once", "\(String(describing: app))")
            case "For an hour":
                #expect(app?.state == "granted" && app?.lifespan == "timed", "\(String(describing: app))")
                let left = (app?.expiresAt ?? 0) - Date().timeIntervalSince1970
                #expect(left > 3000 && left <= 3600, "granted for \(left) s, not an hour")
            default:
                #expect(
                    app?.state == "granted" && app?.lifespan == (remember == "Always" ? "always" : "session"),
                    "\(String(describing: app))")
            }
        }

        /// Deny with "For an hour": xdg-desktop-portal-gtk reports no choices with a deny, so a
        /// second dialog asks how long; the app is denied for that long ("Only this time": its
        /// clients connected now) and the recording stays silent. Cancelling that question is
        /// "not now": undetermined, asked again next time.
        @Test(arguments: ["For an hour", "Only this time", "Cancel"])
        func denyInTheGTKDialogAsksHowLong(_ howLong: String) async throws {
            let answerHowLong = howLong != "Cancel"
            let (desktop, s) = try Self.start { try $0.startGTKPortal() }
            defer { desktop.stop(); s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            try desktop.person("dialog", "wants to use your microphone")
            try desktop.person("click", "For an hour")
            try desktop.person("click", "Deny")
            let question = try desktop.person("dialog", "For how long?")
            #expect(question.contains("Deny parecord the microphone"), "\(question)")
            if answerHowLong {
                try desktop.person("click", howLong)
                try desktop.person("click", "Deny")
            } else {
                try desktop.person("click", "Cancel")
            }
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(resolved?.resolution?.outcome == (answerHowLong ? "deny" : "dismissed"), "\(watch.summary)\n\(s.logs)")
            #expect(resolved?.resolution?.by == "portal", "\(watch.summary)")
            _ = await rec.waitForAudio(seconds: 1)
            let (_, audio) = rec.stop()
            #expect(AudioAnalysis.isUniform(audio, value: 0), "real audio after a deny")
            let app = try s.earmuff.app(s.key)
            if howLong == "Only this time" {
                #expect(app?.state == "undetermined" && app?.reason == "user-once", "\(String(describing: app))")
            } else if answerHowLong {
                #expect(app?.state == "denied" && app?.lifespan == "timed", "\(String(describing: app))")
                let left = (app?.expiresAt ?? 0) - Date().timeIntervalSince1970
                #expect(left > 3000 && left <= 3600, "denied for \(left) s, not an hour")
            } else {
                #expect(app?.state == "undetermined", "\(String(describing: app))")
                let again = try s.record()
                defer { _ = again.stop() }
                #expect(
                    try desktop.person("dialog", "wants to use your microphone").contains("push button: Allow"),
                    "no new dialog at the next capture")
            }
        }

        /// The real dunst: a middle click opens its menu of the notification's actions, the
        /// person picks Allow, and the live recording turns to the tone.
        @Test func allowInDunstsMenu() async throws {
            let (desktop, s) = try Self.start { try $0.startDunst() }
            defer { desktop.stop(); s.stop() }
            try desktop.pick("Allow")
            let rec = try s.record(purpose: nil)
            #expect(await rec.waitForAudio(seconds: 0.2), "\(s.logs)")
            try desktop.person("notification")
            let menu = await Wait.until(timeout: 60, interval: 0.05) { desktop.lastMenu.contains("#Allow (") }
            #expect(menu, "dunst showed no menu with Allow: \(desktop.lastMenu)\n\(s.logs)")
            for label in ["#Allow once (", "#Deny (", "#Allow until logout ("] {
                #expect(desktop.lastMenu.contains(label), "\(label) is not in dunst's menu: \(desktop.lastMenu)")
            }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 1), "no tone after Allow\n\(s.logs)")
            _ = rec.stop()
            let app = try s.earmuff.app(s.key)
            #expect(app?.state == "granted" && app?.lifespan == "always", "\(String(describing: app))")
        }

        /// The notice on the real dunst: a granted app that starts hearing the microphone is
        /// named once ("parecord is using the microphone"); Stop in dunst's menu denies it until
        /// the session ends, and its recording turns to silence; a grant after that brings no
        /// second notice.
        @Test func theNoticeNamesTheAppAndStopDeniesItForTheSession() async throws {
            let (desktop, s) = try Self.start { try $0.startDunst() }
            defer { desktop.stop(); s.stop() }
            try s.earmuff.control("grant", s.key)
            try desktop.pick("Stop")
            let rec = try s.record()
            defer { _ = rec.stop() }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)")
            let shown = try desktop.person("notification-shown")
            try Self.keepScreenshot(desktop, "use-notice.png", of: shown)
            #expect(s.earmuff.log().contains("is using the microphone"), "\(s.logs)")
            try desktop.person("notification")
            #expect(
                await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key))?.state == "denied" },
                "Stop did not deny: \(desktop.lastMenu)\n\(s.logs)")
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio after Stop\n\(s.logs)")
            let app = try s.earmuff.app(s.key)
            #expect(app?.lifespan == "session", "\(String(describing: app))")
            try s.earmuff.control("grant", s.key)
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after the grant\n\(s.logs)")
            #expect(s.earmuff.log().components(separatedBy: "is using the microphone").count - 1 == 1, "\(s.logs)")
        }

        /// A dunst notification closed without an answer (a left click: reason 2, dismissed by
        /// the person) is "not now": the prompt is withdrawn, the stream stays silent, and the
        /// app's next capture raises a new one. The notification is the README's picture.
        @Test func closingTheNotificationIsNotNow() async throws {
            let (desktop, s) = try Self.start { try $0.startDunst() }
            defer { desktop.stop(); s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record(purpose: nil)
            _ = try await watch.waitForLine { $0.event == "prompt-raised" && $0.prompt?.appKey == s.key }
            let shown = try desktop.person("notification-shown")
            try Self.keepScreenshot(desktop, "prompt-notification.png", of: shown)
            try desktop.person("notification", "close")
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(
                resolved?.resolution?.outcome == "dismissed" && resolved?.resolution?.by == "notification",
                "\(watch.summary)\n\(s.logs)")
            #expect(try s.earmuff.status().prompts.isEmpty, "the prompt is still pending")
            _ = await rec.waitForAudio(seconds: 0.5)
            let (_, audio) = rec.stop()
            #expect(AudioAnalysis.isUniform(audio, value: 0), "real audio without an answer")
            #expect(try s.earmuff.app(s.key)?.state == "undetermined")
            let again = try s.record(purpose: nil)
            defer { _ = again.stop() }
            let raisedAgain = try await watch.waitForLine {
                $0.event == "prompt-raised" && $0.prompt?.appKey == s.key && $0.prompt?.id != resolved?.resolution?.prompt
            }
            #expect(raisedAgain != nil, "no new prompt at the next capture\n\(watch.summary)")
        }
    }
}
