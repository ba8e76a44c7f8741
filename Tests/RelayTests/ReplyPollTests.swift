// The reply poll's window: how it shrinks when polls run out, and how it comes back.
@testable import Relay
import Testing

struct ReplyPollTests {
    /// Later than a peer that waited behind the loop: a slow server, an app that thinks.
    static let slow = 0.002

    @Test func pollsTheLongestWindowWhileRepliesCome() {
        var poll = ReplyPoll()
        for _ in 0..<10 {
            #expect(poll.windowForRequest() == ReplyPoll.longest)
            poll.found()
        }
    }

    @Test func windowsThatRunOutLateHalveToNothingThenProbesTryTheShortest() {
        var poll = ReplyPoll()
        var windows: [Double] = []
        while case let w = poll.windowForRequest(), w > 0 {
            windows.append(w)
            poll.ranOut(late: Self.slow)
        }
        #expect(windows == [0.000_2, 0.000_1, 0.000_05, 0.000_025])
        // Asleep at once but for a probe of the shortest window once in `probeInterval`.
        for _ in 1..<(ReplyPoll.probeInterval - 1) { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.shortest)
        poll.ranOut(late: Self.slow)
        for _ in 1..<ReplyPoll.probeInterval { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.shortest)
        // One that catches the reply brings polling back whole.
        poll.found()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
    }

    /// A reply that comes right after the window ran out was kept waiting by the poll: the
    /// loop sleeps at once from the first such poll on, whatever the window was.
    @Test func anEventRightAfterTheWindowTurnsPollingOffAtOnce() {
        var poll = ReplyPoll()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
        poll.ranOut(late: 0.000_012)
        for _ in 1..<ReplyPoll.probeInterval { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.shortest)
        poll.ranOut(late: 0.000_012)
        for _ in 1..<ReplyPoll.probeInterval { #expect(poll.windowForRequest() == 0) }
        #expect(poll.windowForRequest() == ReplyPoll.shortest)
        poll.found()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
    }

    @Test func aCaughtReplyDoublesAShrunkWindow() {
        var poll = ReplyPoll()
        _ = poll.windowForRequest()
        poll.ranOut(late: Self.slow)
        _ = poll.windowForRequest()
        poll.ranOut(late: .infinity)
        #expect(poll.windowForRequest() == 0.000_05)
        poll.found()
        #expect(poll.windowForRequest() == 0.000_1)
        poll.found()
        poll.found()
        #expect(poll.windowForRequest() == ReplyPoll.longest)
    }
}
