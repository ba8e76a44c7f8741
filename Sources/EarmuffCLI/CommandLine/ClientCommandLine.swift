// The `earmuff` client command line, parsed as a pure function.
//
// Each client subcommand maps onto control-protocol requests, so its parsing
// is a pure function, tested without a process:
// `ClientCommandLine.parse(arguments)` returns a `ClientCommand` or a
// `UsageError` (stderr, exit 64). `serve` is passed through untouched; the
// daemon parses its own options.
import Consent
import ControlProtocol
import Wording

/// Options every client subcommand shares.
public struct ClientOptions: Sendable, Equatable {
    /// `--control PATH`; nil means the default path.
    public var controlPath: String?
    /// `--json`: machine-readable output.
    public var json: Bool

    public init(controlPath: String? = nil, json: Bool = false) {
        self.controlPath = controlPath
        self.json = json
    }
}

/// A parsed `earmuff` command line.
public enum ClientCommand: Sendable, Equatable {
    /// Print usage to stdout and exit 0; `topic` is a subcommand name or nil for the overview.
    case help(topic: String?)
    /// Print the version.
    case version
    /// `earmuff serve ARGS...`, passed to the daemon's own parser.
    case serve(arguments: [String])
    /// `earmuff setup ARGS...`, passed to setup's own parser.
    case setup(arguments: [String])
    case status(ClientOptions)
    case apps(ClientOptions)
    /// `grant APP` / `deny APP`, with `--kind K` (nil: microphone) and `--once`, `--session`,
    /// `--for D` or `--always` (nil: none given, always).
    case setDecision(
        app: String, state: DecisionState, kind: Capability? = nil, ClientOptions,
        lifespan: RequestedLifespan? = nil)
    /// `reset APP [--kind K]`.
    case reset(app: String, kind: Capability? = nil, ClientOptions)
    /// `access on|off [--kind K]`: the master switch of a capture kind.
    case access(enabled: Bool, kind: Capability, ClientOptions)
    /// `agent [--answer A] [--once|--session|--for D|--always]`.
    case agent(answer: PromptAnswer?, ClientOptions, lifespan: RequestedLifespan? = nil)
    /// `run [--sandbox ...] [--app-id ID] [--purpose TEXT] [--listen PATH] -- COMMAND ARGS...`.
    case run(RunOptions)
    case watch(ClientOptions)
    /// `log [--app APP] [--since TIME]`: `since` as typed (see `SinceTime`), checked at parse time.
    case log(app: String?, since: String?, ClientOptions)
    /// `doctor [--json]`: check the session.
    case doctor(ClientOptions)
    /// `generate-manual [--config-example FILE] DIRECTORY` (packaging).
    case generateManual(directory: String, configExample: String?)
    /// `generate-units DIRECTORY` (packaging).
    case generateUnits(directory: String)
    /// `generate-completion SHELL` (packaging).
    case generateCompletion(shell: String)
}

/// What `earmuff run` was asked to do.
public struct RunOptions: Sendable, Equatable {
    public var appID: String?
    public var purpose: String?
    /// `--listen PATH`: the daemon's client socket; nil means the default.
    public var listenPath: String?
    public var controlPath: String?
    /// `--sandbox` and its options; nil runs the command unconfined.
    public var sandbox: SandboxOptions?
    /// The command and its arguments.
    public var command: [String]

    public init(
        appID: String? = nil, purpose: String? = nil, listenPath: String? = nil, controlPath: String? = nil,
        sandbox: SandboxOptions? = nil, command: [String]
    ) {
        self.appID = appID
        self.purpose = purpose
        self.listenPath = listenPath
        self.controlPath = controlPath
        self.sandbox = sandbox
        self.command = command
    }
}

/// A command-line mistake: printed to stderr with a hint, exit 64.
public struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// One line naming the mistake and the fix.
    public var message: String
    /// The subcommand whose usage applies, or nil for the overview.
    public var subcommand: String?

    public init(_ message: String, subcommand: String?) {
        self.message = message
        self.subcommand = subcommand
    }

    public var description: String { message }
}

/// Parses `earmuff` arguments (without the program name).
public enum ClientCommandLine {
    /// What `--kind` accepts: the capture kinds decided separately.
    public static let captureKinds = Capability.allCases.map(\.rawValue)

    /// The subcommands, in the order of CommandTable.
    public static var subcommands: [String] { CommandTable.subcommands.map(\.name) }

    /// The shells `generate-completion` writes for.
    public static let shells = ["bash", "zsh", "fish"]

    /// Parses the arguments after the program name.
    public static func parse(_ arguments: [String]) -> Result<ClientCommand, UsageError> {
        do {
            return .success(try parseThrowing(arguments))
        } catch {
            return .failure(error)
        }
    }

