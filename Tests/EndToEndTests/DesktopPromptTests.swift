// Desktop prompts through the real daemon on a private session bus: the
// xdg-desktop-portal Access backend (our dbusmock template) and a
// notification server (python-dbusmock's notification_daemon template) stand
// in for the desktop; `busctl` plays the person clicking. Audio is judged by
// content as in ConsentEndToEndTests.

import Foundation
import Glibc
import Testing
import TestSupport

extension DesktopMocks {
    typealias Setup = EndToEnd.ConsentEndToEndTests.Setup
    typealias ConsentE2E = EndToEnd.ConsentEndToEndTests

    static let portalName = "org.freedesktop.impl.portal.desktop.gnome"
    static let portalPath = "/org/freedesktop/portal/desktop"
    static let mockControl = "org.earmuff.test.AccessMock"
    static let notifications = "org.freedesktop.Notifications"
    static let notificationsPath = "/org/freedesktop/Notifications"

    /// A bus with the Access backend mock on it.
    static func portalBus() throws -> SessionBus {
        let bus = try SessionBus()
        do {
            try bus.startMock(template: SessionBus.fixtureTemplate("access_portal"), owning: portalName)
        } catch {
            bus.stop()
            throw error
        }
        return bus
    }

    /// A bus with a notification server that supports actions.
    static func notificationBus() throws -> SessionBus {
        let bus = try SessionBus()
        do {
            try bus.startMock(
                template: "notification_daemon", owning: notifications,
                parameters: ["capabilities": "actions body body-markup"])
        } catch {
            bus.stop()
            throw error
        }
        return bus
    }

    /// Earmuff's environment for `bus`, on which it trusts the mock as the GNOME backend: its
    /// system service files are replaced by one that names python3 (the mock's program).
    static func environment(_ bus: SessionBus) throws -> [String: String] {
        let services = "\(bus.directory)/system-services"
        try TempDir.makeDirectory(services)
        try "[D-BUS Service]\nName=\(portalName)\nExec=/usr/bin/python3 -m dbusmock\n"
            .write(toFile: "\(services)/\(portalName).service", atomically: true, encoding: .utf8)
        return ["DBUS_SESSION_BUS_ADDRESS": bus.address, "EARMUFF_SYSTEM_DBUS_SERVICES": services]
    }

    /// Earmuff in front of a fresh server, on `bus` (nil: no session bus at all).
    static func setup(on bus: SessionBus?, config: [String] = [], environment: [String: String] = [:]) throws -> Setup {
        let env = try bus.map { try Self.environment($0) }.map { environment.merging($0) { $1 } } ?? environment
        return try Setup(config: config, environment: env)
    }

    /// The mock's counters: open now, most open at once, shown, closed by earmuff.
    static func portalStats(_ bus: SessionBus) throws -> (open: Int, maxOpen: Int, shown: Int, closed: Int) {
        let words = try bus.call(portalName, portalPath, mockControl, "Stats").split(separator: " ").dropFirst()
            .compactMap { Int($0) }
        guard words.count == 4 else { throw TestSupportError("unexpected Stats reply \(words)") }
        return (words[0], words[1], words[2], words[3])
    }
}

/// Namespace for the desktop prompt suites.
enum DesktopMocks {}

extension EndToEnd {
    @Suite(.serialized) struct DesktopPromptTests {
        typealias Setup = DesktopMocks.Setup

        /// Waits until the portal mock has shown `count` dialogs.
        static func waitForDialogs(_ bus: SessionBus, _ count: Int) async -> Bool {
            await Wait.until(timeout: 60, interval: 0.05) { ((try? DesktopMocks.portalStats(bus))?.shown ?? 0) >= count }
        }

