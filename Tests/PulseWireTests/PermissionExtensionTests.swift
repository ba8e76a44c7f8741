// The permission extension's wire (docs/permission-api.md): requests, replies and events
// as bytes, and what is refused.
import Testing
@testable import PulseWire

@Suite struct PermissionExtensionWire {
    /// The call in a request payload, read the way the daemon reads it.
    private func decode(_ payload: [UInt8]) throws -> (tag: UInt32, index: UInt32, name: String?, call: PermissionCall) {
        var r = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &r)
        #expect(header.command == Command.extension.rawValue)
        let (index, name) = try PermissionExtension.addressee(&r)
        return (header.tag, index, name, try PermissionCall.decode(from: &r))
    }

    @Test func requestsRoundTrip() throws {
        for call: PermissionCall in [
            .test, .get(kind: "microphone"), .request(kind: "system-audio", purpose: "Memos"),
            .request(kind: "app-audio", purpose: nil), .subscribe(true), .subscribe(false),
        ] {
            let d = try decode(call.packet(tag: 42))
            #expect(d.tag == 42 && d.index == invalidIndex && d.name == "module-earmuff" && d.call == call)
        }
    }

    @Test func aRequestIsTheDocumentedBytes() {
        // 'L' 87, 'L' tag 5, 'L' 0xFFFFFFFF, 't' "module-earmuff\0", 'L' 2, 't' "microphone\0", 'N'
        var expected: [UInt8] = [0x4C, 0, 0, 0, 87, 0x4C, 0, 0, 0, 5, 0x4C, 0xFF, 0xFF, 0xFF, 0xFF, 0x74]
        expected += Array("module-earmuff".utf8) + [0, 0x4C, 0, 0, 0, 2, 0x74] + Array("microphone".utf8) + [0, 0x4E]
        #expect(PermissionCall.request(kind: "microphone", purpose: nil).packet(tag: 5) == expected)
    }

    @Test func unknownSubcommandsAreToldApartAndTrailingFieldsRefused() throws {
        #expect(try decode(PermissionCall.unknown(9).packet(tag: 1)).call == .unknown(9))
        var tooMuch = PermissionCall.get(kind: "microphone").packet(tag: 1)
        var w = TagStructWriter()
        w.writeString("exe:/usr/bin/other")
        tooMuch += w.bytes
        #expect(throws: WireError.self) { try decode(tooMuch) }
        var noKind = PermissionCall.test.packet(tag: 1)
        noKind[noKind.count - 1] = 1 // GET, without its kind
        #expect(throws: WireError.self) { try decode(noKind) }
    }

    @Test func statusAndTestReplies() throws {
        let s = PermissionStatus(state: "granted", appKey: "flatpak:org.example.App", identifiedBy: "flatpak", strength: "sandbox")
        #expect(try PermissionStatus.decodePacket(s.packet(tag: 3, version: 35), version: 35) == (3, s))
        #expect(try PermissionTestReply.decodePacket(PermissionTestReply().packet(tag: 4, version: 35), version: 35).message.version == 1)
    }

    @Test func eventsAreOursOrAnotherModules() throws {
        let e = PermissionEvent(kind: "microphone", state: "denied")
        #expect(try PermissionEvent.decode(e.packet) == e)
        var r = TagStructReader(e.packet)
        #expect(try PacketHeader.decode(from: &r).tag == 0, "tag 0, as PulseAudio's restore modules send events")
        var w = TagStructWriter()
        PacketHeader(command: .extension, tag: 0).encode(into: &w)
        w.writeU32(3)
        w.writeString("module-stream-restore")
        w.writeU32(3)
        #expect(try PermissionEvent.decode(w.bytes) == nil)
    }
}
