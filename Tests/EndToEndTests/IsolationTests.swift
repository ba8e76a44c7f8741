// Sessions do not hold each other up: a client that stops reading stalls only
// its own session.
import Foundation
import Glibc
import PulseWire
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct IsolationTests {
        /// One client records through earmuff and never reads. Meanwhile two
        /// clients record the same source over the same window, one through
        /// earmuff and one directly: they get the same number of bytes, within
        /// one fragment (the largest memblock the direct client saw).
        @Test func stalledClientDoesNotShortenAnotherRecording() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let earmuff = try EarmuffProcess(upstream: server.serverString)
            defer { earmuff.stop() }

            let purpose = ["application.capture.purpose": "isolation test"]
            let stuck = try RawClient(path: earmuff.listenPath)
            try stuck.handshake(name: "stuck", properties: purpose)
            // float32 stereo, 384 kB/s, so its stall reaches earmuff's ring and
            // the server within the test, not after minutes.
            var req = CreateRecordStreamRequest()
            req.sampleSpec = SampleSpec(format: .float32le, channels: 2, rate: 48000)
            req.channelMap = .stereo
            req.volume = CVolume(channels: 2, volume: CVolume.norm)
            req.maxLength = 1 << 20
            req.fragSize = 7680
            req.adjustLatency = true
            req.proplist.set(Proplist.Key.mediaName, string: "stuck")
            try stuck.send(RawClient.frame(req.packet(tag: 2, version: Limits.protocolVersion)))
            // Its stream exists at the server before the window starts.
            let streamUp = await Wait.until(timeout: 30) {
                let r = try? Tool.run("pactl", args: ["list", "short", "source-outputs"], server: server.serverString, timeout: 10)
                return (r?.stdoutText.split(separator: "\n").count ?? 0) >= 1
            }
            #expect(streamUp, "the stuck client's record stream never appeared\n\(earmuff.log())")
            // Stalled for real: what is queued for it stops growing (earmuff can send no more).
            func queued() -> Int32 {
                var n: Int32 = 0
                _ = ioctl(stuck.fd, UInt(FIONREAD), &n)
                return n
            }
            var last: Int32 = -1
            var stableSince = Wait.now()
            let stalled = await Wait.until(timeout: 60, interval: 0.1) {
                let q = queued()
                if q != last {
                    last = q
                    stableSince = Wait.now()
                }
                return q > 0 && Wait.now() - stableSince >= 1
            }
            #expect(stalled, "the stuck client's socket never filled (\(queued()) bytes queued)\n\(earmuff.log())")

            let proxied = try RawClient(path: earmuff.listenPath)
            let direct = try RawClient(path: server.socketPath)
            for (c, name) in [(proxied, "through-earmuff"), (direct, "direct")] {
                try c.handshake(name: name, properties: purpose)
                guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                      command == Command.reply.rawValue else {
                    Issue.record("\(name): no CREATE_RECORD_STREAM reply\n\(earmuff.log())")
                    return
                }
            }

            func take(_ c: RawClient, timeout: Double) throws -> Int {
                guard let f = try c.readFrame(timeout: timeout), !f.descriptor.isPacket else { return 0 }
                return f.payload.count
            }
            // The window starts once both streams deliver, so neither counts its start-up.
            var seenDirect = false
            var seenEarmuff = false
            let started = await Wait.until(timeout: 30) {
                seenDirect = (try? take(direct, timeout: 0.005)).map { $0 > 0 } == true || seenDirect
                seenEarmuff = (try? take(proxied, timeout: 0.005)).map { $0 > 0 } == true || seenEarmuff
                return seenDirect && seenEarmuff
            }
            #expect(started, "no audio: direct \(seenDirect), through earmuff \(seenEarmuff)\n\(earmuff.log())")

            var viaEarmuff = 0
            var viaDirect = 0
            var fragment = 0
            // Long enough for the stuck session's ring and socket buffers to fill.
            let deadline = Wait.now() + 6
            while Wait.now() < deadline {
                let d = try take(direct, timeout: 0.005)
                viaDirect += d
                fragment = max(fragment, d)
                viaEarmuff += try take(proxied, timeout: 0.005)
            }
            #expect(viaDirect > 0, "the direct client got no audio")
            #expect(!proxied.peerClosed, "the client through earmuff was disconnected\n\(earmuff.log())")
            // The relay's own delay is allowed: the client through earmuff may
            // catch up for a moment, never for a whole fragment of new data.
            let wanted = viaDirect - fragment
            let caughtUp = await Wait.until(timeout: 0.5) {
                viaEarmuff += (try? take(proxied, timeout: 0.005)) ?? 0
                return viaEarmuff >= wanted
            }
            #expect(caughtUp, "through earmuff \(viaEarmuff) bytes, directly \(viaDirect) bytes over the same window (fragment \(fragment)) while another client stalled\n\(earmuff.log())")
            // No upper bound: more bytes through earmuff than directly over a
            // window only says when this thread got around to each socket.
            #expect(earmuff.process.isRunning)
        }

        /// Sessions spread over three loops (accepted on the first, started on
        /// their own) all record; a bad --loops is refused with its fix.
        @Test func sessionsOnSeveralLoops() async throws {
            let server = try PulseServer()
            defer { server.stop() }
            let earmuff = try EarmuffProcess(upstream: server.serverString, extraArguments: ["--loops", "3"])
            defer { earmuff.stop() }
            let purpose = ["application.capture.purpose": "loops test"]
            var clients: [RawClient] = []
            for i in 0..<5 {
                let c = try RawClient(path: earmuff.listenPath)
                try c.handshake(name: "loop-\(i)", properties: purpose)
                guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                      command == Command.reply.rawValue else {
                    Issue.record("client \(i): no CREATE_RECORD_STREAM reply\n\(earmuff.log())")
                    return
                }
                clients.append(c)
            }
            for (i, c) in clients.enumerated() {
                var bytes = 0
                let got = await Wait.until(timeout: 30) {
                    if let f = try? c.readFrame(timeout: 0.05), !f.descriptor.isPacket { bytes += f.payload.count }
                    return bytes >= 9600
                }
                #expect(got, "client \(i) got \(bytes) bytes\n\(earmuff.log())")
            }
            for bad in ["0", "many", "257"] {
                let r = try earmuff.runCLI(["serve", "--loops", bad])
                #expect(r.status == 64, "\(r)")
                #expect(r.stderr.contains("--loops must be a number from 1 to 256"), "\(r)")
            }
        }
    }
}
