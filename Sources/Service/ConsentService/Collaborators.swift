// What the consent service's parts reach outside themselves, as small
// interfaces: each part is built with the ones it uses, the daemon passes the
// real ones (the relay, the control server, the store writer, the prompt
// threads, the desktop), and the parts' tests pass fakes. All are safe from
// any thread and never block on I/O.
import Consent
import ControlProtocol
import Glibc
import LinuxSystem
import PulseWire
import Relay

/// What the consent service asks of the relay about one client (the Daemon).
protocol ClientLink: AnyObject, Sendable {
    /// Queues a packet Earmuff sends the client itself (a permission reply or event).
    func inject(sessionID: UInt64, packet: [UInt8])
    /// Asks a session to close.
    func disconnect(sessionID: UInt64, reason: String)
}

/// What `status` shows of the relay (the Daemon).
protocol RelayStatus: AnyObject, Sendable {
    /// When the relay started, the socket passed by the service manager, the real server.
    var startedAt: Double { get }
    var activatedListener: Int32? { get }
    var upstream: UpstreamAddress { get }
    /// The audio threads' kernel ids (for their scheduling in status).
    func loopThreadIDs() -> [pid_t]
}

extension Daemon: ClientLink, RelayStatus {}

/// Messages to control connections (the ControlServer).
protocol ControlOutput: AnyObject, Sendable {
    func send(_ message: ServerMessage, to connection: ControlConnectionID)
    func broadcast(_ event: ControlEvent)
}

extension ControlServer: ControlOutput {}

/// What the consent service keeps (the StoreWriter): queued, never waited for on a loop.
protocol ConsentRecords: AnyObject, Sendable {
    func save(_ d: Decision)
    func setAccess(_ kind: Capability, enabled: Bool, at: Double)
    func removeTimed(_ app: AppKey, _ capability: Capability)
    func record(_ r: AppRecord)
    func startUsage(stream: UInt64, _ u: UsageRecord)
    func finishUsage(stream: UInt64, endedAt: Double, bytesReal: UInt64, bytesSilenced: UInt64, decision: String?)
    func logEvent(kind: String, app: AppKey?, detail: String, at: Double)
    /// Returns once every queued decision is on disk (the control thread, before a reply).
    func flushDecisions()
}

extension StoreWriter: ConsentRecords {}

/// Where raised prompts go (PromptDelivery: the desktop, the prompt command, their timers).
protocol PromptChannels: AnyObject, Sendable {
    func raised(_ p: PromptInfo)
    func wantsCommand(_ prompt: UInt64, environment: [String: String])
    func scheduleTimeout(_ prompt: UInt64, after seconds: Double)
    func closed(_ prompt: UInt64)
    /// Tells the person that `app` hears the microphone now (`use-notices`).
    func notice(_ app: AppKey, name: String, icon: String?)
}

extension PromptDelivery: PromptChannels {}

/// Runs an action later, one timer per key (the prompt timer loop).
protocol Timers: AnyObject, Sendable {
    func schedule(key: UInt64, after seconds: Double, _ action: @escaping @Sendable () -> Void)
}

extension DeadlineTimers: Timers {}

/// The desktop's microphone switches: of Flatpak apps (DesktopPermissions), and GNOME's
/// for the microphone as a whole (GnomeMicrophoneSwitch).
protocol DesktopSwitches: AnyObject, Sendable {
    func mirror(appID: String, _ state: PermissionState)
    func mirrorMicrophoneAccess(enabled: Bool)
}

/// The daemon's desktop switches, each mirrored where the desktop keeps it.
final class DesktopMirrors: DesktopSwitches {
    let permissions: DesktopPermissions
    let gnome: GnomeMicrophoneSwitch

    init(permissions: DesktopPermissions, gnome: GnomeMicrophoneSwitch) {
        self.permissions = permissions
        self.gnome = gnome
    }

    func mirror(appID: String, _ state: PermissionState) { permissions.mirror(appID: appID, state) }
    func mirrorMicrophoneAccess(enabled: Bool) { gnome.mirror(accessEnabled: enabled) }
}

/// snapd's say on snap connections' audio-record plug (SnapRecordGate).
protocol SnapAccess: AnyObject, Sendable {
    /// Starts the question for a connection; `onAllowed` runs once snapd said yes.
    func sessionOpened(id: UInt64, identity: ClientIdentity, onAllowed: @escaping @Sendable () -> Void)
    func sessionClosed(id: UInt64)
    /// Whether the session's streams may be real (true for anything but an unconfirmed snap).
    func allows(_ id: UInt64) -> Bool
}

extension SnapRecordGate: SnapAccess {}

/// The name and icon of an app as its desktop entry gives them (DesktopEntries).
protocol AppEntries: AnyObject, Sendable {
    func entry(for key: AppKey, executable: String?) -> DesktopEntries.Entry?
}

extension DesktopEntries: AppEntries {}

/// The far end of a reference cycle between two objects built one after the other: the
/// first is built with this, and it is bound, once, to the second (an object: a class, or a
/// class-bound protocol) as soon as that exists, before any thread calls through it. It holds
/// its target weakly, as the references it replaces did (the target has an owner of its
/// own); a call that finds none is dropped.
final class Late<Target: Sendable>: Sendable {
    private struct Weak {
        weak var object: AnyObject?
        var bound = false
    }
    private let state = Locked(Weak())

    init() {}

    func bind(_ t: Target) {
        precondition(type(of: t as Any) is AnyClass, "a late-bound target is an object")
        state.withLock { s in
            precondition(!s.bound, "a late-bound target is bound once")
            s = Weak(object: t as AnyObject, bound: true)
        }
    }

    var value: Target? { state.withLock { $0.object } as? Target }
}

extension Late: ClientLink where Target == any ClientLink {
    func inject(sessionID: UInt64, packet: [UInt8]) { value?.inject(sessionID: sessionID, packet: packet) }
    func disconnect(sessionID: UInt64, reason: String) { value?.disconnect(sessionID: sessionID, reason: reason) }
}

extension Late: ControlOutput where Target == any ControlOutput {
    func send(_ message: ServerMessage, to connection: ControlConnectionID) { value?.send(message, to: connection) }
    func broadcast(_ event: ControlEvent) { value?.broadcast(event) }
}
