import Glibc
import Proxy

/// `earmuff serve`: runs the proxy daemon.
public enum ServeCommand {
    static let usage = """
    usage: earmuff serve [--config FILE] [--listen PATH] [--upstream SERVER] [--control PATH] [--store PATH] [--log-level LEVEL]
                     [--loops N] [--coalesce-ms MS] [--snapd-socket PATH]

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
      --coalesce-ms MS   after a wake-up that moved only a little record audio,
                         a loop lets more gather for up to MS milliseconds
                         (anything from an app wakes it at once; never while a
                         reply is awaited), so many streams share one wake-up;
                         adds at most MS to record latency. 0 to 10, default 2;
                         0 wakes for every memblock
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
            case "--coalesce-ms":
                guard let v = value(a) else { return 64 }
                let limit = RelayOptions.maximumCoalesceWindow * 1000
                guard let ms = Double(v), ms.isFinite, ms >= 0, ms <= limit else {
                    printErr("earmuff serve: --coalesce-ms must be milliseconds from 0 to \(Int(limit)), not \"\(v)\"")
                    return 64
                }
                opts.coalesceMilliseconds = ms
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
