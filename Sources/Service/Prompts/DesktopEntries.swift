// The name and icon a prompt shows, from the system's desktop entries.
//
// A prompt names an app by what the system says, not by what the app claims:
//   - a Flatpak (or launcher) app by the `.desktop` file its id exports,
//     `<id>.desktop` under the applications directories (Flatpak's exports
//     directories included);
//   - a host program by the desktop entry whose `Exec` (or `TryExec`)
//     program resolves to the same executable the kernel reports.
// Lookups come from the I/O loops (a prompt is raised there) and never read
// the directories: they use the last index, built at start-up before apps
// connect and rebuilt on a worker thread ("desktop-entries"), after a lookup,
// when it is more than a minute old.
import Consent
import Foundation
import Glibc
import LinuxSystem
import Runtime

final class DesktopEntries: Sendable {
    struct Entry: Sendable, Equatable {
        var name: String
        var icon: String?
    }

    private struct State {
        var cache: [AppKey: Entry?] = [:]
        var byID: [String: Entry] = [:]
        var byExecutable: [String: Entry] = [:]
        var indexedAt: Double = -.infinity
        var indexing = false
    }

    private let state = Locked(State())
    private let directories: [String]
    /// Where a program named without a path is looked for.
    private let searchPath: [String]
    private let worker: Worker

    /// `environment` supplies XDG_DATA_HOME, XDG_DATA_DIRS, HOME and PATH.
    init(environment: [String: String] = currentEnvironment()) throws(SystemError) {
        worker = try Worker(name: "desktop-entries")
        searchPath = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        let home = environment["HOME"] ?? ""
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.local/share"
        let dataDirs = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init)
        var dirs = [dataHome] + dataDirs + ["\(dataHome)/flatpak/exports/share", "/var/lib/flatpak/exports/share"]
        var seen = Set<String>()
        dirs = dirs.filter { seen.insert($0).inserted }
        directories = dirs.map { $0 + "/applications" }
    }

    /// Builds the index now, on this thread (at start-up, before apps connect).
    func build() {
        let (byID, byExe) = index()
        state.withLock { s in
            (s.byID, s.byExecutable) = (byID, byExe)
            s.indexedAt = DeadlineTimers.now()
            s.cache.removeAll()
        }
    }

    /// Rebuilds the index on the worker thread unless one is being built or is fresh.
    func refresh() {
        let start = state.withLock { s -> Bool in
            guard !s.indexing, DeadlineTimers.now() - s.indexedAt > 60 else { return false }
            s.indexing = true
            return true
        }
        guard start else { return }
        worker.async { [self] in
            build()
            state.withLock { $0.indexing = false }
        }
    }

    /// The entry for an app from the last index, or nil when it has none (or there is
    /// no index yet). Reads no directory.
    func entry(for key: AppKey, executable: String?) -> Entry? {
        defer { refresh() }
        let real = executable.map(resolved)
        return state.withLock { s in
            if let cached = s.cache[key] { return cached }
            let found: Entry? =
                switch key.kind {
                case "flatpak", "launcher", "snap": s.byID[key.value]
                default: real.flatMap { s.byExecutable[$0] }
                }
            if s.indexedAt > -.infinity { s.cache[key] = found }
            return found
        }
    }

    /// Desktop file id → entry, and executable real path → entry. Earlier directories win.
    private func index() -> ([String: Entry], [String: Entry]) {
        var byID: [String: Entry] = [:]
        var byExe: [String: Entry] = [:]
        for dir in directories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
            for name in names.sorted() where name.hasSuffix(".desktop") {
                guard let text = try? String(contentsOfFile: "\(dir)/\(name)", encoding: .utf8),
                    let parsed = Self.parse(text)
                else { continue }
                let id = String(name.dropLast(".desktop".count))
                if byID[id] == nil { byID[id] = parsed.entry }
                for program in parsed.programs {
                    guard let exe = Self.locate(program, path: searchPath) else { continue }
                    let real = resolved(exe)
                    if byExe[real] == nil { byExe[real] = parsed.entry }
                }
            }
        }
        return (byID, byExe)
    }

    /// The entry and the programs its `Exec` and `TryExec` run; nil for hidden or non-application entries.
    static func parse(_ text: String) -> (entry: Entry, programs: [String])? {
        var inMain = false
        var fields: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                inMain = line == "[Desktop Entry]"
                continue
            }
            guard inMain, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            if fields[key] == nil { fields[key] = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces) }
        }
        guard fields["Type"] == "Application", fields["Hidden"] != "true", let name = fields["Name"], !name.isEmpty
        else { return nil }
        var programs: [String] = []
        if let exec = fields["Exec"], let program = execProgram(exec) { programs.append(program) }
        if let tryExec = fields["TryExec"], !tryExec.isEmpty { programs.append(tryExec) }
        let icon = fields["Icon"].flatMap { $0.isEmpty ? nil : $0 }
        return (Entry(name: name, icon: icon), programs)
    }

    /// The program an `Exec` line runs: its first word, past `env` and `VAR=value` words.
    static func execProgram(_ exec: String) -> String? {
        var words = exec.split(separator: " ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        if words.first == "env" || words.first == "/usr/bin/env" {
            words.removeFirst()
            while let w = words.first, w.contains("="), !w.hasPrefix("/") { words.removeFirst() }
        }
        return words.first.flatMap { $0.isEmpty ? nil : $0 }
    }

    private static func locate(_ program: String, path: [String]) -> String? {
        if program.hasPrefix("/") { return program }
        return path.map { "\($0)/\(program)" }.first { unsafe access($0, X_OK) == 0 }
    }

    private func resolved(_ path: String) -> String {
        guard let r = unsafe realpath(path, nil) else { return path }
        defer { unsafe free(r) }
        return unsafe String(cString: r)
    }
}
