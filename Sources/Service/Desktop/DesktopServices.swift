// Who may speak for the desktop.
//
// Any client of the session bus can take a well-known name nobody owns yet
// (a portal backend's, before the real one starts) and answer as if it were
// the desktop. The system says which program a name belongs to: its D-Bus
// service file (`/usr/share/dbus-1/services/NAME.service`, root's, as
// packages install them) names the executable the bus starts for it. A
// name is trusted only while the process that owns it is that executable.
// The user's own service directories do not count: any program of the user
// can write there. And a service counts only when it runs outside any
// sandbox (in Earmuff's own mount namespace): a sandboxed app given the bus
// could otherwise own a name nobody holds, such as the notification
// server's on a desktop without one, and answer its own prompt.
import Consent
import DBus
import Glibc
import LinuxSystem

enum DesktopServices {
    /// The system's directories of session service files; `EARMUFF_SYSTEM_DBUS_SERVICES`
    /// (colon-separated) replaces them, for tests and unusual installs.
    static var serviceDirectories: [String] {
        if let dirs = unsafe getenv("EARMUFF_SYSTEM_DBUS_SERVICES").map({ unsafe String(cString: $0) }), !dirs.isEmpty {
            return dirs.split(separator: ":").map(String.init)
        }
        return ["/usr/local/share/dbus-1/services", "/usr/share/dbus-1/services"]
    }

    /// The `Exec=` program of a service file's text when its `Name=` is `name`.
    static func executable(serviceFile text: String, name: String) -> String? {
        var owns = false
        var exec: String?
        for raw in text.split(separator: "\n") {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("Name=") { owns = line.dropFirst(5) == name }
            if line.hasPrefix("Exec=") { exec = line.dropFirst(5).split(separator: " ").first.map(String.init) }
        }
        return owns ? exec : nil
    }

    /// The executables (real paths) that root's service files for `name` start.
    static func installedExecutables(for name: String) -> Set<String> {
        var found: Set<String> = []
        for dir in serviceDirectories {
            guard isRootsOwn(dir) else { continue }
            for file in directoryEntries(dir) where file.hasSuffix(".service") {
                let path = "\(dir)/\(file)"
                guard isRootsOwn(path), let text = ProcessInspector.readSmallFile(path).map({ String(decoding: $0, as: UTF8.self) }),
                    let exec = executable(serviceFile: text, name: name), let real = realPath(exec)
                else { continue }
                found.insert(real)
            }
        }
        return found
    }

    /// Why the connection `owner`, which owns `name`, is not the program the system installs
    /// for it, running outside any sandbox; nil when it is.
    static func impostor(_ name: String, owner: String, bus: BusConnection) -> String? {
        let expected = installedExecutables(for: name)
        guard !expected.isEmpty else { return "no service file of the system names a program for it" }
        if let why = sandboxed(owner, bus: bus) { return why }
        guard let pid = bus.processID(of: owner), var exe = readSymbolicLink("/proc/\(pid)/exe") else {
            return "its owner cannot be inspected"
        }
        if exe.hasSuffix(" (deleted)") { exe.removeLast(" (deleted)".count) } // upgraded while running
        guard expected.contains(exe) else {
            return "it is owned by process \(pid) (\(exe)), not by \(expected.sorted().joined(separator: " or ")), "
                + "the program the system installs for it"
        }
        // That program, with code of someone else's loaded into it first.
        let facts = ProcessInspector.facts(pid: pid, uid: getuid(), gid: getgid(), launcherAppID: nil)
        if let preload = CodeInjection.preload(environment: facts.environment, environmentComplete: facts.environmentComplete) {
            return "its process \(pid) (\(exe)) runs with \(preload)"
        }
        return nil
    }

    /// Why the connection `owner` is not a service of the desktop outside any sandbox: its
    /// process cannot be inspected, or lives in a mount namespace other than Earmuff's.
    /// Nil when it runs beside Earmuff.
    static func sandboxed(_ owner: String, bus: BusConnection) -> String? {
        bus.sandboxed(owner).map { "its owner: \($0)" }
    }

    /// A file or directory only root can change: owned by root, not writable by group or others.
    private static func isRootsOwn(_ path: String) -> Bool {
        var st = stat()
        return unsafe stat(path, &st) == 0 && st.st_uid == 0 && st.st_mode & (S_IWGRP | S_IWOTH) == 0
    }

    private static func realPath(_ path: String) -> String? {
        guard let p = unsafe realpath(path, nil) else { return nil }
        defer { unsafe free(p) }
        return unsafe String(cString: p)
    }
}
