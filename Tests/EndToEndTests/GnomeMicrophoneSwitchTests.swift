// GNOME's own microphone switch (`org.gnome.desktop.privacy disable-microphone`,
// what GNOME Settings' Privacy page sets), with the real dconf service on a
// private session bus: set, it silences a granted recording within 200 ms, as
// `earmuff access off --kind microphone` does; `earmuff access` writes it;
// Earmuff's own writes decide nothing when they come back; and a switch turned
// off while Earmuff was not running is in force when it starts.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct GnomeMicrophoneSwitchTests {
        typealias E2E = ConsentEndToEndTests
        typealias Restarts = LifespanEndToEndTests.Restarts
        static let schema = "org.gnome.desktop.privacy"
        static let key = "disable-microphone"

        static func gnomeSwitch(_ bus: SessionBus) -> String { (try? bus.gsettings("get", schema, key)) ?? "unreadable" }

        @Test func gnomesSwitchIsTheMicrophonesMasterSwitch() async throws {
            let bus = try SessionBus()
            defer { bus.stop() }
            try bus.startDConf()
            let environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address, "XDG_CONFIG_HOME": bus.settingsHome]
            let r = try Restarts()
            defer { r.remove() }
            // A tone in 5 ms blocks, so that when silence starts is known to the block.
            try r.server.startFineMicrophone()
            let s = try r.start(environment: environment)
            try s.earmuff.control("grant", s.key)
            let rec = try s.record()
            defer { _ = rec.stop() }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)")

            // GNOME Settings turns the microphone off: silent within 200 ms of the change (when
            // the recording's first silent sample reached its file).
            let times = ArrivalTimes([rec])
            defer { times.stop() }
            let before = rec.byteCount()
            let setAt = Date().timeIntervalSince1970
            try bus.gsettings("set", Self.schema, Self.key, "true")
            _ = try await s.earmuff.waitForStatus { $0.accessEnabled("microphone") == false }
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio with GNOME's switch off\n\(s.logs)")
            let delay = SettingsAppTests.arrival(SettingsAppTests.silenceStart(rec, from: before), 0, times, after: setAt)
            print("GNOME's switch: disable-microphone set, the recording silent \(delay.map { String(format: "%.3f", $0) } ?? "-") s after gsettings set began")
            #expect((delay ?? .infinity) < 0.2, "silent \(String(describing: delay)) s after the switch\n\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.state == "granted", "the decision was not kept")

            // Earmuff's switch turns it on again: GNOME's follows, and the tone comes back.
            try s.earmuff.control("access", "on", "--kind", "microphone")
            #expect(await Wait.until(timeout: 60) { Self.gnomeSwitch(bus) == "false" }, "\(Self.gnomeSwitch(bus))\n\(s.logs)")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone once access is on\n\(s.logs)")

            // And off: GNOME's switch says so; its echo decides nothing.
            try s.earmuff.control("access", "off", "--kind", "microphone")
            #expect(await Wait.until(timeout: 60) { Self.gnomeSwitch(bus) == "true" }, "\(Self.gnomeSwitch(bus))\n\(s.logs)")
            try s.earmuff.control("access", "on", "--kind", "microphone")
            #expect(await Wait.until(timeout: 60) { Self.gnomeSwitch(bus) == "false" }, "\(Self.gnomeSwitch(bus))\n\(s.logs)")
            #expect(
                s.earmuff.log().components(separatedBy: "GNOME's microphone switch: microphone access").count - 1 == 1,
                "only GNOME Settings' own change counts as GNOME's\n\(s.logs)")
            _ = rec.stop()

            // Turned off in GNOME while Earmuff was not running: off when it starts.
            r.stop(s)
            try bus.gsettings("set", Self.schema, Self.key, "true")
            let again = try r.start(environment: environment)
            defer { r.stop(again) }
            _ = try await again.earmuff.waitForStatus { $0.accessEnabled("microphone") == false }
            let later = try again.record()
            defer { _ = later.stop() }
            #expect(await Wait.until(timeout: 60) { later.byteCount() >= E2E.bytes(1, of: later) })
            #expect(later.firstNonSilentOffset() == nil, "real audio with GNOME's switch off at start\n\(again.logs)")
        }
    }
}
