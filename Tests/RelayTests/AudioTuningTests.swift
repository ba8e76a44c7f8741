// How a relay loop waits while a connection floods: it polls for the next bytes
// rather than sleep, and still waits as usual now and then.
@testable import Relay
import Runtime
import Testing

struct AudioTuningTests {
    /// Turns of a loop that each read a 64 KiB memblock, as a flood brings them. Once the
    /// connection is known to flood (a 20 ms period faster than `InputRate.bulk`), the turns
    /// poll one after the other, and after `flowPollChain` of that one wait may sleep.
    @Test func pollsForAFloodsBytesAndStillWaitsAsUsualNowAndThen() throws {
        let tuning = try AudioTuning(name: "flow", coalesceWindow: 0.002)
        var rate = InputRate()
        var pollingSince: Double?
        var waitedAfter: Double?
        var lastTurnEnded = 0.0
        let deadline = monotonicNow() + 10
        while waitedAfter == nil && monotonicNow() < deadline {
            let timeout = tuning.willWait(timeout: -1)
            if timeout == 0 {
                // The turn that ended last started the polls.
                if pollingSince == nil { pollingSince = lastTurnEnded }
            } else if let since = pollingSince {
                waitedAfter = monotonicNow() - since
            }
            tuning.woke(events: 1)
            tuning.noteRead(64 * 1024, rate: &rate)
            _ = tuning.keepsPolling(events: 1)
            lastTurnEnded = monotonicNow()
            tuning.turnEnded(events: 1, urgent: false)
        }
        #expect(pollingSince != nil, "the loop never polled for the flood's bytes")
        let waited = try #require(waitedAfter, "the loop polled for 10 s without waiting once")
        #expect(waited >= AudioTuning.flowPollChain, "it waited after polling for \(waited) s")
        #expect(tuning.counters.flowPollsFound.load(ordering: .relaxed) > 0)
    }
}
