// Identity classification: from what /proc says about a peer to an app key.
//
// The proxy reads /proc/PID/{exe,cmdline,cwd,cgroup,attr/current,root/.flatpak-info}
// right after accept (see Service/Identity/ProcessInspector.swift) and hands the
// raw text here. Everything below is pure string work, so every rule is tested
// with realistic /proc contents and no process.
//
// Precedence:
//   0. a process whose /proc cannot be read (non-dumpable) → unknown:pid-PID-START,
//      a key of its own that never gets real audio (a launcher socket still vouches)
//   1. Flatpak  `[Application] name=` in /.flatpak-info   → flatpak:ID
//      strong when its systemd scope is `app-flatpak-ID-N.scope`, weak when no
//      user systemd placed it, sandboxed:unknown when it runs in another unit
//   2. snap     AppArmor label `snap.NAME.APP (enforce)`  → snap:NAME
//   3. launcher `earmuff run --app-id ID` socket           → launcher:ID
//   4. a mount namespace of its own, without the above    → sandboxed:unknown
//   5. systemd  leaf cgroup `app[-LAUNCHER]-ID-RANDOM.scope` or
//               `app[-LAUNCHER]-ID[@RANDOM].service`        → systemd:ID
//   (The systemd scope is told by the desktop, as a sandbox is; it comes after the
//   launcher here because a terminal's scope covers every command run in it.)
//   6. interpreter (python, node, perl, ruby, java, shells, …) running a
//      script named on its command line                   → script:/abs/path
//   7. otherwise the executable                           → exe:/path
//   Script and exe keys get `?FINDING&…` appended when the environment or the
//   interpreter's options load outside code (CodeInjection.swift).
//
// What is trusted: the Flatpak and snap metadata are set up by the sandbox and
// cannot be changed by the app inside it, but a same-uid host process can fake
// a sandbox of its own (bubblewrap with a made-up /.flatpak-info), so Flatpak
// metadata is strong only where the user's systemd confirms it; the cgroup is
// set by the user's systemd, but lies in a subtree the user may change; the
// command line, working directory and environment are the process's own. So
// every identity of an unsandboxed same-uid process is weak (ClientIdentity.strength).

/// Raw facts about a connected peer, as read from /proc (nil: missing or unreadable).
public struct ProcessFacts: Sendable, Equatable {
    /// Peer credentials from SO_PEERCRED.
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// `readlink /proc/PID/exe`.
    public var exe: String?
    /// `/proc/PID/cmdline` split on NUL (empty when unreadable).
    public var cmdline: [String]
    /// `readlink /proc/PID/cwd`, to make a relative script path absolute.
    public var cwd: String?
    /// Contents of `/proc/PID/root/.flatpak-info`.
    public var flatpakInfo: String?
    /// Contents of `/proc/PID/attr/apparmor/current` (or `/proc/PID/attr/current`).
    public var apparmorLabel: String?
    /// Contents of `/proc/PID/cgroup`.
    public var cgroup: String?
    /// The app id of the `earmuff run --app-id` socket the client came through.
    public var launcherAppID: String?
    /// False when /proc/PID could not be read as the peer's (it made itself
    /// non-dumpable, or the pid is gone): nothing but the credentials is known.
    public var inspectable: Bool
    /// The variables of `/proc/PID/environ` that `CodeInjection` cares about.
    public var environment: [String: String]
    /// False when `/proc/PID/environ` could not be read whole.
    public var environmentComplete: Bool
    /// True when the process lives in a mount namespace other than Earmuff's:
    /// its executable and script paths are its own namespace's, not the host's.
    public var foreignMountNamespace: Bool
    /// Field 22 of /proc/PID/stat (clock ticks after boot).
    public var startTime: UInt64?

