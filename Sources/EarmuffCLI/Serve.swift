import ControlProtocol
import Glibc
import Service
import Relay

/// `earmuff serve`: runs the proxy daemon.
public enum ServeCommand {
    static var usage: String { ClientUsage.text(for: "serve") }

    /// Runs the daemon with the arguments after `serve`; returns the exit code.
    public static func run(arguments: [String]) -> Int32 {
        do throws(UsageError) {
            guard let opts = try parse(arguments) else {
                print(usage, terminator: "")
                return 0
            }
            return Server.run(opts)
        } catch {
            printErr("earmuff serve: \(error.message)")
            return 64
        }
    }

    /// The options after `serve`; nil for `--help`. Only options CommandTable lists for serve are taken.
    static func parse(_ arguments: [String]) throws(UsageError) -> ServeOptions? {
        var opts = ServeOptions()
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else {
                throw UsageError("\(flag) needs a value; see 'earmuff serve --help'", subcommand: "serve")
            }
            return arguments[i]
        }
        while i < arguments.count {
            let a = arguments[i]
            guard CommandTable.known("serve").option(a) != nil else {
                throw UsageError("unknown argument '\(a)'; see 'earmuff serve --help'", subcommand: "serve")
            }
            switch a {
            case "--help", "-h": return nil
            case "--listen": opts.listen = try value(a)
            case "--upstream": opts.upstream = try value(a)
            case "--control": opts.control = try value(a)
            case "--store": opts.store = try value(a)
            case "--config": opts.configFile = try value(a)
            case "--log-level": opts.logLevel = try value(a)
            case "--loops":
                let v = try value(a)
                guard let n = Int(v), (1...256).contains(n) else {
                    throw UsageError("--loops must be a number from 1 to 256, not \"\(v)\"", subcommand: "serve")
                }
                opts.loops = n
            case "--coalesce-ms":
                let v = try value(a)
                let limit = RelayOptions.maximumCoalesceWindow * 1000
                guard let ms = Double(v), ms.isFinite, ms >= 0, ms <= limit else {
                    throw UsageError("--coalesce-ms must be milliseconds from 0 to \(Int(limit)), not \"\(v)\"", subcommand: "serve")
                }
                opts.coalesceMilliseconds = ms
            case "--snapd-socket": opts.snapdSocket = try value(a)
            default:
                throw UsageError("'\(a)' is in the table of serve's options but not handled; this is a bug in earmuff", subcommand: "serve")
            }
            i += 1
        }
        return opts
    }
}

func printErr(_ s: String) {
    var line = Array((s + "\n").utf8)
    unsafe line.withUnsafeMutableBytes { _ = unsafe write(2, $0.baseAddress, $0.count) }
}
