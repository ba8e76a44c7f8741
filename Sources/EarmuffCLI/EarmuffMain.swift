#if canImport(Glibc)
import Glibc
#endif

/// Entry point of the `earmuff` executable.
public enum EarmuffMain {
    public static func run() {
        let args = Array(CommandLine.arguments.dropFirst())
        if args.first == "serve" {
            exit(ServeCommand.run(arguments: Array(args.dropFirst())))
        }
        exit(64)
    }
}
