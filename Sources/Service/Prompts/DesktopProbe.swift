// What the desktop offers for prompts right now, asked the way DesktopPrompter
// asks before showing one: an Access portal backend on the session bus, and a
// notification server that supports actions. `earmuff doctor` reports it.
import DBus

/// The desktop's prompt channels as the session bus shows them.
public struct DesktopChannels: Sendable, Equatable {
    /// No session bus (or it refused the connection): why.
    public var busError: String?
    /// The Access portal backend a prompt would go to, if any.
    public var portalBackend: String?
    /// The notification server's capabilities; nil when none answers.
    public var notificationCapabilities: [String]?

    public init(busError: String? = nil, portalBackend: String? = nil, notificationCapabilities: [String]? = nil) {
        self.busError = busError
        self.portalBackend = portalBackend
        self.notificationCapabilities = notificationCapabilities
    }

    /// Whether a notification prompt could offer its buttons.
    public var notificationsHaveActions: Bool { notificationCapabilities?.contains("actions") == true }

    /// Asks the session bus of this environment.
    public static func probe() -> DesktopChannels {
        let bus: BusConnection
        do {
            bus = try BusConnection.session()
        } catch {
            return DesktopChannels(busError: "\(error)")
        }
        var found = DesktopChannels()
        found.portalBackend = DesktopPrompter.portalBackends.first { bus.isProvided($0) }
        do {
            let call = try bus.methodCall(
                destination: DesktopPrompter.notificationsName, path: DesktopPrompter.notificationsPath,
                interface: DesktopPrompter.notificationsName, member: "GetCapabilities")
            found.notificationCapabilities = try bus.call(call, timeout: 5).readStrings()
        } catch {
            found.notificationCapabilities = nil
        }
        return found
    }
}
