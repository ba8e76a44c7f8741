// Who may speak for the desktop. Any client of the session bus (an app given
// the bus, or a Flatpak app through xdg-dbus-proxy's filter) can emit the
// signals the desktop's services emit, and can take a service's name before
// the real service starts. These tests do that, against the real dunst, the
// real xdg-permission-store and the real xdg-desktop-portal-gtk's name, and
// check that no forged answer reaches Earmuff's decisions.

import Foundation
import Glibc
import Testing
import TestSupport

extension EndToEnd {
    @Suite(.serialized) struct DesktopForgeryTests {
        typealias Setup = EndToEnd.ConsentEndToEndTests.Setup
        typealias E2E = EndToEnd.ConsentEndToEndTests

        /// Where a forger sends from: the bus itself, or a Flatpak-style filtered proxy that
        /// lets the app talk to `talk` only.
        enum Door: String, CaseIterable, Sendable { case bus, flatpakProxy }

        /// The bus address `door` gives the forger, and the xdg-dbus-proxy behind it (keep it
        /// alive as long as the address is used).
        static func address(_ door: Door, on bus: SessionBus, talk: String) throws -> (String, ChildProcess?) {
            guard door == .flatpakProxy else { return (bus.address, nil) }
            guard let proxy = findExecutable("xdg-dbus-proxy") else {
                throw TestSupportError("xdg-dbus-proxy not found; install xdg-dbus-proxy")
            }
            let socket = "\(bus.directory)/flatpak-bus-\(UInt32.random(in: 0...UInt32.max))"
            let child = try ChildProcess.spawn(
                executable: proxy, arguments: [bus.address, socket, "--filter", "--talk=\(talk)"],
                environment: Tool.privateEnvironment(root: bus.directory),
                stdoutPath: "\(socket).log", stderrPath: "\(socket).log", maxLifetime: 600)
            guard Wait.untilBlocking(timeout: 30, interval: 0.05, { UnixSocket.canConnect(socket) }) else {
                throw TestSupportError("xdg-dbus-proxy did not listen on \(socket)")
            }
            return ("unix:path=\(socket)", child)
        }

        /// `gdbus emit` on `address`: a signal of `interface` at `path` (to `destination`, or broadcast).
        static func emit(
            _ address: String, _ bus: SessionBus, path: String, _ signal: String, _ args: [String],
            to destination: String? = nil
        ) throws {
            guard let gdbus = findExecutable("gdbus") else { throw TestSupportError("gdbus not found; install libglib2.0-bin") }
            var a = ["emit", "--session", "--object-path", path, "--signal", signal]
            if let destination { a += ["--dest", destination] }
            let result = try bus.run(gdbus, a + args, environment: ["DBUS_SESSION_BUS_ADDRESS": address])
            guard result.succeeded else { throw TestSupportError("gdbus emit failed: \(result)") }
        }

        /// The unique names of `pid`'s connections to `bus` (earmuff has one per desktop thread).
        static func connections(of pid: Int32, on bus: SessionBus) throws -> [String] {
            guard let busctl = findExecutable("busctl") else { throw TestSupportError("busctl not found") }
            let result = try bus.run(busctl, ["--address=\(bus.address)", "list", "--no-legend"])
            return result.stdoutText.split(separator: "\n").compactMap { line in
                let f = line.split(separator: " ", omittingEmptySubsequences: true)
                return f.count > 1 && f[0].hasPrefix(":") && f[1] == "\(pid)" ? String(f[0]) : nil
            }
        }

        /// Forges dunst's ActionInvoked(`key`) for notifications 1 to 4, broadcast and sent to
        /// each of Earmuff's connections.
        static func forgeActions(_ key: String, from forger: String, on bus: SessionBus, to earmuff: [String]) throws {
            for id in 1...4 {
                let args = ["uint32 \(id)", key]
                try emit(forger, bus, path: "/org/freedesktop/Notifications", "org.freedesktop.Notifications.ActionInvoked", args)
                for name in earmuff {
                    try emit(
                        forger, bus, path: "/org/freedesktop/Notifications",
                        "org.freedesktop.Notifications.ActionInvoked", args, to: name)
                }
            }
        }

        /// A forged "allow" for dunst's notification, broadcast and sent to each of Earmuff's
        /// connections, from the bus or through a Flatpak app's filtered proxy: the recording
        /// stays silent and the prompt open; the person's own answer in dunst still counts.
        @Test(arguments: Door.allCases)
        func aForgedNotificationAnswerIsIgnored(_ door: Door) async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            try desktop.startDunst()
            let s = try Setup(config: ["prompt-timeout = 600"], environment: desktop.environment)
            defer { s.stop() }
            let rec = try s.record(purpose: nil)
            _ = try desktop.person("notification-shown")
            let (forger, proxy) = try Self.address(door, on: desktop.bus, talk: "org.freedesktop.Notifications")
            defer { proxy?.terminate() }
            let earmuff = try Self.connections(of: s.earmuff.process.pid, on: desktop.bus)
            #expect(!earmuff.isEmpty, "earmuff is not on the bus")
            try Self.forgeActions("allow", from: forger, on: desktop.bus, to: earmuff)
            let ignored = await Wait.until(timeout: 60) { s.earmuff.log().contains("ignored ActionInvoked") }
            #expect(ignored, "no forged answer reached earmuff (the test proves nothing)\n\(s.logs)")
            #expect(try s.earmuff.status().prompts.count == 1, "the prompt closed\n\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.state == "undetermined", "\(s.logs)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio after a forged answer")

