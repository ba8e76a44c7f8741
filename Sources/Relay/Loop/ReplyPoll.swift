// How long a loop polls for a reply after forwarding a request (and, learned
// apart, for an app's next request after its reply), learned from what its
// polls found (as the kernel's halt-polling learns its window).
//
// Polling pays when the server answers on another CPU: the reply is relayed
// without the loop being put to sleep and woken, which on an idle CPU (and
// most of all on a virtual one, whose idle is a halt) costs more than the
// server's whole answer. It costs when the server cannot run until the loop
// stops: woken by the request onto the loop's CPU, it waits there while the
// loop polls (behind a real-time loop, for the whole window). No rule on
// priority tells the two apart; what the polls find does. A window that ran
// out halves, one that caught an event doubles; below `shortest` the loop
// sleeps at once, and polls the longest window again once in `probeInterval`
// requests (well under 1 %, so a server that never answers in time costs no
// round trip of the 99th percentile); a probe that runs out turns polling off
// again at once.
struct ReplyPoll {
    /// The longest window: a local server answers within tens of microseconds.
    static let longest = 0.000_2
    /// The shortest window polled; half of it is not polled at all.
    static let shortest = 0.000_025
    /// Requests forwarded without polling before the longest window is tried again.
    static let probeInterval = 256

    /// The current window in seconds (0: sleep at once).
    private var window = Self.longest
    private var requestsWithout = 0
    private var probing = false

    /// A request was forwarded: how long to poll for its reply (0: not at all).
    mutating func windowForRequest() -> Double {
        guard window == 0 else { return window }
        requestsWithout += 1
        guard requestsWithout >= Self.probeInterval else { return 0 }
        requestsWithout = 0
        probing = true
        return Self.longest
    }

    /// The poll found an event (the reply, most likely) before its window ran out.
    mutating func found() {
        window = probing ? Self.longest : min(Self.longest, window * 2)
        probing = false
    }

    /// The window ran out with nothing to read.
    mutating func ranOut() {
        window = probing || window / 2 < Self.shortest ? 0 : window / 2
        probing = false
        requestsWithout = 0
    }
}
