// What `earmuff run --sandbox` was asked for: the choices that shape the
// bubblewrap sandbox around the command. Parsed with the rest of `run`
// (ClientCommandLine.swift); turned into a bubblewrap command line by
// EarmuffCLI/SandboxPlan.swift.

/// The sandbox options of `earmuff run --sandbox`.
public struct SandboxOptions: Sendable, Equatable {
    /// Where the app's home comes from.
    public enum Home: Sendable, Equatable {
        /// A directory of its own per app id, kept between runs (the default).
        case privatePerApp
        /// `--share-home`: the user's own home, writable.
        case shared
        /// `--home DIR`: DIR, writable, shown at the user's home path.
        case directory(String)
    }

    public var home: Home
    /// `--net`: keep the network namespace (network, abstract unix sockets).
    public var network: Bool
    /// `--dbus`: pass the session bus socket.
    public var sessionBus: Bool
    /// `--dry-run`: print the bubblewrap command line instead of running it.
    public var dryRun: Bool

    public init(home: Home = .privatePerApp, network: Bool = false, sessionBus: Bool = false, dryRun: Bool = false) {
        self.home = home
        self.network = network
        self.sessionBus = sessionBus
        self.dryRun = dryRun
    }

    /// The options that mean something only with `--sandbox`.
    static let names: Set<String> = ["--share-home", "--home", "--net", "--dbus", "--dry-run"]
}
