// What the `earmuff` client prints and the environment it builds: usage text,
// default paths, aligned tables, and the PULSE_PROP string for `earmuff run`.
// All pure functions of their inputs, so the CLI's output is testable.
import Consent
import ControlProtocol
import Foundation
import Wording

/// Default socket paths of the client side (XDG).
public enum ClientPaths {
    /// `$XDG_RUNTIME_DIR`, else `/run/user/UID`.
    public static func runtimeDirectory(environment: [String: String], uid: UInt32) -> String {
        if let dir = environment["XDG_RUNTIME_DIR"], dir.hasPrefix("/") { return dir }
        return "/run/user/\(uid)"
    }

    /// `$XDG_RUNTIME_DIR/earmuff/control`.
    public static func controlSocket(environment: [String: String], uid: UInt32) -> String {
        runtimeDirectory(environment: environment, uid: uid) + "/earmuff/control"
    }

    /// `$XDG_RUNTIME_DIR/earmuff/native`, the socket apps connect to.
    public static func clientSocket(environment: [String: String], uid: UInt32) -> String {
        runtimeDirectory(environment: environment, uid: uid) + "/earmuff/native"
    }
}

/// Builds libpulse's `PULSE_PROP` value (space-separated `key=value`, values in double quotes).
public enum PulseProp {
    /// The client property that carries the capture purpose.
    public static let purposeKey = "application.capture.purpose"

    /// `key="value"` with `\` and `"` escaped, as `pa_proplist_from_string` reads it.
    public static func pair(_ key: String, _ value: String) -> String {
        var quoted = ""
        for ch in value {
            if ch == "\\" || ch == "\"" { quoted.append("\\") }
            quoted.append(ch)
        }
        return "\(key)=\"\(quoted)\""
    }

    /// `existing` (the caller's PULSE_PROP, if any) with `key="value"` appended.
    public static func appending(_ key: String, _ value: String, to existing: String?) -> String {
        let p = pair(key, value)
        guard let existing, !existing.allSatisfy(\.isWhitespace) else { return p }
        return existing + " " + p
    }
}

/// Left-aligned text tables with two spaces between columns.
public struct TextTable: Sendable {
    public var header: [String]
    public var rows: [[String]] = []

    public init(_ header: [String]) { self.header = header }

    /// Appends one row (missing cells print empty).
    public mutating func add(_ row: [String]) { rows.append(row) }

