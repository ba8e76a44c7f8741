import Foundation
import Glibc

/// The desktop a person has, for tests: a private Xvfb, a private session bus with the
/// accessibility bus on it, and the real services that show Earmuff's prompts
/// (xdg-desktop-portal-gtk's Access dialog, the dunst notification server). `person`
/// answers them as a person does: it finds a button through the accessibility tree and
/// clicks it with the pointer (Tests/Fixtures/desktop/person.py).
public final class TestDesktop: Sendable {
    public let bus: SessionBus
    public let x: XServer
    /// The dunst menu's pick (see `startDunst`), written by the test.
    private let menuPick: String

    /// Starts Xvfb, the bus and the accessibility bus; nothing that shows prompts yet.
    public init() throws {
        let bus = try SessionBus()
        self.bus = bus
        do {
            x = try XServer(directory: bus.directory)
        } catch {
            bus.stop()
            throw error
        }
        menuPick = "\(bus.directory)/dmenu-pick"
        do {
            guard
                let launcher = ["/usr/libexec/at-spi-bus-launcher", "/usr/lib/at-spi2-core/at-spi-bus-launcher"]
                    .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
            else { throw TestSupportError("at-spi-bus-launcher not found; install at-spi2-core") }
            try bus.startService(
                launcher, arguments: ["--launch-immediately"], owning: "org.a11y.Bus",
                environment: environment, hint: "the accessibility bus")
        } catch {
            stop()
            throw error
        }
    }

    /// DISPLAY and the session bus, for the desktop's services, earmuff and the person.
    public var environment: [String: String] {
        ["DISPLAY": x.name, "DBUS_SESSION_BUS_ADDRESS": bus.address, "GTK_MODULES": "gail:atk-bridge"]
    }

    /// Starts the real `xdg-desktop-portal-gtk`, which owns `org.freedesktop.impl.portal.desktop.gtk`
    /// (with `extra` in its environment).
    public func startGTKPortal(extra: [String: String] = [:]) throws {
        let binary = ["/usr/libexec/xdg-desktop-portal-gtk", "/usr/lib/xdg-desktop-portal-gtk"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestSupportError("xdg-desktop-portal-gtk not found; install xdg-desktop-portal-gtk") }
        try bus.startService(
            binary, arguments: ["--replace"], owning: "org.freedesktop.impl.portal.desktop.gtk",
            environment: environment.merging(extra) { $1 }, hint: "xdg-desktop-portal-gtk")
    }

    /// Starts the real `dunst`. Its context menu (opened by a middle click on a notification
    /// with several actions) is a dmenu command: here a script that logs the menu and picks
    /// the line of the action labelled `pick(_:)`.
    public func startDunst() throws {
        guard let dunst = findExecutable("dunst") else { throw TestSupportError("dunst not found; install dunst") }
        let dir = bus.directory
        let menu = "\(dir)/dmenu.sh"
        try """
        #!/bin/sh
        cat > '\(dir)/dmenu.in'
        grep -m1 -F "#$(cat '\(menuPick)') (" '\(dir)/dmenu.in'

        """.write(toFile: menu, atomically: true, encoding: .utf8)
        _ = unsafe chmod(menu, 0o755)
        try """
        [global]
            dmenu = \(menu)
            mouse_middle_click = do_action, close_current
            width = 420
            icon_theme = Adwaita
            enable_recursive_icon_lookup = true

        """.write(toFile: "\(dir)/dunstrc", atomically: true, encoding: .utf8)
        try bus.startService(
            dunst, arguments: ["-conf", "\(dir)/dunstrc"], owning: "org.freedesktop.Notifications",
            environment: environment, hint: "dunst")
    }

