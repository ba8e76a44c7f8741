// Lines a client can cause at will are written at most `burst` per interval; the next
// line written says how many were left out.
import Basics
import Runtime
import Testing
@testable import Relay

@Suite struct RateLimitedLogTests {
    @Test func aBurstPerIntervalThenACount() {
        let limiter = RateLimitedLog(burst: 3, interval: 10)
        var lines: [String] = []
        for i in 0..<20 { limiter.record(.warn, "refused \(i)", now: 100 + Double(i) * 0.1) { lines.append($1) } }
        #expect(lines == ["refused 0", "refused 1", "refused 2"])
        limiter.record(.warn, "refused later", now: 111) { lines.append($1) }
        #expect(lines.last == "refused later (17 more like this were not logged in the 10 s before)")
        limiter.record(.warn, "and again", now: 111.5) { lines.append($1) }
        #expect(lines.last == "and again")
    }
}
