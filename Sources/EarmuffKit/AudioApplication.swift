// EarmuffKit: Apple's recording permission (AVAudioApplication's `recordPermission` and
// `requestRecordPermission`) for Linux apps behind Earmuff.
//
//     if await AudioApplication.requestRecordPermission() {
//         startRecording()
//     } else if AudioApplication.shared.recordPermission == .denied {
//         showHint("Allow the microphone in Earmuff (earmuff grant …)")
//     }
//
// It speaks Earmuff's permission extension (docs/permission-api.md) on a connection of its
// own to the app's sound server, found the way libpulse finds it, so it works wherever the
// app's PulseAudio socket does, sandboxes included. Without Earmuff in front of the server
// the state is `.unavailable` and requests return false at once, so an app can ship it
// unconditionally.
import Glibc
import PulseWire
import LinuxSystem

/// The app's recording permission, as Earmuff keeps it.
public final class AudioApplication: Sendable {
    /// The app's instance (its connection to the server is opened on first use).
    public static let shared = AudioApplication()

    /// A recording permission state.
    public enum RecordPermission: String, Sendable, Equatable, CaseIterable {
        /// Not asked yet: recording gets silence; a request asks the person.
        case undetermined
        /// The person (or the administrator) said no: recording gets silence.
        case denied
        /// Recording gets real audio.
        case granted
        /// There is no Earmuff in front of the sound server (or no server): nothing to ask.
        case unavailable
    }

    /// What is recorded, each decided on its own.
    public enum CaptureKind: String, Sendable, Equatable, CaseIterable {
        /// Capture devices (the default).
        case microphone
        /// What the speakers play (a sink's monitor).
        case systemAudio = "system-audio"
        /// Another app's audio stream.
        case appAudio = "app-audio"
    }

    /// Who Earmuff takes this app for, and how sure it is.
    public struct Identity: Sendable, Equatable {
        /// The app key decisions are stored under, e.g. `flatpak:org.example.App`.
        public var appKey: String
        /// How it was identified: flatpak, snap, launcher, systemd-scope, script, exe, ….
        public var identifiedBy: String
        /// What the identity resists: `sandbox` when the app's sandbox or launcher vouches
        /// for it (the app inside cannot change it; an unsandboxed program of the user could
        /// build the same), `weak` when any program of the user could pose as it.
        public var strength: String
        /// Whether a sandbox or launcher vouches for it (strength `sandbox`).
        public var isVouchedForBySandbox: Bool { strength == "sandbox" }
    }

    private let environment: [String: String]
    private struct State {
        var connection: PermissionConnection?
        var identity: Identity?
        var unavailable: String?
        /// Whether SUBSCRIBE was sent on `connection`.
        var subscribed = false
    }
    private let state = Locked(State())

    /// How long the server may take to answer a query (not a request, which waits for the person).
    private let timeout: Double

    /// An instance for the server that `environment` names (default: this process's), whose
    /// queries give up after `timeout` seconds. Apps use `shared`.
    public init(environment: [String: String]? = nil, timeout: Double = 10) {
        self.environment = environment ?? Self.processEnvironment()
        self.timeout = timeout
    }

    // MARK: the state

    /// The microphone permission now (a round trip to Earmuff, or `.unavailable`).
    public var recordPermission: RecordPermission { recordPermission(for: .microphone) }

    /// The permission for `kind` now.
    public func recordPermission(for kind: CaptureKind) -> RecordPermission {
        guard let c = connection() else { return .unavailable }
        return status(c.call({ PermissionCall.get(kind: kind.rawValue).packet(tag: $0) }, timeout: timeout))
    }

    /// Who Earmuff takes this app for (nil until a state was read, or when unavailable).
    public var identity: Identity? { state.withLock { $0.identity } }

    /// Why the permission is `.unavailable`, when it was last.
    public var unavailableReason: String? { state.withLock { $0.unavailable } }

    // MARK: asking

    /// Asks for `kind`, like AVAudioApplication's `requestRecordPermission()`: returns at once
    /// when the app is decided, else after the person answers (Earmuff raises its prompt, the one
    /// the app's first recording would raise), the prompt times out, or the connection closes.
    /// `purpose` is shown in the prompt; without one Earmuff shows the app's declared purpose
    /// (apps.d, `earmuff run --purpose`, or the client property `application.capture.purpose`,
    /// which `PULSE_PROP` sets). True when granted.
    public static func requestRecordPermission(for kind: CaptureKind = .microphone, purpose: String? = nil) async -> Bool {
        await shared.requestPermission(for: kind, purpose: purpose) == .granted
    }

    /// The completion-handler form; `completionHandler` is called once, on another thread.
    public static func requestRecordPermission(
        for kind: CaptureKind = .microphone, purpose: String? = nil,
        completionHandler: @escaping @Sendable (Bool) -> Void
    ) {
        shared.requestPermission(for: kind, purpose: purpose) { completionHandler($0 == .granted) }
    }