    public init(
        pid: Int32, uid: UInt32, gid: UInt32, exe: String? = nil, cmdline: [String] = [],
        cwd: String? = nil, flatpakInfo: String? = nil, apparmorLabel: String? = nil,
        cgroup: String? = nil, launcherAppID: String? = nil, inspectable: Bool = true,
        environment: [String: String] = [:], environmentComplete: Bool = true,
        foreignMountNamespace: Bool = false, startTime: UInt64? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.exe = exe
        self.cmdline = cmdline
        self.cwd = cwd
        self.flatpakInfo = flatpakInfo
        self.apparmorLabel = apparmorLabel
        self.cgroup = cgroup
        self.launcherAppID = launcherAppID
        self.inspectable = inspectable
        self.environment = environment
        self.environmentComplete = environmentComplete
        self.foreignMountNamespace = foreignMountNamespace
        self.startTime = startTime
    }
}

/// Turns `ProcessFacts` into a `ClientIdentity`; pure.
public enum IdentityClassifier {

    /// The key of every process in a mount namespace of its own whose sandbox metadata does not check out.
    public static let unknownSandboxKey = AppKey(kind: "sandboxed", value: "unknown")

    /// Classifies a peer, strongest evidence first (see the file comment).
    public static func classify(_ f: ProcessFacts) -> ClientIdentity {
        let exe = f.exe.map(cleanExecutablePath)
        func identity(
            _ kind: String, _ value: String, _ method: IdentificationMethod, script: String? = nil,
            strength: IdentityStrength? = nil, caveat: String? = nil
        ) -> ClientIdentity {
            ClientIdentity(
                pid: f.pid, uid: f.uid, gid: f.gid, appKey: AppKey(kind: kind, value: value),
                method: method, executable: exe, script: script, strength: strength,
                caveat: caveat, startTime: f.startTime, origin: f.cgroup.flatMap(cgroupPath))
        }
        // The launcher socket vouches whatever the process shows (it may be in a sandbox).
        let launcherID = f.launcherAppID?.trimmingWhitespace()
        if let id = launcherID, !id.isEmpty, !f.inspectable {
            return identity("launcher", id, .launcher)
        }
        guard f.inspectable else { return hidden(f) }
        if let info = f.flatpakInfo, let id = flatpakAppID(fromInfo: info) {
            switch flatpakScope(of: id, cgroup: f.cgroup) {
            case .confirmed:
                return identity("flatpak", id, .flatpak)
            case .unavailable:
                return identity(
                    "flatpak", id, .flatpak, strength: .weak,
                    caveat: "no systemd scope confirms its Flatpak metadata")
            case .contradicted(let unit):
                return identity(
                    unknownSandboxKey.kind, unknownSandboxKey.value, .sandboxed,
                    caveat: "its /.flatpak-info names \(id), but it runs in \(unit), not in that app's Flatpak scope")
            }
        }
        if let label = f.apparmorLabel, let name = snapName(fromLabel: label) {
            return identity("snap", name, .snap)
        }
        // The launcher socket beats the systemd scope: a scope is inherited by
        // every process a terminal starts (one scope for all of Konsole, say),
        // while `earmuff run --app-id` is an explicit choice for this one app.
        if let id = launcherID, !id.isEmpty {
            return identity("launcher", id, .launcher)
        }
        if f.foreignMountNamespace {
            // Paths inside another mount namespace are whatever it mounted there
            // (bubblewrap can put python3 at /usr/bin/pacat).
            return identity(
                unknownSandboxKey.kind, unknownSandboxKey.value, .sandboxed,
                caveat: "it runs in a mount namespace of its own without sandbox metadata")
        }
        if let cgroup = f.cgroup, let id = systemdAppID(fromCgroup: cgroup) {
            return identity("systemd", id, .systemdScope)
        }
        guard let exe, !exe.isEmpty else {
            // Its /proc is its own but the exe link is not readable: it made itself
            // non-dumpable after start. Never the shared key it once fell back to.
            return hidden(f)
        }
        let found = CodeInjection.findings(
            exe: exe, cmdline: f.cmdline, cwd: f.cwd,
            environment: f.environment, environmentComplete: f.environmentComplete)
        let suffix = found.isEmpty ? "" : "?" + found.joined(separator: "&")
        let caveat = found.isEmpty ? nil : "it loads code from outside its program (\(found.joined(separator: ", ")))"
        if let script = scriptTarget(exe: exe, cmdline: f.cmdline, cwd: f.cwd) {
            return identity("script", script + suffix, .script, script: script, caveat: caveat)
        }
        return identity("exe", exe + suffix, .executable, caveat: caveat)
    }

