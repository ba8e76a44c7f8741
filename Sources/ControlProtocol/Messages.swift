// Control protocol messages (version 1).
//
// Client → daemon: `ClientMessage` (a `hello` or a `ControlRequest`, with an
// optional integer `id`). Daemon → client: `ServerMessage` — a response that
// echoes the request's `id` (`hello`, `ok`, `status`, `apps`, `app`,
// `launcher`, `error`), an `event` for subscribers, or a `prompt` for agents.
// Every message is one JSON object with a `"type"`; payloads use camelCase keys.
// Fields whose value is unknown are left out rather than sent as null.
import Consent
import Foundation

// MARK: - Small value types

/// A decision a client may set with `set-decision`.
public enum DecisionState: String, Codable, Sendable, CaseIterable {
    case granted
    case denied
}

/// How a prompt ended.
public enum PromptOutcome: String, Codable, Sendable, CaseIterable {
    case allow
    case once
    case deny
    /// Nobody answered within `prompt-timeout`; the app stays undetermined.
    case timeout
    /// Closed on the desktop without an answer ("not now"); the app stays undetermined
    /// and is asked again at its next capture.
    case dismissed
    /// The prompt became moot (decision set from the CLI, or the app went away).
    case cancelled
}

/// Whether a capture stream currently gets real samples or silence.
public enum AudioDelivery: String, Codable, Sendable, CaseIterable {
    case real
    case silenced
}

/// An error code. Open-ended: codes this build does not know still decode.
public struct ControlErrorCode: RawRepresentable, Hashable, Codable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }

    /// No app matches the name or key given.
    public static let unknownApp = ControlErrorCode("unknown-app")
    /// A name matches more than one known app; use the app key.
    public static let ambiguousApp = ControlErrorCode("ambiguous-app")
    /// The request is malformed (missing or invalid field, or not JSON).
    public static let badRequest = ControlErrorCode("bad-request")
    /// The request type is unknown to this daemon.
    public static let unknownRequest = ControlErrorCode("unknown-request")
    /// The peer speaks a protocol version this daemon does not.
    public static let version = ControlErrorCode("version")
    /// A request line exceeded the size limit.
    public static let tooLarge = ControlErrorCode("too-large")
    /// `answer-prompt` named a prompt that is not pending (already answered or timed out).
    public static let unknownPrompt = ControlErrorCode("unknown-prompt")
    /// `answer-prompt` from a connection that did not send `become-agent`.
    public static let notAgent = ControlErrorCode("not-agent")
    /// `subscribe` or `become-agent` over the limit of such connections for the peer's uid.
    public static let tooMany = ControlErrorCode("too-many")
    /// `become-agent` from a process that is not one of Earmuff's own programs.
    public static let notEarmuff = ControlErrorCode("not-earmuff")
    /// The daemon could not carry out the request (e.g. a socket could not be created).
    public static let failed = ControlErrorCode("failed")
    /// A bug or an unexpected state in the daemon.
    public static let `internal` = ControlErrorCode("internal")
}

/// An error reply: a code for programs and a one-line message naming cause and fix.
public struct ControlError: Codable, Sendable, Equatable, Error, CustomStringConvertible {
    public var code: ControlErrorCode
    public var message: String

