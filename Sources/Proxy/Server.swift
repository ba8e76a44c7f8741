// `earmuff serve` wiring: paths, upstream discovery, signals.
import Glibc

/// Options of `earmuff serve` as given on the command line.
public struct ServeOptions: Sendable {
    public var listen: String?
    public var upstream: String?
    public var control: String?
    public var store: String?
    public var configFile: String?
    public var logLevel: String?
    public var environment: [String: String] = currentEnvironment()
    public init() {}
}

/// Runs the daemon until SIGINT or SIGTERM.
public enum Server {
    public static func run(_ opts: ServeOptions) -> Int32 {
        if let l = opts.logLevel {
            guard let level = LogLevel(name: l) else {
                fail("--log-level must be error, warn, info or debug, not \"\(l)\"")
                return 64
            }
            Log.setLevel(level)
        }
        let env = opts.environment
        let runtime = env["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/user/\(getuid())"
        let listen = opts.listen ?? runtime + "/earmuff/native"
        let upstream: UpstreamAddress
        do {
            upstream = try UpstreamAddress.discover(flag: opts.upstream, config: nil, environment: env, ownSockets: [listen])
        } catch {
            fail("\(error)")
            return 64
        }
        if upstream.path == listen {
            fail("the upstream server \(upstream) is Earmuff's own socket; give the real server with --upstream")
            return 64
        }
        // Block the stop signals in every thread; the main thread waits for them.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)

        let daemon: Daemon
        do {
            daemon = try Daemon(listenPath: listen, upstream: upstream, options: RelayOptions(),
                                observer: TransparentObserver(), identify: basicIdentity)
            try daemon.start()
        } catch {
            fail("cannot start: \(error)")
            return 1
        }
        Log.info("listening on \(listen), relaying to \(upstream)")
        var line = Array("PULSE_SERVER=unix:\(listen)\n".utf8)
        line.withUnsafeMutableBytes { _ = write(1, $0.baseAddress, $0.count) }
        var sig: Int32 = 0
        sigwait(&set, &sig)
        Log.info("stopping on signal \(sig)")
        daemon.stop()
        unlink(listen)
        return 0
    }

    static func fail(_ message: String) {
        var line = Array("earmuff: \(message)\n".utf8)
        line.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// The process environment as a dictionary.
public func currentEnvironment() -> [String: String] {
    var env: [String: String] = [:]
    var p = environ
    while let entry = p.pointee {
        let s = String(cString: entry)
        if let eq = s.firstIndex(of: "=") {
            env[String(s[..<eq])] = String(s[s.index(after: eq)...])
        }
        p += 1
    }
    return env
}
