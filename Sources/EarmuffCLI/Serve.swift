/// `earmuff serve`: runs the proxy daemon.
public enum ServeCommand {
    /// Runs the daemon with the arguments after `serve`; returns the exit code.
    public static func run(arguments: [String]) -> Int32 {
        0
    }
}
