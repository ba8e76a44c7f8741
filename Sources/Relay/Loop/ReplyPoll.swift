// How long a loop polls for a reply after forwarding a request (and, learned
// apart, for an app's next request after its reply), learned from what its
// polls found (as the kernel's halt-polling learns its window).
//
// Polling pays when the server answers on another CPU: the reply is relayed
// without the loop being put to sleep and woken, which on an idle CPU (and
// most of all on a virtual one, whose idle is a halt) costs more than the
// server's whole answer. It costs when the server cannot run until the loop
// stops: woken by the request onto the loop's CPU (the sync hint of a socket
// write queues the wakee on the waker's CPU when the others are busy), it
// waits there while the loop polls. A loop at normal priority yields its CPU
// between zero-timeout waits, so the wakee runs; behind a real-time loop it
// waits for the whole window. No rule on priority tells the cases apart (a
// loop may be made real-time or demoted at any time, from outside); what the
// polls find, and when the event comes after a window ran out, do:
//
// * a poll that catches an event doubles the window, up to `longest`;
// * one whose event comes within `peerWaited` of its end was most likely
//   waiting for the peer it kept off the CPU: the loop sleeps at once from
//   then on, and that peer runs as soon as it does;
// * one whose event comes later (a slow server, an app that thinks) halves
//   it, and below `shortest` the loop sleeps at once (so does a peer kept
//   waiting that needs longer than `peerWaited` to answer once it runs).
//
// While it sleeps at once, every `probeInterval`-th request is a probe that
// polls the shortest window; one that catches its event brings the longest
// window back. The scheduler moves threads between CPUs often (an app, its
// server and the loop are three threads on what may be two CPUs), so probes
// come often, and are short, so that one the peer waits behind costs that
// round trip only the shortest window.
struct ReplyPoll {
    /// The longest window: a local server answers within tens of microseconds.
    static let longest = 0.000_2
    /// The shortest window polled, and a probe's; half of it is not polled at all.
    static let shortest = 0.000_025
    /// An event that comes this soon after a window ran out came from a peer that could not
    /// run until the loop stopped polling.
    static let peerWaited = 0.000_05
    /// While the loop sleeps at once, one request in this many is a probe.
    static let probeInterval = 16

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
        return Self.shortest
    }

    /// The poll found an event (the reply, most likely) before its window ran out.
    mutating func found() {
        window = probing ? Self.longest : min(Self.longest, window * 2)
        probing = false
    }

    /// The window ran out with nothing to read; the next event came `late` seconds after
    /// (`.infinity`: none before the next poll).
    mutating func ranOut(late: Double) {
        if probing || late < Self.peerWaited || window / 2 < Self.shortest {
            window = 0
        } else {
            window /= 2
        }
        probing = false
        requestsWithout = 0
    }
}
