// Memory one app must not be able to take: clients sending packets of 15 MB (the
// protocol allows 16 MiB) through the real daemon in front of a private server. Each
// such packet is answered with ERROR(TOOLARGE) without being read into memory, the
// connection goes on, and the daemon's peak memory stays far below what was sent.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct MemoryLimitTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// UPDATE_CLIENT_PROPLIST (mode replace) of about `bytes` bytes: entries of 60 KiB values.
        static func hugeProplist(tag: UInt32, bytes: Int) -> [UInt8] {
            var props = Proplist()
            let value = [UInt8](repeating: UInt8(ascii: "x"), count: 60 * 1024 - 1) + [0]
            for i in 0..<max(1, bytes / value.count) { props.set("earmuff.test.filler.\(i)", value: value) }
            return RawClient.packet(.updateClientProplist, tag: tag) { w in
                w.writeU32(2)
                w.writeProplist(props)
            }
        }

        /// The command of the reply to `tag` (REPLY or ERROR) and, for an ERROR, its code.
        static func answer(_ c: RawClient, tag: UInt32, timeout: Double = 60) throws -> (command: UInt32, code: UInt32?)? {
            guard let frame = try c.reply(tag: tag, timeout: timeout) else { return nil }
            var r = TagStructReader(frame.payload)
            let header = try PacketHeader.decode(from: &r)
            return (header.command, header.command == Command.error.rawValue ? try r.readU32() : nil)
        }

        static func connected(_ n: Int, to s: Setup) throws -> [RawClient] {
            try (0..<n).map { _ in
                let c = try RawClient(path: s.earmuff.listenPath)
                try c.handshake()
                return c
            }
        }

        /// 30 (and 56) clients each send one 15 MB packet, over max-packet-kib (1 MiB by default).
        @Test(arguments: [30, 56])
        func packetsOverThePerClientLimit(_ count: Int) async throws {
            // 56 clients of one app: max-clients 64 less the 8 reserved-clients.
            let s = try Setup(config: ["max-clients = 64", "max-clients-per-app = 64"])
            defer { s.stop() }
            let pid = s.earmuff.process.pid
            let clients = try Self.connected(count, to: s)
            defer { for c in clients { c.close() } }
            let before = ProcessStats.residentKiB(pid)
            let packet = Self.hugeProplist(tag: 7, bytes: 15_000_000)
            for c in clients { try c.send(packet) }
            for (i, c) in clients.enumerated() {
                let a = try Self.answer(c, tag: 7)
                #expect(
                    a?.command == Command.error.rawValue && a?.code == ErrorCode.tooLarge.rawValue,
                    "client \(i): \(String(describing: a))\n\(s.logs)")
            }
            let peak = ProcessStats.peakResidentKiB(pid)
            print("memory: \(count) clients sent \(packet.count) bytes each; resident before \(before / 1024) MiB, peak \(peak / 1024) MiB")
            #expect(peak - before < 48 * 1024, "earmuff's peak memory grew by \(peak - before) KiB")
            // Each connection goes on: its next request is answered by the server.
            for c in clients {
                let next = try c.request(RawClient.packet(.getServerInfo, tag: 8), tag: 8)
                #expect(next?.command == Command.reply.rawValue, "\(String(describing: next))")
            }
            #expect(s.earmuff.log().contains("larger than the 1048576 bytes one packet may have"), "\(s.logs)")
            let lines = s.earmuff.log().split(separator: "\n").filter { $0.contains("UPDATE_CLIENT_PROPLIST") }.count
            #expect(lines <= count, "\(lines) log lines for \(count) refusals")
        }

        /// With max-packet-kib at the protocol's 16 MiB, 30 clients hold 15 MB packets half sent:
        /// the packets being received hold at most packet-buffer-mib (32) together; the others are
        /// refused as they start, and the budget comes back when a held packet is complete.
        @Test func packetsOverTheTotalBudget() async throws {
            let s = try Setup(config: ["max-clients-per-app = 56", "max-packet-kib = 16384"])
            defer { s.stop() }
            let pid = s.earmuff.process.pid
            let clients = try Self.connected(30, to: s)
            defer { for c in clients { c.close() } }
            let before = ProcessStats.residentKiB(pid)
            let packet = Self.hugeProplist(tag: 7, bytes: 15_000_000)
            let half = packet.count / 2
            for c in clients { try c.send(Array(packet[..<half])) }
            // Two fit in 32 MiB; the other 28 are answered while the first two still wait.
            var refused: [Int] = []
            for (i, c) in clients.enumerated() {
                if let a = try Self.answer(c, tag: 7, timeout: i < 2 ? 2 : 60) {
                    #expect(a.code == ErrorCode.tooLarge.rawValue, "\(a)")
                    refused.append(i)
                }
            }
            #expect(refused.count == 28, "refused: \(refused)\n\(s.logs)")
            let peak = ProcessStats.peakResidentKiB(pid)
            print("memory: 30 clients each started a \(packet.count)-byte packet; resident before \(before / 1024) MiB, peak \(peak / 1024) MiB")
            #expect(peak - before < 80 * 1024, "earmuff's peak memory grew by \(peak - before) KiB")
            #expect(s.earmuff.log().contains("the large packets being received from all clients may hold together"), "\(s.logs)")
            // The held packets are delivered once complete, and their budget is free again.
            for (i, c) in clients.enumerated() {
                try c.send(Array(packet[half...]))
                if refused.contains(i) { continue }
                let a = try Self.answer(c, tag: 7)
                #expect(a?.command == Command.reply.rawValue, "\(String(describing: a))\n\(s.logs)")
            }
            let late = Self.hugeProplist(tag: 9, bytes: 15_000_000)
            for i in refused.prefix(2) {
                try clients[i].send(late)
                let a = try Self.answer(clients[i], tag: 9)
                #expect(a?.command == Command.reply.rawValue, "\(String(describing: a))\n\(s.logs)")
            }
        }
    }
}
