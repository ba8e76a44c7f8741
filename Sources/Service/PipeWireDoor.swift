// The second door: native PipeWire clients (`pipewire-0`), gated as the relay
// gates Pulse clients.
//
// The PipeWire gate (target PipeWireGate) is a manager connection to the
// session's PipeWire; its loop's descriptor is a handler on the `pipewire`
// EventLoop here, which also owns everything below. Each native client the
// gate admits becomes a `SessionState` identified from the process PipeWire
// saw at connect (`pipewire.sec.pid`/`uid`, with the same /proc reading and
// classification as a Pulse client), and each of its capture streams a
// `RecordStream` whose kind the gate says; the consent service is asked the
// relay's questions (a session opened, a stream started, moved, ended), so
// one app has one decision whichever door it uses. A change of a stream's
// access flag comes back here and the gate routes the stream.
import Basics
import Consent
import ControlProtocol
import Glibc
import LinuxSystem
import PipeWireGate
import PulseWire
import Runtime
import StreamState

/// Where the session's PipeWire listens, found as libpipewire finds it: $PIPEWIRE_REMOTE
/// (a name or a path), else `pipewire-0`, in $PIPEWIRE_RUNTIME_DIR, else $XDG_RUNTIME_DIR.
struct PipeWireAddress: Sendable, Equatable {
    /// What libpipewire is given (nil: its default, which is the same socket).
    var remote: String?
    var path: String

    static func find(environment env: [String: String]) -> PipeWireAddress {
        let remote = env["PIPEWIRE_REMOTE"].flatMap { $0.isEmpty ? nil : $0 }
        let runtime =
            [env["PIPEWIRE_RUNTIME_DIR"], env["XDG_RUNTIME_DIR"]].compactMap { $0 }.first { !$0.isEmpty }
            ?? "/run/user/\(getuid())"
        let name = remote ?? "pipewire-0"
        return PipeWireAddress(remote: remote, path: name.hasPrefix("/") ? name : "\(runtime)/\(name)")
    }
}

/// The programs whose PipeWire clients are part of the sound system, when run by the daemon's
/// own user: told by the executable the kernel reports, never by a name the client gives (the
/// door's `admit`), and let in unheld by `earmuff setup`'s module-access rules.
public enum PipeWireSoundSystem {
    /// The daemon (pipewire-pulse is a link to it) and the portal.
    public static let executables = ["/usr/bin/pipewire", "/usr/libexec/xdg-desktop-portal"]
    /// Session managers: trusted, and they link streams.
    public static let sessionManagers = ["/usr/bin/wireplumber", "/usr/bin/pipewire-media-session"]
}

final class PipeWireDoor: LoopHandler, PipeWireGateObserver, @unchecked Sendable {
    // @unchecked Sendable: everything but `published` is touched only on `loop`.
    /// Session and stream ids of native clients start here, apart from the relay's.
    static let firstID: UInt64 = 1 << 48
    /// While there is no socket, the door waits for one to be created (a starting PipeWire
    /// makes it anew), with no timer, so a daemon on a system without PipeWire never wakes
    /// for it. A socket that is there but refuses (just created and not listening yet, or
    /// left by a PipeWire that died) is tried again after these delays, then left to the
    /// watch as well.
    static let retryDelays = [0.1, 0.3, 1.0, 3.0]
    /// Where no directory watch can be set up (the runtime directory is missing), the
    /// door tries again this often.
    static let unwatchedRetryDelay = 30.0

    private let loop: EventLoop
    /// The consent service's session observer: asked what the relay asks.
    private let observer: any SessionObserver
    let address: PipeWireAddress
    private var gate: PipeWireGate?
    private var token: UInt64 = 0
    private var sessions: [UInt32: SessionState] = [:]
    /// Capture streams by node id, with the session of their client.
    private var streams: [UInt32: (stream: RecordStream, session: SessionState)] = [:]
    private var nextID = firstID
    private var stopping = false
    /// The gate's silent source is ready (status says "gating" only then).
    private var isReady = false
    private let published: Locked<PipeWireInfo>
    /// The kinds each native client may record, by its PipeWire id: set by the consent service
    /// (under its engine's lock, from any thread), read by the gate at each reconcile.
    private let grants = Locked<[UInt32: Set<Capability>]>([:])
    /// Connections lost while gating, and the last one's reason and time.
    private var cuts = 0
    private var lastCut: (reason: String, at: Double)?
    /// Wakes the door when an entry of the socket's name appears in its directory.
    private var socketWatch: DirectoryWatch?
    /// How many of `retryDelays` have been used since the last attempt that could succeed.
    private var retries = 0

