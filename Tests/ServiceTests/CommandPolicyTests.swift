// The command policy's table and each access class, with a session fake.
import Consent
@testable import Service
import PulseWire
@testable import Relay
import StreamState
import Testing

@Suite struct CommandPolicyTests {
    private func session() -> SessionState {
        let identity = ClientIdentity(
            pid: 1, uid: 1000, gid: 1000, appKey: AppKey(kind: "exe", value: "/usr/bin/app"),
            method: .executable)
        return SessionState(id: 1, identity: identity, launcherAppID: nil, connectedAt: 0)
    }

    private func request(_ command: Command, _ body: (inout TagStructWriter) -> Void = { _ in }) -> [UInt8] {
        var w = TagStructWriter()
        PacketHeader(command: command, tag: 7).encode(into: &w)
        body(&w)
        return w.bytes
    }

    private func refusal(
        _ command: Command, session s: SessionState? = nil, trusted: Bool = false, granted: Bool = false,
        _ body: (inout TagStructWriter) -> Void = { _ in }
    ) -> String? {
        CommandPolicy.refusal(
            for: command, payload: request(command, body), session: s ?? session(),
            trusted: trusted, granted: { granted })
    }

    @Test("every request a client may send has an access class; nothing else has one")
    func tableCoversClientRequests() {
        let sideChannels: Set<Command> = [.enableSrbchannel, .disableSrbchannel, .registerMemfdShmid]
        for c in Command.allCases {
            let clientSends = c.info.direction == .clientToServer || c.info.direction == .both
            if clientSends && !sideChannels.contains(c) {
                #expect(CommandPolicy.table[c] != nil, "\(c.info.name) has no access class")
            } else {
                #expect(CommandPolicy.table[c] == nil, "\(c.info.name) is not a client request but has a class")
            }
        }
    }

    @Test("a command without an access class is refused, even with valid arguments")
    func defaultDeny() {
        #expect(refusal(.registerMemfdShmid) { $0.writeU32(1) } != nil)
        #expect(
            refusal(.request) {
                $0.writeU32(0); $0.writeU32(4096)
            } != nil)
    }

    @Test("open requests pass; trust covers modules, devices and defaults, nothing else")
    func openAndTrusted() {
        #expect(refusal(.getServerInfo) == nil)
        #expect(
            refusal(.loadModule) {
                $0.writeString("module-null-sink"); $0.writeString("")
            } != nil)
        #expect(refusal(.exit) != nil)
        #expect(refusal(.addAutoload) == "obsolete command")
        #expect(
            refusal(.loadModule, trusted: true) {
                $0.writeString("module-null-sink"); $0.writeString("")
            } == nil)
        #expect(refusal(.setDefaultSource, trusted: true) { $0.writeString("mic") } == nil)
        // Trust does not reach other apps' streams, other clients, stored routing or obsolete commands.
        #expect(refusal(.killSourceOutput, trusted: true) { $0.writeU32(6) } == "source output 6 belongs to another client")
        #expect(refusal(.killClient, trusted: true) { $0.writeU32(4) } == "client 4 is another client")
        #expect(
            refusal(.extension, trusted: true) {
                $0.writeU32(0); $0.writeString("module-stream-restore"); $0.writeU32(2)
            } != nil)
        #expect(refusal(.addAutoload, trusted: true) == "obsolete command")
    }

    @Test("shared devices change only with microphone consent or trust")
    func deviceChanges() {
        for c: Command in [
            .setSinkVolume, .setSourceVolume, .setSinkMute, .setSourceMute, .suspendSink, .suspendSource,
            .setCardProfile, .setSinkPort, .setSourcePort, .setPortLatencyOffset,
        ] {
            #expect(refusal(c)?.contains("needs microphone consent") == true, "\(c.info.name)")
            #expect(refusal(c, granted: true) == nil, "\(c.info.name)")
            #expect(refusal(c, trusted: true) == nil, "\(c.info.name)")
        }
    }

    @Test("streams and clients: only the client's own")
    func ownership() {
        let s = session()
        s.ownSourceOutputs.withLock { _ = $0.insert(5) }
        s.ownSinkInputs.withLock { _ = $0.insert(9) }
        s.clientIndex.withLock { $0 = 3 }
        for c: Command in [.moveSourceOutput, .killSourceOutput, .setSourceOutputVolume, .setSourceOutputMute] {
            #expect(refusal(c, session: s) { $0.writeU32(5) } == nil, "\(c.info.name) on its own source output")
            #expect(refusal(c, session: s) { $0.writeU32(6) } == "source output 6 belongs to another client")
        }
        for c: Command in [.moveSinkInput, .killSinkInput, .setSinkInputVolume, .setSinkInputMute] {
            #expect(refusal(c, session: s) { $0.writeU32(9) } == nil, "\(c.info.name) on its own sink input")
            #expect(refusal(c, session: s) { $0.writeU32(5) } == "sink input 5 belongs to another client")
        }
        #expect(refusal(.killClient, session: s) { $0.writeU32(3) } == nil)
        #expect(refusal(.killClient, session: s) { $0.writeU32(4) } == "client 4 is another client")
    }

    @Test("default devices need capture consent")
    func defaultDevices() {
        for c: Command in [.setDefaultSource, .setDefaultSink] {
            #expect(refusal(c, granted: true) { $0.writeString("mic") } == nil)
            #expect(refusal(c, granted: false) { $0.writeString("mic") } == "changing the default device needs microphone consent")
        }
    }

    @Test("extensions and object messages: read-only ones only")
    func readOnly() {
        func ext(_ name: String, _ sub: UInt32) -> String? {
            refusal(.extension) {
                $0.writeU32(0xFFFF_FFFF); $0.writeString(name); $0.writeU32(sub)
            }
        }
        #expect(ext("module-stream-restore", 1) == nil) // READ
        #expect(ext("module-stream-restore", 2) != nil) // WRITE
        #expect(ext("module-device-manager", 6) == nil) // SUBSCRIBE
        #expect(ext("module-something-else", 0) != nil)
        func message(_ m: String) -> String? {
            refusal(.sendObjectMessage) {
                $0.writeString("/core"); $0.writeString(m); $0.writeString(nil)
            }
        }
        #expect(message("list-handlers") == nil)
        #expect(message("set-codec") != nil)
    }

    @Test("arguments that do not parse are refused with the cause")
    func unparsable() {
        let r = refusal(.killSinkInput)
        #expect(r?.hasPrefix("cannot parse its arguments") == true, "\(r ?? "nil")")
    }
}
