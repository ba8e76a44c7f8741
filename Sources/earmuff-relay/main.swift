// earmuff-relay: the relay alone, with no consent service. Every record stream is real,
// no request is refused and Earmuff's permission extension is not there (as in front of
// a plain server). It links the Relay target and nothing above it, so it shows that the
// audio path builds and runs without SQLite or sd-bus (scripts/check-relay-links), and it
// is what the relay costs by itself.
//
//   earmuff-relay --listen PATH --upstream SERVER [--loops N] [--coalesce-ms MS] [--log-level LEVEL]
import Basics
import Glibc
import PulseWire
import Relay
import Runtime
import StreamState

/// Lets everything through. Safe from any thread: it keeps nothing but the relay it answers on.
final class OpenGate: SessionObserver, @unchecked Sendable {
    // @unchecked Sendable: `relay` is set once, before the relay accepts its first client.
    weak var relay: Daemon?

    func sessionOpened(_ session: SessionState) {}
    func sessionClosed(_ session: SessionState) {}
    func clientPropertiesChanged(_ session: SessionState) {}
    func recordStreamRequested(_ session: SessionState, request: CreateRecordStreamRequest) -> String? { nil }
    func recordStreamStarted(_ session: SessionState, stream: RecordStream) { stream.setReal(true) }
    func recordStreamMoved(_ session: SessionState, stream: RecordStream) {}
    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {}
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? { nil }

    /// Answered as a server without the extension answers: ERROR(no such extension).
    func permissionCall(_ session: SessionState, tag: UInt32, call: PermissionCall) -> String? {
        relay?.inject(sessionID: session.id, packet: ErrorReply(code: .noExtension).packet(tag: tag, version: session.protocolVersion))
        return nil
    }
}

/// A client named by its executable, as far as /proc shows it.
func identify(pid: Int32, uid: UInt32, gid: UInt32) -> ClientIdentity {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = unsafe readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
    let exe = n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    return ClientIdentity(
        pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "exe", value: exe ?? "pid-\(pid)"),
        method: .executable, executable: exe)
}

func fail(_ message: String, status: Int32 = 64) -> Never {
    var line = Array("earmuff-relay: \(message)\n".utf8)
    unsafe line.withUnsafeMutableBytes { _ = unsafe write(2, $0.baseAddress, $0.count) }
    exit(status)
}

let usage = "usage: earmuff-relay --listen PATH --upstream SERVER [--loops N] [--coalesce-ms MS] [--log-level LEVEL]"
var listen: String?
var upstreamText: String?
var options = RelayOptions()
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    if flag == "--help" || flag == "-h" {
        print(usage)
        exit(0)
    }
    guard let value = arguments.popFirst() else { fail("\(flag) needs a value\n\(usage)") }
    switch flag {
    case "--listen": listen = value
    case "--upstream": upstreamText = value
    case "--loops":
        guard let n = Int(value), (1...256).contains(n) else { fail("--loops must be a number from 1 to 256, not \"\(value)\"") }
        options.loops = n
    case "--coalesce-ms":
        let limit = RelayOptions.maximumCoalesceWindow * 1000
        guard let ms = Double(value), ms.isFinite, ms >= 0, ms <= limit else {
            fail("--coalesce-ms must be milliseconds from 0 to \(Int(limit)), not \"\(value)\"")
        }
        options.coalesceWindow = ms / 1000
    case "--log-level":
        guard let level = LogLevel(name: value) else { fail("--log-level must be error, warn, info or debug, not \"\(value)\"") }
        Log.setLevel(level)
    default: fail("unknown argument '\(flag)'\n\(usage)")
    }
}
guard let listen, let upstreamText else { fail("--listen and --upstream are needed\n\(usage)") }
let upstream: UpstreamAddress
do {
    upstream = try UpstreamAddress.parse(upstreamText)
} catch {
    fail("\(error)")
}
guard upstream.path != listen else { fail("the upstream server \(upstream) is the relay's own socket") }
// No app is told apart from another here: one limit for all.
options.maxClientsPerApp = options.maxClients

// The stop signals are blocked in every thread; the main thread waits for them.
var stopSignals = sigset_t()
unsafe sigemptyset(&stopSignals)
unsafe sigaddset(&stopSignals, SIGINT)
unsafe sigaddset(&stopSignals, SIGTERM)
unsafe pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

let gate = OpenGate()
let relay: Daemon
do {
    relay = try Daemon(listenPath: listen, upstream: upstream, options: options, observer: gate) { pid, uid, gid, _ in
        identify(pid: pid, uid: uid, gid: gid)
    }
    gate.relay = relay
    try relay.start()
} catch {
    fail("cannot start: \(error)", status: 1)
}
Log.info("listening on \(listen), relaying to \(upstream) (no consent: every stream is real)")
var line = Array("PULSE_SERVER=unix:\(listen)\n".utf8)
unsafe line.withUnsafeMutableBytes { _ = unsafe write(1, $0.baseAddress, $0.count) }
var received: Int32 = 0
unsafe sigwait(&stopSignals, &received)
Log.info("stopping on signal \(received)")
relay.stop()
unsafe unlink(listen)