    public init(_ code: ControlErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

// MARK: - Client → daemon

/// A request a client sends; the daemon's handler answers it with a `ControlResponse`.
public enum ControlRequest: Sendable, Equatable {
    /// Daemon, upstream, clients, streams and prompts.
    case status
    /// Every known app.
    case apps
    /// Stores a decision for `lifespan` (nil: always). `app` is an app key or an unambiguous
    /// display/executable name. `kind` is the capture kind (microphone, system-audio, app-audio;
    /// absent: microphone).
    case setDecision(
        app: String, state: DecisionState, reason: String?, kind: Capability? = nil,
        lifespan: RequestedLifespan? = nil)
    /// Back to undetermined.
    case reset(app: String, kind: Capability? = nil)
    /// Start receiving `event` messages on this connection.
    case subscribe
    /// Receive `prompt` messages (pending ones at once) and answer them.
    case becomeAgent
    /// Answer a prompt, for `lifespan` (nil: `once` for the answer `once`, else always).
    case answerPrompt(prompt: UInt64, answer: PromptAnswer, lifespan: RequestedLifespan? = nil)
    /// Ask for a per-app listening socket for `earmuff run --app-id`.
    case registerLauncher(appID: String, purpose: String?)
    /// Capture sessions from the usage log, newest first: of one app (a key or name) when given,
    /// started at `since` (seconds since 1970) or later when given, at most `limit`.
    case log(app: String?, since: Double?, limit: Int?)
    /// Switches a capture kind on or off for every app (the master switch).
    case setAccess(kind: Capability, enabled: Bool)

    /// The wire `type` of this request.
    public var typeName: String {
        switch self {
        case .status: "status"
        case .apps: "apps"
        case .setDecision: "set-decision"
        case .reset: "reset"
        case .subscribe: "subscribe"
        case .becomeAgent: "become-agent"
        case .answerPrompt: "answer-prompt"
        case .registerLauncher: "register-launcher"
        case .log: "log"
        case .setAccess: "set-access"
        }
    }
}

/// One line from a client: a version handshake or a request, with the id echoed by the reply.
public struct ClientMessage: Sendable, Equatable {
    /// What the line asks for.
    public enum Body: Sendable, Equatable {
        /// Version handshake: the client's protocol version and a free-form name.
        case hello(version: Int, client: String?)
        case request(ControlRequest)
    }

    /// Echoed in the reply; optional.
    public var id: Int?
    public var body: Body

    public init(id: Int?, _ body: Body) {
        self.id = id
        self.body = body
    }

    /// A request with an id.
    public static func request(_ request: ControlRequest, id: Int?) -> ClientMessage {
        ClientMessage(id: id, .request(request))
    }
}

// MARK: - Daemon → client

/// The daemon's reply to one request.
public enum ControlResponse: Sendable, Equatable {
    /// The greeting, also the reply to `hello`.
    case hello(ServerHello)
    /// Done (subscribe, become-agent, answer-prompt).
    case ok
    case status(StatusPayload)
    case apps([AppInfo])
    /// The app after set-decision or reset.
    case app(AppInfo)
    case launcher(LauncherInfo)
    /// Capture sessions, the reply to `log`.
    case usage([UsageInfo])
    case error(ControlError)

    /// True for `.error`.
    public var isError: Bool {
        if case .error = self { return true }
        return false
    }
}

/// Something that happened in the daemon, sent to subscribers.
public enum ControlEvent: Sendable, Equatable {
    case clientConnected(ClientInfo)
    case clientDisconnected(ClientInfo)
    case streamStarted(StreamInfo)
    /// A live stream switched between real samples and silence.
    case streamChanged(StreamInfo)
    case streamEnded(StreamInfo)
    case promptRaised(PromptInfo)
    case promptResolved(PromptResolution)
    case decisionChanged(AppInfo)
    /// A capture kind was switched on or off for every app.
    case accessChanged(AccessInfo)

    /// The wire name in the `event` field.
    public var name: String {
        switch self {
        case .clientConnected: "client-connected"
        case .clientDisconnected: "client-disconnected"
        case .streamStarted: "stream-started"
        case .streamChanged: "stream-changed"
        case .streamEnded: "stream-ended"
        case .promptRaised: "prompt-raised"
        case .promptResolved: "prompt-resolved"
        case .decisionChanged: "decision-changed"
        case .accessChanged: "access-changed"
        }
    }
}

/// One line from the daemon.
public enum ServerMessage: Sendable, Equatable {
    /// A reply; `id` echoes the request's id (nil for the greeting and for requests without one).
    case response(id: Int?, ControlResponse)
    /// An event for subscribers.
    case event(ControlEvent)
    /// A prompt for agents to answer.
    case prompt(PromptInfo)
}

// MARK: - Wire encoding

struct WireKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension ClientMessage: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: WireKey.self)
        id = try c.decodeIfPresent(Int.self, forKey: WireKey("id"))
        let type = try c.decode(String.self, forKey: WireKey("type"))
        func str(_ k: String) throws -> String { try c.decode(String.self, forKey: WireKey(k)) }
        func optStr(_ k: String) throws -> String? { try c.decodeIfPresent(String.self, forKey: WireKey(k)) }
        let messageID = id
        /// A capture kind by name, refused with the names there are.
        func kind(_ name: String?) throws -> Capability? {
            guard let name else { return nil }
            guard let kind = Capability(rawValue: name) else {
                throw ControlProtocolError.badMessage(
                    id: messageID,
                    "unknown capture kind \"\(name)\"; use "
                        + Capability.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return kind
        }
        switch type {
        case "hello":
            body = .hello(version: try c.decode(Int.self, forKey: WireKey("version")), client: try optStr("client"))
        case "status": body = .request(.status)
        case "apps": body = .request(.apps)
        case "set-decision":
            body = .request(
                .setDecision(
                    app: try str("app"),
                    state: try c.decode(DecisionState.self, forKey: WireKey("state")),
                    reason: try optStr("reason"), kind: try kind(optStr("kind")),
                    lifespan: try RequestedLifespan.decode(from: c)))
        case "reset": body = .request(.reset(app: try str("app"), kind: try kind(optStr("kind"))))
        case "subscribe": body = .request(.subscribe)
        case "become-agent": body = .request(.becomeAgent)
        case "answer-prompt":
            body = .request(
                .answerPrompt(
                    prompt: try c.decode(UInt64.self, forKey: WireKey("prompt")),
                    answer: try c.decode(PromptAnswer.self, forKey: WireKey("answer")),
                    lifespan: try RequestedLifespan.decode(from: c)))
        case "register-launcher":
            body = .request(.registerLauncher(appID: try str("appId"), purpose: try optStr("purpose")))
        case "log":
            body = .request(
                .log(
                    app: try optStr("app"), since: try c.decodeIfPresent(Double.self, forKey: WireKey("since")),
                    limit: try c.decodeIfPresent(Int.self, forKey: WireKey("limit"))))
        case "set-access":
            body = .request(.setAccess(kind: try kind(str("kind"))!, enabled: try c.decode(Bool.self, forKey: WireKey("enabled"))))
        default:
            throw ControlProtocolError.unknownType(id: id, type)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: WireKey.self)
        try c.encodeIfPresent(id, forKey: WireKey("id"))
        switch body {
        case .hello(let version, let client):
            try c.encode("hello", forKey: WireKey("type"))
            try c.encode(version, forKey: WireKey("version"))
            try c.encodeIfPresent(client, forKey: WireKey("client"))
        case .request(let r):
            try c.encode(r.typeName, forKey: WireKey("type"))
            switch r {
            case .status, .apps, .subscribe, .becomeAgent: break
            case .setDecision(let app, let state, let reason, let kind, let lifespan):
                try c.encode(app, forKey: WireKey("app"))
                try c.encode(state, forKey: WireKey("state"))
                try c.encodeIfPresent(reason, forKey: WireKey("reason"))
                try c.encodeIfPresent(kind, forKey: WireKey("kind"))
                try lifespan?.encode(to: &c)
            case .reset(let app, let kind):
                try c.encode(app, forKey: WireKey("app"))
                try c.encodeIfPresent(kind, forKey: WireKey("kind"))
            case .answerPrompt(let prompt, let answer, let lifespan):
                try c.encode(prompt, forKey: WireKey("prompt"))
                try c.encode(answer, forKey: WireKey("answer"))
                try lifespan?.encode(to: &c)
            case .registerLauncher(let appID, let purpose):
                try c.encode(appID, forKey: WireKey("appId"))
                try c.encodeIfPresent(purpose, forKey: WireKey("purpose"))
            case .setAccess(let kind, let enabled):
                try c.encode(kind, forKey: WireKey("kind"))
                try c.encode(enabled, forKey: WireKey("enabled"))
            case .log(let app, let since, let limit):
                try c.encodeIfPresent(app, forKey: WireKey("app"))
                try c.encodeIfPresent(since, forKey: WireKey("since"))
                try c.encodeIfPresent(limit, forKey: WireKey("limit"))
            }
        }
    }
}

extension ServerMessage: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: WireKey.self)
        let type = try c.decode(String.self, forKey: WireKey("type"))
        let id = try c.decodeIfPresent(Int.self, forKey: WireKey("id"))
        func get<T: Decodable>(_ t: T.Type, _ k: String) throws -> T { try c.decode(t, forKey: WireKey(k)) }
        switch type {
        case "hello": self = .response(id: id, .hello(try ServerHello(from: decoder)))
        case "ok": self = .response(id: id, .ok)
        case "status": self = .response(id: id, .status(try get(StatusPayload.self, "status")))
        case "apps": self = .response(id: id, .apps(try get([AppInfo].self, "apps")))
        case "app": self = .response(id: id, .app(try get(AppInfo.self, "app")))
        case "launcher": self = .response(id: id, .launcher(try get(LauncherInfo.self, "launcher")))
        case "usage": self = .response(id: id, .usage(try get([UsageInfo].self, "usage")))
        case "error": self = .response(id: id, .error(try ControlError(from: decoder)))
        case "prompt": self = .prompt(try get(PromptInfo.self, "prompt"))
        case "event":
            let name = try get(String.self, "event")
            switch name {
            case "client-connected": self = .event(.clientConnected(try get(ClientInfo.self, "client")))
            case "client-disconnected": self = .event(.clientDisconnected(try get(ClientInfo.self, "client")))
            case "stream-started": self = .event(.streamStarted(try get(StreamInfo.self, "stream")))
            case "stream-changed": self = .event(.streamChanged(try get(StreamInfo.self, "stream")))
            case "stream-ended": self = .event(.streamEnded(try get(StreamInfo.self, "stream")))
            case "prompt-raised": self = .event(.promptRaised(try get(PromptInfo.self, "prompt")))
            case "prompt-resolved": self = .event(.promptResolved(try get(PromptResolution.self, "resolution")))
            case "decision-changed": self = .event(.decisionChanged(try get(AppInfo.self, "app")))
            case "access-changed": self = .event(.accessChanged(try get(AccessInfo.self, "access")))
            default: throw ControlProtocolError.unknownType(id: nil, "event/\(name)")
            }
        default:
            throw ControlProtocolError.unknownType(id: id, type)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: WireKey.self)
        switch self {
        case .response(let id, let response):
            try c.encodeIfPresent(id, forKey: WireKey("id"))
            switch response {
            case .hello(let h):
                try c.encode("hello", forKey: WireKey("type"))
                try h.encode(to: encoder)
            case .ok:
                try c.encode("ok", forKey: WireKey("type"))
            case .status(let s):
                try c.encode("status", forKey: WireKey("type"))
                try c.encode(s, forKey: WireKey("status"))
            case .apps(let a):
                try c.encode("apps", forKey: WireKey("type"))
                try c.encode(a, forKey: WireKey("apps"))
            case .app(let a):
                try c.encode("app", forKey: WireKey("type"))
                try c.encode(a, forKey: WireKey("app"))
            case .launcher(let l):
                try c.encode("launcher", forKey: WireKey("type"))
                try c.encode(l, forKey: WireKey("launcher"))
            case .usage(let u):
                try c.encode("usage", forKey: WireKey("type"))
                try c.encode(u, forKey: WireKey("usage"))
            case .error(let e):
                try c.encode("error", forKey: WireKey("type"))
                try e.encode(to: encoder)
            }
        case .prompt(let p):
            try c.encode("prompt", forKey: WireKey("type"))
            try c.encode(p, forKey: WireKey("prompt"))
        case .event(let event):
            try c.encode("event", forKey: WireKey("type"))
            try c.encode(event.name, forKey: WireKey("event"))
            switch event {
            case .clientConnected(let x), .clientDisconnected(let x): try c.encode(x, forKey: WireKey("client"))
            case .streamStarted(let x), .streamChanged(let x), .streamEnded(let x): try c.encode(x, forKey: WireKey("stream"))
            case .promptRaised(let x): try c.encode(x, forKey: WireKey("prompt"))
            case .promptResolved(let x): try c.encode(x, forKey: WireKey("resolution"))
            case .decisionChanged(let x): try c.encode(x, forKey: WireKey("app"))
            case .accessChanged(let x): try c.encode(x, forKey: WireKey("access"))
            }
        }
    }
}

