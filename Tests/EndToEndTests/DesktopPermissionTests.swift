// The desktop's microphone switch for Flatpak apps, with the real
// xdg-permission-store on a private session bus: `earmuff grant` shows as
// "yes" in devices/microphone, a SetPermission written the way Flatseal writes
// it (gdbus) silences the app's live recording on its next frames, an entry the
// store had before Earmuff started is adopted, and without a session bus
// nothing is tried.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct DesktopPermissionTests {
        typealias Setup = ConsentEndToEndTests.Setup
        static let store = "org.freedesktop.impl.portal.PermissionStore"
        static let storePath = "/org/freedesktop/impl/portal/PermissionStore"
        static let appID = "org.example.Recorder"
        static let key = "flatpak:\(appID)"

        /// The `devices`/`microphone` entry as busctl prints it, e.g.
        /// `a{sas}v 1 "org.example.Recorder" 1 "yes" …`; empty when there is none.
        static func microphoneTable(_ bus: SessionBus) -> String {
            (try? bus.call(store, storePath, store, "Lookup", "ss", "devices", "microphone")) ?? ""
        }

        /// `gdbus call … SetPermission devices true microphone APP "['VALUE']"`, as Flatseal sets a switch.
        static func flatsealSet(_ bus: SessionBus, app: String, _ value: String) throws {
            guard let gdbus = findExecutable("gdbus") else { throw TestSupportError("gdbus not found; install libglib2.0-bin") }
            var env = Tool.privateEnvironment(root: bus.directory)
            env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
            let out = "\(bus.directory)/gdbus-\(UInt32.random(in: 0...UInt32.max))"
            let result = try ChildProcess.spawn(
                executable: gdbus,
                arguments: [
                    "call", "--session", "--dest", store, "--object-path", storePath,
                    "--method", "\(store).SetPermission", "devices", "true", "microphone", app, "['\(value)']",
                ],
                environment: env, stdoutPath: "\(out).stdout", stderrPath: "\(out).stderr", maxLifetime: 60
            ).finish(timeout: 30)
            guard result.succeeded else { throw TestSupportError("gdbus SetPermission failed: \(result)") }
        }

        static func entry(_ app: String, _ value: String) -> String { "\"\(app)\" 1 \"\(value)\"" }

        @Test func theSwitchShowsAndChangesTheDecision() async throws {
            let bus = try SessionBus()
            defer { bus.stop() }
            try bus.startPermissionStore()
            // Set on the desktop before Earmuff ran, for an app Earmuff has not decided.
            try Self.flatsealSet(bus, app: "org.example.Other", "no")

            let s = try Setup(environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
            defer { s.stop() }
            #expect(
                await Wait.until(timeout: 60) { (try? s.earmuff.app("flatpak:org.example.Other"))?.state == "denied" },
                "\(String(describing: try? s.earmuff.app("flatpak:org.example.Other")))\n\(s.logs)")
            #expect(try s.earmuff.app("flatpak:org.example.Other")?.reason == "desktop")

            try s.earmuff.control("grant", Self.key)
            #expect(
                await Wait.until(timeout: 60) { Self.microphoneTable(bus).contains(Self.entry(Self.appID, "yes")) },
                "\(Self.microphoneTable(bus))\n\(s.logs)")

            let rec = try Sandbox.startFlatpakRecording(
                appID: Self.appID, sessionSocket: s.earmuff.listenPath,
                purpose: ConsentEndToEndTests.purpose)
            defer { _ = rec.stop() }
            let status = try await s.earmuff.waitForStatus { !$0.streams(of: Self.key).isEmpty }
            #expect(status.clients(of: Self.key).first?.identifiedBy == "flatpak", "\(status)")
            #expect(
                await ConsentEndToEndTests.waitForToneAfterSwitch(rec, seconds: 0.5),
                "no tone for the granted Flatpak\n\(rec.tool.process.stderrText())\n\(s.logs)")
            // Earmuff's own write came back as a Changed signal and decided nothing.
            #expect(!s.earmuff.log().contains("switched to yes on the desktop"), "\(s.logs)")
            #expect(try s.earmuff.app(Self.key)?.reason == "user")

            try Self.flatsealSet(bus, app: Self.appID, "no")
            _ = try await s.earmuff.waitForStatus { $0.streams(of: Self.key).first?.audio == "silenced" }
            #expect(await LifespanEndToEndTests.silentFromHere(rec), "real audio after the switch went off\n\(s.logs)")
            let app = try s.earmuff.app(Self.key)
            #expect(app?.state == "denied" && app?.reason == "desktop", "\(String(describing: app))")

            try Self.flatsealSet(bus, app: Self.appID, "yes")
            _ = try await s.earmuff.waitForStatus { $0.streams(of: Self.key).first?.audio == "real" }

            // A reset in Earmuff takes the app off the desktop's list.
            try s.earmuff.control("reset", Self.key)
            #expect(
                await Wait.until(timeout: 60) { !Self.microphoneTable(bus).contains("\"\(Self.appID)\"") },
                "\(Self.microphoneTable(bus))\n\(s.logs)")
            #expect(Self.microphoneTable(bus).contains(Self.entry("org.example.Other", "no")))
            #expect(try s.earmuff.app(Self.key)?.state == "undetermined")

            // Decisions in quick succession: every write comes back announced, none decides anything.
            for verb in ["deny", "grant", "deny", "grant"] { try s.earmuff.control(verb, Self.key) }
            #expect(
                await Wait.until(timeout: 60) { Self.microphoneTable(bus).contains(Self.entry(Self.appID, "yes")) },
                "\(Self.microphoneTable(bus))\n\(s.logs)")
            // Six writes in all: the first grant, the reset, and these four.
            func writes() -> Int { s.earmuff.log().components(separatedBy: "microphone \(Self.appID) = ").count - 1 }
            _ = await Wait.until(timeout: 60) { writes() >= 6 }
            #expect(writes() == 6, "\(s.logs)")
            #expect(try s.earmuff.app(Self.key)?.state == "granted" && (try s.earmuff.app(Self.key)?.reason) == "user")
            #expect(s.earmuff.log().components(separatedBy: "on the desktop;").count - 1 == 2, "\(s.logs)")
        }

        @Test func withoutASessionBusNothingIsTried() async throws {
            let s = try Setup(environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/earmuff-test-bus"])
            defer { s.stop() }
            try s.earmuff.control("grant", Self.key)
            try s.earmuff.control("deny", Self.key)
            #expect(try s.earmuff.app(Self.key)?.state == "denied")
            #expect(!s.earmuff.log().contains("permission store"), "\(s.logs)")
        }
    }
}
