// Configuration: earmuff.conf and apps.d/*.conf, parsed from text.
//
// The proxy reads the files (admin `/etc/earmuff/...` first, then the user's
// `$XDG_CONFIG_HOME/earmuff/...`) and passes their text here; later files
// override earlier ones key by key. Syntax is PulseAudio's `key = value`
// (daemon.conf, client.conf): blank lines, whole-line `;` and `#` comments,
// and, as an extension, a `;` or `#` that follows whitespace outside quotes
// starts a trailing comment. Every error names the file, the line, what is
// wrong and how to fix it. No I/O here: the environment is passed in.

/// What to do when an undetermined app opens a record stream without a purpose string.
public enum MissingPurposeMode: String, Sendable, Equatable, CaseIterable {
    /// Close the connection (Apple's behaviour for a missing NSMicrophoneUsageDescription).
    case disconnect
    /// Store `denied` with reason `missing-purpose`; the app records silence.
    case deny
    /// Prompt anyway; the prompt shows that no purpose was given.
    case prompt
}

/// Where a prompt is shown (`prompt-via`), tried in order; the first available one shows it.
public enum PromptChannel: String, Sendable, Equatable, CaseIterable {
    /// The desktop's xdg-desktop-portal backend: `org.freedesktop.impl.portal.Access.AccessDialog`.
    case portal
    /// A desktop notification with actions (`org.freedesktop.Notifications`).
    case notification
    /// `prompt-command`, when one is configured and no agent is connected.
    case command
    /// Connected `earmuff agent`s (they get every prompt whatever comes first).
    case agent

    /// What `prompt-via = auto` means.
    public static let auto: [PromptChannel] = [.portal, .notification, .command, .agent]
}

/// A configuration problem: where it is (when it comes from a file) and what to do.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file the problem is in, if any.
    public var file: String?
    /// The 1-based line number, if any.
    public var line: Int?
    /// What is wrong and how to fix it.
    public var message: String

    public init(file: String? = nil, line: Int? = nil, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    /// `FILE:LINE: message`, or just the message when there is no location.
    public var description: String {
        switch (file, line) {
        case let (file?, line?): "\(file):\(line): \(message)"
        case let (file?, nil): "\(file): \(message)"
        default: message
        }
    }
}

/// The settings of earmuff.conf, with their documented defaults.
public struct Configuration: Sendable, Equatable {
    /// Upstream server (`unix:/path`, `/path`); empty: discover it.
    public var upstream: String = ""
    /// Client socket path, before `$VAR`/`~` expansion.
    public var listen: String = "$XDG_RUNTIME_DIR/earmuff/native"
    /// Control socket path, before expansion.
    public var control: String = "$XDG_RUNTIME_DIR/earmuff/control"
    /// Permission store path, before expansion.
    public var store: String = "$XDG_STATE_HOME/earmuff/permissions.sqlite"
    /// What happens to an undetermined app without a purpose string.
    public var missingPurpose: MissingPurposeMode = .prompt
    /// Where prompts are shown, in order of preference.
    public var promptVia: [PromptChannel] = PromptChannel.auto
    /// Seconds a prompt waits for an answer.
    public var promptTimeout: Double = 30
    /// Prompts pending at once, in all and for the apps of one uid; a capture over either
    /// waits silent, listed in status, until a prompt closes.
    public var maxPendingPrompts: Int = 16
    public var maxPendingPromptsPerUID: Int = 8
    /// Shell command (run with `/bin/sh -c`) that answers prompts when no agent is connected; empty: none.
    public var promptCommand: String = ""
    /// Whether the desktop is told, once per app and run, that an app hears the microphone.
    public var useNotices: Bool = true
    /// Apps allowed to send LOAD_MODULE, UNLOAD_MODULE and EXIT upstream.
    public var trustedApps: [AppKey] = []
    /// How much the daemon logs.
    public var logLevel: LogLevel = .info
    /// Clients Earmuff relays at once; the rest are refused. Below PulseAudio's 64 slots,
    /// so that apps through Earmuff can never take every slot of the server.
    public var maxClients: Int = RelayDefaults.maxClients
    /// Clients one app may have at once (one app cannot take every slot Earmuff has).
    public var maxClientsPerApp: Int = RelayDefaults.maxClientsPerApp
    /// The last slots of max-clients, kept for apps that have fewer than 4 clients connected.
    public var reservedClients: Int = RelayDefaults.reservedClients
    /// Seconds a client has to send AUTH and SET_CLIENT_NAME before it is disconnected.
    public var handshakeTimeout: Double = RelayDefaults.handshakeTimeout
    /// Days after which a grant that was not used goes back to undetermined; 0: never.
    public var autoResetDays: Int = 90
    /// The largest packet a client may send, in KiB; a larger one is skipped unread and
    /// answered with an error. Far below the protocol's 16 MiB: no request an app sends needs more.
    public var maxPacketKiB: Int = RelayDefaults.maxPacketKiB
    /// MiB that the large packets (over 64 KiB) being received from all clients may hold
    /// together; a packet that does not fit is skipped unread and answered with an error.
    public var packetBufferMiB: Int = RelayDefaults.packetBufferMiB
    /// SCHED_RR priority the relay's audio threads ask for (RealtimeKit, else
    /// directly); 0: never real-time. PulseAudio's own default is 5.
    public var realtimePriority: Int = RelayDefaults.realtimePriority
    /// Nice level of the audio threads when real-time is refused; 0: unchanged.
    public var niceLevel: Int = RelayDefaults.niceLevel