    /// The table as lines ending in "\n"; the last column is not padded.
    public func render() -> String {
        let all = ([header] + rows).map { $0.map(ClientFormat.printable) }
        let columns = all.map(\.count).max() ?? 0
        var widths = Array(repeating: 0, count: columns)
        for row in all {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        var out = ""
        for row in all {
            var line = ""
            for i in 0..<columns {
                let cell = i < row.count ? row[i] : ""
                if i == columns - 1 {
                    line += cell
                } else {
                    line += cell + String(repeating: " ", count: widths[i] - cell.count + 2)
                }
            }
            while line.hasSuffix(" ") { line.removeLast() }
            out += line + "\n"
        }
        return out
    }
}

/// Human-readable renderings of control-protocol payloads.
public enum ClientFormat {
    /// "3d 4h", "1h 02m", "5m 07s", "42s".
    public static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.isFinite ? seconds : 0))
        let d = s / 86400, h = (s % 86400) / 3600, m = (s % 3600) / 60, sec = s % 60
        if d > 0 { return "\(d)d \(h)h" }
        if h > 0 { return "\(h)h " + two(m) + "m" }
        if m > 0 { return "\(m)m " + two(sec) + "s" }
        return "\(sec)s"
    }

    /// "1.5 MiB", "512 B".
    public static func bytes(_ n: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n)
        var u = 0
        while v >= 1024 && u < units.count - 1 {
            v /= 1024
            u += 1
        }
        if u == 0 { return "\(n) B" }
        return String(format: "%.1f %@", v, units[u])
    }

    /// A UTC-free local timestamp "YYYY-MM-DD HH:MM" for a time since 1970, or "-".
    public static func date(_ seconds: Double?, timeZone: TimeZone = .current) -> String {
        TextFormat.date(seconds, timeZone: timeZone)
    }

    /// A time of day "HH:MM:SS".
    public static func clock(_ seconds: Double, timeZone: TimeZone = .current) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = timeZone
        f.dateFormat = "HH:mm:ss"
        return f.string(from: Date(timeIntervalSince1970: seconds))
    }

    /// Cuts a string to `max` characters, marking the cut with "…", and flattens newlines.
    public static func cell(_ s: String?, max: Int = 60) -> String { TextFormat.cell(s, max: max) }

    private static func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }

    /// `s` safe to print on a terminal: every control character (C0 including
    /// newline and tab, DEL, C1) and every bidirectional override is shown as
    /// `\xNN` or `\u{NNNN}`, so a name or path an app chose can neither move
    /// the cursor, recolour the screen, nor forge a line of output.
    public static func printable(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: needsEscape) else { return s }
        var out = ""
        for u in s.unicodeScalars {
            if !needsEscape(u) {
                out.unicodeScalars.append(u)
            } else if u.value < 0x100 {
                out += "\\x" + String(u.value, radix: 16, uppercase: true).leftPadded(to: 2)
            } else {
                out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }

    private static func needsEscape(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0..<0x20, 0x7F..<0xA0: true // C0, DEL, C1
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true // bidi marks, embeddings, overrides, isolates
        case 0x2028, 0x2029: true // line and paragraph separators
        default: false
        }
    }

    /// How the audio threads run, e.g. "real-time (SCHED_RR priority 5, via RealtimeKit), 2 threads".
    static func audioThreads(_ a: AudioThreadsInfo) -> String {
        var what: String
        switch a.scheduling {
        case "realtime": what = "real-time (\(a.policy) priority \(a.priority ?? 0)"
        case "high-priority": what = "high priority (nice \(a.nice ?? 0)"
        default: what = "normal scheduling (\(a.policy)" + (a.nice.map { $0 == 0 ? "" : ", nice \($0)" } ?? "")
        }
        what += (a.via.map { ", via \($0)" } ?? "") + "), \(a.threads) thread\(a.threads == 1 ? "" : "s")"
        return what + (a.note.map { "; \($0)" } ?? "")
    }

    /// "gating 3 clients", or why native PipeWire clients are not gated.
    static func pipeWire(_ p: PipeWireInfo) -> String {
        let now =
            p.gating
            ? "gating \(p.clients) client\(p.clients == 1 ? "" : "s") (\(p.socket))"
            : "not gating: \(p.reason ?? "not connected") (\(p.socket))"
        return now + (cutText(p).map { "; \($0)" } ?? "")
    }

    /// "cut 2 times, last at 10:41:07: REASON", or nil for a gate never cut.
    static func cutText(_ p: PipeWireInfo) -> String? {
        guard let cuts = p.cuts, cuts > 0 else { return nil }
        let when = p.lastCutAt.map { " at \(clock($0))" } ?? ""
        return "cut \(cuts == 1 ? "once" : "\(cuts) times"), last\(when): \(p.lastCut ?? "unknown")"
    }

    /// The `earmuff status` report.
    public static func status(_ s: StatusPayload) -> String {
        var out = ""
        var info = TextTable(["", ""])
        info.rows = [
            ["daemon", "pid \(s.daemon.pid), version \(s.daemon.version), up \(duration(s.daemon.uptimeSeconds))"],
            ["listen", s.daemon.listenPath],
            ["control", s.daemon.controlPath],
            ["store", s.daemon.storePath],
            ["upstream", "\(s.upstream.server) (\(s.upstream.reachable ? "reachable" : "unreachable"))"],
        ]
        if let p = s.pipewire { info.rows.append(["pipewire", pipeWire(p)]) }
        if let a = s.daemon.audioThreads { info.rows.append(["audio", audioThreads(a)]) }
        out += info.render().split(separator: "\n", omittingEmptySubsequences: true).map { $0 + "\n" }.joined()
        for a in s.access ?? [] where !a.enabled { out += accessLine(a) + "\n" }

        out += "\nclients: \(s.clients.count)\n"
        if !s.clients.isEmpty {
            var t = TextTable(["ID", "APP", "NAME", "PID", "IDENTIFIED"])
            for c in s.clients {
                t.add([
                    String(c.id), c.appKey, cell(c.shownName, max: 30), c.pid.map(String.init) ?? "-",
                    c.identifiedBy + (PromptWording.strengthLabel(c.strength).map { ", \($0)" } ?? ""),
                ])
            }
            out += t.render()
        }
        out += "\ncapture streams: \(s.streams.count)\n"
        if !s.streams.isEmpty {
            var t = TextTable(["CLIENT", "STREAM", "APP", "KIND", "SOURCE", "SPEC", "AUDIO", "REAL", "SILENCED"])
            for st in s.streams {
                t.add([
                    String(st.client), String(st.stream), st.appKey, st.kind?.rawValue ?? unknownKind, cell(st.source, max: 40), st.sampleSpec,
                    st.audio.rawValue, bytes(st.bytesReal), bytes(st.bytesSilenced),
                ])
            }
            out += t.render()
        }
        if let temporary = s.temporary, !temporary.isEmpty {
            out += "\ntemporary decisions: \(temporary.count)\n"
            var t = TextTable(["APP", "KIND", "STATE", "LASTS", "THEN"])
            for a in temporary {
                t.add([a.key, (a.kind ?? .microphone).rawValue, "\(a.state) (\(a.reason))", lasts(a) ?? "-", a.afterwards?.rawValue ?? "-"])
            }
            out += t.render()
        }
        out += "\npending prompts: \(s.prompts.count)\n"
        if !s.prompts.isEmpty {
            var t = TextTable(["PROMPT", "APP", "KIND", "NAME", "PID", "SOURCE", "PURPOSE"])
            for p in s.prompts {
                t.add([
                    String(p.id), p.appKey, PromptWording.kind(p).rawValue, cell(PromptWording.name(p), max: 30), p.pid.map(String.init) ?? "-",
                    cell(p.source, max: 40), cell(p.purpose),
                ])
            }
            out += t.render()
        }
        if let waiting = s.waiting, !waiting.isEmpty {
            out += "\nwaiting for a prompt (silenced; decide them with earmuff grant or deny): \(waiting.count)\n"
            var t = TextTable(["APP", "KIND", "NAME", "UID", "SOURCE", "SINCE"])
            for w in waiting {
                t.add([
                    w.appKey, w.kind.rawValue, cell(w.shownName, max: 30), String(w.uid), cell(w.source, max: 40),
                    ClientFormat.date(w.since),
                ])
            }
            out += t.render()
        }
        return out
    }

    /// The `earmuff apps` table.
    public static func apps(_ apps: [AppInfo], timeZone: TimeZone = .current) -> String {
        if apps.isEmpty { return "no known apps\n" }
        var t = TextTable(["APP", "KIND", "NAME", "STATE", "REASON", "IDENTIFIED", "LAST USED", "PURPOSE", "EXECUTABLE"])
        for a in apps {
            t.add([
                a.key, (a.kind ?? .microphone).rawValue, cell(a.shownName, max: 30), state(a, timeZone: timeZone), a.reason.rawValue,
                a.identifiedBy.map { $0.rawValue + (PromptWording.strengthLabel(a.strength).map { ", \($0)" } ?? "") } ?? "-",
                date(a.lastUsed, timeZone: timeZone), cell(a.purpose, max: 50), cell(a.executable, max: 50),
            ])
        }
        return t.render()
    }

    /// How long a decision lasts, for tables: "this session", "until 2026-11-30 14:05", "once";
    /// nil for a lasting one.
    public static func lasts(_ a: AppInfo, timeZone: TimeZone = .current) -> String? {
        switch a.lifespan {
        case .session?: "this session"
        case .once?: "once"
        case .timed?: "until " + date(a.expiresAt, timeZone: timeZone)
        case .always?, nil: nil
        }
    }

    /// The state with its lifespan and what follows it: "granted until 2026-11-30 14:05, then undetermined".
    public static func state(_ a: AppInfo, timeZone: TimeZone = .current) -> String {
        guard let lasts = lasts(a, timeZone: timeZone) else { return a.state.rawValue }
        return "\(a.state) \(lasts)" + (a.afterwards.map { ", then \($0)" } ?? "")
    }

    /// One line for `grant`/`deny`/`reset`: "exe:/usr/bin/pacat (parecord, identified by exe): microphone granted (user)",
    /// with its lifespan when it is not lasting: "microphone granted this session (user), then undetermined".
    public static func decision(_ a: AppInfo, timeZone: TimeZone = .current) -> String {
        // The app's name when it says more than its key does (pw-record for exe:/usr/bin/pw-cat).
        let byKey = AppNameResolver.shownName(appKey: a.key, systemName: nil, commandName: nil, executable: nil)
        let details = [
            a.shownName == byKey ? nil : cell(a.shownName, max: 40),
            a.identifiedBy.map { "identified by \($0)" },
        ].compactMap { $0 }
        let name = details.isEmpty ? "" : " (\(details.joined(separator: ", ")))"
        let lasting = lasts(a, timeZone: timeZone)
        let then = lasting != nil ? (a.afterwards.map { ", then \($0)" } ?? "") : ""
        let span = lasting.map { " " + $0 } ?? ""
        return printable("\(a.key)\(name): \(a.kind ?? .microphone) \(a.state)\(span) (\(a.reason))\(then)") + "\n"
    }

    /// What status shows for a stream whose source is not known yet (it is silenced).
    static let unknownKind = "unknown"

    /// The `earmuff log` table.
    public static func usage(_ sessions: [UsageInfo], timeZone: TimeZone = .current) -> String {
        if sessions.isEmpty { return "no capture sessions\n" }
        func seconds(_ s: Double?) -> String { s.map { String(format: "%.1f s", $0) } ?? "-" }
        var t = TextTable(["APP", "KIND", "SOURCE", "START", "END", "REAL", "SILENCED", "DECISION"])
        for u in sessions {
            let end = u.endedAt.map { clock($0, timeZone: timeZone) } ?? "live"
            t.add([
                u.appKey, u.kind, cell(u.source, max: 40), date(u.startedAt, timeZone: timeZone) + clock(u.startedAt, timeZone: timeZone).dropFirst(5),
                end, seconds(u.realSeconds), seconds(u.silencedSeconds), cell(u.decision),
            ])
        }
        return t.render()
    }

    /// The prompt as an agent shows it, several lines.
    public static func prompt(_ p: PromptInfo) -> String {
        var t = TextTable(["", ""])
        t.rows = [
            ["app", cell(PromptWording.name(p), max: 60)],
            ["calls itself", p.displayName.map { cell($0, max: 60) } ?? "(no name given)"],
            ["key", PromptWording.identity(p)],
            ["pid", p.pid.map(String.init) ?? "-"],
            ["purpose", PromptWording.purpose(p)],
            ["source", PromptWording.device(p)],
        ]
        if let exe = p.executable {
            let link = p.commandName.map { " (\(cell($0, max: 60)) is a link to it)" } ?? ""
            t.rows.insert(["executable", exe + link], at: 3)
        }
        let body = t.render().split(separator: "\n").map { "  " + $0 + "\n" }.joined()
        return "prompt \(p.id): \(printable(PromptWording.title(p)))\n" + body
    }

    /// "microphone access: off (every app records silence of it; decisions are kept)".
    public static func accessLine(_ a: AccessInfo) -> String {
        a.enabled
            ? "\(a.kind) access: on (each app as decided)"
            : "\(a.kind) access: off (every app records silence of it; decisions are kept)"
    }

    /// One line per event for `earmuff watch`.
    public static func event(_ e: ControlEvent, at time: Double, timeZone: TimeZone = .current) -> String {
        let stamp = clock(time, timeZone: timeZone)
        let text: String
        switch e {
        case .clientConnected(let c):
            text =
                "client \(c.id) \(c.appKey) (\(cell(c.shownName, max: 40)), pid \(c.pid.map(String.init) ?? "-"), by \(c.identifiedBy)\(PromptWording.strengthLabel(c.strength).map { ", \($0)" } ?? ""))"
        case .clientDisconnected(let c):
            text = "client \(c.id) \(c.appKey)"
        case .streamStarted(let s):
            text = "client \(s.client) stream \(s.stream) \(s.appKey) \(s.kind?.rawValue ?? unknownKind) from \(s.source) \(s.sampleSpec) \(s.audio.rawValue)"
        case .streamChanged(let s):
            text = "client \(s.client) stream \(s.stream) \(s.appKey) \(s.kind?.rawValue ?? unknownKind) from \(s.source) now \(s.audio.rawValue)"
        case .streamEnded(let s):
            text = "client \(s.client) stream \(s.stream) \(s.appKey) real \(bytes(s.bytesReal)), silenced \(bytes(s.bytesSilenced))"
        case .promptRaised(let p):
            text =
                "prompt \(p.id) \(p.appKey) \(PromptWording.kind(p)) (\(cell(PromptWording.name(p), max: 40)), pid \(p.pid.map(String.init) ?? "-")) purpose: \(p.purpose.map { cell($0) } ?? PromptWording.noReason)"
        case .promptResolved(let r):
            text = "prompt \(r.prompt) \(r.appKey) \(r.outcome.rawValue)" + (r.by.map { " by \($0)" } ?? "")
        case .decisionChanged(let a):
            text = "\(a.key) \(a.kind ?? .microphone) \(state(a, timeZone: timeZone)) (\(a.reason))"
        case .accessChanged(let a):
            text = accessLine(a)
        }
        return "\(stamp)  \(e.name.padding(toLength: 19, withPad: " ", startingAt: 0)) \(printable(text))\n"
    }
}

extension String {
    /// The string with zeros in front, to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
