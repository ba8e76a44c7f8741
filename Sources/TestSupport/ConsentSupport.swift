// Consent-side helpers for end-to-end tests: reading earmuff's `--json`
// output, running long-lived client subcommands (`agent`, `watch`) while a
// test goes on, and recorders that declare a capture purpose.
//
// The JSON views below are the tests' own mirror of the control protocol
// (docs/control-protocol.md), decoded independently of the ControlProtocol
// module so a test cannot share a bug with the code it checks. Unknown keys
// are ignored, as the protocol asks of clients.

import Foundation
import Glibc
import PulseWire

/// A connected client in `earmuff status --json`.
public struct ClientView: Decodable, Sendable, Equatable {
    /// The daemon's connection id.
    public var id: UInt64
    /// The app key, `kind:value`.
    public var appKey: String
    /// How the app key was derived (exe, launcher, …).
    public var identifiedBy: String
    /// The client's pid.
    public var pid: Int32?
    /// The claimed name (display only).
    public var displayName: String?
    /// What the identity resists: sandbox (strong against its sandbox only) or weak.
    public var strength: String?
}

/// A live capture stream in `earmuff status --json` or an event.
public struct StreamView: Decodable, Sendable, Equatable {
    /// The owning client's id.
    public var client: UInt64
    /// The stream's channel on its client's connection.
    public var stream: UInt32?
    /// The app key.
    public var appKey: String
    /// `real` or `silenced`.
    public var audio: String
    /// The source recorded from.
    public var source: String?
    /// Text such as `s16le 1ch 48000Hz`.
    public var sampleSpec: String?
    /// Record bytes passed unchanged so far.
    public var bytesReal: UInt64?
    /// Record bytes replaced by silence so far.
    public var bytesSilenced: UInt64?
    /// What it captures: microphone, system-audio, app-audio (absent while not known).
    public var kind: String?
}

/// A pending prompt (status, agent output, `prompt-raised` events).
public struct PromptView: Decodable, Sendable, Equatable {
    /// The prompt id.
    public var id: UInt64
    /// The app key.
    public var appKey: String
    /// How the app was identified.
    public var identifiedBy: String?
    /// What the identity resists: sandbox or weak.
    public var strength: String?
    /// The client's pid.
    public var pid: Int32?
    /// The declared purpose, if any.
    public var purpose: String?
    /// The source it wants to record from.
    public var source: String?
    /// When it was raised (seconds since 1970).
    public var raisedAt: Double?
    /// The capture kind it asks for.
    public var kind: String?
    /// True while access to that kind is off for every app.
    public var accessOff: Bool?
}

/// The master switch of one capture kind in `earmuff status --json`.
public struct AccessView: Decodable, Sendable, Equatable {
    public var kind: String
    public var enabled: Bool
}

/// `earmuff status --json`.
public struct StatusView: Decodable, Sendable, Equatable {
    /// Connected audio clients.
    public var clients: [ClientView]
    /// Live capture streams.
    public var streams: [StreamView]
    /// Pending prompts.
    public var prompts: [PromptView]
    /// Decisions for this session or until a time.
    public var temporary: [AppView]?
    /// The master switch of each capture kind.
    public var access: [AccessView]?

    /// Whether access to `kind` is on (the master switch).
    public func accessEnabled(_ kind: String) -> Bool? { access?.first { $0.kind == kind }?.enabled }
    /// Captures waiting for a prompt (over the prompt caps).
    public var waiting: [WaitingView]?
    /// The gate for native PipeWire clients.
    public var pipewire: PipeWireView?
    /// The daemon itself.
    public var daemon: DaemonView?
    /// Where prompts go.
    public var promptChannels: PromptChannelsView? { daemon?.promptChannels }

    /// Clients whose app key is `key`.
    public func clients(of key: String) -> [ClientView] { clients.filter { $0.appKey == key } }
    /// Streams whose app key is `key`.
    public func streams(of key: String) -> [StreamView] { streams.filter { $0.appKey == key } }
    /// Pending prompts for `key`.
    public func prompts(of key: String) -> [PromptView] { prompts.filter { $0.appKey == key } }
}

