// The one table of `earmuff`'s subcommands and options. The parsers
// (ClientCommandLine, and `serve`'s and `setup`'s own in EarmuffCLI) accept an
// option only when the table lists it for that subcommand, `--help` is
// printed from it (CommandHelp.swift), and so are the manual page and the
// shell completions (ManualPage.swift, Completions.swift): what the CLI
// accepts and what it documents cannot drift apart.
import Wording

/// What a shell may offer for an option's value or an operand.
public enum ValueCompletion: Sendable, Equatable {
    /// Nothing to offer (free text).
    case none
    case file
    case directory
    /// One of these words.
    case words([String])
    /// An app key from `earmuff apps` (when the daemon answers).
    case appKeys
    /// A command on PATH, then its own arguments.
    case commands
    /// An `earmuff` subcommand name.
    case subcommands
}

/// One option of a subcommand.
public struct OptionSpec: Sendable, Equatable {
    /// The names it is given by, the long one first: ["--help", "-h"].
    public let names: [String]
    /// The value's placeholder ("PATH"), nil for a flag.
    public let value: String?
    /// One or more sentences; `--help` and the manual wrap them.
    public let help: String
    public let completion: ValueCompletion

    public init(_ names: [String], value: String? = nil, _ help: String, completion: ValueCompletion = .none) {
        self.names = names
        self.value = value
        self.help = help
        self.completion = completion
    }

    /// `--kind KIND`, `-h, --help`: as the help text lists it.
    public var label: String {
        let shown = names.sorted { $0.count < $1.count }.joined(separator: ", ")
        return value.map { "\(shown) \($0)" } ?? shown
    }
}

/// One subcommand: its synopsis, what it does, its options.
public struct SubcommandSpec: Sendable, Equatable {
    public let name: String
    /// The synopsis lines, each after `earmuff NAME `.
    public let synopsis: [String]
    /// One line for the overview.
    public let summary: String
    /// Paragraphs separated by blank lines; a paragraph whose lines start with
    /// two spaces is kept as it is written (a table, examples).
    public let description: String
    public let options: [OptionSpec]
    /// What the operands are, for completion.
    public let operand: ValueCompletion
    /// Hidden subcommands (used when packaging) are left out of the overview; the manual and the completions list them.
    public let hidden: Bool

    public init(
        _ name: String, synopsis: [String], summary: String, description: String, options: [OptionSpec],
        operand: ValueCompletion = .none, hidden: Bool = false
    ) {
        self.name = name
        self.synopsis = synopsis
        self.summary = summary
        self.description = description
        self.options = options
        self.operand = operand
        self.hidden = hidden
    }

    /// The option given by `name` (any of its names), if the subcommand has it.
    public func option(_ name: String) -> OptionSpec? {
        options.first { $0.names.contains(name) }
    }

    /// Every name of every option.
    public var optionNames: [String] { options.flatMap(\.names) }
}

/// The table.
public enum CommandTable {
    /// Options shared by the client subcommands.
    static let json = OptionSpec(["--json"], "print JSON (one object per line) instead of a table")
    static let control = OptionSpec(["--control"], value: "PATH", "the daemon's control socket (default $XDG_RUNTIME_DIR/earmuff/control)", completion: .file)
    static let help = OptionSpec(["--help", "-h"], "show this help")
    static let kind = OptionSpec(
        ["--kind"], value: "KIND", "microphone (default), system-audio or app-audio", completion: .words(ClientCommandLine.captureKinds))
    static let lifespans = [
        OptionSpec(["--once"], "only for the app's clients connected now, until each disconnects"),
        OptionSpec(["--session"], "until the daemon stops (you log out); not stored"),
        OptionSpec(
            ["--for"], value: "DURATION", "for a while: \(DurationText.help)",
            completion: .words(["30m", "1h", "2h", "8h", "1d", "1w"])),
        OptionSpec(["--always"], "until changed (the default)"),
    ]
    static let appOperand = """
        APP is an app key (kind:value, e.g. exe:/usr/bin/parecord or flatpak:org.mozilla.firefox; it need not have been seen yet), a command on PATH or a path (decided for the key its processes get: links are followed, so arecord decides exe:/usr/bin/aplay; the key is printed), or the executable name of exactly one known app. A name that apps only call themselves decides nothing.
        """
    static let kinds = """
        Kinds are decided separately: microphone (capture devices; the default), system-audio (the monitor of a sink: everything it plays), app-audio (another app's stream).
        """
    static let lifespanNote = """
        A decision --once, --session or --for lies over the lasting one; when it ends, the lasting decision is in force again (undetermined if there is none).
        """