    /// The door of `observer` on the session's PipeWire; `start()` connects (when the socket
    /// answers, and again when it is created anew).
    init(observer: any SessionObserver, environment: [String: String]) throws(SystemError) {
        loop = try EventLoop(name: "pipewire")
        self.observer = observer
        let address = PipeWireAddress.find(environment: environment)
        self.address = address
        published = Locked(PipeWireInfo(socket: address.path, gating: false, reason: "starting"))
    }

    /// What `status` shows.
    var info: PipeWireInfo { published.withLock { $0 } }

    func start() {
        loop.start()
        loop.post { [self] in connect() }
    }

    func stopAndJoin() {
        loop.post { [self] in
            stopping = true
            disconnect(reason: "stopped")
            if let watch = socketWatch { loop.remove(watch.descriptor.rawValue, token: watch.token) }
            socketWatch = nil
        }
        loop.stopAndJoin()
    }

    private func connect() {
        loop.assertInLoop()
        guard !stopping, gate == nil else { return }
        watchForSocket()
        guard canConnect(address.path) else { return retry("no PipeWire server answers there") }
        retries = 0
        do {
            let g = try PipeWireGate(remote: address.remote, observer: self)
            gate = g
            token = try loop.register(g.descriptor, events: PollEvents.input, handler: self)
            publish("connected; the silent source is not ready yet")
        } catch {
            disconnect(reason: "\(error)")
        }
    }

    private func retry(_ reason: String) {
        publish(reason)
        guard !stopping else { return }
        if socketWatch == nil {
            loop.schedule(after: Self.unwatchedRetryDelay) { [self] in connect() }
        } else if unsafe access(address.path, F_OK) != 0 {
            return // no socket: the watch says when one is made
        } else if retries < Self.retryDelays.count {
            loop.schedule(after: Self.retryDelays[retries]) { [self] in connect() }
            retries += 1
        }
    }

    /// Watches the socket's directory (once): a PipeWire that starts creates its socket, and
    /// the door connects then.
    private func watchForSocket() {
        guard socketWatch == nil else { return }
        let slash = address.path.lastIndex(of: "/") ?? address.path.startIndex
        let directory = String(address.path[..<slash])
        let name = String(address.path[address.path.index(after: slash)...])
        do throws(SystemError) {
            let watch = try DirectoryWatch(directory: directory, name: name) { [unowned self] in
                retries = 0
                connect()
            }
            watch.token = try loop.register(watch.descriptor.rawValue, events: PollEvents.input, handler: watch)
            socketWatch = watch
        } catch {
            Log.debug("pipewire: cannot watch \(directory) for \(name) (\(error)); trying every \(Int(Self.unwatchedRetryDelay)) s")
        }
    }

    /// Ends every native session (their streams end with them) and drops the connection. A
    /// connection lost while gating is a cut, counted and shown in `status` and `doctor`: what
    /// was silenced stays on the silent source, which the server owns, until the gate is back.
    private func disconnect(reason: String) {
        if let g = gate {
            loop.remove(g.descriptor, token: token)
            g.close()
            gate = nil
            if isReady, reason != "stopped" {
                cuts += 1
                lastCut = (reason, wallClockNow())
            }
            isReady = false
            Log.warn("pipewire: not gating: \(reason)")
        }
        for id in streams.keys.sorted() { captureEnded(id) }
        for id in sessions.keys.sorted() { clientGone(id) }
        retry(reason)
    }

    private func publish(_ reason: String?) {
        let clients = gate == nil ? 0 : sessions.count
        let info = PipeWireInfo(
            socket: address.path, gating: reason == nil, clients: clients, reason: reason,
            cuts: cuts == 0 ? nil : cuts, lastCut: lastCut?.reason, lastCutAt: lastCut?.at)
        published.withLock { $0 = info }
    }

    func handleEvents(_ events: UInt32) {
        loop.assertInLoop()
        do { try gate?.dispatch() } catch { disconnect(reason: "\(error)") }
    }

    // MARK: PipeWireGateObserver (on the loop)