    private static func parseThrowing(_ arguments: [String]) throws(UsageError) -> ClientCommand {
        guard let first = arguments.first else {
            throw UsageError("no subcommand given; run 'earmuff --help' for the list", subcommand: nil)
        }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "-h", "--help":
            return .help(topic: nil)
        case "help":
            guard let topic = rest.first else { return .help(topic: nil) }
            guard subcommands.contains(topic) else {
                throw UsageError("no help for unknown subcommand '\(topic)'; run 'earmuff --help' for the list", subcommand: nil)
            }
            return .help(topic: topic)
        case "-V", "--version", "version":
            return .version
        case "serve":
            return .serve(arguments: rest)
        case "setup":
            return .setup(arguments: rest)
        case "status", "apps", "watch", "doctor":
            var p = OptionParser(rest, subcommand: first)
            let options = try p.commonOptions(json: true)
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(0)
            switch first {
            case "status": return .status(options)
            case "apps": return .apps(options)
            case "doctor": return .doctor(options)
            default: return .watch(options)
            }
        case "generate-manual":
            var p = OptionParser(rest, subcommand: first)
            var example: String?
            _ = try p.commonOptions(json: false) { name, p throws(UsageError) in
                guard name == "--config-example" else { return false }
                example = try p.value(for: name)
                return true
            }
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(1)
            guard let dir = p.positionals.first, !dir.isEmpty else {
                throw UsageError("'earmuff generate-manual' needs the directory to write the pages into", subcommand: first)
            }
            return .generateManual(directory: dir, configExample: example)
        case "generate-units":
            var p = OptionParser(rest, subcommand: first)
            _ = try p.commonOptions(json: false)
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(1)
            guard let dir = p.positionals.first, !dir.isEmpty else {
                throw UsageError("'earmuff generate-units' needs the directory to write the units into", subcommand: first)
            }
            return .generateUnits(directory: dir)
        case "generate-completion":
            var p = OptionParser(rest, subcommand: first)
            _ = try p.commonOptions(json: false)
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(1)
            guard let shell = p.positionals.first, Self.shells.contains(shell) else {
                throw UsageError(
                    "'earmuff generate-completion' takes \(Self.shells.joined(separator: ", ")), not '\(p.positionals.first ?? "")'", subcommand: first)
            }
            return .generateCompletion(shell: shell)
        case "access":
            var p = OptionParser(rest, subcommand: first)
            var kind = Capability.microphone
            let options = try p.commonOptions(json: true) { name, p throws(UsageError) in
                guard name == "--kind" else { return false }
                kind = try p.captureKind(for: name)
                return true
            }
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(1)
            guard let word = p.positionals.first, word == "on" || word == "off" else {
                throw UsageError("'earmuff access' takes on or off, not '\(p.positionals.first ?? "")'", subcommand: first)
            }
            return .access(enabled: word == "on", kind: kind, options)
        case "grant", "deny", "reset":
            var p = OptionParser(rest, subcommand: first)
            var lifespan = LifespanOption(subcommand: first)
            var kind: Capability?
            let options = try p.commonOptions(json: true) { name, p throws(UsageError) in
                if name == "--kind" {
                    kind = try p.captureKind(for: name)
                    return true
                }
                guard first != "reset" else { return false }
                return try lifespan.take(name, &p)
            }
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(1)
            guard let app = p.positionals.first else {
                throw UsageError("'earmuff \(first)' needs an app (an app key such as exe:/usr/bin/parecord, or a known app's name)", subcommand: first)
            }
            guard !app.isEmpty else { throw UsageError("the app name is empty; give an app key or a known app's name", subcommand: first) }
            switch first {
            case "grant": return .setDecision(app: app, state: .granted, kind: kind, options, lifespan: lifespan.value)
            case "deny": return .setDecision(app: app, state: .denied, kind: kind, options, lifespan: lifespan.value)
            default: return .reset(app: app, kind: kind, options)
            }
        case "log":
            var p = OptionParser(rest, subcommand: first)
            var app: String?
            var since: String?
            let options = try p.commonOptions(json: true) { name, p throws(UsageError) in
                switch name {
                case "--app":
                    app = try p.value(for: name)
                case "--since":
                    let value = try p.value(for: name)
                    guard SinceTime.parse(value, now: 0) != nil else {
                        throw UsageError("--since takes \(SinceTime.help), not '\(value)'", subcommand: "log")
                    }
                    since = value
                default:
                    return false
                }
                return true
            }
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(0)
            return .log(app: app, since: since, options)
        case "agent":
            var p = OptionParser(rest, subcommand: first)
            var answer: PromptAnswer?
            var lifespan = LifespanOption(subcommand: first)
            let options = try p.commonOptions(json: true) { name, p throws(UsageError) in
                if try lifespan.take(name, &p) { return true }
                guard name == "--answer" else { return false }
                let value = try p.value(for: name)
                guard let a = PromptAnswer(rawValue: value) else {
                    throw UsageError("--answer takes allow, once or deny, not '\(value)'", subcommand: "agent")
                }
                answer = a
                return true
            }
            if p.wantsHelp { return .help(topic: first) }
            try p.expectNoPositionals(0)
            if lifespan.value != nil && answer == nil {
                throw UsageError(
                    "\(lifespan.given ?? "a lifespan") goes with --answer allow or deny; typed answers take it after the letter, e.g. 'a 2h'",
                    subcommand: "agent")
            }
            if answer == .once, let given = lifespan.given {
                throw UsageError("--answer once lasts until the app's clients disconnect; drop \(given), or answer allow \(given)", subcommand: "agent")
            }
            return .agent(answer: answer, options, lifespan: lifespan.value)
        case "run":
            return try parseRun(rest)
        default:
            if first.hasPrefix("-") {
                throw UsageError("unknown option '\(first)'; a subcommand comes first, run 'earmuff --help' for the list", subcommand: nil)
            }
            throw UsageError("unknown subcommand '\(first)'; run 'earmuff --help' for the list", subcommand: nil)
        }
    }

    private static func parseRun(_ arguments: [String]) throws(UsageError) -> ClientCommand {
        var options = RunOptions(command: [])
        var sandbox = SandboxOptions()
        var sandboxed = false
        var sandboxOnly: [String] = []
        var homes: [String] = []
        var i = 0
        func value(_ name: String) throws(UsageError) -> String {
            guard i + 1 < arguments.count else {
                throw UsageError("\(name) needs a value", subcommand: "run")
            }
            i += 1
            return arguments[i]
        }
        while i < arguments.count {
            let arg = arguments[i]
            var name = arg
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            func take() throws(UsageError) -> String {
                if let v = inline { return v }
                return try value(name)
            }
            if name.hasPrefix("-") && name != "--" && CommandTable.known("run").option(name) == nil {
                throw UsageError("unknown option '\(arg)' for 'earmuff run'; put the command after '--'", subcommand: "run")
            }
            switch name {
            case "--":
                options.command = Array(arguments[(i + 1)...])
                i = arguments.count
                continue
            case "-h", "--help":
                return .help(topic: "run")
            case "--app-id":
                let v = try take()
                guard isValidAppID(v) else {
                    throw UsageError("--app-id '\(v)' is not a valid app id; use letters, digits, '.', '-' and '_' (e.g. org.example.Notes)", subcommand: "run")
                }
                options.appID = v
            case "--purpose":
                let v = try take()
                guard !v.isEmpty else { throw UsageError("--purpose is empty; say why the app records, e.g. --purpose 'voice notes'", subcommand: "run") }
                options.purpose = v
            case "--listen":
                options.listenPath = try take()
            case "--control":
                options.controlPath = try take()
            case "--sandbox":
                sandboxed = true
            case "--share-home":
                sandbox.home = .shared
                homes.append(name)
            case "--home":
                let v = try take()
                guard v.hasPrefix("/") else {
                    throw UsageError("--home takes an absolute directory, not '\(v)'; e.g. --home \"$HOME/sandboxes/notes\"", subcommand: "run")
                }
                sandbox.home = .directory(v)
                homes.append(name)
            case "--net":
                sandbox.network = true
            case "--dbus":
                sandbox.sessionBus = true
            case "--dry-run":
                sandbox.dryRun = true
            default:
                if arg.hasPrefix("-") {
                    throw UsageError("unknown option '\(arg)' for 'earmuff run'; put the command after '--'", subcommand: "run")
                }
                // The first word that is not an option starts the command.
                options.command = Array(arguments[i...])
                i = arguments.count
                continue
            }
            if SandboxOptions.names.contains(name) { sandboxOnly.append(name) }
            i += 1
        }
        guard !options.command.isEmpty else {
            throw UsageError("'earmuff run' needs a command after '--', e.g. earmuff run -- parecord out.wav", subcommand: "run")
        }
        if sandboxed {
            guard homes.count <= 1 else {
                throw UsageError("\(homes.joined(separator: " and ")) both choose the home; give one of --share-home and --home DIR", subcommand: "run")
            }
            guard options.listenPath == nil else {
                throw UsageError("--listen does not apply to --sandbox (the sandbox gets a launcher socket of its own); leave it out", subcommand: "run")
            }
            options.sandbox = sandbox
        } else if let first = sandboxOnly.first {
            throw UsageError("\(first) applies only to a sandbox; add --sandbox, e.g. earmuff run --sandbox \(first) -- COMMAND", subcommand: "run")
        }
        return .run(options)
    }

    /// True for a launcher app id: 1-255 characters of letters, digits, '.', '-', '_', not starting with '.' or '-'.
    public static func isValidAppID(_ id: String) -> Bool {
        guard let first = id.unicodeScalars.first, id.utf8.count <= 255, first != ".", first != "-" else { return false }
        return id.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "." || s == "-" || s == "_"
        }
    }
}