    /// Starts the real `xfce4-panel` as the desktop's tray: one panel across the top of the
    /// screen, 32 pixels high, holding only the "systray" plugin, which is both the
    /// `org.kde.StatusNotifierWatcher` and the host that shows the items and opens their
    /// `com.canonical.dbusmenu` menus (libdbusmenu-gtk3). Returns once the watcher is on the
    /// bus and the tray in the accessibility tree; `person.py tray` and `person.py menu` find
    /// the items and menus and click them.
    public func startTray() throws {
        guard let panel = findExecutable("xfce4-panel") else { throw TestSupportError("xfce4-panel not found; install xfce4-panel") }
        let xfconfd = [
            "/usr/lib/x86_64-linux-gnu/xfce4/xfconf/xfconfd", "/usr/lib/aarch64-linux-gnu/xfce4/xfconf/xfconfd",
            "/usr/lib/xfce4/xfconf/xfconfd",
        ]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let xfconfd, let query = findExecutable("xfconf-query") else {
            throw TestSupportError("xfconfd or xfconf-query not found; install xfconf")
        }
        // The panel reads its layout from xfconf, whose daemon keeps each channel in the
        // XDG_CONFIG_HOME every service on this bus shares. A channel already holding a
        // panel (and the current configver) spares the panel its first-start dialog, which
        // would otherwise ask whether to copy the system's default layout.
        let channels = "\(bus.directory)/config/xfce4/xfconf/xfce-perchannel-xml"
        try FileManager.default.createDirectory(atPath: channels, withIntermediateDirectories: true)
        try Self.trayPanel.write(toFile: "\(channels)/xfce4-panel.xml", atomically: true, encoding: .utf8)
        // xfconfd ends itself after five minutes without a call, for D-Bus activation to start
        // it again when next asked; this bus activates nothing, and the tray writes to xfconf
        // when an item comes (its list of known items). So a call each minute keeps it up; the
        // shell ends the daemon and its nap when it is stopped, and waits for their ends.
        let keeper = """
            daemon= nap=
            trap 'kill $daemon $nap 2>/dev/null; wait; exit 0' TERM INT HUP
            "$1" & daemon=$!
            while kill -0 "$daemon" 2>/dev/null; do
                sleep 60 & nap=$!
                wait "$nap"
                "$2" -c xfce4-panel -p /configver >/dev/null 2>&1
            done
            """
        try bus.startService(
            "/bin/sh", arguments: ["-c", keeper, "xfconfd", xfconfd, query], owning: "org.xfce.Xfconf",
            environment: environment, hint: "xfconfd")
        // No window manager runs here: without --disable-wm-check the panel waits 5 s for one;
        // nor a session manager. The systray plugin runs out of the panel's process (in
        // wrapper-2.0), which takes the watcher's name once it is up. GTK 3 shows the plugin's
        // widgets in the panel's accessibility tree only if the plugin's window carries its
        // accessible's address by the time the panel takes the window in, which now and then
        // it does not (then for good): such a panel is ended and started again, before any
        // item has come to it.
        let watcher = "org.kde.StatusNotifierWatcher"
        var missing: any Error = TestSupportError("no panel started")
        for _ in 1...4 {
            let child = try bus.startService(
                panel, arguments: ["--disable-wm-check", "--sm-client-disable"],
                owning: watcher, environment: environment,
                hint: "xfce4-panel's systray plugin")
            do {
                try person("panel", timeout: 30)
                return
            } catch {
                missing = error
            }
            child.terminate()
            _ = Wait.untilBlocking(timeout: 10, interval: 0.05) { (try? bus.hasOwner(watcher)) == false }
        }
        throw TestSupportError("xfce4-panel's tray never showed in the accessibility tree: \(missing); the panel printed: \(trayLog)")
    }

    /// What xfce4-panel and its systray plugin printed (GTK's and xfconf's warnings, a crash).
    public var trayLog: String {
        (try? String(contentsOfFile: "\(bus.directory)/org.kde.StatusNotifierWatcher.out", encoding: .utf8)) ?? ""
    }

    /// The xfconf channel `xfce4-panel` of `startTray`: panel 1 snapped to the top left
    /// (p=6), as long as the screen and 32 pixels high, with the systray plugin alone: its
    /// items square buttons with 24-pixel icons, a new item shown (not put among the hidden).
    static let trayPanel = """
        <?xml version="1.0" encoding="UTF-8"?>
        <channel name="xfce4-panel" version="1.0">
          <property name="configver" type="int" value="2"/>
          <property name="panels" type="array">
            <value type="int" value="1"/>
            <property name="panel-1" type="empty">
              <property name="position" type="string" value="p=6;x=0;y=0"/>
              <property name="length" type="uint" value="100"/>
              <property name="position-locked" type="bool" value="true"/>
              <property name="size" type="uint" value="32"/>
              <property name="plugin-ids" type="array">
                <value type="int" value="1"/>
              </property>
            </property>
          </property>
          <property name="plugins" type="empty">
            <property name="plugin-1" type="string" value="systray">
              <property name="square-icons" type="bool" value="true"/>
              <property name="icon-size" type="int" value="24"/>
              <property name="hide-new-items" type="bool" value="false"/>
            </property>
          </property>
        </channel>

        """

    /// The action dunst's menu picks next, by its label ("Allow", "Deny").
    public func pick(_ label: String) throws {
        try label.write(toFile: menuPick, atomically: true, encoding: .utf8)
    }

    /// The lines of the last menu dunst showed.
    public var lastMenu: String { (try? String(contentsOfFile: "\(bus.directory)/dmenu.in", encoding: .utf8)) ?? "" }

    /// Runs `person.py ARGS` and returns what it printed; throws with its message when it fails.
    @discardableResult
    public func person(_ arguments: String..., timeout: Double = 90) throws -> String {
        try person(arguments, timeout: timeout)
    }

    /// `person(_:)` with the arguments in an array.
    @discardableResult
    public func person(_ arguments: [String], timeout: Double = 90) throws -> String {
        let script = URL(fileURLWithPath: SessionBus.fixtureTemplate("x")).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("desktop/person.py").path
        let result = try bus.run("/usr/bin/python3", [script] + arguments, environment: environment, timeout: timeout)
        guard result.succeeded else {
            throw TestSupportError("person.py \(arguments.joined(separator: " ")) (exit status \(result.status)): \(result.stdoutText)\(result.stderr)")
        }
        return result.stdoutText
    }

    /// A PNG of the whole screen (ImageMagick's `import`), for the README.
    public func screenshot(to path: String, crop: String? = nil) throws {
        guard let convert = findExecutable("import") else { throw TestSupportError("import not found; install imagemagick") }
        var args = ["-window", "root"]
        if let crop { args += ["-crop", crop] }
        let result = try bus.run(convert, args + [path], environment: environment)
        guard result.succeeded else { throw TestSupportError("import failed: \(result)") }
    }

    public func stop() {
        bus.stop()
        x.stop()
    }
}