/// The daemon in `status --json`.
public struct DaemonView: Decodable, Sendable, Equatable {
    public var promptChannels: PromptChannelsView?
}

/// Where prompts go, in `status --json`.
public struct PromptChannelsView: Decodable, Sendable, Equatable {
    /// Prompt agents connected now.
    public var agents: Int
}

/// The PipeWire gate in `status --json`.
public struct PipeWireView: Decodable, Sendable, Equatable {
    public var socket: String
    public var gating: Bool
    public var clients: Int
    public var reason: String?
    public var cuts: Int?
    public var lastCut: String?
}

/// A capture waiting for a prompt in `status --json`.
public struct WaitingView: Decodable, Sendable, Equatable {
    public var appKey: String
    public var kind: String
    public var uid: UInt32
}

/// An app in `earmuff apps --json` or a `decision-changed` event.
public struct AppView: Decodable, Sendable, Equatable {
    /// The app key.
    public var key: String
    /// undetermined, granted or denied.
    public var state: String
    /// Why (user, user-once, missing-purpose, prompt-timeout, …).
    public var reason: String
    /// The stored or declared purpose.
    public var purpose: String?
    /// How it was identified.
    public var identifiedBy: String?
    /// What a key of that method resists at best: sandbox or weak.
    public var strength: String?
    /// Its claimed name.
    public var displayName: String?
    /// The capture kind the decision is about.
    public var kind: String?
    /// How long the state lasts: always, session, timed, once.
    public var lifespan: String?
    /// When a timed decision ends (seconds since 1970).
    public var expiresAt: Double?
    /// The state in force when a temporary decision ends.
    public var afterwards: String?
    /// The name of its desktop entry.
    public var systemName: String?
    /// The icon of its desktop entry.
    public var icon: String?
    /// Its executable.
    public var executable: String?
    /// The command it was last started as, when a link to its executable.
    public var commandName: String?
}

/// How a prompt was closed (`prompt-resolved`).
public struct ResolutionView: Decodable, Sendable, Equatable {
    /// The prompt id.
    public var prompt: UInt64
    /// The app key.
    public var appKey: String
    /// allow, once, deny, timeout, cancelled.
    public var outcome: String
    /// When it was resolved (seconds since 1970).
    public var resolvedAt: Double?
    /// Who resolved it, when known.
    public var by: String?
}

/// One line printed by `earmuff watch --json` or `earmuff agent --json`.
public struct ControlLine: Decodable, Sendable, Equatable {
    /// `event`, `prompt`, `answered`, …
    public var type: String
    /// The event name for `type == "event"`.
    public var event: String?
    /// The subject of `prompt` messages and `prompt-raised` events.
    public var prompt: PromptView?
    /// The subject of `prompt-resolved` events.
    public var resolution: ResolutionView?
    /// The subject of `decision-changed` events.
    public var app: AppView?
    /// The subject of stream events.
    public var stream: StreamView?
    /// The subject of client events.
    public var client: ClientView?
    /// For `answered` lines: the answer sent.
    public var answer: String?
    /// For `answered` lines: whether the daemon accepted the answer.
    public var accepted: Bool?
    /// For `answered` lines: the prompt that was answered.
    public var answeredPrompt: UInt64?

    private enum CodingKeys: String, CodingKey {
        case type, event, prompt, resolution, app, stream, client, answer, accepted
    }

    /// Decodes; an `answered` line carries the prompt id as a number in `prompt`.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decode(String.self, forKey: .type)
        event = try c.decodeIfPresent(String.self, forKey: .event)
        if type == "answered" {
            let id = try c.decode(UInt64.self, forKey: .prompt)
            answeredPrompt = id
            prompt = nil
        } else {
            prompt = try c.decodeIfPresent(PromptView.self, forKey: .prompt)
        }
        resolution = try c.decodeIfPresent(ResolutionView.self, forKey: .resolution)
        app = try c.decodeIfPresent(AppView.self, forKey: .app)
        stream = try c.decodeIfPresent(StreamView.self, forKey: .stream)
        client = try c.decodeIfPresent(ClientView.self, forKey: .client)
        answer = try c.decodeIfPresent(String.self, forKey: .answer)
        accepted = try c.decodeIfPresent(Bool.self, forKey: .accepted)
    }
}