/// `--once`, `--session`, `--for DURATION`, `--always`: at most one of them.
struct LifespanOption {
    let subcommand: String
    /// The lifespan given, if any.
    var value: RequestedLifespan?
    /// The option as typed, for messages.
    var given: String?

    init(subcommand: String) { self.subcommand = subcommand }

    /// Takes `name` if it is a lifespan option; returns whether it was.
    mutating func take(_ name: String, _ p: inout OptionParser) throws(UsageError) -> Bool {
        let span: RequestedLifespan
        var typed = name
        switch name {
        case "--once": span = .once
        case "--session": span = .session
        case "--always": span = .always
        case "--for":
            let text = try p.value(for: name)
            guard let seconds = DurationText.parse(text) else {
                throw UsageError("--for takes \(DurationText.help), not '\(text)'", subcommand: subcommand)
            }
            span = .timed(seconds: seconds)
            typed = "--for \(text)"
        default:
            return false
        }
        if let given, given != typed {
            throw UsageError("\(given) and \(typed) contradict each other; give one of --once, --session, --for DURATION, --always", subcommand: subcommand)
        }
        value = span
        given = typed
        return true
    }
}

/// Option scanning shared by the client subcommands: `--control PATH`, `--control=PATH`, `--json`, `--help`.
struct OptionParser {
    let arguments: [String]
    let subcommand: String
    var index = 0
    var positionals: [String] = []
    var wantsHelp = false
    private var inlineValue: String?