        /// The Access dialog answers in the a(ss) shape of xdg-desktop-portal-kde 6, which
        /// reports the Remember choice with a deny too: granted turns the live recording real
        /// and stores granted; "only this time" turns it real and stores nothing but
        /// user-once; "until I log out" turns it real for this session; denied keeps it silent
        /// and stores denied; "denied for an hour" denies for an hour, with no second question.
        @Test(arguments: ["granted", "once", "session", "denied", "denied for an hour"])
        func portalDialogAnswers(_ answer: String) async throws {
            let bus = try DesktopMocks.portalBus()
            defer { bus.stop() }
            let s = try DesktopMocks.setup(on: bus)
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            #expect(await rec.waitForAudio(seconds: 0.5), "\(s.logs)")
            #expect(await Self.waitForDialogs(bus, 1), "no dialog:\n\(bus.calls(DesktopMocks.portalName))\n\(s.logs)")
            let dialog = try bus.call(DesktopMocks.portalName, DesktopMocks.portalPath, DesktopMocks.mockControl, "LastDialog")
            #expect(dialog.contains("wants to use your microphone"), "\(dialog)")
            #expect(dialog.contains(DesktopMocks.ConsentE2E.purpose), "the purpose is missing: \(dialog)")
            #expect(dialog.contains("Not verified: any program of yours could use this name"), "\(dialog)")
            #expect(!dialog.contains(s.key), "the app key is a detail, not for the dialog: \(dialog)")
            #expect(dialog.contains("audio-input-microphone-symbolic"), "\(dialog)")
            #expect(
                dialog.contains("lifespan=Remember:always/Always,session/Until I log out,1h/For an hour,once/Only this time:always"),
                "the dialog does not ask how long: \(dialog)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio before the answer")

