// The control socket's limits (ControlServer+Limits.swift): idle connections time out
// unless they subscribed or became agents, a full server makes room for a new connection,
// and long-lived connections are capped per uid.
import Consent
import ControlProtocol
import EarmuffClient
import Foundation
import Glibc
import Service
import Synchronization
import Testing

@Suite struct ControlLimitTests {
    @Test func silentConnectionsTimeOutSubscribersAndAgentsStay() throws {
        let f = try ServerFixture(options: ControlServerOptions(idleTimeout: 0.5))
        let idle = try f.raw()
        _ = try idle.readMessage() // the greeting
        let sub = try f.connect()
        #expect(try sub.request(.subscribe) == .ok)
        let agent = try f.connect()
        #expect(try agent.request(.becomeAgent) == .ok)
        #expect(try idle.readUntilClosed().isEmpty, "the silent connection was not closed")
        #expect(waitUntil { f.server.connectionCount == 2 })
        // Both long-lived connections are still served well after the timeout.
        let seen = f.server.connectionCount
        usleep(1_200_000)
        #expect(f.server.connectionCount == seen)
        let event = ControlEvent.decisionChanged(AppInfo(key: "exe:/x", state: .denied, reason: .user))
        f.server.broadcast(event)
        #expect(try sub.receive(timeoutMs: 10000) == .event(event))
        #expect(try agent.request(.status) != .ok)
    }

    /// The idle sweep runs only while a connection it could close is open: after a one-shot
    /// request the server's thread sleeps until the next one comes, and does not wake for it.
    @Test func anIdleServerDoesNotWakeForTheSweep() throws {
        // A sweep every 0.5 s while a connection is open.
        let f = try ServerFixture(options: ControlServerOptions(idleTimeout: 2))
        let c = try f.connect()
        #expect(try c.request(.status) != .ok)
        c.close()
        #expect(waitUntil { f.server.connectionCount == 0 })
        let tid = f.server.loopThreadID
        func switches() -> Int? {
            guard let s = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8) else { return nil }
            return s.split(separator: "\n").filter { $0.contains("ctxt_switches") }
                .compactMap { $0.split(separator: "\t").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
                .reduce(0, +)
        }
        // Settled: asleep, and no switch for 100 ms (it went back to sleep after the close).
        var before = try #require(switches())
        #expect(
            waitUntil {
                usleep(100_000)
                let now = switches()
                defer { before = now ?? before }
                return now == before
            })
        // Nothing else runs on this loop: a switch within the next sweep period would be the sweep.
        usleep(1_000_000)
        #expect(switches() == before, "the control thread woke while nobody was connected")
    }

    /// Other processes of the uid cannot lock Earmuff's own programs out of long-lived slots,
    /// nor become agents (and receive prompts); Earmuff's own, at their limit, make room.
    @Test func earmuffsOwnProgramsHaveSlotsOfTheirOwnAndAloneBecomeAgents() throws {
        let own = Mutex(false)
        var options = ControlServerOptions(maxLongLivedPerUID: 2)
        options.ownProgram = { _ in own.withLock { $0 } }
        let f = try ServerFixture(options: options)
        var others: [ControlClient] = []
        for _ in 0..<2 {
            let c = try f.connect()
            #expect(try c.request(.subscribe) == .ok)
            others.append(c)
        }
        let third = try f.connect()
        #expect(code(third, .subscribe) == .tooMany)
        #expect(code(third, .becomeAgent) == .notEarmuff)

        own.withLock { $0 = true }
        let watch = try f.connect()
        #expect(try watch.request(.subscribe) == .ok, "the others' subscriptions count against Earmuff's own")
        let agent = try f.connect()
        #expect(try agent.request(.becomeAgent) == .ok)
        // A third of its own: the one silent the longest (the subscriber) makes room.
        let settings = try f.connect()
        #expect(try settings.request(.subscribe) == .ok)
        #expect(waitUntil { f.logs.contains("to make room for pid \(getpid())") })
        #expect(f.server.connectionCount == 5, "the two others, the refused one, the agent and the settings window")
        #expect(throws: ControlClientError.self) { try watch.request(.status) }
        for c in others { #expect(try c.request(.status) != .ok, "another's subscription was dropped") }
    }

    /// The code of the error `client`'s `request` was answered with.
    private func code(_ client: ControlClient, _ request: ControlRequest) -> ControlErrorCode? {
        do {
            _ = try client.request(request)
            return nil
        } catch {
            return error.reply?.code
        }
    }

    @Test func aFullServerMakesRoomForAOneShotRequest() throws {
        let f = try ServerFixture(options: ControlServerOptions(maxConnections: 4))
        var idle: [RawConnection] = []
        for _ in 0..<4 {
            let c = try f.raw()
            _ = try c.readMessage()
            idle.append(c)
        }
        #expect(waitUntil { f.server.connectionCount == 4 })
        let cli = try f.connect()
        #expect(try cli.request(.apps) == .apps([AppInfo(key: "exe:/usr/bin/pacat", state: .undetermined, reason: .none)]))
        // The one silent the longest made room.
        #expect(try idle[0].readUntilClosed().isEmpty)
        #expect(f.server.connectionCount == 4)
        #expect(f.logs.contains("to make room for pid \(getpid())"))
        // A storm of connections logs a few lines, not one per eviction.
        for _ in 0..<40 { _ = try? f.raw() }
        #expect(waitUntil { f.logs.lines.withLock { $0.filter { $0.contains("to make room") }.count } >= 1 })
        #expect(f.logs.lines.withLock { $0.filter { $0.contains("to make room") }.count } <= 6)
    }

    /// Processes that are not Earmuff's own programs (those make room instead: above).
    @Test func longLivedConnectionsAreCappedPerUID() throws {
        var options = ControlServerOptions(maxLongLivedPerUID: 2)
        options.ownProgram = { _ in false }
        let f = try ServerFixture(options: options)
        let a = try f.connect(), b = try f.connect(), c = try f.connect()
        #expect(try a.request(.subscribe) == .ok)
        #expect(try b.request(.subscribe) == .ok)
        #expect(code(c, .subscribe) == .tooMany)
        #expect(code(c, .becomeAgent) == .notEarmuff)
        // Its one-shot requests are still answered, and a slot freed lets it subscribe.
        #expect(try c.request(.status) != .ok)
        a.close()
        #expect(waitUntil { f.server.subscriberCount == 1 })
        #expect(try c.request(.subscribe) == .ok)
    }
}
