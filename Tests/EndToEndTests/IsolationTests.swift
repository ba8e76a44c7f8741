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
            let stalled = try await Stalled.start()
            defer { stalled.stop() }
            let (server, earmuff) = (stalled.server, stalled.earmuff)

            let purpose = ["application.capture.purpose": "isolation test"]
            let proxied = try RawClient(path: earmuff.listenPath)
            let direct = try RawClient(path: server.socketPath)
            for (c, name) in [(proxied, "through-earmuff"), (direct, "direct")] {
                try c.handshake(name: name, properties: purpose)
                guard let (command, _) = try c.request(RawClient.createRecordStream(tag: 2), tag: 2),
                    command == Command.reply.rawValue
                else {
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
            #expect(
                caughtUp,
                "through earmuff \(viaEarmuff) bytes, directly \(viaDirect) bytes over the same window (fragment \(fragment)) while another client stalled\n\(earmuff.log())"
            )
            // No upper bound: more bytes through earmuff than directly over a
            // window only says when this thread got around to each socket.
            #expect(earmuff.process.isRunning)
        }

        /// The case as a user meets it, with stock parecord: a client through
        /// earmuff holds a record stream and never reads; meanwhile parecord
        /// (`--latency-msec=20`, 96 kB/s) records through earmuff and, starting
        /// once that stream exists, directly, until the direct file holds two
        /// blocks. The private server's
        /// sine source hands out audio in 2 s blocks, so a recording's length
        /// depends on when it started relative to them (3 s directly give
        /// 192 kB or 384 kB): the direct stream starts later and may only get
        /// fewer blocks. Through earmuff the file must hold at least as much as
        /// the direct one, less one 20 ms fragment; a block held up or lost
        /// behind the stalled session is 192 kB.
        @Test func stalledClientDoesNotShortenParecord() async throws {
            let stalled = try await Stalled.start()
            defer { stalled.stop() }
            let (server, earmuff) = (stalled.server, stalled.earmuff)

            let bytesPerSecond = 2 * PulseServer.toneRate
            let args = [
                "--raw", "--format=s16le", "--rate=\(PulseServer.toneRate)", "--channels=1", "--latency-msec=20",
                "--property=application.capture.purpose=isolation test", "recording.raw",
            ]
            func sourceOutputs() -> Int {
                let r = try? Tool.run("pactl", args: ["list", "short", "source-outputs"], server: server.serverString, timeout: 10)
                return r?.stdoutText.split(separator: "\n").count ?? 0
            }
            try earmuff.control("grant", try Tool.appKey(for: "parecord"))
            let proxied = try Tool.start("parecord", args: args, server: earmuff.serverString)
            defer { proxied.cleanup() }
            let proxiedUp = await Wait.until(timeout: 30) { sourceOutputs() >= 2 }
            #expect(proxiedUp, "parecord through earmuff has no stream\n\(earmuff.log())")
            let direct = try Tool.start("parecord", args: args, server: server.serverString)
            defer { direct.cleanup() }
            let directUp = await Wait.until(timeout: 30) { sourceOutputs() >= 3 }
            #expect(directUp, "parecord direct has no stream")
            func size(_ t: RunningTool) -> Int {
                var st = stat()
                return unsafe stat("\(t.directory)/recording.raw", &st) == 0 ? Int(st.st_size) : 0
            }
            // At least two blocks recorded directly.
            let recorded = await Wait.until(timeout: 60) { size(direct) >= 4 * bytesPerSecond }
            #expect(recorded, "direct parecord recorded only \(size(direct)) bytes")
            let fragment = bytesPerSecond / 50
            // The relay's own delay is allowed: earmuff's copy of a block may land a moment later.
            let wanted = size(direct) - fragment
            let caughtUp = await Wait.until(timeout: 1) { size(proxied) >= wanted }
            #expect(caughtUp, "through earmuff \(size(proxied)) bytes, directly \(size(direct)) bytes while another client stalled\n\(earmuff.log())")
            #expect(proxied.process.isRunning, "parecord through earmuff ended: \(proxied.process.stderrText())")
            #expect(earmuff.process.isRunning)
        }

        /// A private PulseAudio, earmuff in front of it, and a client through
        /// earmuff whose record stream it never reads.
        struct Stalled {
            let server: PulseServer
            let earmuff: EarmuffProcess
            let stuck: RawClient

            static func start() async throws -> Stalled {
                let server = try PulseServer()
                do {
                    let earmuff = try EarmuffProcess(upstream: server.serverString)
                    do {
                        // Granted, so that the streams are relayed: one that may not record is
                        // held by earmuff and never reaches the server.
                        try earmuff.control("grant", try Tool.ownAppKey())
                        let stuck = try await stalledRecorder(earmuff: earmuff, server: server.serverString)
                        return Stalled(server: server, earmuff: earmuff, stuck: stuck)
                    } catch {
                        earmuff.stop()
                        throw error
                    }
                } catch {
                    server.stop()
                    throw error
                }
            }

            func stop() {
                stuck.close()
                earmuff.stop()
                server.stop()
            }
        }

        /// A client through `earmuff` with a float32 stereo record stream that
        /// it never reads, once its socket has stopped filling.
        static func stalledRecorder(earmuff: EarmuffProcess, server: String) async throws -> RawClient {
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
                let r = try? Tool.run("pactl", args: ["list", "short", "source-outputs"], server: server, timeout: 10)
                return (r?.stdoutText.split(separator: "\n").count ?? 0) >= 1
            }
            #expect(streamUp, "the stuck client's record stream never appeared\n\(earmuff.log())")
            // Stalled for real: what is queued for it stops growing (earmuff can send no more).
            func queued() -> Int32 {
                var n: Int32 = 0
                _ = unsafe ioctl(stuck.fd, UInt(FIONREAD), &n)
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
            return stuck
        }

        /// Sessions spread over three loops (accepted on the first, started on
        /// their own) all record; a bad --loops or --coalesce-ms is refused with its fix.
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
                    command == Command.reply.rawValue
                else {
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
            for bad in ["-1", "soon", "11", "nan"] {
                let r = try earmuff.runCLI(["serve", "--coalesce-ms", bad])
                #expect(r.status == 64, "\(r)")
                #expect(r.stderr.contains("--coalesce-ms must be milliseconds from 0 to 10"), "\(r)")
            }
        }
    }
}
