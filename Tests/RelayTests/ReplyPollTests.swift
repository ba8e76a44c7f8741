// The reply poll's window: how it shrinks when polls run out, and how it comes back.
@testable import Relay
import Testing

struct ReplyPollTests {
    @Test func pollsTheLongestWindowWhileRepliesCome() {
        var poll = ReplyPoll()
        for _ in 0..<10 {
            #expect(poll.windowForRequest() == ReplyPoll.longest)
            poll.found()
        }
    }

    @Test func windowsThatRunOutHalveToNothingThenAProbeTriesTheLongest() {
        var poll = ReplyPoll()
        var windows: [Double] = []
        while case let w = poll.windowForRequest(), w > 0 {
            windows.append(w)
            poll.ranOut()
        }
        #expect(windows == [0.000_2, 0.000_1, 0.000_05, 0.000_025])
        // Asleep at once until the probe, which is the longest window.
        for _ in 1..<(ReplyPoll.probeInterval - 1) { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.longest)
        // A probe that runs out turns polling off again at once.
        poll.ranOut()
        for _ in 1..<ReplyPoll.probeInterval { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.longest)
        // One that catches the reply brings polling back whole.
        poll.found()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
    }

    @Test func aCaughtReplyDoublesAShrunkWindow() {
        var poll = ReplyPoll()
        _ = poll.windowForRequest()
        poll.ranOut()
        _ = poll.windowForRequest()
        poll.ranOut()
        #expect(poll.windowForRequest() == 0.000_05)
        poll.found()
        #expect(poll.windowForRequest() == 0.000_1)
        poll.found()
        poll.found()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
    }
}
