// The window's connection to the daemon: the control thread (SettingsLink) hands each
// new state to the GTK loop with `g_idle_add`, which only shows it.
import CAdwaita
import ControlProtocol
import Foundation
import Glibc
import LinuxSystem
import SettingsLink
import SettingsModel

/// The GTK loop's side: the state the control thread last handed over, and clicks to send.
@MainActor
final class DaemonLink {
    let path: String
    private(set) var state = SettingsState()
    /// Called after every change of `state`.
    var changed: () -> Void = {}
    private var thread: ControlThread?

    init(path: String) { self.path = path }

    /// Starts the control thread, which connects at once and keeps trying until it works.
    func start() {
        guard thread == nil else { return }
        // The link lives as long as the application: the thread's handovers may name it.
        let link = unsafe UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())
        do {
            thread = try ControlThread(path: path) { state in
                let box = unsafe Unmanaged.passRetained(Handover(link: link, state: state)).toOpaque()
                unsafe g_idle_add(
                    { data in
                        let h = unsafe Unmanaged<Handover>.fromOpaque(data!).takeRetainedValue()
                        MainActor.assumeIsolated {
                            unsafe Unmanaged<DaemonLink>.fromOpaque(UnsafeRawPointer(bitPattern: h.link)!).takeUnretainedValue().show(h.state)
                        }
                        return 0
                    }, unsafe box)
            }
        } catch {
            state.lost(.refused(message: "cannot start the control thread (\(error))"))
            changed()
        }
    }

    /// Sends a click's request; what it changes comes back as a new state.
    func perform(_ intent: SettingsIntent) { thread?.post(intent) }

    private func show(_ new: SettingsState) {
        state = new
        changed()
    }
}

/// A state on its way from the control thread to the GTK loop.
private final class Handover: Sendable {
    let link: UInt
    let state: SettingsState
    init(link: UInt, state: SettingsState) { (self.link, self.state) = (link, state) }
}