    func admit(_ client: PipeWireClient) -> PipeWireAdmission {
        guard let pid = client.pid, let uid = client.uid else {
            // Without credentials it cannot be told apart from anything: gated, as an unknown process.
            return open(client, ProcessFacts(pid: 0, uid: client.uid ?? UInt32.max, gid: 0, launcherAppID: nil, inspectable: false))
        }
        let facts = ProcessInspector.facts(pid: pid, uid: uid, gid: client.gid ?? 0, launcherAppID: nil)
        // What module-access's `access.allowed` admits by argv[0], which any process can fake, is
        // checked here by the executable the kernel reports, as every client is: in this mount
        // namespace (in a sandbox of its own, any program can be bound over /usr/bin/pipewire),
        // and with no library preloaded into it.
        let preloaded = CodeInjection.preload(environment: facts.environment, environmentComplete: facts.environmentComplete) != nil
        if uid == getuid(), facts.inspectable, !facts.foreignMountNamespace, !preloaded {
            if pid == getpid() { return .soundSystem }
            if let exe = facts.exe, PipeWireSoundSystem.sessionManagers.contains(exe) || PipeWireSoundSystem.executables.contains(exe) {
                // Where the session's user manager runs that program's units, only their processes are it.
                if let why = SoundSystemUnits.refusal(exe: exe, cgroup: facts.cgroup) {
                    Log.warn("pipewire: client \(client.id) (pid \(pid)) runs \(exe) but is not the session's: \(why); gated as an app")
                } else {
                    return PipeWireSoundSystem.sessionManagers.contains(exe) ? .sessionManager : .soundSystem
                }
            }
        }
        return open(client, facts)
    }

    private func open(_ client: PipeWireClient, _ facts: ProcessFacts) -> PipeWireAdmission {
        let identity = IdentityClassifier.classify(facts)
        let id = client.id
        let session = SessionState(id: takeID(), identity: identity, launcherAppID: nil, connectedAt: wallClockNow()) {
            [weak self] kind, granted in self?.grantChanged(id, kind, granted)
        }
        session.properties.withLock {
            $0.applicationName = client.applicationName
            $0.processBinary = client.processBinary
        }
        sessions[client.id] = session
        observer.sessionOpened(session)
        observer.clientPropertiesChanged(session)
        Log.info("pipewire: client \(client.id) (pid \(client.pid.map(String.init) ?? "?")) is \(identity.appKey)")
        if isReady { publish(nil) }
        return identity.method == .flatpak ? .sandboxedApp : .app
    }

    /// Called under the consent engine's lock (from the loop while the client is admitted,
    /// from any thread afterwards): the gate shows or hides what the client may record from
    /// on the loop.
    private func grantChanged(_ client: UInt32, _ kind: Capability, _ granted: Bool) {
        let changed = grants.withLock { grants in
            var kinds = grants[client] ?? []
            let changed = granted ? kinds.insert(kind).inserted : kinds.remove(kind) != nil
            grants[client] = kinds
            return changed
        }
        guard changed else { return }
        loop.post { [weak self] in
            guard let self, sessions[client] != nil else { return }
            gate?.grantsChanged(client: client)
        }
    }

    func granted(_ client: UInt32) -> Set<Capability> {
        grants.withLock { $0[client] ?? [] }
    }

    func clientGone(_ client: UInt32) {
        grants.withLock { $0[client] = nil }
        guard let session = sessions.removeValue(forKey: client) else { return }
        observer.sessionClosed(session)
        if isReady { publish(nil) }
    }

    func captureStarted(_ id: UInt32, client: UInt32, origin: CaptureOrigin) -> Bool {
        guard let session = sessions[client] else { return false }
        // As the relay checks at each new stream: a process that exec'd another program since
        // it connected is not the app it was identified as. Its streams stay silent.
        if let changed = ProcessInspector.change(since: session.identity) {
            Log.warn("pipewire: stream \(id) of client \(client) stays silent: its identity changed since it connected: \(changed)")
            return false
        }
        let stream = RecordStream(
            // pipewire-pulse lists it as the source-output its node's serial indexes.
            sessionID: session.id, streamID: takeID(), channel: id, sourceOutputIndex: gate?.serial(of: id) ?? invalidIndex,
            // Negotiated once the stream is linked, after this: captureFormat.
            sampleSpec: Self.notNegotiated, source: origin.source,
            real: false, startedAt: monotonicNow(),
            placedByGraph: true,
            accessChanged: { [weak self] real in
                // Called under the consent engine's lock: the routing happens on the loop.
                self?.loop.post { [weak self] in self?.gate?.setAccess(stream: id, real: real) }
            })
        stream.placement.withLock { $0.kind = origin.kind }
        streams[id] = (stream, session)
        observer.recordStreamStarted(session, stream: stream)
        return stream.isReal
    }

