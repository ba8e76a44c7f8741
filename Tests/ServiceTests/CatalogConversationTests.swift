// The source catalog's conversation with the server, without a server: what it
// asks when it connects, and what each reply and event changes or asks next.
import Consent
import Foundation
import Runtime
@testable import Service
import PulseWire
@testable import Relay
import Testing

@Suite struct CatalogConversationTests {
    static let version = introspectionVersion

    /// The packets of `.send` actions, as (command, tag).
    static func requests(_ actions: [CatalogConversation.Action]) -> [(Command?, UInt32)] {
        actions.compactMap { a -> (Command?, UInt32)? in
            guard case .send(let payload) = a, let h = try? PacketHeader.decode(payload) else { return nil }
            return (h.knownCommand, h.tag)
        }
    }

    static func frame<M: PacketMessage>(_ m: M, tag: UInt32) -> Frame { Frame(packet: m.packet(tag: tag, version: version)) }

    /// A conversation past its opening requests (tags 0 to 5).
    static func opened(at now: Double = 10) -> CatalogConversation {
        var c = CatalogConversation()
        _ = c.opening(now: now)
        return c
    }

    @Test func openingAsksForEverythingInOrder() {
        var c = CatalogConversation()
        let asked = Self.requests(c.opening(now: 1))
        #expect(asked.map(\.0) == [.auth, .setClientName, .subscribe, .getServerInfo, .getSourceOutputInfoList, .getSourceInfoList])
        #expect(asked.map(\.1) == [0, 1, 2, 3, 4, 5])
        #expect(c.awaitsSourceOutputList)
        #expect(!c.announcesMoves)
    }

    @Test func theSourceListFillsTheTable() throws {
        var c = Self.opened()
        let list = SourceInfoReply(records: [
            SourceInfo(index: 1, name: "mic"),
            SourceInfo(index: 2, name: "out.monitor", monitorOfSink: 0),
        ])
        let actions = try c.handle(Self.frame(list, tag: 5), now: 11)
        #expect(actions == [.listed(sources: 2, monitors: 1), .changed])
        #expect(c.table.kind(sourceIndex: 1, sourceName: "mic") == .microphone)
        #expect(c.table.kind(sourceIndex: 2, sourceName: "out.monitor") == .systemAudio)
        // A reply whose tag was answered already changes nothing.
        #expect(try c.handle(Self.frame(list, tag: 5), now: 12) == [])
    }

    @Test(arguments: [("pulseaudio", true), ("PulseAudio (on PipeWire 1.0.5)", false)])
    func theServerSaysWhetherItAnnouncesMoves(package: String, announces: Bool) throws {
        var c = Self.opened()
        var info = ServerInfo(defaultSourceName: "mic")
        info.packageName = package
        #expect(try c.handle(Self.frame(info, tag: 3), now: 11) == [.changed])
        #expect(c.announcesMoves == announces)
        #expect(c.table.defaultSourceName == "mic")
    }

    @Test func sourceOutputsAreReportedWithWhenTheyWereAsked() throws {
        var c = Self.opened(at: 10)
        let outputs = SourceOutputInfoReply(records: [SourceOutputInfo(index: 40, source: 1)])
        let actions = try c.handle(Self.frame(outputs, tag: 4), now: 11)
        #expect(actions == [.sourceOutput(index: 40, source: 1, askedAt: 10)])
        #expect(!c.awaitsSourceOutputList)
        // The next poll is asked under a new tag, and awaited.
        #expect(Self.requests([c.askSourceOutputs(now: 12)]).map(\.0) == [.getSourceOutputInfoList])
        #expect(c.awaitsSourceOutputList)
    }

    @Test func eventsAskAgainOrForget() throws {
        var c = Self.opened()
        _ = try c.handle(Self.frame(SourceInfoReply(records: [SourceInfo(index: 1, name: "mic")]), tag: 5), now: 11)

        let added = try c.handle(Self.frame(SubscribeEvent(.source, .new, index: 7), tag: PacketTag.none), now: 12)
        #expect(Self.requests(added).map(\.0) == [.getSourceInfo])
        guard case .send(let ask) = added.first else { return }
        #expect(try GetSourceInfo.decodePacket(ask, version: Self.version).message.index == 7)

        let moved = try c.handle(Self.frame(SubscribeEvent(.sourceOutput, .change, index: 40), tag: PacketTag.none), now: 12)
        #expect(Self.requests(moved).map(\.0) == [.getSourceOutputInfo])
        let server = try c.handle(Self.frame(SubscribeEvent(.server, .change, index: 0), tag: PacketTag.none), now: 12)
        #expect(Self.requests(server).map(\.0) == [.getServerInfo])

        #expect(try c.handle(Self.frame(SubscribeEvent(.source, .remove, index: 1), tag: PacketTag.none), now: 13) == [.changed])
        #expect(c.table.kind(sourceIndex: 1, sourceName: "mic") == nil)
    }

    @Test func aRefusedAuthenticationEndsTheConnection() throws {
        var c = Self.opened()
        // An error for another request (a source gone before its info was asked) is no failure.
        _ = try c.handle(Self.frame(SubscribeEvent(.source, .new, index: 7), tag: PacketTag.none), now: 11)
        #expect(try c.handle(Self.frame(ErrorReply(code: .noEntity), tag: 6), now: 11) == [])
        #expect(throws: SourceCatalogError.self) { try c.handle(Self.frame(ErrorReply(code: .access), tag: 0), now: 11) }
    }

    @Test func anUnreadableReplyEndsTheConnection() {
        var c = Self.opened()
        // A source list reply cut in the middle of a record.
        var payload = SourceInfoReply(records: [SourceInfo(index: 1, name: "mic")]).packet(tag: 5, version: Self.version)
        payload.removeLast(3)
        #expect(throws: SourceCatalogError.self) { try c.handle(Frame(packet: payload), now: 11) }
    }

    @Test func memblocksAreIgnored() throws {
        var c = Self.opened()
        let audio = Frame(
            descriptor: FrameDescriptor(length: 4, channel: 0, offsetHi: 0, offsetLo: 0, flags: 0),
            payload: [0, 0, 0, 0])
        #expect(try c.handle(audio, now: 11) == [])
    }
}

@Suite struct WorkerTests {
    /// Jobs run in the order they were posted, on a thread named after the worker, and
    /// `waitForJobs` returns only after those posted before it ran.
    @Test func jobsRunInOrderOnTheNamedThread() throws {
        let worker = try Worker(name: "test-worker")
        let seen = Locked<[Int]>([])
        let names = Locked<Set<String>>([])
        for i in 0..<100 {
            worker.async {
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
                names.withLock { _ = $0.insert(comm.trimmingCharacters(in: .whitespacesAndNewlines)) }
                seen.withLock { $0.append(i) }
            }
        }
        worker.waitForJobs()
        #expect(seen.withLock { $0 } == Array(0..<100))
        #expect(names.withLock { $0 } == ["test-worker"])
    }
}
