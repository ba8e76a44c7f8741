// `earmuff serve` wiring: configuration, paths, store, control socket,
// upstream discovery, and signals.
import Consent
import ConsentStore
import ControlProtocol
import Foundation
import Glibc
import PulseWire
import Relay
import Runtime

/// Options of `earmuff serve` as given on the command line.
public struct ServeOptions: Sendable {
    public var listen: String?
    public var upstream: String?
    public var control: String?
    public var store: String?
    public var configFile: String?
    public var logLevel: String?
    /// Event loops (threads) sessions are spread over; nil: one per core.
    public var loops: Int?
    /// Milliseconds a loop lets record audio gather (`--coalesce-ms`); nil: the default.
    public var coalesceMilliseconds: Double?
    /// snapd's socket, asked about snaps' audio-record connections.
    public var snapdSocket: String = "/run/snapd.socket"
    public var environment: [String: String] = currentEnvironment()
    public init() {}
}

/// Where the daemon's sockets and store live.
struct DaemonPaths: Sendable {
    var listen: String
    var control: String
    var store: String
    /// Directory of the per-app launcher sockets (`earmuff run --app-id`).
    var launcherDirectory: String
    /// Whether `listen` is the session's socket, `$XDG_RUNTIME_DIR/pulse/native`.
    var isSessionSocket = false
}

/// A configuration problem that stops the daemon from starting (exit 64).
struct StartupError: Error, CustomStringConvertible {
    let description: String
}