// MARK: - Lines

/// Turns messages into JSON lines and back.
public enum ControlCodec {
    /// The JSON line (with its trailing "\n") for a value. Never fails: a value that
    /// cannot be encoded (a non-finite number) becomes an `internal` error line.
    public static func encodeLine<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .throw
        var bytes: [UInt8]
        do {
            bytes = Array(try encoder.encode(value))
        } catch {
            bytes = Array(#"{"code":"internal","message":"the daemon could not encode its reply; report this as a bug","type":"error"}"#.utf8)
        }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Decodes one line (without its newline) from a client.
    public static func decodeClientMessage(_ line: [UInt8]) throws(ControlProtocolError) -> ClientMessage {
        try decode(ClientMessage.self, line)
    }

    /// Decodes one line (without its newline) from the daemon.
    public static func decodeServerMessage(_ line: [UInt8]) throws(ControlProtocolError) -> ServerMessage {
        try decode(ServerMessage.self, line)
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ line: [UInt8]) throws(ControlProtocolError) -> T {
        let data = Data(line)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw .notJSON("invalid JSON")
        }
        guard let dict = object as? [String: Any] else { throw .notJSON("a JSON value that is not an object") }
        let id = dict["id"] as? Int
        guard dict["type"] is String else {
            throw .badMessage(id: id, "the message has no \"type\" string; every line needs one, e.g. {\"type\":\"status\",\"id\":1}")
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let e as ControlProtocolError {
            throw e
        } catch let DecodingError.keyNotFound(key, _) {
            throw .badMessage(
                id: id, "field \"\(key.stringValue)\" is missing; see docs/control-protocol.md for the fields of '\(dict["type"] as? String ?? "")'")
        } catch let DecodingError.typeMismatch(_, ctx), let DecodingError.valueNotFound(_, ctx) {
            throw .badMessage(id: id, "field \"\(fieldPath(ctx))\" has the wrong type; see docs/control-protocol.md")
        } catch let DecodingError.dataCorrupted(ctx) {
            throw .badMessage(id: id, "field \"\(fieldPath(ctx))\" has an invalid value; see docs/control-protocol.md for the allowed values")
        } catch {
            throw .badMessage(id: id, "invalid message: \(error)")
        }
    }

    private static func fieldPath(_ ctx: DecodingError.Context) -> String {
        ctx.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}