            let denied = answer.hasPrefix("denied")
            let (response, lifespan) =
                denied
                ? ("1", answer == "denied" ? "always" : "1h")
                : ("0", ["granted": "always", "once": "once", "session": "session"][answer] ?? "")
            try bus.call(DesktopMocks.portalName, DesktopMocks.portalPath, DesktopMocks.mockControl, "Answer", "us", response, lifespan)
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            let expected = denied ? "deny" : ["granted": "allow", "once": "once", "session": "allow"][answer]
            #expect(resolved?.resolution?.outcome == expected, "\(watch.summary)\n\(s.logs)")
            #expect(resolved?.resolution?.by == "portal", "\(watch.summary)")
            if denied {
                _ = await rec.waitForAudio(seconds: 1)
                let (_, audio) = rec.stop()
                #expect(AudioAnalysis.isUniform(audio, value: 0))
            } else {
                #expect(await DesktopMocks.ConsentE2E.waitForToneAfterSwitch(rec, seconds: 1), "no tone after the answer\n\(s.logs)")
                #expect(DesktopMocks.ConsentE2E.isSilenceThenTone(rec.stop().1), "not silence, then the tone")
            }
            let app = try s.earmuff.app(s.key)
            let state = denied ? "denied" : ["granted": "granted", "once": "undetermined", "session": "granted"][answer]
            #expect(
                app?.state == state && app?.reason == (answer == "once" ? "user-once" : "user"),
                "\(String(describing: app))")
            let remembered = ["session": "session", "denied for an hour": "timed"][answer] ?? "always"
            #expect(app?.lifespan == remembered, "\(String(describing: app))")
            if answer == "denied for an hour" {
                let left = (app?.expiresAt ?? 0) - Date().timeIntervalSince1970
                #expect(left > 3000 && left <= 3600, "denied for \(left) s")
            }
            let stats = try DesktopMocks.portalStats(bus)
            #expect(stats.closed == 0 && stats.shown == 1, "an answered dialog was closed, or asked twice: \(stats)")
        }

        /// A backend that reports no choices at all (xdg-desktop-portal-kde 5.27): Allow is
        /// always; once seen, a Deny there is lasting without a second question (asked, it
        /// could not offer the choice either).
        @Test func aBackendWithoutChoicesIsNotAskedHowLong() async throws {
            let bus = try DesktopMocks.portalBus()
            defer { bus.stop() }
            let s = try DesktopMocks.setup(on: bus)
            defer { s.stop() }
            let first = try s.record()
            #expect(await Self.waitForDialogs(bus, 1), "\(s.logs)")
            try bus.call(DesktopMocks.portalName, DesktopMocks.portalPath, DesktopMocks.mockControl, "Answer", "us", "0", "")
            #expect(await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key))?.state == "granted" }, "\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.lifespan == "always")
            _ = first.stop()
            _ = try s.earmuff.control("reset", s.key)
            let second = try s.record()
            defer { _ = second.stop() }
            #expect(await Self.waitForDialogs(bus, 2), "\(s.logs)")
            try bus.call(DesktopMocks.portalName, DesktopMocks.portalPath, DesktopMocks.mockControl, "Answer", "us", "1", "")
            #expect(await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key))?.state == "denied" }, "\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.lifespan == "always")
            let stats = try DesktopMocks.portalStats(bus)
            #expect(stats.shown == 2, "asked how long: \(stats)")
        }

        /// A backend that answers garbage, or fails: the prompt goes on to the notification at
        /// once (not after prompt-timeout), and the backend is not asked again.
        @Test(arguments: ["garbage", "error"])
        func aBrokenBackendIsSkipped(_ how: String) async throws {
            let bus = try DesktopMocks.portalBus()
            defer { bus.stop() }
            try bus.startMock(
                template: "notification_daemon", owning: DesktopMocks.notifications,
                parameters: ["capabilities": "actions body body-markup"])
            let s = try DesktopMocks.setup(on: bus, config: ["prompt-timeout = 600"])
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            #expect(await Self.waitForDialogs(bus, 1), "no dialog:\n\(s.logs)")
            try bus.call(DesktopMocks.portalName, DesktopMocks.portalPath, DesktopMocks.mockControl, "Misbehave", "s", how)
            let notified = await Wait.until(timeout: 60, interval: 0.05) {
                bus.calls(DesktopMocks.notifications).contains("Notify ")
            }
            #expect(notified, "the prompt did not move on to the notification:\n\(s.logs)")
            #expect(s.earmuff.log().contains("not asked again"), "\(s.logs)")
            #expect(try s.earmuff.status().prompts.count == 1, "the prompt closed instead of moving on")
            // The notification answers; the next app's prompt goes straight to it.
            try bus.call(
                DesktopMocks.notifications, DesktopMocks.notificationsPath, "org.freedesktop.DBus.Mock", "EmitSignal",
                "sssav", "", "ActionInvoked", "us", "2", "u", "1", "s", "deny")
            _ = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            _ = rec.stop()
            try s.earmuff.control("reset", s.key)
            let again = try s.record()
            defer { _ = again.stop() }
            let second = await Wait.until(timeout: 60, interval: 0.05) {
                bus.calls(DesktopMocks.notifications).components(separatedBy: "Notify ").count == 3
            }
            #expect(second, "no second notification:\n\(bus.calls(DesktopMocks.notifications))\n\(s.logs)")
            #expect(try DesktopMocks.portalStats(bus).shown == 1, "the broken backend was asked again")
        }

        /// A portal backend that owns its name but has no Access dialog (xdg-desktop-portal-gnome
        /// 43, as Debian 12 ships it: GNOME Shell shows that dialog there): the prompt goes to
        /// the notification at once, and the backend is asked once, not again.
        @Test func aBackendWithoutTheAccessDialogIsSkipped() async throws {
            let bus = try DesktopMocks.notificationBus()
            defer { bus.stop() }
            try bus.startService(
                "/usr/bin/python3",
                arguments: [
                    "-m", "dbusmock", "--session", DesktopMocks.portalName,
                    DesktopMocks.portalPath, "org.freedesktop.impl.portal.Settings",
                ],
                owning: DesktopMocks.portalName, hint: "dbusmock")
            let s = try DesktopMocks.setup(on: bus, config: ["prompt-timeout = 600"])
            defer { s.stop() }
            let first = try s.record()
            let notified = await Wait.until(timeout: 60, interval: 0.05) {
                bus.calls(DesktopMocks.notifications).contains("Notify ")
            }
            #expect(notified, "no notification:\n\(s.logs)")
            try bus.call(
                DesktopMocks.notifications, DesktopMocks.notificationsPath, "org.freedesktop.DBus.Mock", "EmitSignal",
                "sssav", "", "ActionInvoked", "us", "2", "u", "1", "s", "deny")
            #expect(await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key))?.state == "denied" }, "\(s.logs)")
            _ = first.stop()
            _ = try s.earmuff.control("reset", s.key)
            let second = try s.record()
            defer { _ = second.stop() }
            let again = await Wait.until(timeout: 60, interval: 0.05) {
                bus.calls(DesktopMocks.notifications).components(separatedBy: "Notify ").count == 3
            }
            #expect(again, "no second notification:\n\(s.logs)")
            let skipped = s.earmuff.log().components(separatedBy: "has no Access dialog").count - 1
            #expect(skipped == 1, "the backend was asked \(skipped) times:\n\(s.logs)")
        }

        /// A notification with actions: Allow (or Allow until logout, for this session) flips
        /// the live recording to the tone; the notification is resident, so earmuff withdraws
        /// it after the answer.
        @Test(arguments: ["allow", "session"])
        func notificationActionAnswers(_ action: String) async throws {
            let bus = try DesktopMocks.notificationBus()
            defer { bus.stop() }
            let s = try DesktopMocks.setup(on: bus)
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record(purpose: nil)
            let shown = await Wait.until(timeout: 60, interval: 0.05) { bus.calls(DesktopMocks.notifications).contains("Notify ") }
            #expect(shown, "no notification:\n\(bus.calls(DesktopMocks.notifications))\n\(s.logs)")
            let notify = bus.calls(DesktopMocks.notifications)
            for needle in [
                "\"allow\"", "\"Allow\"", "\"once\"", "\"deny\"", "\"session\"", "\"Allow until logout\"",
                "gave no reason", "wants to use your microphone", "urgency", "resident",
            ] {
                #expect(notify.contains(needle), "\(needle) missing from \(notify)")
            }
            #expect(await rec.waitForAudio(seconds: 0.1), "\(s.logs)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio before the answer")
            // The stock mock numbers notifications from 1.
            try bus.call(
                DesktopMocks.notifications, DesktopMocks.notificationsPath, "org.freedesktop.DBus.Mock", "EmitSignal",
                "sssav", "", "ActionInvoked", "us", "2", "u", "1", "s", action)
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(
                resolved?.resolution?.outcome == "allow" && resolved?.resolution?.by == "notification",
                "\(watch.summary)\n\(s.logs)")
            #expect(await DesktopMocks.ConsentE2E.waitForToneAfterSwitch(rec, seconds: 1), "no tone after the answer\n\(s.logs)")
            let (_, audio) = rec.stop()
            let at = (audio.firstIndex { $0 != 0 } ?? audio.count) / 2 * 2
            #expect(at > 0, "the recording was never silent")
            let withdrawn = await Wait.until(timeout: 30, interval: 0.05) {
                bus.calls(DesktopMocks.notifications).contains("CloseNotification 1")
            }
            #expect(withdrawn, "\(bus.calls(DesktopMocks.notifications))")
            let app = try s.earmuff.app(s.key)
            #expect(
                app?.state == "granted" && app?.lifespan == (action == "session" ? "session" : "always"),
                "\(String(describing: app))")
        }

        /// The prompt names the app by the desktop entry whose Exec is its executable, with
        /// that entry's icon; the name the app gave itself appears only as "calls itself".
        @Test func promptNamesTheAppByItsDesktopEntry() async throws {
            let scratch = try Helpers.scratch()
            defer { TempDir.remove(scratch) }
            try TempDir.makeDirectory("\(scratch)/share/applications")
            try "[Desktop Entry]\nType=Application\nName=Sound Recorder\nIcon=audio-recorder\nExec=parecord --record %f\n"
                .write(toFile: "\(scratch)/share/applications/sound-recorder.desktop", atomically: true, encoding: .utf8)
            let bus = try DesktopMocks.notificationBus()
            defer { bus.stop() }
            let s = try DesktopMocks.setup(on: bus, environment: ["XDG_DATA_DIRS": "\(scratch)/share"])
            defer { s.stop() }
            let rec = try s.record()
            let shown = await Wait.until(timeout: 60, interval: 0.05) { bus.calls(DesktopMocks.notifications).contains("Notify ") }
            #expect(shown, "\(s.logs)")
            let notify = bus.calls(DesktopMocks.notifications)
            for needle in ["Sound Recorder wants to use your microphone", "\"audio-recorder\"", "It calls itself “parecord”"] {
                #expect(notify.contains(needle), "\(needle) missing from \(notify)")
            }
            _ = rec.stop()
        }

        /// An agent answers first: the dialog is cancelled with Request.Close, or the
        /// notification withdrawn with CloseNotification.
        @Test(arguments: ["portal", "notification"])
        func agentAnswerWithdrawsTheDesktopPrompt(_ channel: String) async throws {
            let bus = try channel == "portal" ? DesktopMocks.portalBus() : DesktopMocks.notificationBus()
            defer { bus.stop() }
            let s = try DesktopMocks.setup(on: bus)
            defer { s.stop() }
            let rec = try s.record()
            if channel == "portal" {
                #expect(await Self.waitForDialogs(bus, 1), "\(s.logs)")
            } else {
                #expect(
                    await Wait.until(timeout: 60, interval: 0.05) {
                        bus.calls(DesktopMocks.notifications).contains("Notify ")
                    }, "\(s.logs)")
            }
            let agent = try s.earmuff.startCLI(["agent", "--answer", "deny", "--json"])
            defer { agent.stop() }
            _ = try await agent.waitForLine { $0.type == "answered" }
            let closed = await Wait.until(timeout: 30, interval: 0.05) {
                channel == "portal"
                    ? ((try? DesktopMocks.portalStats(bus))?.closed ?? 0) == 1
                    : bus.calls(DesktopMocks.notifications).contains("CloseNotification 1")
            }
            #expect(closed, "\(bus.calls(channel == "portal" ? DesktopMocks.portalName : DesktopMocks.notifications))\n\(s.logs)")
            if channel == "portal" { #expect(try DesktopMocks.portalStats(bus).open == 0) }
            _ = rec.stop()
            #expect(try s.earmuff.app(s.key)?.state == "denied")
        }

        /// No session bus, a bus without either service, or a notification server without
        /// actions: the prompt goes straight on to prompt-command (no D-Bus timeout in between).
        @Test(arguments: ["no bus", "empty bus", "notifications without actions"])
        func noDesktopFallsThroughToTheCommand(_ desktop: String) async throws {
            let bus = desktop == "no bus" ? nil : try SessionBus()
            defer { bus?.stop() }
            if desktop == "notifications without actions" {
                try bus?.startMock(
                    template: "notification_daemon", owning: DesktopMocks.notifications,
                    parameters: ["capabilities": "body body-markup"])
            }
            let s = try DesktopMocks.setup(on: bus, config: ["prompt-command = exit 0"])
            defer { s.stop() }
            let watch = try await s.earmuff.startWatch()
            defer { watch.stop() }
            let rec = try s.record()
            let raised = try await watch.waitForLine { $0.event == "prompt-raised" && $0.prompt?.appKey == s.key }
            let resolved = try await watch.waitForLine { $0.event == "prompt-resolved" && $0.resolution?.appKey == s.key }
            #expect(resolved?.resolution?.by == "prompt-command", "\(watch.summary)\n\(s.logs)")
            // sd-bus's call timeout is 25 s and ours 10 s: well under that means nothing waited on D-Bus.
            let delay = (resolved?.resolution?.resolvedAt ?? .infinity) - (raised?.prompt?.raisedAt ?? 0)
            #expect(delay < 5, "the command answered \(delay) s after the prompt\n\(s.logs)")
            _ = rec.stop()
            if let bus, desktop != "empty bus" {
                // The prompt was not shown there; the notice that the app now hears the microphone may be.
                #expect(!bus.calls(DesktopMocks.notifications).contains("wants to"), "prompted without actions")
            }
        }
    }
}
