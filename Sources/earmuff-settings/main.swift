// earmuff-settings: who may record, who records now, and one switch per kind of
// capture, in a window. It talks to the daemon only through its control socket.
//
//   earmuff-settings [--control PATH]
import CAdwaita
import Foundation
import Glibc
import SettingsLink
import SettingsModel

var controlPath = ControlThread.defaultPath()
switch SettingsCommandLine.parse(Array(CommandLine.arguments.dropFirst())) {
case .failure(let e):
    FileHandle.standardError.write(Data("earmuff-settings: \(e.message)\n\(SettingsCommandLine.usage)\n".utf8))
    exit(2)
case .success(let parsed) where parsed.help:
    print(SettingsCommandLine.help(usage: SettingsCommandLine.usage))
    exit(0)
case .success(let parsed):
    if let p = parsed.controlPath { controlPath = p }
}

/// The application and its one window (a second start raises the first window).
@MainActor
@safe
final class SettingsApp {
    static let id = "org.earmuff.Settings"
    let app = unsafe adw_application_new(SettingsApp.id, G_APPLICATION_DEFAULT_FLAGS)!
    let link: DaemonLink
    var window: SettingsWindow?

    init(controlPath: String) {
        link = DaemonLink(path: controlPath)
        unsafe on(app, "activate") { [unowned self] in
            if let window {
                unsafe gtk_window_present(cast(window.window))
                return
            }
            let w = unsafe SettingsWindow(application: app, link: link)
            window = w
            unsafe gtk_window_present(cast(w.window))
            later { self.link.start() }
        }
    }

    func run() -> Int32 {
        unsafe g_application_run(cast(app), 0, nil)
    }
}

unsafe g_set_prgname("earmuff-settings")
unsafe gtk_window_set_default_icon_name(SettingsApp.id)
let settings = MainActor.assumeIsolated { SettingsApp(controlPath: controlPath) }
exit(MainActor.assumeIsolated { settings.run() })