    func mayClaim(_ client: UInt32, volumeControl id: String) -> Bool {
        guard let session = sessions[client] else { return false }
        let may = VolumeControls.mayClaim(id, appKey: session.identity.appKey)
        if !may { Log.warn("pipewire: client \(client) (\(session.identity.appKey)) claims to be the volume control \(id)") }
        return may
    }

    func captureMoved(_ id: UInt32, origin: CaptureOrigin) -> Bool {
        guard let (stream, session) = streams[id] else { return false }
        stream.placement.withLock {
            $0.kind = origin.kind
            $0.source = origin.source
        }
        observer.recordStreamMoved(session, stream: stream)
        return stream.isReal
    }

    func captureFormat(_ id: UInt32, format: PipeWireAudioFormat) {
        guard let (stream, session) = streams[id] else { return }
        let spec = Self.sampleSpec(format)
        stream.negotiated(spec)
        Log.info("session \(session.id) (\(session.identity.appKey)): stream \(id) negotiated \(specText(spec))")
    }

    /// A stream's spec until it has negotiated one.
    static let notNegotiated = SampleSpec(format: .invalid, channels: 0, rate: 0)

    /// What a PipeWire format is in Pulse's words: the same sample format (SPA's planar ones
    /// are native-endian, little on every host Earmuff runs on), or `invalid` for one Pulse has
    /// no name for (F64, U16…).
    static func sampleSpec(_ f: PipeWireAudioFormat) -> SampleSpec {
        let formats: [String: SampleFormat] = [
            "U8": .u8, "U8P": .u8, "ALAW": .alaw, "ULAW": .ulaw,
            "S16LE": .s16le, "S16P": .s16le, "S16BE": .s16be,
            "F32LE": .float32le, "F32P": .float32le, "F32BE": .float32be,
            "S32LE": .s32le, "S32P": .s32le, "S32BE": .s32be,
            "S24LE": .s24le, "S24P": .s24le, "S24BE": .s24be,
            "S24_32LE": .s24_32le, "S24_32P": .s24_32le, "S24_32BE": .s24_32be,
        ]
        return SampleSpec(format: formats[f.sample] ?? .invalid, channels: UInt8(clamping: f.channels ?? 0), rate: f.rate ?? 0)
    }

    func captureEnded(_ id: UInt32) {
        guard let (stream, session) = streams.removeValue(forKey: id) else { return }
        observer.recordStreamEnded(session, stream: stream)
    }

    func ready() {
        isReady = true
        publish(nil)
        Log.info("pipewire: gating native clients of \(address.path)")
    }

    func connectionLost(_ reason: String) {
        // Out of the gate's own call stack: the connection is closed from the loop.
        loop.post { [weak self] in self?.disconnect(reason: reason) }
    }

    func refused(_ reason: String) {
        Log.debug("pipewire: refused: \(reason)")
    }

    func noticed(_ attempt: String) {
        Log.warn("pipewire: \(attempt)")
    }

    func routed(_ action: String) {
        Log.debug("pipewire: \(action)")
    }

    func later(_ seconds: Double, _ body: @escaping () -> Void) {
        loop.schedule(after: seconds, body)
    }

    private func takeID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }
}

/// An inotify watch of one directory, on the door's loop: calls `appeared` when an entry of
/// `name` is created in it or moved into it.
private final class DirectoryWatch: LoopHandler {
    let descriptor: FileDescriptor
    var token: UInt64 = 0
    private let name: String
    private let appeared: () -> Void

    init(directory: String, name: String, appeared: @escaping () -> Void) throws(SystemError) {
        do throws(Errno) {
            descriptor = try FileDescriptor.watchingDirectory(directory)
        } catch {
            throw SystemError("inotify watch of \(directory)", error)
        }
        self.name = name
        self.appeared = appeared
    }

    func handleEvents(_ events: UInt32) {
        if descriptor.drainDirectoryEvents(naming: name) { appeared() }
    }
}