    /// A process that hid itself (or whose /proc could not be read) gets a key of its own,
    /// so that a grant to one such process never reaches another; it never gets real audio.
    private static func hidden(_ f: ProcessFacts) -> ClientIdentity {
        let value = "pid-\(f.pid)" + (f.startTime.map { "-\($0)" } ?? "")
        return ClientIdentity(
            pid: f.pid, uid: f.uid, gid: f.gid, appKey: AppKey(kind: "unknown", value: value),
            method: .uninspectable, executable: f.exe.map(cleanExecutablePath),
            caveat: "its process cannot be inspected (not dumpable)", startTime: f.startTime,
            origin: f.cgroup.flatMap(cgroupPath))
    }

    /// What the cgroup says about a process whose /.flatpak-info names app `id`.
    public enum FlatpakScopeCheck: Equatable, Sendable {
        /// It runs in `app-flatpak-ID-N.scope`, which `flatpak run` creates under the user's systemd.
        case confirmed
        /// No systemd user manager placed it (no `user@UID.service` in its cgroup path).
        case unavailable
        /// A systemd user manager runs it, in this other unit.
        case contradicted(String)
    }

    /// Cross-checks Flatpak metadata with the systemd unit the process runs in.
    public static func flatpakScope(of id: String, cgroup: String?) -> FlatpakScopeCheck {
        guard let cgroup, let path = cgroupPath(cgroup), path.contains("/user@"),
            let leaf = path.split(separator: "/").last
        else { return .unavailable }
        let unit = String(leaf)
        if unit.hasPrefix("app-flatpak-"), unit.hasSuffix(".scope"), appID(fromUnitName: unit) == id {
            return .confirmed
        }
        return .contradicted(unit)
    }

    // MARK: Flatpak

