// The sound system, known by the units that run it.
//
// A process of the user that runs /usr/bin/pipewire is not necessarily the
// session's PipeWire or pipewire-pulse: an app can start its own pipewire-pulse
// on a private socket and record through it. Where the session's systemd user
// manager runs the sound system's units, only the processes it placed in those
// units are the sound system; any other process running the same program is an
// app. Where it runs none of them (no systemd user manager, or a session that
// starts them some other way), the executable is all there is to go by.
import Consent
import Glibc
import LinuxSystem

enum SoundSystemUnits {
    /// The units of the user manager that run each program of the sound system.
    static let units: [String: Set<String>] = [
        "/usr/bin/pipewire": ["pipewire.service", "pipewire-pulse.service"],
        "/usr/bin/wireplumber": ["wireplumber.service"],
        "/usr/bin/pipewire-media-session": ["pipewire-media-session.service"],
        "/usr/libexec/xdg-desktop-portal": ["xdg-desktop-portal.service"],
    ]

    /// Why a process running `exe`, in the cgroup that `cgroup` (`/proc/PID/cgroup`) names, is
    /// not the sound system's own though it runs its program: the user manager Earmuff runs
    /// under runs that program's units, and it is in none of them. Nil when it is, or when no
    /// such unit runs.
    static func refusal(exe: String, cgroup: String?) -> String? {
        guard let names = units[exe], let manager = ownManager else { return nil }
        let running = runningUnits(under: manager).intersection(names)
        guard !running.isEmpty else { return nil }
        let placed = cgroup.flatMap(IdentityClassifier.userUnit(fromCgroup:))
        if let placed, placed.manager == manager, running.contains(placed.unit) { return nil }
        return "the user manager runs \(exe) as \(running.sorted().joined(separator: " and ")), "
            + "and this process is \(placed.map { "in \($0.unit)" } ?? "in no unit of it")"
    }

    /// The cgroup of the user manager Earmuff runs under, if any (it does not change).
    private static let ownManager: String? = ProcessInspector.readSmallFile("/proc/self/cgroup")
        .flatMap { IdentityClassifier.userManager(fromCgroup: String(decoding: $0, as: UTF8.self)) }

    /// The names of the units the user manager whose cgroup is `manager` runs under its slices
    /// (the unified hierarchy's, else the v1 `name=systemd` one's).
    static func runningUnits(under manager: String) -> Set<String> {
        guard let root = ["/sys/fs/cgroup", "/sys/fs/cgroup/systemd"].first(where: { isDirectory($0 + manager) }) else { return [] }
        var found: Set<String> = []
        var slices = [manager]
        while let slice = slices.popLast() {
            for entry in directoryEntries(root + slice) {
                if entry.hasSuffix(".slice") { slices.append(slice + "/" + entry) }
                if entry.hasSuffix(".service") { found.insert(entry) }
            }
        }
        return found
    }

    private static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return unsafe stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }
}