/// Runs the daemon until SIGINT or SIGTERM.
public enum Server {
    public static func run(_ opts: ServeOptions) -> Int32 {
        let env = opts.environment
        let configuration: Configuration
        let declarations: [AppKey: AppDeclaration]
        let paths: DaemonPaths
        do {
            (configuration, declarations) = try loadConfiguration(opts)
            paths = try resolvePaths(opts, configuration)
        } catch {
            fail("\(error)")
            return 64
        }
        let levelName = opts.logLevel ?? configuration.logLevel.rawValue
        guard let level = LogLevel(name: levelName) else {
            fail("--log-level must be error, warn, info or debug, not \"\(levelName)\"")
            return 64
        }
        Log.setLevel(level)

        let upstream: UpstreamAddress
        do {
            // --upstream, else the config's upstream, else $PULSE_SERVER (never
            // our own socket), else $XDG_RUNTIME_DIR/pulse/native.
            let server =
                configuration.upstreamServer(commandLine: opts.upstream, environment: env, ownSocket: paths.listen)
                ?? "/run/user/\(getuid())/pulse/native"
            upstream = try UpstreamAddress.parse(server)
        } catch {
            fail("\(error)")
            return 64
        }
        if upstream.path == paths.listen {
            fail("the upstream server \(upstream) is Earmuff's own socket; give the real server with --upstream")
            return 64
        }
        if unsafe access(upstream.path, F_OK) != 0 {
            Log.warn("no sound server at \(upstream) yet; apps will be refused until it appears")
        }

        // A socket passed by the service manager (earmuff.socket) replaces binding --listen.
        let activated: Int32?
        do {
            activated = try SocketActivation.takeListener(for: paths.listen, environment: env)
        } catch {
            fail("\(error)")
            return 64
        }

        // Block the stop signals in every thread; the main thread waits for them.
        var set = sigset_t()
        unsafe sigemptyset(&set)
        unsafe sigaddset(&set, SIGINT)
        unsafe sigaddset(&set, SIGTERM)
        unsafe pthread_sigmask(SIG_BLOCK, &set, nil)

        let store: PermissionStore
        let service: ConsentService
        let daemon: Daemon
        let control: ControlServer
        /// The control server holds its handler weakly: this keeps it.
        let requests: ControlRequests
        let catalog: SourceCatalog
        let pipeWire: PipeWireDoor
        do {
            store = try PermissionStore(path: paths.store)
            // The catalog, the relay and the control server report into the consent service
            // and are told back by it: each cycle is closed by a sink bound once both exist,
            // before any of them runs.
            let kinds = Late<CaptureKinds>()
            catalog = try SourceCatalog(
                upstream: upstream, onChange: { kinds.value?.sourcesChanged() },
                onSourceOutput: { kinds.value?.sourceOutputChanged(index: $0, source: $1, askedAt: $2) },
                watching: { kinds.value?.hasRecordStreams ?? false })
            let clients = Late<any ClientLink>()
            let controlOutput = Late<any ControlOutput>()
            service = try ConsentService(
                configuration: configuration, declarations: declarations, store: store, paths: paths,
                clients: clients, control: controlOutput, catalog: catalog,
                snapGate: SnapRecordGate(snapd: SnapdClient(socketPath: opts.snapdSocket)))
            kinds.bind(service.parts.kinds)
            var relay = RelayOptions()
            if let n = opts.loops { relay.loops = n }
            if let ms = opts.coalesceMilliseconds { relay.coalesceWindow = ms / 1000 }
            relay.maxClients = configuration.maxClients
            relay.maxClientsPerApp = configuration.maxClientsPerApp
            relay.reservedClients = configuration.reservedClients
            relay.handshakeTimeout = configuration.handshakeTimeout
            relay.maxClientPacket = configuration.maxPacketKiB * 1024
            relay.clientPacketBudget = configuration.packetBufferMiB * 1024 * 1024
            daemon = try Daemon(
                listenPath: paths.listen, activatedListener: activated, upstream: upstream,
                options: relay, observer: service.parts.observer
            ) {
                [launchers = service.launchers] pid, uid, gid, launcher in
                // A launcher socket vouches only for the process tree of the run that owns it.
                var admitted = launcher
                if let id = launcher, !launchers.admits(pid, appID: id) {
                    Log.warn("pid \(pid) connected through a launcher socket of \(id) without descending from its 'earmuff run'; identified by what it is")
                    admitted = nil
                }
                return IdentityClassifier.classify(ProcessInspector.facts(pid: pid, uid: uid, gid: gid, launcherAppID: admitted))
            }
            clients.bind(daemon)
            pipeWire = try PipeWireDoor(observer: service.parts.observer, environment: env)
            requests = ControlRequests(
                parts: service.parts, records: service.writer, store: store,
                launchers: service.launchers, host: daemon, pipeWire: pipeWire)
            control = try ControlServer(
                path: paths.control, handler: requests,
                options: ControlServerOptions(daemonVersion: earmuffVersion))
            controlOutput.bind(control)
            service.start()
            // Streams on sources the catalog does not know yet are silent: give it a moment first.
            catalog.start()
            catalog.waitUntilReady(timeout: 1)
            try daemon.start()
            raiseAudioThreads(daemon, configuration)
            pipeWire.start()
            control.start()
        } catch {
            fail("cannot start: \(error)")
            return 1
        }
        let how = activated.map { " (socket fd \($0) from the service manager)" } ?? ""
        Log.info("listening on \(paths.listen)\(how), relaying to \(upstream); control \(paths.control); store \(paths.store)")
        var line = Array("PULSE_SERVER=unix:\(paths.listen)\n".utf8)
        unsafe line.withUnsafeMutableBytes { _ = unsafe write(1, $0.baseAddress, $0.count) }
        var sig: Int32 = 0
        unsafe sigwait(&set, &sig)
        Log.info("stopping on signal \(sig)")
        control.stop()
        withExtendedLifetime(requests) {}
        pipeWire.stopAndJoin()
        daemon.stop()
        catalog.stop()
        service.stop()
        // A passed socket stays: the service manager keeps it for the next start.
        if activated == nil { unsafe unlink(paths.listen) }
        service.launchers.removeAll()
        service.flushStore()
        store.close()
        return 0
    }