/// Decoding earmuff's JSON output.
public enum ConsentJSON {
    /// Decodes one JSON document, with the text in the error when it does not parse.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw TestSupportError("cannot decode \(type) from \(String(decoding: data.prefix(2000), as: UTF8.self)): \(error)")
        }
    }

    /// Decodes every complete line (one JSON object each); a half-written last line is left out.
    public static func lines(_ data: Data) throws -> [ControlLine] {
        let text = String(decoding: data, as: UTF8.self)
        var parts = text.split(separator: "\n", omittingEmptySubsequences: false)
        parts.removeLast() // after the last "\n": empty, or a line still being written
        return try parts.filter { !$0.isEmpty }.map { try decode(ControlLine.self, from: Data($0.utf8)) }
    }
}

/// A long-running `earmuff` client subcommand (`agent`, `watch`) whose stdout
/// is read while it runs.
public final class RunningCLI: Sendable {
    /// The process.
    public let process: ChildProcess
    /// Where its stdout and stderr go.
    public let directory: String

    init(process: ChildProcess, directory: String) {
        self.process = process
        self.directory = directory
    }

    /// Everything it printed to stdout so far.
    public func output() -> String { String(decoding: process.stdoutData(), as: UTF8.self) }

    /// Its complete JSON lines so far (for `--json` runs).
    public func lines() throws -> [ControlLine] { try ConsentJSON.lines(process.stdoutData()) }

    /// Waits until one of its lines satisfies `condition`; returns that line or nil at the deadline.
    public func waitForLine(timeout: Double = 60, _ condition: (ControlLine) -> Bool) async throws -> ControlLine? {
        var found: ControlLine?
        try await Wait.until(timeout: timeout, interval: 0.02) {
            found = try lines().first(where: condition)
            return found != nil || !process.isRunning
        }
        if found == nil { found = try lines().first(where: condition) }
        return found
    }

    /// Stops it (SIGTERM, then SIGKILL) and removes its directory; returns its final result.
    @discardableResult
    public func stop() -> ToolResult {
        process.terminate(signal: SIGTERM, grace: 5)
        let result = process.finish(timeout: 1)
        TempDir.remove(directory)
        return result
    }

    /// A summary for failure messages.
    public var summary: String { "stdout:\n\(output())\nstderr:\n\(process.stderrText())" }

    deinit {
        if process.isRunning { process.terminate(signal: SIGKILL) }
        TempDir.remove(directory)
    }
}

extension EarmuffProcess {
    /// Starts `earmuff ARGS` (e.g. `agent --answer allow --json`, `watch --json`) with this
    /// instance's private environment, and returns at once.
    public func startCLI(_ arguments: [String], maxLifetime: Int = 600) throws -> RunningCLI {
        let dir = try TempDir.make(prefix: "earmuff-cli")
        do {
            let process = try ChildProcess.spawn(
                executable: binary, arguments: arguments, environment: environment,
                stdoutPath: "\(dir)/stdout", stderrPath: "\(dir)/stderr",
                maxLifetime: maxLifetime, cleanupDirectory: dir)
            return RunningCLI(process: process, directory: dir)
        } catch {
            TempDir.remove(dir)
            throw error
        }
    }

    /// Starts `earmuff watch --json` and returns once it is subscribed: it keeps changing the
    /// decision of a made-up probe app (`probeKey`) until the watcher reports that change.
    public func startWatch(
        probeKey: String = "exe:/nonexistent/earmuff-watch-probe",
        timeout: Double = 60
    ) async throws -> RunningCLI {
        let watch = try startCLI(["watch", "--json"])
        let deadline = Wait.now() + timeout
        while Wait.now() < deadline {
            try control("deny", probeKey)
            let seen = try await watch.waitForLine(timeout: 0.5) { $0.event == "decision-changed" && $0.app?.key == probeKey }
            if seen != nil { return watch }
            guard watch.process.isRunning else { break }
        }
        let summary = watch.summary
        watch.stop()
        throw TestSupportError("earmuff watch did not report a probe decision within \(timeout) s; \(summary)\nearmuff log:\n\(log())")
    }

