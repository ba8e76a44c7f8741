// earmuff-settings' command line: what it accepts, its usage, and what its manual page
// says of each option (`earmuff generate-manual` writes earmuff-settings(1) from this).
// Pure: the window parses with it, the manual is printed from it.

public enum SettingsCommandLine {
    /// An option: its names, the value it takes (nil: none), and what it does.
    public struct Option: Sendable {
        public var names: [String]
        public var value: String?
        public var help: String
    }

    public static let options = [
        Option(names: ["--control"], value: "PATH",
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