    /// Asks for real-time scheduling for the relay loops (and only them), and logs what they got.
    static func raiseAudioThreads(_ daemon: Daemon, _ c: Configuration) {
        let settings = AudioThreadSettings(realtimePriority: Int32(c.realtimePriority), niceLevel: Int32(c.niceLevel))
        // Nothing asked for: RealtimeKit is not asked either.
        let (realtimeKit, unreachable) = settings.asksForAnything ? RealtimeKit.onSystemBus() : (nil, nil)
        let grant = AudioThreads.raise(daemon.loopThreadIDs(), settings: settings, broker: realtimeKit, brokerRefusal: unreachable)
        let why =
            !settings.asksForAnything
            ? " (realtime-priority = 0 and nice-level = 0 in the configuration)"
            : grant.refusals.isEmpty ? "" : " (refused: \(grant.refusals.joined(separator: "; ")))"
        switch grant.level {
        case .realtime(let p): Log.info("audio threads: SCHED_RR priority \(p) via \(grant.via ?? "?")\(why)")
        case .highPriority(let n): Log.info("audio threads: nice \(n) via \(grant.via ?? "?")\(why)")
        case .normal: Log.info("audio threads: normal scheduling\(why)")
        }
    }

    /// Admin file, then the user file (or `--config`), then apps.d declarations (admin, then user).
    static func loadConfiguration(_ opts: ServeOptions) throws -> (Configuration, [AppKey: AppDeclaration]) {
        let env = opts.environment
        var files: [(path: String, text: String)] = []
        if let t = readIfPresent(Configuration.adminFile) { files.append((Configuration.adminFile, t)) }
        if let explicit = opts.configFile {
            guard let t = readIfPresent(explicit) else {
                throw StartupError(description: "cannot read the config file \(explicit); check the path given to --config")
            }
            files.append((explicit, t))
        } else if let user = try? Configuration.userFile(environment: env), let t = readIfPresent(user) {
            files.append((user, t))
        }
        let configuration = try Configuration.load(files)
        var declFiles: [(path: String, text: String)] = []
        var dirs = [Configuration.adminAppsDirectory]
        if let userApps = try? Configuration.userAppsDirectory(environment: env) { dirs.append(userApps) }
        for dir in dirs {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".conf") }.sorted()
            for n in names {
                if let t = readIfPresent(dir + "/" + n) { declFiles.append((dir + "/" + n, t)) }
            }
        }
        return (configuration, try AppDeclaration.load(declFiles))
    }

    static func resolvePaths(_ opts: ServeOptions, _ c: Configuration) throws -> DaemonPaths {
        let env = opts.environment
        var expandEnv = env
        if (expandEnv["XDG_RUNTIME_DIR"] ?? "").isEmpty { expandEnv["XDG_RUNTIME_DIR"] = "/run/user/\(getuid())" }
        let listen = try opts.listen ?? Configuration.expand(c.listen, environment: expandEnv)
        let control = try opts.control ?? Configuration.expand(c.control, environment: expandEnv)
        let store = try opts.store ?? Configuration.expand(c.store, environment: expandEnv)
        let runtime = try Configuration.expand("$XDG_RUNTIME_DIR/earmuff", environment: expandEnv)
        var paths = DaemonPaths(listen: listen, control: control, store: store, launcherDirectory: runtime + "/app")
        paths.isSessionSocket = try listen == Configuration.expand("$XDG_RUNTIME_DIR/pulse/native", environment: expandEnv)
        return paths
    }

    static func readIfPresent(_ path: String) -> String? {
        guard unsafe access(path, F_OK) == 0 else { return nil }
        return try? String(contentsOfFile: path, encoding: .utf8)
    }

    static func fail(_ message: String) {
        var line = Array("earmuff: \(message)\n".utf8)
        unsafe line.withUnsafeMutableBytes { _ = unsafe write(2, $0.baseAddress, $0.count) }
    }
}

/// The process environment as a dictionary.
public func currentEnvironment() -> [String: String] {
    ProcessInfo.processInfo.environment
}
