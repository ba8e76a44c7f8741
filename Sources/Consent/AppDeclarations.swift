// apps.d/*.conf: what an administrator or the user declares about an app
// (its purpose, its decision per capture kind), parsed from text with the
// same syntax and error style as earmuff.conf (Configuration.swift).

/// What an apps.d file declares about one app.
public struct AppDeclaration: Sendable, Equatable {
    /// The purpose string shown in prompts.
    public var purpose: String?
    /// Site policy per capture kind (`granted` or `denied`, reason `admin-policy`); a kind
    /// not listed is the user's to decide.
    public var decisions: [Capability: PermissionState]

    /// The microphone's policy (`decision =`).
    public var decision: PermissionState? {
        get { decisions[.microphone] }
        set { decisions[.microphone] = newValue }
    }

    public init(purpose: String? = nil, decision: PermissionState? = nil, decisions: [Capability: PermissionState] = [:]) {
        self.purpose = purpose
        self.decisions = decisions
        if let decision { self.decisions[.microphone] = decision }
    }

    /// The key that sets each kind's policy: `decision` for the microphone (as before kinds were
    /// told apart), `system-audio-decision`, `app-audio-decision`.
    public static func decisionKey(_ kind: Capability) -> String {
        kind == .microphone ? "decision" : "\(kind.rawValue)-decision"
    }

    /// Keys a declaration section accepts.
    public static let keys = ["purpose"] + Capability.allCases.map(decisionKey)

    /// App key kinds a declaration may name.
    public static let kinds = ["flatpak", "snap", "systemd", "launcher", "script", "exe"]

    /// `other`'s fields replacing this one's where `other` sets them.
    public func merging(_ other: AppDeclaration) -> AppDeclaration {
        AppDeclaration(purpose: other.purpose ?? purpose, decisions: decisions.merging(other.decisions) { _, new in new })
    }

    /// Parses one apps.d file: `[kind:value]` sections of `purpose =` and `decision =` lines
    /// (and `system-audio-decision =`, `app-audio-decision =`).
    public static func parse(text: String, file: String) throws(ConfigError) -> [AppKey: AppDeclaration] {
        var result: [AppKey: AppDeclaration] = [:]
        var current: AppKey?
        for (number, line) in ConfigLexer.lines(text) {
            func fail(_ message: String) -> ConfigError { ConfigError(file: file, line: number, message: message) }
            switch try ConfigLexer.classify(line, file: file, number: number) {
            case .blank:
                continue
            case let .section(name):
                guard let key = AppKey(parsing: name) else {
                    throw fail("[\(name)] is not an app key; write [kind:value], e.g. [exe:/usr/bin/arecord] or [flatpak:org.example.App]")
                }
                guard kinds.contains(key.kind) else {
                    throw fail("unknown app kind \"\(key.kind)\" in [\(name)]\(suggestion(key.kind, among: kinds)) (kinds: \(kinds.joined(separator: ", ")))")
                }
                if key.kind == "exe", !key.value.hasPrefix("/") {
                    throw fail("[\(name)] must name the executable by its absolute path, e.g. [exe:/usr/bin/arecord]")
                }
                current = key
                result[key] = result[key] ?? AppDeclaration()
            case let .setting(name, rawValue):
                guard let app = current else {
                    throw fail("\"\(name) =\" comes before any [app-key] section; start with a line like [exe:/usr/bin/arecord]")
                }
                guard keys.contains(name) else { throw fail(unknownKeyMessage(name, known: keys)) }
                let value = ConfigLexer.unquote(rawValue)
                var d = result[app] ?? AppDeclaration()
                if name == "purpose" {
                    guard !value.isEmpty else { throw fail("purpose is empty; say why \(app) records, or remove the line") }
                    d.purpose = value
                } else if let kind = Capability.allCases.first(where: { decisionKey($0) == name }) {
                    switch value {
                    case "granted": d.decisions[kind] = .granted
                    case "denied": d.decisions[kind] = .denied
                    default:
                        throw fail("\(name) must be granted or denied, not \"\(value)\" (remove the line to let the user decide)")
                    }
                }
                result[app] = d
            }
        }
        return result
    }

    /// Parses `files` in order (admin directory first, each sorted by name) and merges them; later files win.
    public static func load(_ files: [(path: String, text: String)]) throws(ConfigError) -> [AppKey: AppDeclaration] {
        var all: [AppKey: AppDeclaration] = [:]
        for f in files {
            for (key, d) in try parse(text: f.text, file: f.path) {
                all[key] = (all[key] ?? AppDeclaration()).merging(d)
            }
        }
        return all
    }
}