            try desktop.pick("Allow")
            try desktop.person("notification")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "the person's own Allow did not count\n\(s.logs)")
            _ = rec.stop()
        }

        /// A forged Stop for the notice that a granted app hears the microphone, from the bus or
        /// through a Flatpak app's filtered proxy: the app stays granted and keeps the tone.
        @Test(arguments: Door.allCases)
        func aForgedStopOnTheNoticeIsIgnored(_ door: Door) async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            try desktop.startDunst()
            let s = try Setup(environment: desktop.environment)
            defer { s.stop() }
            try s.earmuff.control("grant", s.key)
            let rec = try s.record()
            defer { _ = rec.stop() }
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "granted but no tone\n\(s.logs)")
            _ = try desktop.person("notification-shown")
            let (forger, proxy) = try Self.address(door, on: desktop.bus, talk: "org.freedesktop.Notifications")
            defer { proxy?.terminate() }
            let earmuff = try Self.connections(of: s.earmuff.process.pid, on: desktop.bus)
            try Self.forgeActions("stop", from: forger, on: desktop.bus, to: earmuff)
            let ignored = await Wait.until(timeout: 60) { s.earmuff.log().contains("ignored Stop for notice") }
            #expect(ignored, "no forged Stop reached earmuff (the test proves nothing)\n\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.state == "granted", "\(s.logs)")
            #expect(await E2E.waitForToneAfterSwitch(rec, seconds: 0.5), "no tone after a forged Stop\n\(s.logs)")
        }

        /// A forged `Changed` of the permission store, saying a Flatpak app's microphone switch is
        /// on: the app stays undetermined and its recording silent. The store's own changes
        /// (Flatseal's SetPermission) still count.
        @Test(arguments: Door.allCases)
        func aForgedPermissionStoreChangeIsIgnored(_ door: Door) async throws {
            let bus = try SessionBus()
            defer { bus.stop() }
            try bus.startPermissionStore()
            let s = try Setup(environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
            defer { s.stop() }
            let app = DesktopPermissionTests.appID, key = DesktopPermissionTests.key
            let rec = try Sandbox.startFlatpakRecording(
                appID: app, sessionSocket: s.earmuff.listenPath,
                purpose: E2E.purpose)
            defer { _ = rec.stop() }
            _ = try await s.earmuff.waitForStatus { !$0.streams(of: key).isEmpty }
            let (forger, proxy) = try Self.address(door, on: bus, talk: "org.example.Nothing")
            defer { proxy?.terminate() }
            try Self.emit(
                forger, bus, path: DesktopPermissionTests.storePath,
                "\(DesktopPermissionTests.store).Changed",
                ["devices", "microphone", "false", "<byte 0>", "{'\(app)': ['yes']}"])
            let ignored = await Wait.until(timeout: 60) { s.earmuff.log().contains("ignored a Changed signal") }
            #expect(ignored, "the forged signal never reached earmuff (the test proves nothing)\n\(s.logs)")
            #expect(try s.earmuff.app(key)?.state != "granted", "\(s.logs)")
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio after a forged switch")

            try DesktopPermissionTests.flatsealSet(bus, app: app, "yes")
            #expect(
                await Wait.until(timeout: 60) { (try? s.earmuff.app(key))?.state == "granted" },
                "the store's own change did not count\n\(s.logs)")
        }

        /// What an app run with `earmuff run --sandbox --dbus` tries, to answer its own prompt:
        /// it forges "allow" for every notification id, then becomes the notification server
        /// itself (on a desktop without one) and answers its own notification; meanwhile it
        /// records. Prints what it did.
        static let selfAnswering = """
            import subprocess, sys, dbus, dbus.lowlevel, dbus.service
            from dbus.mainloop.glib import DBusGMainLoop
            from gi.repository import GLib
            DBusGMainLoop(set_as_default=True)
            bus = dbus.SessionBus()
            path, iface = '/org/freedesktop/Notifications', 'org.freedesktop.Notifications'
            def say(text):
                print(text, file=sys.stderr, flush=True)
            def forge():
                for id in range(1, 9):
                    m = dbus.lowlevel.SignalMessage(path, iface, 'ActionInvoked')
                    m.append(dbus.UInt32(id), 'allow', signature='us')
                    bus.send_message(m)
                say('forged allow for notifications 1-8')
                return True
            class Server(dbus.service.Object):
                @dbus.service.method(iface, out_signature='as')
                def GetCapabilities(self):
                    return ['actions', 'body']
                @dbus.service.method(iface, in_signature='susssasa{sv}i', out_signature='u')
                def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
                    say('asked to notify')
                    GLib.timeout_add(100, lambda: self.ActionInvoked(7, 'allow') and False)
                    return 7
                @dbus.service.method(iface, in_signature='u')
                def CloseNotification(self, id):
                    pass
                @dbus.service.signal(iface, signature='us')
                def ActionInvoked(self, id, key):
                    say('answered allow')
            name = dbus.service.BusName(iface, bus)
            server = Server(bus, path)
            say('owns the notification name')
            subprocess.Popen(['parecord', '--raw', '--format=s16le', '--rate=44100', '--channels=1', '--latency-msec=20'])
            GLib.timeout_add(500, forge)
            GLib.MainLoop().run()
            """

        /// `earmuff run --sandbox --dbus`: the app forges answers (ignored) and becomes the
        /// notification server itself on a desktop without one; Earmuff does not show its
        /// prompt on a server that runs in a sandbox, so the app records silence.
        @Test func aSandboxedAppCannotAnswerItsOwnPrompt() async throws {
            let bus = try SessionBus()
            defer { bus.stop() }
            let s = try Setup(config: ["prompt-timeout = 600"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
            defer { s.stop() }
            let appID = "org.example.SelfAnswer", key = "launcher:org.example.SelfAnswer"
            let run = try s.earmuff.startSandboxed(
                ["--dbus", "--app-id", appID, "--purpose", "self-answer test"],
                command: ["/usr/bin/python3", "-c", Self.selfAnswering],
                environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
            defer { run.cleanup() }
            let tried = await Wait.until(timeout: 90) {
                run.process.stderrText().contains("forged allow") && s.earmuff.log().contains("notification server is not trusted")
            }
            #expect(tried, "the app did not get as far as trying:\n\(run.process.stderrText())\n\(s.logs)")
            let bytes = await Wait.until(timeout: 90) { run.process.stdoutData().count >= 44_100 * 2 }
            #expect(bytes, "the sandboxed parecord recorded nothing: \(run.process.stderrText())")
            #expect(!run.process.stderrText().contains("asked to notify"), "earmuff showed the prompt on the app's own server")
            #expect(try s.earmuff.app(key)?.state != "granted", "\(s.logs)")
            #expect(AudioAnalysis.isUniform(run.process.stdoutData(), value: 0), "the app heard the microphone")
        }

        /// The desktop's own portal backend, started with a library preloaded into it (code that
        /// could answer every dialog): not asked; the prompt goes to the notification.
        @Test func aPortalBackendWithAPreloadedLibraryIsNotAsked() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            try desktop.startGTKPortal(extra: ["LD_PRELOAD": "libm.so.6"])
            try desktop.startDunst()
            let s = try Setup(environment: desktop.environment)
            defer { s.stop() }
            let rec = try s.record()
            defer { _ = rec.stop() }
            _ = try desktop.person("notification-shown")
            #expect(s.earmuff.log().contains("runs with LD_PRELOAD=libm.so.6"), "\(s.logs)")
            #expect(try s.earmuff.app(s.key)?.state == "undetermined")
        }

        /// A process that owns the GTK portal backend's name before the real one starts, and
        /// grants every dialog: Earmuff does not ask it (it is not the program the system
        /// installs for that name) and the prompt goes to the notification. Once the real
        /// backend holds the name, the next app's prompt is its dialog.
        @Test func anImpostorPortalBackendIsNotAsked() async throws {
            let desktop = try TestDesktop()
            defer { desktop.stop() }
            let name = "org.freedesktop.impl.portal.desktop.gtk"
            let impostor = try desktop.bus.startService(
                "/usr/bin/python3",
                arguments: [
                    "-m", "dbusmock", "--session", "-l", desktop.bus.logPath(name), name, "/org/freedesktop/portal/desktop",
                    "org.freedesktop.impl.portal.Access",
                ], owning: name, hint: "dbusmock")
            try desktop.bus.call(
                name, "/org/freedesktop/portal/desktop", "org.freedesktop.DBus.Mock", "AddMethod",
                "sssss", "org.freedesktop.impl.portal.Access", "AccessDialog", "osssssa{sv}", "ua{sv}",
                "ret = (dbus.UInt32(0), {})")
            try desktop.startDunst()
            let s = try Setup(environment: desktop.environment)
            defer { s.stop() }
            let rec = try s.record()
            _ = try desktop.person("notification-shown")
            #expect(s.earmuff.log().contains("not trusted"), "\(s.logs)")
            #expect(!desktop.bus.calls(name).contains("AccessDialog"), "the impostor was asked: \(desktop.bus.calls(name))")
            _ = await rec.waitForAudio(seconds: 0.5)
            #expect(AudioAnalysis.isUniform(rec.data(), value: 0), "real audio: the impostor answered")
            #expect(try s.earmuff.app(s.key)?.state == "undetermined")
            _ = rec.stop()

            impostor.terminate()
            try desktop.startGTKPortal()
            let (next, _) = try HeldStreamTests.startRecorder("pulsesrc", s)
            defer { _ = next.stop() }
            let dialog = try desktop.person("dialog", "wants to use your microphone")
            #expect(dialog.contains("gst-launch-1.0 wants to use your microphone"), "\(dialog)\n\(s.logs)")
        }
    }
}