    init(_ arguments: [String], subcommand: String) {
        self.arguments = arguments
        self.subcommand = subcommand
    }

    /// The value of the option being parsed (inline after '=' or the next argument).
    /// The value of `--kind`: one of `ClientCommandLine.captureKinds`.
    mutating func captureKind(for name: String) throws(UsageError) -> Capability {
        let value = try value(for: name)
        guard let kind = Capability(rawValue: value) else {
            throw UsageError(
                "\(name) takes \(ClientCommandLine.captureKinds.joined(separator: ", ")), not '\(value)'",
                subcommand: subcommand)
        }
        return kind
    }

    mutating func value(for name: String) throws(UsageError) -> String {
        if let v = inlineValue {
            inlineValue = nil
            return v
        }
        guard index + 1 < arguments.count else {
            throw UsageError("\(name) needs a value", subcommand: subcommand)
        }
        index += 1
        return arguments[index]
    }

    /// Scans all arguments; `extra` handles subcommand-specific options and returns whether it did.
    mutating func commonOptions(
        json allowsJSON: Bool,
        extra: (String, inout OptionParser) throws(UsageError) -> Bool = { _, _ in false }
    ) throws(UsageError) -> ClientOptions {
        var options = ClientOptions()
        var onlyPositionals = false
        while index < arguments.count {
            let arg = arguments[index]
            if onlyPositionals || !arg.hasPrefix("-") || arg == "-" {
                positionals.append(arg)
                index += 1
                continue
            }
            var name = arg
            inlineValue = nil
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inlineValue = String(arg[arg.index(after: eq)...])
            }
            if name != "--" && CommandTable.spec(subcommand)?.option(name) == nil {
                throw UsageError("unknown option '\(arg)' for 'earmuff \(subcommand)'; run 'earmuff \(subcommand) --help'", subcommand: subcommand)
            }
            switch name {
            case "--":
                onlyPositionals = true
            case "-h", "--help":
                wantsHelp = true
            case "--json" where allowsJSON && inlineValue == nil:
                options.json = true
            case "--control":
                let v = try value(for: name)
                guard !v.isEmpty else { throw UsageError("--control needs a socket path", subcommand: subcommand) }
                options.controlPath = v
            default:
                if try !extra(name, &self) {
                    throw UsageError("unknown option '\(arg)' for 'earmuff \(subcommand)'; run 'earmuff \(subcommand) --help'", subcommand: subcommand)
                }
            }
            if inlineValue != nil {
                throw UsageError("option '\(name)' takes no value", subcommand: subcommand)
            }
            index += 1
        }
        return options
    }

    /// Throws when more than `max` positional arguments were given.
    func expectNoPositionals(_ max: Int) throws(UsageError) {
        if positionals.count > max {
            let extra = positionals[max]
            throw UsageError("unexpected argument '\(extra)' for 'earmuff \(subcommand)'; run 'earmuff \(subcommand) --help'", subcommand: subcommand)
        }
    }
}
