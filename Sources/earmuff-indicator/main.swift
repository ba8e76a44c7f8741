// earmuff-indicator: who hears the microphone now, in the desktop's tray, with Deny one
// click away. It talks to the daemon only through its control socket (on the control
// thread it shares with the settings window) and to the tray over the session bus (on the
// main thread, which owns every sd-bus object): the control thread hands each new state
// over through an eventfd, and the main thread shows it.
//
//   earmuff-indicator [--control PATH]
import DBus
import Foundation
import Glibc
import LinuxSystem
import SettingsLink
import SettingsModel

var controlPath = ControlThread.defaultPath()
switch SettingsCommandLine.parse(Array(CommandLine.arguments.dropFirst())) {
case .failure(let e):
    log("\(e.message)\n\(SettingsCommandLine.indicatorUsage)")
    exit(2)
case .success(let parsed) where parsed.help:
    print(SettingsCommandLine.help(usage: SettingsCommandLine.indicatorUsage))
    exit(0)
case .success(let parsed):
    if let p = parsed.controlPath { controlPath = p }
}

/// Earmuff Settings, next to this program (as the package installs both), if it is there.
func findSettingsProgram() -> String? {
    let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    let beside = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("earmuff-settings").path
    return FileManager.default.isExecutableFile(atPath: beside) ? beside : nil
}

/// Starts `program` (Earmuff Settings), not waiting for it (a second start raises its window).
func start(_ program: String, controlPath: String) {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = unsafe [strdup(program), strdup("--control"), strdup(controlPath), nil]
    defer { unsafe argv.forEach { unsafe free($0) } }
    let rc = unsafe posix_spawn(&pid, program, nil, nil, argv, environ)
    if rc != 0 { log("cannot start \(program): \(Errno(rawValue: rc))") }
}

/// A state on its way from the control thread to the main thread.
final class Handover: @unchecked Sendable {
    // @unchecked Sendable: `wake` is only signalled by the control thread (an atomic write in
    // the kernel) and drained by the main thread; `state` is under its lock.
    let wake: FileDescriptor
    let state = Locked<SettingsState?>(nil)

    init() throws(Errno) { wake = try FileDescriptor.eventfd() }

    func give(_ new: SettingsState) {
        state.withLock { $0 = new }
        wake.signalEvent()
    }

    func take() -> SettingsState? {
        wake.drainEvents()
        return state.withLock { s in
            defer { s = nil }
            return s
        }
    }
}

func run(controlPath: String) -> Never {
    // Started children are never waited for.
    signal(SIGCHLD, SIG_IGN)
    let settings = findSettingsProgram()
    let bus: BusConnection, handover: Handover, control: ControlThread, item: StatusItem
    do {
        bus = try BusConnection.session()
        let h = try Handover()
        handover = h
        control = try ControlThread(path: controlPath, usage: false) { h.give($0) }
    } catch {
        log("cannot start: \(error)")
        exit(1)
    }
    do {
        item = try StatusItem(bus: bus, view: IndicatorView(SettingsState(), settingsInstalled: settings != nil)) { action in
            switch action {
            case .intent(let intent): control.post(intent)
            case .openSettings: if let settings { start(settings, controlPath: controlPath) }
            }
        }
    } catch {
        log("cannot put the indicator on the session bus: \(error)")
        exit(1)
    }
    while true {
        do throws(BusError) {
            while try bus.process() {}
        } catch {
            log("the session bus is gone (\(error)); the session has ended")
            exit(0)
        }
        var fds = [pollfd(fd: bus.fd, events: bus.events, revents: 0), pollfd(fd: handover.wake.rawValue, events: Int16(POLLIN), revents: 0)]
        _ = unsafe poll(&fds, 2, bus.pollTimeout)
        if fds[1].revents != 0, let state = handover.take() {
            item.show(IndicatorView(state, settingsInstalled: settings != nil))
        }
    }
}

run(controlPath: controlPath)
