// Abuse that must only hurt the abuser, through the real daemon in front of a
// private PulseAudio: a client renaming itself without end must not make the
// daemon queue work for the store, nor keep other apps' decisions waiting.

import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct AbuseTests {
        typealias Setup = ConsentEndToEndTests.Setup

        /// UPDATE_CLIENT_PROPLIST (mode replace) with a new application.name.
        static func rename(tag: UInt32, to name: String) -> [UInt8] {
            var props = Proplist()
            props.set(Proplist.Key.applicationName, string: name)
            return RawClient.packet(.updateClientProplist, tag: tag) { w in
                w.writeU32(2)
                w.writeProplist(props)
            }
        }

        /// 300,000 renames, each of which changes the display name the store keeps.
        @Test func renamingFloodQueuesNoStoreWork() async throws {
            let s = try Setup()
            defer { s.stop() }
            let pid = s.earmuff.process.pid
            let client = try RawClient(path: s.earmuff.listenPath)
            defer { client.close() }
            try client.handshake(name: "renamer")
            let peakBefore = ProcessStats.peakResidentKiB(pid)
            var tag: UInt32 = 10
            for round in 0..<300 {
                var batch: [UInt8] = []
                for i in 0..<1000 {
                    batch += Self.rename(tag: tag, to: "renamer \(round)-\(i)")
                    tag += 1
                }
                try client.send(batch)
                guard try client.reply(tag: tag - 1, timeout: 60) != nil else {
                    Issue.record("no reply to rename \(tag - 1)\n\(s.logs)")
                    return
                }
            }
            // Another app's decision is answered, and it is on disk when it is.
            try s.earmuff.control("grant", "exe:/usr/bin/earmuff-abuse-probe")
            #expect(try s.earmuff.app("exe:/usr/bin/earmuff-abuse-probe")?.state == "granted")
            let grown = ProcessStats.peakResidentKiB(pid) - peakBefore
            #expect(grown < 24 * 1024, "earmuff's peak memory grew by \(grown) KiB during the renames")
            // The last name is the one the store keeps.
            let shown = await Wait.until(timeout: 60) {
                (try? s.earmuff.apps().contains { $0.displayName == "renamer 299-999" }) == true
            }
            #expect(shown, "\(s.logs)")
        }
    }
}
