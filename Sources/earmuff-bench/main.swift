// earmuff-bench: earmuff against a direct connection and a socat relay.
//
// A synthetic upstream (TestSupport's FloodServer, in this process) answers
// the handshake and floods record memblocks; the benchmark's own minimal
// native-protocol client (no libpulse, no SHM) reaches it directly, through
// `socat UNIX-LISTEN:…,fork UNIX-CONNECT:…`, and through `earmuff serve`, and
// measures round trips, throughput and the relay's CPU per GB. A private real
// PulseAudio gives the audio-rate figures. Memory is earmuff's VmRSS with many
// idle or recording clients; silencing compares granted with denied streams.
// The run ends with a table, ratios and a PASS/FAIL line per target.

import Foundation
import Glibc
import PulseWire
import TestSupport

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count == 3, arguments[0] == CalibrationRelay.argument {
    CalibrationRelay.run(listen: arguments[1], upstream: arguments[2])
}
let options = Options.parse(arguments)
do {
    try Bench(options: options).run()
} catch {
    FileHandle.standardError.write(Data("earmuff-bench: \(error)\n".utf8))
    exit(1)
}
