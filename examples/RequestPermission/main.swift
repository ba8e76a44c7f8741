// earmuff-request-permission: asks for recording permission with EarmuffKit, then records
// with libpulse (as any PulseAudio app does) and says what it got.
//
//   earmuff-request-permission [--kind microphone|system-audio|app-audio] [--purpose TEXT]
//                              [--seconds S] [--watch N]
//
// Prints `state: STATE`, the identity Earmuff gave it, and `recorded: ...` (S seconds, 1 by
// default, 0 to skip); with `--watch N`, `watching: STATE` once subscribed, then
// `changed: STATE` for each of the next N changes of its permission. Exits 0 when granted,
// 1 when not, 2 when unavailable (no Earmuff in front of the server), 64 for a bad command line.
import CPulseSimple
import EarmuffKit
import Glibc

struct Options {
    var kind = AudioApplication.CaptureKind.microphone
    var purpose: String?
    var seconds = 1.0
    var watch = 0
}

/// Writes a line to `fd` at once (a test, or a pipe, reads it while the program runs).
func say(_ line: String, to fd: Int32 = 1) {
    let bytes = Array((line + "\n").utf8)
    var sent = 0
    while sent < bytes.count {
        let n = unsafe bytes.withUnsafeBytes { unsafe write(fd, $0.baseAddress! + sent, $0.count - sent) }
        if n <= 0 { return }
        sent += n
    }
}

func usage(_ problem: String) -> Never {
    say(
        "earmuff-request-permission: \(problem)\n"
            + "usage: earmuff-request-permission [--kind microphone|system-audio|app-audio] [--purpose TEXT] "
            + "[--seconds S] [--watch N]", to: 2)
    exit(64)
}

func parse(_ args: [String]) -> Options {
    var o = Options()
    var i = 0
    func value(_ name: String) -> String {
        i += 1
        guard i < args.count else { usage("\(name) needs a value") }
        return args[i]
    }
    while i < args.count {
        switch args[i] {
        case "--kind":
            let k = value("--kind")
            guard let kind = AudioApplication.CaptureKind(rawValue: k) else {
                usage("unknown kind \"\(k)\"; use microphone, system-audio or app-audio")
            }
            o.kind = kind
        case "--purpose": o.purpose = value("--purpose")
        case "--seconds":
            guard let s = Double(value("--seconds")), s >= 0, s <= 3600 else { usage("--seconds takes 0 to 3600") }
            o.seconds = s
        case "--watch":
            guard let n = Int(value("--watch")), n >= 0 else { usage("--watch takes a count") }
            o.watch = n
        case "-h", "--help": usage("asks for recording permission, records, and prints what it got")
        default: usage("unknown argument \"\(args[i])\"")
        }
        i += 1
    }
    return o
}

/// Records `seconds` of mono s16le at 48 kHz from the kind's default source (the default
/// microphone, or the default sink's monitor for system audio); the samples, or why not.
func record(seconds: Double, kind: AudioApplication.CaptureKind) -> (samples: [Int16], error: String?) {
    var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: 48000, channels: 1)
    var attr = pa_buffer_attr(
        maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
        fragsize: 1920)
    var error: Int32 = 0
    let device: String? = kind == .systemAudio ? "@DEFAULT_MONITOR@" : nil
    guard
        let s = unsafe pa_simple_new(
            nil, "earmuff-request-permission", PA_STREAM_RECORD, device, "permission example",
            &spec, nil, &attr, &error)
    else {
        return unsafe ([], String(cString: pa_strerror(error)))
    }
    defer { unsafe pa_simple_free(s) }
    var samples = [Int16](repeating: 0, count: Int(seconds * 48000))
    let ok = unsafe samples.withUnsafeMutableBytes { unsafe pa_simple_read(s, $0.baseAddress, $0.count, &error) }
    return unsafe ok < 0 ? ([], String(cString: pa_strerror(error))) : (samples, nil)
}

let options = parse(Array(CommandLine.arguments.dropFirst()))
let app = AudioApplication.shared
let state = await app.requestPermission(for: options.kind, purpose: options.purpose)
say("state: \(state.rawValue)")
if state == .unavailable {
    say("why: \(app.unavailableReason ?? "unknown")")
    exit(2)
}
if let id = app.identity {
    say("identity: \(id.appKey) (identified by \(id.identifiedBy), \(id.strength))")
}
if options.seconds > 0 && options.kind == .appAudio {
    // Another app's stream is recorded by naming its sink input, which the simple API cannot.
    say("recorded: nothing (recording app audio needs another app's stream; see parecord --monitor-stream)")
} else if options.seconds > 0 {
    let (samples, error) = record(seconds: options.seconds, kind: options.kind)
    if let error {
        say("recorded: nothing (\(error))")
    } else {
        let peak = samples.map { abs(Int($0)) }.max() ?? 0
        let rms = (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, samples.count))).squareRoot() / 32768
        say("recorded: \(samples.count) frames, " + (peak == 0 ? "silence" : "sound (rms \(Int(rms * 1000)) / 1000)"))
    }
}
if options.watch > 0 {
    var seen = -1
    for await p in app.recordPermissionChanges(for: options.kind) {
        // The stream starts with the state once subscribed.
        say(seen < 0 ? "watching: \(p.rawValue)" : "changed: \(p.rawValue)")
        seen += 1
        if seen == options.watch || p == .unavailable { break }
    }
}
exit(state == .granted ? 0 : 1)
