// The status indicator in the tray a person has: the real xfce4-panel with its
// StatusNotifierItem host (the systray plugin, whose menus are libdbusmenu-gtk3's), on
// a private Xvfb and session bus. The icon is judged by its pixels on the screen, the
// menu by what the panel draws, a click by the running recording's audio.
//
// EARMUFF_SCREENSHOTS=DIR keeps the README's pictures of the tray and its menu.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite(.serialized) struct IndicatorTests {
        typealias E2E = EndToEnd.ConsentEndToEndTests
        typealias Desktop = RealDesktopPromptTests
        typealias Restarts = LifespanEndToEndTests.Restarts

        static let orange: (Int, Int, Int) = (0xff, 0x78, 0x00)
        static let grey: (Int, Int, Int) = (0x8c, 0x8c, 0x8c)

        /// How many pixels of the tray item (`shown`'s geometry) are within a few steps of
        /// `colour` (the tray scales the pixmap nearest its size, which blends edges only).
        static func pixels(near colour: (Int, Int, Int), _ desktop: TestDesktop, _ shown: String) throws -> Int {
            try SettingsAppTests.pixels(desktop, shown).count {
                abs(Int($0.0) - colour.0) <= 12 && abs(Int($0.1) - colour.1) <= 12 && abs(Int($0.2) - colour.2) <= 12
            }
        }

        /// Waits until the tray item shows `colour` (some pixels of it) and not `other`.
        static func waitForIcon(_ colour: (Int, Int, Int), not other: (Int, Int, Int), _ desktop: TestDesktop) async throws -> String {
            var last = ""
            let shown = await Wait.until(timeout: 60, interval: 0.1) {
                let item: String
                do { item = try desktop.person("tray", "Earmuff") } catch {
                    last = "\(error)"
                    return false
                }
                last = item
                return ((try? pixels(near: colour, desktop, item)) ?? 0) >= 8 && ((try? pixels(near: other, desktop, item)) ?? 1) == 0
            }
            guard shown else {
                try? desktop.screenshot(to: "/tmp/indicator-fail.png")
                throw TestSupportError("the tray item did not turn \(colour): \(last)\n\(desktop.indicatorLog)")
            }
            return last
        }

        /// A property of the indicator's item, as `busctl get-property` prints it (`s "Active"`).
        static func property(_ name: String, _ desktop: TestDesktop, _ indicator: ChildProcess) throws -> String {
            let r = try desktop.bus.run(
                findExecutable("busctl") ?? "busctl",
                [
                    "--address=\(desktop.bus.address)", "get-property", "org.kde.StatusNotifierItem-\(indicator.pid)-1",
                    "/StatusNotifierItem", "org.kde.StatusNotifierItem", name,
                ])
            guard r.succeeded else { throw TestSupportError("busctl get-property \(name): \(r)") }
            return r.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Waits until the item's `Status` is `status` ("Passive": the tray shows it no more).
        static func waitForStatus(_ status: String, _ desktop: TestDesktop, _ indicator: ChildProcess) async -> Bool {
            await Wait.until(timeout: 60) { (try? property("Status", desktop, indicator)) == "s \"\(status)\"" }
        }

        /// A granted parecord recording: the tray's microphone turns orange, its tooltip and
        /// menu name parecord; "Deny" in parecord's submenu, clicked with the pointer in the
        /// menu the panel draws, turns the running recording to exact silence, and the item
        /// goes passive, which the tray shows by not showing it. While the daemon is stopped the
        /// item stays passive and says Earmuff is not running; when the daemon is back the
        /// indicator follows by itself.
        @Test func theTrayNamesWhoHearsTheMicrophoneAndDenyStopsIt() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            try desktop.startTray()
            let r = try Restarts()
            defer { r.remove() }
            // The indicator's socket path stays while daemons come and go, as $XDG_RUNTIME_DIR's does.
            let control = "\(r.directory)/control"
            var s = try r.start(environment: desktop.environment)
            try FileManager.default.createSymbolicLink(atPath: control, withDestinationPath: s.earmuff.controlPath)
            let indicator = try desktop.startIndicator(controlPath: control, environment: desktop.environment)
            defer { indicator.terminate(signal: SIGTERM, grace: 5) }
            var logs: String { "\(s.logs)\nearmuff-indicator:\n\(desktop.indicatorLog)\nxfce4-panel:\n\(desktop.trayLog)" }
            #expect(await Self.waitForStatus("Passive", desktop, indicator), "nobody records, yet: \(logs)")

            try s.earmuff.control("grant", s.key)
            let rec = try s.record()
            defer { _ = rec.stop() }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(logs)")
            let item = try await Self.waitForIcon(Self.orange, not: Self.grey, desktop)
            try Desktop.keepScreenshot(desktop, "indicator-microphone.png", of: item)
            let tooltip = try Self.property("ToolTip", desktop, indicator)
            #expect(tooltip.contains("parecord hears the microphone"), "\(tooltip)")

            try desktop.person("tray", "Earmuff", "click")
            let menu = try desktop.person("menu")
            for line in ["parecord hears the microphone", "Turn off microphone access"] {
                #expect(menu.contains(line), "\(line) is not in the menu:\n\(menu)\n\(logs)")
            }
            try desktop.person("menu", "click", "parecord hears the microphone")
            let submenu = try desktop.person("menu")
            #expect(submenu.contains("Deny\n") && submenu.contains("Deny for this session"), "\(submenu)")
            try Desktop.keepScreenshot(desktop, "indicator-menu.png", of: "geometry: 470x114+0+0")
            try desktop.person("menu", "click", "Deny")
            #expect(await Wait.until(timeout: 60) { (try? s.earmuff.app(s.key))?.state == "denied" }, "Deny did not deny\n\(logs)")
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio after Deny\n\(logs)")
            #expect(try s.earmuff.app(s.key)?.lifespan == "always")
            #expect(await Self.waitForStatus("Passive", desktop, indicator), "still active after Deny\n\(logs)")
            #expect(try Self.pixels(near: Self.orange, desktop, "geometry: 300x32+0+0") == 0, "the tray still shows the microphone in orange")

            // The daemon goes away and comes back: the indicator follows without a restart.
            _ = rec.stop()
            r.stop(s)
            #expect(
                await Wait.until(timeout: 60) { ((try? Self.property("ToolTip", desktop, indicator)) ?? "").contains("Earmuff is not running") },
                "\(logs)")
            s = try r.start(environment: desktop.environment)
            defer { r.stop(s) }
            try FileManager.default.removeItem(atPath: control)
            try FileManager.default.createSymbolicLink(atPath: control, withDestinationPath: s.earmuff.controlPath)
            try s.earmuff.control("grant", s.key)
            let again = try s.record()
            defer { _ = again.stop() }
            #expect(await E2E.waitForToneAfterSwitch(again, seconds: 0.5), "granted but no tone\n\(logs)")
            _ = try await Self.waitForIcon(Self.orange, not: Self.grey, desktop)
            #expect(indicator.isRunning, "\(desktop.indicatorLog)")
        }

        /// What an app run with `earmuff run --sandbox --dbus` tries, to allow its own prompt
        /// through the indicator: it records, finds its prompt's Allow in the indicator's menu
        /// (GetLayout), and clicks it (Event and EventGroup). Prints what it did.
        static let selfAllowing = """
            import subprocess, sys, time, dbus
            bus = dbus.SessionBus()
            subprocess.Popen(['parecord', '--raw', '--format=s16le', '--rate=44100', '--channels=1', '--latency-msec=20'])
            def allow_ids():
                found = []
                for name in bus.list_names():
                    if not str(name).startswith('org.kde.StatusNotifierItem-'):
                        continue
                    menu = dbus.Interface(bus.get_object(name, '/MenuBar'), 'com.canonical.dbusmenu')
                    def walk(node, parent):
                        id, props, children = node
                        if props.get('label') == 'Allow' and 'wants to use' in parent:
                            found.append((name, menu, int(id)))
                        for c in children:
                            walk(c, str(props.get('label', '')))
                    walk(menu.GetLayout(0, -1, [])[1], '')
                return found
            for _ in range(600):
                ids = allow_ids()
                if ids:
                    break
                time.sleep(0.1)
            for name, menu, id in ids:
                menu.Event(id, 'clicked', dbus.Int32(0, variant_level=1), dbus.UInt32(0))
                menu.EventGroup([(id, 'clicked', dbus.Int32(0, variant_level=1), dbus.UInt32(0))])
                print('clicked Allow', name, id, file=sys.stderr, flush=True)
            time.sleep(600)
            """

        /// The indicator's menu is the tray's to click: a sandboxed app given the session bus
        /// that clicks Allow on its own prompt there is ignored (and logged), while the same
        /// click from a process beside the indicator (as the tray is) allows it.
        @Test func aSandboxedAppCannotAllowItsOwnPromptThroughTheIndicator() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            let s = try E2E.Setup(config: ["prompt-timeout = 600"], environment: desktop.environment)
            defer { s.stop() }
            let indicator = try desktop.startIndicator(controlPath: s.earmuff.controlPath, environment: desktop.environment)
            defer { indicator.terminate(signal: SIGTERM, grace: 5) }
            var logs: String { "\(s.logs)\nearmuff-indicator:\n\(desktop.indicatorLog)" }
            let appID = "org.example.SelfAllow", key = "launcher:org.example.SelfAllow"
            let run = try s.earmuff.startSandboxed(
                ["--dbus", "--app-id", appID, "--purpose", "self-allow test"],
                command: ["/usr/bin/python3", "-c", Self.selfAllowing],
                environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.bus.address])
            defer { run.cleanup() }
            let clicked = await Wait.until(timeout: 90) { run.process.stderrText().contains("clicked Allow") }
            #expect(clicked, "the app did not get as far as clicking:\n\(run.process.stderrText())\n\(logs)")
            #expect(await Wait.until(timeout: 60) { desktop.indicatorLog.contains("runs in a sandbox") }, "\(logs)")
            #expect(try s.earmuff.app(key)?.state != "granted", "\(logs)")

            // The same click from beside the indicator, as the tray's.
            let id = try #require(
                run.process.stderrText().split(separator: "\n").first { $0.hasPrefix("clicked Allow") }?
                    .split(separator: " ").last.map(String.init))
            try desktop.bus.call(
                "org.kde.StatusNotifierItem-\(indicator.pid)-1", "/MenuBar", "com.canonical.dbusmenu", "Event",
                "isvu", id, "clicked", "i", "0", "0")
            #expect(await Wait.until(timeout: 60) { (try? s.earmuff.app(key))?.state == "granted" }, "\(logs)")
        }
    }
}