    /// The defaults.
    public init() {}

    /// The admin configuration file.
    public static let adminFile = "/etc/earmuff/earmuff.conf"
    /// The admin declarations directory.
    public static let adminAppsDirectory = "/etc/earmuff/apps.d"

    /// Every key earmuff.conf accepts, in documentation order.
    public static let keys = [
        "upstream", "listen", "control", "store", "missing-purpose",
        "prompt-via", "prompt-timeout", "max-pending-prompts", "max-pending-prompts-per-uid", "prompt-command", "use-notices", "trusted-apps", "log-level",
        "max-clients", "max-clients-per-app", "reserved-clients", "handshake-timeout",
        "auto-reset-days", "max-packet-kib", "packet-buffer-mib", "realtime-priority", "nice-level",
    ]

    /// The most clients any limit may allow (the descriptors they need must stay far below the process limit).
    public static let maximumClientLimit = 4096

    /// Bounds of max-packet-kib (64 KiB up to the protocol's 16 MiB) and packet-buffer-mib.
    public static let packetKiBRange = 64...16_384
    public static let packetBufferMiBRange = 1...4096

    /// The most prompts any limit may let wait at once.
    public static let maximumPendingPrompts = 1024

    /// Longest accepted handshake-timeout, in seconds.
    public static let maximumHandshakeTimeout: Double = 300

    /// Longest accepted auto-reset-days (about 27 years).
    public static let maximumAutoResetDays = 10_000

    /// Longest accepted prompt-timeout, in seconds.
    public static let maximumPromptTimeout: Double = 86_400

    /// The settings one file sets; nil: not set there.
    public struct Overrides: Sendable, Equatable {
        public var upstream: String?
        public var listen: String?
        public var control: String?
        public var store: String?
        public var missingPurpose: MissingPurposeMode?
        public var promptVia: [PromptChannel]?
        public var promptTimeout: Double?
        public var maxPendingPrompts: Int?
        public var maxPendingPromptsPerUID: Int?
        public var promptCommand: String?
        public var useNotices: Bool?
        public var trustedApps: [AppKey]?
        public var logLevel: LogLevel?
        public var maxClients: Int?
        public var maxClientsPerApp: Int?
        public var reservedClients: Int?
        public var handshakeTimeout: Double?
        public var autoResetDays: Int?
        public var maxPacketKiB: Int?
        public var packetBufferMiB: Int?
        public var realtimePriority: Int?
        public var niceLevel: Int?

        public init() {}
    }

