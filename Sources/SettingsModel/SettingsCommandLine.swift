// earmuff-settings' and earmuff-indicator's command line: what they accept, their usage,
// and what their manual pages say (`earmuff generate-manual` writes earmuff-settings(1)
// and earmuff-indicator(1) from this).
// Pure: the window parses with it, the manual is printed from it.

public enum SettingsCommandLine {
    /// An option: its names, the value it takes (nil: none), and what it does.
    public struct Option: Sendable {
        public var names: [String]
        public var value: String?
        public var help: String
    }

    public static let options = [
        Option(
            names: ["--control"], value: "PATH",
            help: "the daemon's control socket (default $XDG_RUNTIME_DIR/earmuff/control, where 'earmuff serve' listens)"),
        Option(names: ["-h", "--help"], value: nil, help: "print the usage and exit"),
    ]

    public static let usage = "usage: earmuff-settings [--control PATH]"

    /// What the window shows, for its manual page.
    public static let description = [
        "Earmuff Settings shows, in a window, who may record sound and who records now, and changes it: a page per kind of capture (Microphone, System audio, Other apps' audio) with a row per app that asked, named and drawn from its desktop entry, its purpose, when it last recorded, whether it records now (real sound or silence), and Allow, Deny or Ask one click away (for an hour, or until you log out, when a row is expanded, with how the app was identified).",
        "The switch in the header turns the visible page's kind off or on for every app at once, as 'earmuff access off' does; each app's decision is kept and applies again when it is on. Prompts waiting for an answer are listed at the top of their kind's page. The History page lists what each app recorded, newest first.",
        "It talks to the daemon only through its control socket, as the earmuff command does. When the daemon is not running it says so, with the command that starts it, and connects as soon as it runs; when apps still reach the sound server directly, it says what 'earmuff setup' would change.",
    ]

    /// earmuff-indicator takes the same options.
    public static let indicatorUsage = "usage: earmuff-indicator [--control PATH]"

    /// What the status indicator shows, for its manual page.
    public static let indicatorDescription = [
        "earmuff-indicator puts Earmuff in the desktop's tray (the StatusNotifierItem protocol of KDE Plasma, XFCE, Budgie, LXQt, and GNOME with the AppIndicator extension). Its icon says who hears something now: a grey microphone when nobody does, an orange one while an app hears the microphone, a blue speaker while an app hears only system audio or another app's audio, a microphone struck through in red while microphone access is off, and a dimmed one while Earmuff is not running. Only real audio counts: an app that records silence lights nothing.",
        "Its tooltip and menu name each app that hears something, per kind, with Deny and Deny for this session; the prompts waiting for an answer, with Allow and Deny; Turn off (or on) microphone access; and Open Earmuff Settings. It follows the daemon's events as they come, and reconnects when the daemon restarts.",
        "The desktop starts it with the session (its autostart entry); a desktop without a tray host leaves it waiting, idle, for one to appear.",
    ]

    /// What `--help` prints: `usage`, then a line per option.
    public static func help(usage: String) -> String {
        ([usage]
            + options.map { o in
                "  \(([o.names.joined(separator: ", ")] + (o.value.map { [$0] } ?? [])).joined(separator: " "))  \(o.help)"
            }).joined(separator: "\n")
    }

    public struct Parsed: Sendable, Equatable {
        /// nil: the default path.
        public var controlPath: String?
        public var help = false
    }

    /// The arguments after the program name; a usage error's message on failure.
    public static func parse(_ arguments: [String]) -> Result<Parsed, UsageError> {
        var parsed = Parsed()
        var rest = arguments[...]
        while let a = rest.popFirst() {
            switch a {
            case "--control":
                guard let p = rest.popFirst(), !p.isEmpty else { return .failure(UsageError(message: "--control needs the control socket's path")) }
                parsed.controlPath = p
            case "--help", "-h":
                parsed.help = true
            default:
                return .failure(UsageError(message: "unknown argument '\(a)'"))
            }
        }
        return .success(parsed)
    }

    public struct UsageError: Error, Sendable, Equatable {
        public var message: String
        public init(message: String) { self.message = message }
    }
}