    /// Every subcommand, in the order the overview lists them.
    public static let subcommands: [SubcommandSpec] = [
        SubcommandSpec(
            "serve",
            synopsis: [
                "[--config FILE] [--listen PATH] [--upstream SERVER] [--control PATH] [--store PATH] [--log-level LEVEL] [--loops N] [--coalesce-ms MS] [--snapd-socket PATH]"
            ],
            summary: "run the daemon",
            description:
                "Runs the Earmuff daemon: apps connect to the listening socket instead of the sound server; every packet is relayed to the real server and back. Options override the configuration files.",
            options: [
                OptionSpec(["--listen"], value: "PATH", "client socket (default $XDG_RUNTIME_DIR/earmuff/native)", completion: .file),
                OptionSpec(
                    ["--upstream"], value: "SERVER",
                    "the real server, e.g. unix:/run/user/1000/pulse/native (default: config 'upstream', else $PULSE_SERVER, else $XDG_RUNTIME_DIR/pulse/native)"
                ),
                OptionSpec(["--control"], value: "PATH", "control socket (default $XDG_RUNTIME_DIR/earmuff/control)", completion: .file),
                OptionSpec(["--store"], value: "PATH", "permission store (default $XDG_STATE_HOME/earmuff/permissions.sqlite)", completion: .file),
                OptionSpec(["--config"], value: "FILE", "config file read after /etc/earmuff/earmuff.conf", completion: .file),
                OptionSpec(["--log-level"], value: "LEVEL", "error, warn, info or debug", completion: .words(["error", "warn", "info", "debug"])),
                OptionSpec(["--loops"], value: "N", "event-loop threads sessions are spread over, 1 to 256 (default: one per processor online)"),
                OptionSpec(
                    ["--coalesce-ms"], value: "MS",
                    "after a wake-up that moved only a little record audio, a loop lets more gather for up to MS milliseconds (anything from an app wakes it at once; never while a reply is awaited), so many streams share one wake-up; adds at most MS to record latency. 0 to 10, default 2; 0 wakes for every memblock"
                ),
                OptionSpec(
                    ["--snapd-socket"], value: "PATH", "snapd's socket, asked whether a snap's audio-record plug is connected (default /run/snapd.socket)",
                    completion: .file),
                help,
            ]),
        SubcommandSpec(
            "setup",
            synopsis: ["[--undo] [--dry-run] [--server pipewire|pulseaudio] [--no-systemctl] [--binary PATH] [--pulse-script FILE] [--pipewire-config FILE]"],
            summary: "make Earmuff the session's sound socket (systemd user units)",
            description: """
                Makes Earmuff the session's sound socket: systemd user units put Earmuff on $XDG_RUNTIME_DIR/pulse/native and the real server (pipewire-pulse or PulseAudio) behind it on $XDG_RUNTIME_DIR/pulse/upstream, so every app that uses the PulseAudio socket, Flatpaks and snaps included, goes through Earmuff. On PipeWire it also writes the user's pipewire.conf, the system's with module-access holding each native client (pipewire-0) until Earmuff has identified it. Runs as the user; writes only under $XDG_CONFIG_HOME (~/.config), and PulseAudio's user default.pa in ~/.config/pulse.

                When the package installed earmuff.socket and earmuff.service in /usr/lib/systemd/user, setup uses those and writes only the server's drop-ins; otherwise it writes the two units under $XDG_CONFIG_HOME/systemd/user. Exit status: 0 done (or nothing to do), 1 refused or failed (nothing written when refused), 64 usage error.
                """,
            options: [
                OptionSpec(["--undo"], "remove exactly what setup wrote (and the directories it made, once empty); the real server goes back to pulse/native"),
                OptionSpec(["--dry-run", "-n"], "print every file and systemctl command, change nothing"),
                OptionSpec(
                    ["--server"], value: "NAME", "pipewire or pulseaudio (default: detected from 'pactl info' and the enabled systemd user units)",
                    completion: .words(["pipewire", "pulseaudio"])),
                OptionSpec(["--no-systemctl"], "write the files but run no 'systemctl --user' command (they are printed instead)"),
                OptionSpec(
                    ["--binary"], value: "PATH",
                    "the earmuff binary the service runs (default: this one); writes units of its own even when the package installed some", completion: .file),
                OptionSpec(["--pulse-script"], value: "FILE", "PulseAudio's system startup script (default /etc/pulse/default.pa)", completion: .file),
                OptionSpec(
                    ["--pipewire-config"], value: "FILE",
                    "PipeWire's system configuration, copied with module-access holding native clients for Earmuff (default /etc/pipewire/pipewire.conf, else /usr/share/pipewire/pipewire.conf)",
                    completion: .file),
                help,
            ]),
        SubcommandSpec(
            "doctor",
            synopsis: ["[--json] [--control PATH]"],
            summary: "check the session: daemon, socket, server, prompts, bypasses, units, store",
            description: """
                Checks the session and prints one line per check, with what to do about each that fails: the daemon answers; the session socket ($XDG_RUNTIME_DIR/pulse/native) is Earmuff's and the real server is behind it; the upstream server answers; a prompt channel exists, and which one a prompt would use now; the pipewire-0 socket and /dev/snd devices this user can open (the ways around Earmuff); stale or foreign systemd units and drop-ins, and an earmuff.service whose program is gone; the permission store's integrity.

                Exit status: 0 when every check passes, 1 when one fails (warnings do not fail), 64 usage error.
                """,
            options: [OptionSpec(["--json"], "print one JSON object with every check"), control, help]),
        SubcommandSpec(
            "status",
            synopsis: ["[--json] [--control PATH]"],
            summary: "daemon, upstream, clients, capture streams, pending prompts",
            description: "Shows the daemon, its upstream server, connected clients, live capture streams (real or silenced) and pending prompts.",
            options: [json, control, help]),
        SubcommandSpec(
            "apps",
            synopsis: ["[--json] [--control PATH]"],
            summary: "every app that recorded or asked, and its decision",
            description:
                "Lists every app that recorded, asked for permission or has a decision (not tools that only connected, such as pactl): key, display name, state, reason, how it was identified, when it last recorded, its purpose and executable.",
            options: [json, control, help]),
        SubcommandSpec(
            "grant",
            synopsis: ["APP [--kind KIND] [--once|--session|--for DURATION|--always] [--json] [--control PATH]"],
            summary: "let APP record (an app key, or a known app's name)",
            description:
                "Lets APP record KIND: its capture streams of that kind get real samples from their next frame.\n\n\(kinds)\n\n\(appOperand)\n\n\(lifespanNote)",
            options: [kind] + lifespans + [json, control, help], operand: .appKeys),
        SubcommandSpec(
            "deny",
            synopsis: ["APP [--kind KIND] [--once|--session|--for DURATION|--always] [--json] [--control PATH]"],
            summary: "give APP silence",
            description:
                "Denies APP the KIND: its capture streams of that kind get silence from their next frame.\n\n\(kinds)\n\n\(appOperand)\n\n\(lifespanNote)",
            options: [kind] + lifespans + [json, control, help], operand: .appKeys),
        SubcommandSpec(
            "reset",
            synopsis: ["APP [--kind KIND] [--json] [--control PATH]"],
            summary: "back to undetermined: prompt again next time",
            description:
                "Forgets the decision for APP and KIND: it is undetermined and prompts again on its next capture of that kind.\n\n\(kinds)\n\n\(appOperand)",
            options: [kind, json, control, help], operand: .appKeys),
        SubcommandSpec(
            "access",
            synopsis: ["on|off [--kind KIND] [--json] [--control PATH]"],
            summary: "switch a capture kind on or off for every app at once",
            description:
                "With off, every app records silence of KIND, whatever it is granted (apps.d included), from its next frame; with on, each app gets again what it was decided. Decisions are kept meanwhile and prompts still ask (the answer counts once access is on). The switch is stored and survives a restart of the daemon.\n\n\(kinds)",
            options: [kind, json, control, help], operand: .words(["on", "off"])),
        SubcommandSpec(
            "agent",
            synopsis: ["[--answer allow|once|deny [--session|--for DURATION]] [--json] [--control PATH]"],
            summary: "answer prompts, interactively or with a fixed answer",
            description: """
                Becomes a prompt agent: shows each prompt (app name, key and how it was identified, pid, purpose, source) and reads an answer from the terminal:

                  a  allow, remembered      o  allow once, until the client disconnects
                  s  allow this session     d  deny, remembered
                  a 2h, d 30m              allow or deny for that long

                With --answer, answers every prompt that way and prints each. Runs until interrupted or the daemon stops. The lifespan options say how long an --answer lasts (default: always; once for once).
                """,
            options: [OptionSpec(["--answer"], value: "A", "answer every prompt with allow, once or deny", completion: .words(["allow", "once", "deny"]))]
                + lifespans + [OptionSpec(["--json"], "print prompts and results as JSON lines"), control, help]),
        SubcommandSpec(
            "run",
            synopsis: [
                "[--app-id ID] [--purpose TEXT] [--listen PATH] -- COMMAND [ARGS...]",
                "--sandbox [--app-id ID] [--purpose TEXT] [--share-home|--home DIR] [--net] [--dbus] [--dry-run] -- COMMAND [ARGS...]",
            ],
            summary: "run COMMAND with PULSE_SERVER pointed at Earmuff (--sandbox: under bubblewrap)",
            description: """
                Runs COMMAND with PULSE_SERVER pointed at Earmuff. The exit status is COMMAND's (127 when it cannot be found, 126 when it cannot be run).

                With --sandbox, COMMAND runs under bubblewrap and Earmuff is its only sound path: a launcher socket of its own at $XDG_RUNTIME_DIR/pulse/native, and no real server socket, pipewire-0, session bus or /dev/snd. It is identified as launcher:ID (strong against its sandbox only: any unsandboxed program of yours can start earmuff run with the same --app-id); the system is read-only, /tmp private, the network off. Ctrl-C, SIGTERM, SIGHUP and SIGQUIT are passed to COMMAND; its exit status (128+N when signal N killed it) is earmuff's.
                """,
            options: [
                OptionSpec(
                    ["--app-id"], value: "ID",
                    "ask the daemon for a socket of app launcher:ID and connect COMMAND there, so its clients are identified as ID (with --sandbox the default is the command's name)"
                ),
                OptionSpec(
                    ["--purpose"], value: "TEXT", "tell the daemon why COMMAND records (client property application.capture.purpose, set through PULSE_PROP)"),
                OptionSpec(
                    ["--listen"], value: "PATH",
                    "the daemon's client socket (default $XDG_RUNTIME_DIR/earmuff/native, or $XDG_RUNTIME_DIR/pulse/native after 'earmuff setup')",
                    completion: .file),
                OptionSpec(["--sandbox"], "run COMMAND under bubblewrap (package bubblewrap)"),
                OptionSpec(
                    ["--share-home"],
                    "the sandbox sees your home, writable (default: a home of its own, $XDG_DATA_HOME/earmuff/sandboxes/ID, kept between runs)"),
                OptionSpec(["--home"], value: "DIR", "the sandbox sees DIR, writable, as its home", completion: .directory),
                OptionSpec(["--net"], "keep the network (and abstract unix sockets: X11's, a TCP or abstract sound server's, the bus if it is abstract)"),
                OptionSpec(["--dbus"], "pass the session bus; it can start programs outside the sandbox, so only for apps you trust with it"),
                OptionSpec(["--dry-run"], "print the bubblewrap command line and run nothing"),
                control, help,
            ], operand: .commands),
        SubcommandSpec(
            "watch",
            synopsis: ["[--json] [--control PATH]"],
            summary: "print events until interrupted",
            description: "Prints events as they happen (clients, capture streams, prompts, decisions) until interrupted.",
            options: [json, control, help]),
        SubcommandSpec(
            "log",
            synopsis: ["[--app APP] [--since TIME] [--json] [--control PATH]"],
            summary: "capture sessions: app, source, start, end, real and silenced seconds",
            description:
                "Lists capture sessions from the usage log, newest first: app, what it captured, the source, start and end, seconds of real audio and of silence, and the decision in force (A → B when it changed).",
            options: [
                OptionSpec(["--app"], value: "APP", "only this app (an app key, or a known app's name)", completion: .appKeys),
                OptionSpec(["--since"], value: "TIME", "only sessions started since TIME: \(SinceTime.help)"),
                json, control, help,
            ]),
        SubcommandSpec(
            "help",
            synopsis: ["[SUBCOMMAND]"],
            summary: "the overview, or a subcommand's help",
            description: "Prints the overview, or the help of SUBCOMMAND (as 'earmuff SUBCOMMAND --help' does).",
            options: [], operand: .subcommands),
        SubcommandSpec(
            "version",
            synopsis: [""],
            summary: "the release and the control protocol version",
            description: "Prints the release of this build and the version of the control protocol it speaks (also -V, --version).",
            options: []),
        SubcommandSpec(
            "generate-manual",
            synopsis: ["[--config-example FILE] DIRECTORY"],
            summary: "write earmuff.1 and earmuff.conf.5 into DIRECTORY",
            description:
                "Writes the manual pages earmuff.1 and earmuff.conf.5 into DIRECTORY, from this table and the commented configuration example (default: config/earmuff.conf of the source tree). Used when packaging.",
            options: [OptionSpec(["--config-example"], value: "FILE", "the configuration example that documents every setting", completion: .file), help],
            operand: .directory, hidden: true),
        SubcommandSpec(
            "generate-units",
            synopsis: ["DIRECTORY"],
            summary: "write the packaged earmuff.socket and earmuff.service into DIRECTORY",
            description:
                "Writes the systemd user units the package installs in /usr/lib/systemd/user: earmuff.socket on $XDG_RUNTIME_DIR/pulse/native and earmuff.service running /usr/bin/earmuff in front of either server. 'earmuff setup' enables them. Used when packaging.",
            options: [help], operand: .directory, hidden: true),
        SubcommandSpec(
            "generate-completion",
            synopsis: ["bash|zsh|fish"],
            summary: "print the completion script for a shell",
            description: "Prints the completion script for bash, zsh or fish. Used when packaging.",
            options: [help], operand: .words(["bash", "zsh", "fish"]), hidden: true),
    ]

    /// Options `earmuff` takes before any subcommand.
    public static let globalOptions = [
        OptionSpec(["--help", "-h"], "show the overview"),
        OptionSpec(["--version", "-V"], "print the release and the control protocol version"),
    ]

    /// The subcommand called `name`.
    public static func spec(_ name: String) -> SubcommandSpec? {
        subcommands.first { $0.name == name }
    }

    /// The subcommand called `name`; for names the code itself passes (a name missing from the table is a programming error).
    public static func known(_ name: String) -> SubcommandSpec {
        guard let s = spec(name) else { preconditionFailure("no subcommand '\(name)' in CommandTable") }
        return s
    }

    /// The subcommands the overview, the manual and the completions list.
    public static var visible: [SubcommandSpec] { subcommands.filter { !$0.hidden } }
}