    /// `earmuff status --json`, decoded.
    public func status() throws -> StatusView {
        try ConsentJSON.decode(StatusView.self, from: control("status", "--json").stdout)
    }

    /// `earmuff apps --json`, decoded.
    public func apps() throws -> [AppView] {
        try ConsentJSON.decode([AppView].self, from: control("apps", "--json").stdout)
    }

    /// The app `key` from `earmuff apps --json`, or nil when it is not listed.
    public func app(_ key: String) throws -> AppView? {
        try apps().first { $0.key == key }
    }

    /// Polls `earmuff status --json` until `condition` holds; returns the last status seen.
    @discardableResult
    public func waitForStatus(timeout: Double = 60, _ condition: (StatusView) -> Bool) async throws -> StatusView {
        var last = try status()
        try await Wait.until(timeout: timeout, interval: 0.05) {
            last = try status()
            return condition(last)
        }
        return last
    }
}

extension Tool {
    /// The `PULSE_PROP` value declaring `purpose` as the client's capture purpose.
    public static func purposeProperty(_ purpose: String) -> String {
        "application.capture.purpose='\(purpose)'"
    }

    /// Starts a raw recording like `startRecording`, with `purpose` (when given) as the
    /// client's `application.capture.purpose` and `extraArguments` passed to parecord
    /// (e.g. `--monitor-stream=N`).
    public static func startPurposefulRecording(
        server: String, purpose: String?, format: PCMFormat = .s16le, rate: Int = 48000, channels: Int = 1,
        device: String? = nil, extraArguments: [String] = [], latencyMsec: Int = 20,
        environment: [String: String] = [:], tool name: String = "parecord"
    ) throws -> Recording {
        var args =
            [
                "--raw", "--format=\(format.pulseName)", "--rate=\(rate)", "--channels=\(channels)",
                "--latency-msec=\(latencyMsec)",
            ] + extraArguments
        if let device { args.append("--device=\(device)") }
        args.append("recording.raw")
        var env = environment
        if let purpose { env["PULSE_PROP"] = purposeProperty(purpose) }
        let tool = try start(name, args: args, server: server, environment: env)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }

    /// Starts any recorder `name ARGS` that writes raw audio of the given format to
    /// `recording.raw` in its private directory (a script, parecord under `unshare`…),
    /// declaring `purpose` through PULSE_PROP when given.
    public static func startRecordingCommand(
        _ name: String, args: [String], server: String, purpose: String?, environment: [String: String] = [:],
        format: PCMFormat = .s16le, rate: Int = 48000, channels: Int = 1
    ) throws -> Recording {
        var env = environment
        if let purpose { env["PULSE_PROP"] = purposeProperty(purpose) }
        let tool = try start(name, args: args, server: server, environment: env)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }

    /// Starts `earmuff ARGS -- parecord --raw … recording.raw` (for `earmuff run`), in a
    /// private tool directory, with `server` as the inherited PULSE_SERVER.
    public static func startRecordingThroughRun(
        earmuffBinary: String, runArguments: [String], server: String, format: PCMFormat = .s16le,
        rate: Int = 48000, channels: Int = 1, latencyMsec: Int = 20
    ) throws -> Recording {
        guard let parecord = findExecutable("parecord") else { throw TestSupportError("parecord not found in PATH") }
        let args =
            ["run"] + runArguments + [
                "--", parecord, "--raw", "--format=\(format.pulseName)", "--rate=\(rate)",
                "--channels=\(channels)", "--latency-msec=\(latencyMsec)", "recording.raw",
            ]
        let tool = try start(earmuffBinary, args: args, server: server)
        return Recording(tool: tool, format: format, rate: rate, channels: channels)
    }
}

extension Recording {
    /// The offset of the first byte that is not `silenceByte`, or nil if all so far is silence.
    public func firstNonSilentOffset() -> Int? {
        let bytes = data()
        return bytes.firstIndex { $0 != format.silenceByte }.map { $0 - bytes.startIndex }
    }

    /// Whether the whole recording so far is non-empty exact silence of its format.
    public func isExactSilence() -> Bool {
        AudioAnalysis.isUniform(data(), value: format.silenceByte)
    }
}

