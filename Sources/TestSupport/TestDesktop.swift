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
            guard let launcher = ["/usr/libexec/at-spi-bus-launcher", "/usr/lib/at-spi2-core/at-spi-bus-launcher"]
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
            else { throw TestSupportError("at-spi-bus-launcher not found; install at-spi2-core") }
            try bus.startService(launcher, arguments: ["--launch-immediately"], owning: "org.a11y.Bus",
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

    /// Starts the real `xdg-desktop-portal-gtk`, which owns `org.freedesktop.impl.portal.desktop.gtk`.
    public func startGTKPortal() throws {
        let binary = ["/usr/libexec/xdg-desktop-portal-gtk", "/usr/lib/xdg-desktop-portal-gtk"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestSupportError("xdg-desktop-portal-gtk not found; install xdg-desktop-portal-gtk") }
        try bus.startService(binary, arguments: ["--replace"], owning: "org.freedesktop.impl.portal.desktop.gtk",
                             environment: environment, hint: "xdg-desktop-portal-gtk")
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
        _ = chmod(menu, 0o755)
        try """
        [global]
            dmenu = \(menu)
            mouse_middle_click = do_action, close_current
            width = 420
            icon_theme = Adwaita
            enable_recursive_icon_lookup = true

        """.write(toFile: "\(dir)/dunstrc", atomically: true, encoding: .utf8)
        try bus.startService(dunst, arguments: ["-conf", "\(dir)/dunstrc"], owning: "org.freedesktop.Notifications",
                             environment: environment, hint: "dunst")
    }

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