    /// Asks for `kind` and returns the state it settled on (`.undetermined` when the prompt
    /// timed out, `.unavailable` without Earmuff).
    public func requestPermission(for kind: CaptureKind = .microphone, purpose: String? = nil) async -> RecordPermission {
        await withCheckedContinuation { (done: CheckedContinuation<RecordPermission, Never>) in
            requestPermission(for: kind, purpose: purpose) { done.resume(returning: $0) }
        }
    }

    /// The completion-handler form of `requestPermission(for:purpose:)`.
    public func requestPermission(
        for kind: CaptureKind = .microphone, purpose: String? = nil,
        completionHandler: @escaping @Sendable (RecordPermission) -> Void
    ) {
        guard let c = connection() else {
            completionHandler(.unavailable)
            return
        }
        c.send({ PermissionCall.request(kind: kind.rawValue, purpose: purpose).packet(tag: $0) }) { [self] result in
            completionHandler(status(result))
        }
    }

    // MARK: changes

    /// The permission for `kind` now, then each time it changes (`earmuff grant`, a prompt's
    /// answer, a decision that ends). Ends after `.unavailable` (no Earmuff, or the connection
    /// closed).
    public func recordPermissionChanges(for kind: CaptureKind = .microphone) -> AsyncStream<RecordPermission> {
        AsyncStream { continuation in
            guard let c = connection() else {
                continuation.yield(.unavailable)
                continuation.finish()
                return
            }
            let listener = c.listen { event in
                guard let event else {
                    continuation.yield(.unavailable)
                    continuation.finish()
                    return
                }
                if event.kind == kind.rawValue, let p = RecordPermission(rawValue: event.state) {
                    continuation.yield(p)
                }
            }
            guard let listener else {
                continuation.yield(.unavailable)
                continuation.finish()
                return
            }
            continuation.onTermination = { _ in c.stopListening(listener) }
            // Subscribed before the state is read, so no change falls between the two.
            guard subscribe(c) else {
                continuation.yield(.unavailable)
                continuation.finish()
                return
            }
            continuation.yield(recordPermission(for: kind))
        }
    }

    // MARK: internals

    /// The open connection, or a new one; nil (and the reason kept) when there is none.
    private func connection() -> PermissionConnection? {
        if let c = state.withLock({ $0.connection }), c.isOpen { return c }
        do {
            let c = try PermissionConnection.open(
                paths: ClientEnvironment.serverPaths(environment), environment: environment,
                timeout: timeout)
            state.withLock { s in
                s.connection = c
                s.subscribed = false
            }
            return c
        } catch {
            state.withLock { $0.unavailable = error.description }
            return nil
        }
    }

    private func subscribe(_ c: PermissionConnection) -> Bool {
        if state.withLock({ $0.subscribed && $0.connection === c }) { return true }
        switch c.call({ PermissionCall.subscribe(true).packet(tag: $0) }, timeout: timeout) {
        case .reply:
            state.withLock { if $0.connection === c { $0.subscribed = true } }
            return true
        case let .error(code):
            noteUnavailable(code)
            return false
        case let .closed(why):
            state.withLock { $0.unavailable = why }
            return false
        }
    }

    /// The state a GET or REQUEST reply says; `.unavailable` for an error or a closed connection.
    private func status(_ result: CallResult) -> RecordPermission {
        switch result {
        case let .reply(payload):
            guard let s = try? PermissionStatus.decodePacket(payload, version: Limits.protocolVersion).message,
                let p = RecordPermission(rawValue: s.state)
            else {
                state.withLock { $0.unavailable = "Earmuff's reply could not be read (a newer wire?)" }
                return .unavailable
            }
            state.withLock { $0.identity = Identity(appKey: s.appKey, identifiedBy: s.identifiedBy, strength: s.strength) }
            return p
        case let .error(code):
            noteUnavailable(code)
            return .unavailable
        case let .closed(why):
            state.withLock { $0.unavailable = why }
            return .unavailable
        }
    }

    private func noteUnavailable(_ code: UInt32) {
        let why: String =
            switch ErrorCode(rawValue: code) {
            case .noExtension, .noEntity, .access:
                "the sound server has no \(PermissionExtension.moduleName): Earmuff is not in front of it"
            case .invalid: "Earmuff does not know this capture kind"
            case .notSupported: "this Earmuff does not know the request (an older version)"
            default: "the sound server answered error \(code)"
            }
        state.withLock { $0.unavailable = why }
    }

    private static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        var p = unsafe environ
        while let entry = unsafe p.pointee {
            let text = unsafe String(cString: entry)
            if let eq = text.firstIndex(of: "=") {
                out[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            unsafe p += 1
        }
        return out
    }
}