/// A control-socket connection speaking JSON lines by hand (for what the CLI does not expose,
/// such as two agents answering the same prompt at once).
public final class ControlConnection {
    private let client: RawClient
    private var buffer: [UInt8] = []

    /// Connects to the control socket at `path` and reads the daemon's greeting.
    public init(path: String, timeout: Double = 10) throws {
        client = try RawClient(path: path)
        guard let hello = try nextMessage(timeout: timeout), hello["type"] as? String == "hello" else {
            throw TestSupportError("no hello from the control socket at \(path)")
        }
    }

    /// Sends one request object as a JSON line.
    public func send(_ object: [String: Any]) throws {
        var line = try JSONSerialization.data(withJSONObject: object)
        line.append(UInt8(ascii: "\n"))
        try client.send(Array(line))
    }

    /// The next JSON object from the daemon, or nil after `timeout` seconds or when it closed.
    public func nextMessage(timeout: Double) throws -> [String: Any]? {
        let deadline = Wait.now() + timeout
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(buffer[..<nl])
                buffer.removeSubrange(...nl)
                guard let object = try JSONSerialization.jsonObject(with: line) as? [String: Any] else {
                    throw TestSupportError("control line is not an object: \(String(decoding: line, as: UTF8.self))")
                }
                return object
            }
            let left = deadline - Wait.now()
            if left <= 0 || client.peerClosed { return nil }
            buffer += client.readRaw(timeout: left)
        }
    }

    /// Reads until a message satisfies `condition` (others are dropped); nil at the deadline.
    public func waitFor(timeout: Double = 30, _ condition: ([String: Any]) -> Bool) throws -> [String: Any]? {
        let deadline = Wait.now() + timeout
        while let m = try nextMessage(timeout: max(0, deadline - Wait.now())) {
            if condition(m) { return m }
        }
        return nil
    }

    /// Sends `object` with `id` added and returns the reply carrying that id.
    public func request(_ object: [String: Any], id: Int, timeout: Double = 30) throws -> [String: Any]? {
        var o = object
        o["id"] = id
        try send(o)
        return try waitFor(timeout: timeout) { ($0["id"] as? Int) == id && $0["type"] as? String != "event" }
    }
}

extension RawClient {
    /// Sends CREATE_RECORD_STREAM (`request`, tag `tag`) and returns the stream's channel and the
    /// sample spec the server chose; throws with what arrived instead of a reply.
    public func createRecordStream(
        _ request: CreateRecordStreamRequest, tag: UInt32,
        timeout: Double = 10
    ) throws -> (channel: UInt32, spec: SampleSpec) {
        var w = TagStructWriter(reservingCapacity: 256)
        PacketHeader(command: .createRecordStream, tag: tag).encode(into: &w)
        request.encode(into: &w, version: Limits.protocolVersion)
        guard let (command, reader) = try self.request(Self.frame(w.bytes), tag: tag, timeout: timeout) else {
            throw TestSupportError("no CREATE_RECORD_STREAM reply (peer closed: \(peerClosed))")
        }
        var r = reader
        guard command == Command.reply.rawValue else {
            let code = command == Command.error.rawValue ? (try? r.readU32()).map { "error \($0)" } : nil
            throw TestSupportError("CREATE_RECORD_STREAM answered with \(code ?? "command \(command)")")
        }
        let reply = try CreateRecordStreamReply.decode(from: &r, version: Limits.protocolVersion)
        return (reply.channel, reply.sampleSpec)
    }

    /// Collects the audio of record channel `channel` until `bytes` arrived or `timeout`
    /// passed, including any data frames `reply(tag:)` read past earlier.
    public func recordData(channel: UInt32, bytes: Int, timeout: Double = 60) throws -> [UInt8] {
        var out: [UInt8] = []
        for frame in skippedFrames where !frame.descriptor.isPacket && frame.descriptor.channel == channel {
            out += frame.payload
        }
        skippedFrames.removeAll()
        let deadline = Wait.now() + timeout
        while out.count < bytes, let frame = try readFrame(timeout: max(0, deadline - Wait.now())) {
            if !frame.descriptor.isPacket && frame.descriptor.channel == channel { out += frame.payload }
        }
        return out
    }
}