    /// Parses one earmuff.conf; `file` is used in error messages.
    public static func parse(text: String, file: String) throws(ConfigError) -> Overrides {
        var o = Overrides()
        for (number, line) in ConfigLexer.lines(text) {
            func fail(_ message: String) -> ConfigError { ConfigError(file: file, line: number, message: message) }
            switch try ConfigLexer.classify(line, file: file, number: number) {
            case .blank:
                continue
            case .section:
                throw fail("sections like \(line.trimmingWhitespace()) belong in apps.d/*.conf; earmuff.conf takes only \"key = value\" lines")
            case let .setting(key, rawValue):
                guard keys.contains(key) else {
                    throw fail(unknownKeyMessage(key, known: keys))
                }
                // prompt-command goes to /bin/sh verbatim: its quotes are shell syntax.
                let value = key == "prompt-command" ? rawValue : ConfigLexer.unquote(rawValue)
                switch key {
                case "upstream":
                    o.upstream = value
                case "listen", "control", "store":
                    guard !value.isEmpty else { throw fail("\(key) needs a path; remove the line to use the default") }
                    guard value.hasPrefix("/") || value.hasPrefix("~/") || value.hasPrefix("$") else {
                        throw fail("\(key) must be an absolute path (it may start with ~/ or $XDG_RUNTIME_DIR), not \"\(value)\"")
                    }
                    if key == "listen" { o.listen = value }
                    if key == "control" { o.control = value }
                    if key == "store" { o.store = value }
                case "missing-purpose":
                    guard let mode = MissingPurposeMode(rawValue: value) else {
                        throw fail("missing-purpose must be disconnect, deny or prompt, not \"\(value)\"")
                    }
                    o.missingPurpose = mode
                case "prompt-via":
                    o.promptVia = try parsePromptVia(value, fail: fail)
                case "prompt-timeout":
                    guard let seconds = Double(value), seconds.isFinite, seconds > 0,
                        seconds <= maximumPromptTimeout
                    else {
                        throw fail("prompt-timeout must be a number of seconds above 0 and at most \(Int(maximumPromptTimeout)), not \"\(value)\"")
                    }
                    o.promptTimeout = seconds
                case "max-pending-prompts", "max-pending-prompts-per-uid":
                    guard let n = Int(value), n >= 1, n <= maximumPendingPrompts else {
                        throw fail("\(key) must be a whole number from 1 to \(maximumPendingPrompts), not \"\(value)\"")
                    }
                    if key == "max-pending-prompts" { o.maxPendingPrompts = n } else { o.maxPendingPromptsPerUID = n }
                case "prompt-command":
                    o.promptCommand = value
                case "use-notices":
                    switch value {
                    case "yes": o.useNotices = true
                    case "no": o.useNotices = false
                    default: throw fail("use-notices must be yes or no, not \"\(value)\"")
                    }
                case "trusted-apps":
                    var apps: [AppKey] = []
                    for word in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
                        guard let app = AppKey(parsing: String(word)) else {
                            throw fail("trusted-apps takes app keys separated by spaces (kind:value, e.g. exe:/usr/bin/pavucontrol), not \"\(word)\"")
                        }
                        apps.append(app)
                    }
                    o.trustedApps = apps
                case "log-level":
                    guard let level = LogLevel(rawValue: value) else {
                        throw fail("log-level must be error, warn, info or debug, not \"\(value)\"")
                    }
                    o.logLevel = level
                case "max-clients", "max-clients-per-app":
                    guard let n = Int(value), n >= 1, n <= maximumClientLimit else {
                        throw fail("\(key) must be a whole number from 1 to \(maximumClientLimit), not \"\(value)\"")
                    }
                    if key == "max-clients" { o.maxClients = n } else { o.maxClientsPerApp = n }
                case "reserved-clients":
                    guard let n = Int(value), n >= 0, n < maximumClientLimit else {
                        throw fail("reserved-clients must be a whole number from 0 to \(maximumClientLimit - 1), not \"\(value)\"")
                    }
                    o.reservedClients = n
                case "handshake-timeout":
                    guard let seconds = Double(value), seconds.isFinite, seconds > 0, seconds <= maximumHandshakeTimeout else {
                        throw fail("handshake-timeout must be a number of seconds above 0 and at most \(Int(maximumHandshakeTimeout)), not \"\(value)\"")
                    }
                    o.handshakeTimeout = seconds
                case "realtime-priority":
                    guard let n = Int(value), (0...99).contains(n) else {
                        throw fail("realtime-priority must be a whole number from 0 (never real-time) to 99, not \"\(value)\"")
                    }
                    o.realtimePriority = n
                case "nice-level":
                    guard let n = Int(value), (-20...0).contains(n) else {
                        throw fail("nice-level must be a whole number from -20 to 0 (unchanged), not \"\(value)\"")
                    }
                    o.niceLevel = n
                case "auto-reset-days":
                    guard let n = Int(value), n >= 0, n <= maximumAutoResetDays else {
                        throw fail("auto-reset-days must be a whole number of days from 0 (never) to \(maximumAutoResetDays), not \"\(value)\"")
                    }
                    o.autoResetDays = n
                case "max-packet-kib", "packet-buffer-mib":
                    let range = key == "max-packet-kib" ? packetKiBRange : packetBufferMiBRange
                    guard let n = Int(value), range.contains(n) else {
                        throw fail("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(value)\"")
                    }
                    if key == "max-packet-kib" { o.maxPacketKiB = n } else { o.packetBufferMiB = n }
                default:
                    throw fail(unknownKeyMessage(key, known: keys))
                }
            }
        }
        return o
    }

    /// This configuration with every setting `o` makes replacing the current one.
    public func merging(_ o: Overrides) -> Configuration {
        var c = self
        if let v = o.upstream { c.upstream = v }
        if let v = o.listen { c.listen = v }
        if let v = o.control { c.control = v }
        if let v = o.store { c.store = v }
        if let v = o.missingPurpose { c.missingPurpose = v }
        if let v = o.promptVia { c.promptVia = v }
        if let v = o.promptTimeout { c.promptTimeout = v }
        if let v = o.maxPendingPrompts { c.maxPendingPrompts = v }
        if let v = o.maxPendingPromptsPerUID { c.maxPendingPromptsPerUID = v }
        if let v = o.promptCommand { c.promptCommand = v }
        if let v = o.useNotices { c.useNotices = v }
        if let v = o.trustedApps { c.trustedApps = v }
        if let v = o.logLevel { c.logLevel = v }
        if let v = o.maxClients { c.maxClients = v }
        if let v = o.maxClientsPerApp { c.maxClientsPerApp = v }
        if let v = o.reservedClients { c.reservedClients = v }
        if let v = o.handshakeTimeout { c.handshakeTimeout = v }
        if let v = o.autoResetDays { c.autoResetDays = v }
        if let v = o.maxPacketKiB { c.maxPacketKiB = v }
        if let v = o.packetBufferMiB { c.packetBufferMiB = v }
        if let v = o.realtimePriority { c.realtimePriority = v }
        if let v = o.niceLevel { c.niceLevel = v }
        return c
    }

    /// Parses `files` (path and text, admin first) over the defaults; later files win.
    public static func load(_ files: [(path: String, text: String)]) throws(ConfigError) -> Configuration {
        var c = Configuration()
        for f in files { c = c.merging(try parse(text: f.text, file: f.path)) }
        return c
    }

    /// `auto`, or channel names separated by spaces or commas, each at most once.
    static func parsePromptVia(_ value: String, fail: (String) -> ConfigError) throws(ConfigError) -> [PromptChannel] {
        let names = value.split { $0 == " " || $0 == "," || $0 == "\t" }.map(String.init)
        let choices = "auto, or a list of " + PromptChannel.allCases.map(\.rawValue).joined(separator: ", ")
        if names == ["auto"] { return PromptChannel.auto }
        guard !names.isEmpty else { throw fail("prompt-via needs a value: \(choices)") }
        var channels: [PromptChannel] = []
        for name in names {
            guard let c = PromptChannel(rawValue: name) else {
                throw fail("prompt-via: unknown channel \"\(name)\"; write \(choices), e.g. prompt-via = notification agent")
            }
            guard !channels.contains(c) else { throw fail("prompt-via lists \"\(name)\" twice; name each channel once") }
            channels.append(c)
        }
        return channels
    }

    /// Whether `app` may load and unload modules or stop the server.
    public func isTrusted(_ app: AppKey) -> Bool { trustedApps.contains(app) }

    // MARK: Paths

    /// `$XDG_CONFIG_HOME/earmuff/earmuff.conf` (`~/.config/...` when unset).
    public static func userFile(environment: [String: String]) throws(ConfigError) -> String {
        try expand("$XDG_CONFIG_HOME/earmuff/earmuff.conf", environment: environment)
    }

    /// `$XDG_CONFIG_HOME/earmuff/apps.d`.
    public static func userAppsDirectory(environment: [String: String]) throws(ConfigError) -> String {
        try expand("$XDG_CONFIG_HOME/earmuff/apps.d", environment: environment)
    }

    /// Expands a leading `~/`, and `$NAME` / `${NAME}` anywhere, from `environment`.
    /// `XDG_CONFIG_HOME` and `XDG_STATE_HOME` fall back to `~/.config` and
    /// `~/.local/state`; any other unset variable is an error naming it.
    public static func expand(_ raw: String, environment env: [String: String]) throws(ConfigError) -> String {
        func home() throws(ConfigError) -> String {
            guard let h = env["HOME"], !h.isEmpty else {
                throw ConfigError(message: "HOME is not set, so \"\(raw)\" cannot be expanded; set HOME or give an absolute path")
            }
            return h
        }
        func variable(_ name: String) throws(ConfigError) -> String {
            if let v = env[name], !v.isEmpty { return v }
            switch name {
            case "XDG_CONFIG_HOME": return try home() + "/.config"
            case "XDG_STATE_HOME": return try home() + "/.local/state"
            case "HOME": return try home()
            default:
                throw ConfigError(message: "\(name) is not set, so \"\(raw)\" cannot be expanded; set \(name) or give an absolute path")
            }
        }
        var out = ""
        var rest = Substring(raw)
        if rest.hasPrefix("~/") {
            out = try home()
            rest = rest.dropFirst()
        }
        while let c = rest.first {
            rest = rest.dropFirst()
            guard c == "$" else { out.append(c); continue }
            var name = ""
            if rest.first == "{" {
                guard let close = rest.firstIndex(of: "}") else {
                    throw ConfigError(message: "\"\(raw)\" has an unclosed ${; write ${NAME}")
                }
                name = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
            } else {
                while let n = rest.first, n.isASCII, n.isLetter || n.isNumber || n == "_" {
                    name.append(n)
                    rest = rest.dropFirst()
                }
            }
            guard !name.isEmpty else {
                throw ConfigError(message: "\"\(raw)\" has a $ without a variable name; write $NAME or ${NAME}")
            }
            out += try variable(name)
        }
        return out
    }

    /// The upstream server: `commandLine`, else this config's `upstream`, else
    /// `$PULSE_SERVER` without any entry naming `ownSocket`, else
    /// `$XDG_RUNTIME_DIR/pulse/native`. Nil when none can be found.
    public func upstreamServer(
        commandLine: String?, environment env: [String: String],
        ownSocket: String
    ) -> String? {
        if let s = commandLine, !s.isEmpty { return s }
        if !upstream.isEmpty { return upstream }
        if let list = env["PULSE_SERVER"] {
            let mine: Set<String> = [ownSocket, "unix:" + ownSocket]
            let others = list.split(whereSeparator: { $0 == " " || $0 == "\t" })
                .map(String.init).filter { !mine.contains($0) }
            if !others.isEmpty { return others.joined(separator: " ") }
        }
        if let runtime = env["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/pulse/native" }
        return nil
    }
}
