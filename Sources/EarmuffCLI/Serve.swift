import Glibc
import Proxy

/// `earmuff serve`: runs the proxy daemon.
public enum ServeCommand {
    static let usage = """
    usage: earmuff serve [--config FILE] [--listen PATH] [--upstream SERVER] [--control PATH] [--store PATH] [--log-level LEVEL]
                     [--loops N] [--snapd-socket PATH]

    Runs the Earmuff daemon: apps connect to the listening socket instead of the
    sound server; every packet is relayed to the real server and back.

      --listen PATH      client socket (default $XDG_RUNTIME_DIR/earmuff/native)
      --upstream SERVER  the real server, e.g. unix:/run/user/1000/pulse/native
                         (default: config 'upstream', else $PULSE_SERVER, else
                         $XDG_RUNTIME_DIR/pulse/native)
      --control PATH     control socket (default $XDG_RUNTIME_DIR/earmuff/control)
      --store PATH       permission store (default $XDG_STATE_HOME/earmuff/permissions.sqlite)
      --config FILE      config file read after /etc/earmuff/earmuff.conf
      --log-level LEVEL  error, warn, info or debug
      --loops N          event-loop threads sessions are spread over, 1 to 256
                         (default: one per processor online)
      --snapd-socket PATH  snapd's socket, asked whether a snap's audio-record
                         plug is connected (default /run/snapd.socket)

    """

    /// Runs the daemon with the arguments after `serve`; returns the exit code.
    public static func run(arguments: [String]) -> Int32 {
        var opts = ServeOptions()
        var i = 0
        func value(_ flag: String) -> String? {
            i += 1
            guard i < arguments.count else {
                printErr("earmuff serve: \(flag) needs a value; see 'earmuff serve --help'")
                return nil
            }
            return arguments[i]
        }
        while i < arguments.count {
            let a = arguments[i]
            switch a {
            case "--help", "-h":
                print(usage, terminator: "")
                return 0
            case "--listen": guard let v = value(a) else { return 64 }; opts.listen = v
            case "--upstream": guard let v = value(a) else { return 64 }; opts.upstream = v
            case "--control": guard let v = value(a) else { return 64 }; opts.control = v
            case "--store": guard let v = value(a) else { return 64 }; opts.store = v
            case "--config": guard let v = value(a) else { return 64 }; opts.configFile = v
            case "--log-level": guard let v = value(a) else { return 64 }; opts.logLevel = v
            case "--loops":
                guard let v = value(a) else { return 64 }
                guard let n = Int(v), (1...256).contains(n) else {
                    printErr("earmuff serve: --loops must be a number from 1 to 256, not \"\(v)\"")
                    return 64
                }
                opts.loops = n
            case "--snapd-socket": guard let v = value(a) else { return 64 }; opts.snapdSocket = v
            default:
                printErr("earmuff serve: unknown argument '\(a)'; see 'earmuff serve --help'")
                return 64
            }
            i += 1
        }
        return Server.run(opts)
    }
}

func printErr(_ s: String) {
    var line = Array((s + "\n").utf8)
    line.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
}