    /// The `name=` of the `[Application]` group of a `.flatpak-info` keyfile.
    public static func flatpakAppID(fromInfo text: String) -> String? {
        var group = ""
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0.isNewline }) {
            let line = String(raw).trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard group == "Application", let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq]).trimmingWhitespace()
            let value = String(line[line.index(after: eq)...]).trimmingWhitespace()
            if key == "name", isPlausibleAppID(value) { return value }
        }
        return nil
    }

    // MARK: snap

    /// `snap.NAME.APP (enforce)` (or `snap.NAME.hook.HOOK`) → `NAME`; anything else → nil.
    public static func snapName(fromLabel text: String) -> String? {
        // The file may end in "\n" or NUL; the mode follows a space.
        var label = text.trimmingWhitespace()
        if let nul = label.firstIndex(of: "\0") { label = String(label[..<nul]) }
        if let space = label.firstIndex(of: " ") { label = String(label[..<space]) }
        let parts = label.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap" else { return nil }
        let name = parts[1]
        // Snap names: lowercase letters, digits and dashes; `_INSTANCE` for parallel installs.
        guard !name.isEmpty, name.allSatisfy({ ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" || $0 == "_" })
        else { return nil }
        return String(name)
    }

    // MARK: systemd

    /// The app id of the leaf systemd unit in a `/proc/PID/cgroup` text, following
    /// https://systemd.io/DESKTOP_ENVIRONMENTS: `app[-LAUNCHER]-ID-RANDOM.scope`,
    /// `app[-LAUNCHER]-ID[@RANDOM].service`; dashes in ID are escaped as `\x2d`.
    public static func systemdAppID(fromCgroup text: String) -> String? {
        guard let path = cgroupPath(text), let leaf = path.split(separator: "/").last else { return nil }
        return appID(fromUnitName: String(leaf))
    }

    /// Where a systemd user manager placed a process itself: the path of the manager's own
    /// cgroup (`/user.slice/user-1000.slice/user@1000.service`) and the unit the process runs in,
    /// when the cgroup path of a `/proc/PID/cgroup` text has only slices between the manager and
    /// that unit (`…/user@1000.service/session.slice/pipewire.service`). A program of the user
    /// makes cgroups only inside its own unit's subtree, under a unit that is no slice; and a
    /// unit's name is the manager's to give, to one unit at a time. Nil for anything else: no
    /// user manager, a process in a subtree a unit made, a scope's process.
    public static func userUnit(fromCgroup text: String) -> (manager: String, unit: String)? {
        guard let (manager, below) = userManagerPath(text), let unit = below.last, unit.hasSuffix(".service"),
            below.dropLast().allSatisfy({ $0.hasSuffix(".slice") })
        else { return nil }
        return (manager, unit)
    }

    /// The path of the systemd user manager's own cgroup a process runs under, if any.
    public static func userManager(fromCgroup text: String) -> String? { userManagerPath(text)?.manager }

    /// The user manager's cgroup path in a `/proc/PID/cgroup` text, and the path's parts below it.
    private static func userManagerPath(_ text: String) -> (manager: String, below: ArraySlice<String>)? {
        guard let path = cgroupPath(text) else { return nil }
        let parts = path.split(separator: "/").map(String.init)
        guard let at = parts.lastIndex(where: { $0.hasPrefix("user@") && $0.hasSuffix(".service") }) else { return nil }
        return ("/" + parts[...at].joined(separator: "/"), parts[(at + 1)...])
    }

    /// The unified (v2) cgroup path of a `/proc/PID/cgroup` text, else the v1 `name=systemd` one.
    static func cgroupPath(_ text: String) -> String? {
        var unified: String?
        var namedSystemd: String?
        for raw in text.split(whereSeparator: { $0.isNewline }) {
            let line = String(raw).trimmingWhitespace()
            // hierarchy-ID:controllers:path — the path may itself contain colons.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[0] == "0" && fields[1].isEmpty { unified = String(fields[2]) }
            if fields[1] == "name=systemd" { namedSystemd = String(fields[2]) }
        }
        return unified ?? namedSystemd
    }

    /// `app-gnome-org.gnome.Nautilus-1234.scope` → `org.gnome.Nautilus`; nil for other units.
    public static func appID(fromUnitName unit: String) -> String? {
        var name: Substring
        if unit.hasSuffix(".scope") {
            name = unit.dropLast(".scope".count)
            // The random suffix is mandatory for scopes.
            guard let dash = name.lastIndex(of: "-") else { return nil }
            name = name[..<dash]
        } else if unit.hasSuffix(".service") {
            name = unit.dropLast(".service".count)
            if let at = name.firstIndex(of: "@") { name = name[..<at] }
        } else {
            return nil
        }
        guard name.hasPrefix("app-") else { return nil }
        var rest = name.dropFirst("app-".count)
        // Dashes inside the id are escaped, so a remaining dash ends the launcher.
        if let dash = rest.firstIndex(of: "-") { rest = rest[rest.index(after: dash)...] }
        guard let id = unescapeUnitName(rest), isPlausibleAppID(id) else { return nil }
        return id
    }

    /// Undoes systemd's `\xNN` escaping; nil on a malformed escape.
    static func unescapeUnitName(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var u = Array(s.utf8)[...]
        while let b = u.first {
            if b == UInt8(ascii: "\\") {
                guard u.count >= 4, u[u.startIndex + 1] == UInt8(ascii: "x"),
                    let hi = hexValue(u[u.startIndex + 2]), let lo = hexValue(u[u.startIndex + 3])
                else { return nil }
                bytes.append(hi << 4 | lo)
                u = u.dropFirst(4)
            } else {
                bytes.append(b)
                u = u.dropFirst()
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isPlausibleAppID(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 255 && !id.contains("/")
            && id.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7f }
    }
}

extension String {
    /// The string without leading and trailing spaces, tabs, CR, LF and NUL.
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline || $0 == "\0" }
        guard let first = firstIndex(where: { !isSpace($0) }),
            let last = lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(self[first...last])
    }
}
