import Testing
import PulseWire

@Suite struct CommandTableTests {
    /// `createRecordStream` → `CREATE_RECORD_STREAM`.
    static func upperSnake(_ name: String) -> String {
        var out = ""
        for ch in name {
            if ch.isUppercase { out += "_" }
            out += ch.uppercased()
        }
        return out
    }

    @Test func everyOpcodeFromZeroTo104() {
        #expect(Command.allCases.map(\.rawValue) == Array(0...104))
        #expect(Command(rawValue: 105) == nil)
    }

    @Test func tableEntriesDescribeTheirOwnCommand() {
        for command in Command.allCases {
            let info = command.info
            #expect(info.command == command)
            #expect(info.name == Self.upperSnake(String(describing: command)), "\(command)")
            #expect(info.since >= 8 && info.since <= 35)
        }
    }

    @Test func knownEntries() {
        #expect(Command.createRecordStream.info.name == "CREATE_RECORD_STREAM")
        #expect(Command.createRecordStream.info.direction == .clientToServer)
        #expect(Command.recordStreamKilled.info.direction == .serverToClient)
        #expect(Command.extension.info.direction == .both)
        #expect(Command.timeout.info.direction == Direction.none)
        #expect(Command.moveSourceOutput.info.since == 10)
        #expect(Command.recordStreamMoved.info.since == 12)
        #expect(Command.extension.info.since == 14)
        #expect(Command.setSourceOutputVolume.info.since == 22)
        #expect(Command.enableSrbchannel.info.since == 30)
        #expect(Command.registerMemfdShmid.info.since == 31)
        #expect(Command.sendObjectMessage.info.since == 35)
        #expect(Command.getAutoloadInfoList.rawValue == 56 && Command.getAutoloadInfoList.isObsolete)
        #expect(!Command.loadModule.isObsolete)
    }

    @Test func errorCodes() {
        #expect(ErrorCode.allCases.map(\.rawValue) == Array(0...26))
        #expect(ErrorCode.access.rawValue == 1)
        #expect(ErrorCode.noEntity.rawValue == 5)
        #expect(ErrorCode.moduleInitFailed.rawValue == 14)
        #expect(ErrorCode.busy.rawValue == 26)
    }

    @Test func protocolVersionWords() {
        #expect(ProtocolVersion.number(of: 0xC000_0023) == 35)
        #expect(ProtocolVersion.number(of: 0x4000_0023) == 35)
        #expect(ProtocolVersion.number(of: 0x0000_000C) == 12)
        // Below 13 the whole word is the number, as PulseAudio reads it.
        #expect(ProtocolVersion.number(of: 0x8000_000C) == 0x8000_000C)
        #expect(ProtocolVersion.stripTransportFlags(0xC000_0023) == 0x23)
        #expect(ProtocolVersion.stripTransportFlags(0x7FFF_000D) == 0x0D)
        #expect(ProtocolVersion.stripTransportFlags(0x8000_000C) == 0x8000_000C)
        #expect(ProtocolVersion.effective(client: 0xC000_0023, server: 0x0000_000D) == 13)
        #expect(ProtocolVersion.shmFlag == 0x8000_0000 && ProtocolVersion.memfdFlag == 0x4000_0000)
    }

    @Test func packetHeader() throws {
        let header = try PacketHeader.decode(try goldenPayload(Golden.recordKilled))
        #expect(header == PacketHeader(command: .recordStreamKilled, tag: PacketTag.none))
        #expect(header.knownCommand == .recordStreamKilled)
        #expect(packetInvalidTag == 0xFFFF_FFFF)
        let unknown = try PacketHeader.decode(packet(0xFFF0, tag: 7))
        #expect(unknown.knownCommand == nil && unknown.tag == 7)
        #expect(
            wireError { _ = try PacketHeader.decode([0x4C, 0, 0, 0, 2, 0x74, 0]) }
                == .unexpectedTag(expected: WireTag.u32, found: WireTag.string, at: 5))
        #expect(wireError { _ = try PacketHeader.decode([0x4C, 0, 0, 0, 2]) } == .unexpectedEnd(expected: WireTag.u32, at: 5))
    }
}
