/// Which way a command travels.
public enum Direction: Sendable, Equatable {
    /// Requests from the client.
    case clientToServer
    /// Replies and events from the server.
    case serverToClient
    /// Sent by either side.
    case both
    /// Never on the wire (libpulse-internal).
    case none
}

/// Metadata of one opcode.
public struct CommandInfo: Sendable, Equatable {
    /// The opcode.
    public let command: Command
    /// Oldest protocol version with this opcode (8 for everything PulseAudio 0.9 already had).
    public let since: UInt32
    /// Which side sends it.
    public let direction: Direction
    /// PulseAudio's name without the `PA_COMMAND_` prefix, e.g. `CREATE_RECORD_STREAM`.
    public let name: String
}

/// Native protocol opcodes (`PA_COMMAND_*`), identical in PulseAudio and pipewire-pulse.
public enum Command: UInt32, Sendable, CaseIterable {
    case error = 0
    case timeout = 1
    case reply = 2
    case createPlaybackStream = 3
    case deletePlaybackStream = 4
    case createRecordStream = 5
    case deleteRecordStream = 6
    case exit = 7
    case auth = 8
    case setClientName = 9
    case lookupSink = 10
    case lookupSource = 11
    case drainPlaybackStream = 12
    case stat = 13
    case getPlaybackLatency = 14
    case createUploadStream = 15
    case deleteUploadStream = 16
    case finishUploadStream = 17
    case playSample = 18
    case removeSample = 19
    case getServerInfo = 20
    case getSinkInfo = 21
    case getSinkInfoList = 22
    case getSourceInfo = 23
    case getSourceInfoList = 24
    case getModuleInfo = 25
    case getModuleInfoList = 26
    case getClientInfo = 27
    case getClientInfoList = 28
    case getSinkInputInfo = 29
    case getSinkInputInfoList = 30
    case getSourceOutputInfo = 31
    case getSourceOutputInfoList = 32
    case getSampleInfo = 33
    case getSampleInfoList = 34
    case subscribe = 35
    case setSinkVolume = 36
    case setSinkInputVolume = 37
    case setSourceVolume = 38
    case setSinkMute = 39
    case setSourceMute = 40
    case corkPlaybackStream = 41
    case flushPlaybackStream = 42
    case triggerPlaybackStream = 43
    case setDefaultSink = 44
    case setDefaultSource = 45
    case setPlaybackStreamName = 46
    case setRecordStreamName = 47
    case killClient = 48
    case killSinkInput = 49
    case killSourceOutput = 50
    case loadModule = 51
    case unloadModule = 52
    case addAutoload = 53
    case removeAutoload = 54
    case getAutoloadInfo = 55
    case getAutoloadInfoList = 56
    case getRecordLatency = 57
    case corkRecordStream = 58
    case flushRecordStream = 59
    case prebufPlaybackStream = 60
    case request = 61
    case overflow = 62
    case underflow = 63
    case playbackStreamKilled = 64
    case recordStreamKilled = 65
    case subscribeEvent = 66
    case moveSinkInput = 67
    case moveSourceOutput = 68
    case setSinkInputMute = 69
    case suspendSink = 70
    case suspendSource = 71
    case setPlaybackStreamBufferAttr = 72
    case setRecordStreamBufferAttr = 73
    case updatePlaybackStreamSampleRate = 74
    case updateRecordStreamSampleRate = 75
    case playbackStreamSuspended = 76
    case recordStreamSuspended = 77
    case playbackStreamMoved = 78
    case recordStreamMoved = 79
    case updateRecordStreamProplist = 80
    case updatePlaybackStreamProplist = 81
    case updateClientProplist = 82
    case removeRecordStreamProplist = 83
    case removePlaybackStreamProplist = 84
    case removeClientProplist = 85
    case started = 86
    case `extension` = 87
    case getCardInfo = 88
    case getCardInfoList = 89
    case setCardProfile = 90
    case clientEvent = 91
    case playbackStreamEvent = 92
    case recordStreamEvent = 93
    case playbackBufferAttrChanged = 94
    case recordBufferAttrChanged = 95
    case setSinkPort = 96
    case setSourcePort = 97
    case setSourceOutputVolume = 98
    case setSourceOutputMute = 99
    case setPortLatencyOffset = 100
    case enableSrbchannel = 101
    case disableSrbchannel = 102
    case registerMemfdShmid = 103
    case sendObjectMessage = 104
}

extension Command {
    /// Version, direction and name of this opcode.
    public var info: CommandInfo { commandTable[Int(rawValue)] }

    /// Whether PulseAudio treats the opcode as unsupported (autoload 53–56, and TIMEOUT which never travels).
    public var isObsolete: Bool {
        switch self {
        case .timeout, .addAutoload, .removeAutoload, .getAutoloadInfo, .getAutoloadInfoList: return true
        default: return false
        }
    }
}

/// Indexed by raw value; the tests check that every entry names its own command.
private let commandTable: [CommandInfo] = [
    CommandInfo(command: .error, since: 8, direction: .serverToClient, name: "ERROR"),
    CommandInfo(command: .timeout, since: 8, direction: .none, name: "TIMEOUT"),
    CommandInfo(command: .reply, since: 8, direction: .serverToClient, name: "REPLY"),
    CommandInfo(command: .createPlaybackStream, since: 8, direction: .clientToServer, name: "CREATE_PLAYBACK_STREAM"),
    CommandInfo(command: .deletePlaybackStream, since: 8, direction: .clientToServer, name: "DELETE_PLAYBACK_STREAM"),
    CommandInfo(command: .createRecordStream, since: 8, direction: .clientToServer, name: "CREATE_RECORD_STREAM"),
    CommandInfo(command: .deleteRecordStream, since: 8, direction: .clientToServer, name: "DELETE_RECORD_STREAM"),
    CommandInfo(command: .exit, since: 8, direction: .clientToServer, name: "EXIT"),
    CommandInfo(command: .auth, since: 8, direction: .clientToServer, name: "AUTH"),
    CommandInfo(command: .setClientName, since: 8, direction: .clientToServer, name: "SET_CLIENT_NAME"),
    CommandInfo(command: .lookupSink, since: 8, direction: .clientToServer, name: "LOOKUP_SINK"),
    CommandInfo(command: .lookupSource, since: 8, direction: .clientToServer, name: "LOOKUP_SOURCE"),
    CommandInfo(command: .drainPlaybackStream, since: 8, direction: .clientToServer, name: "DRAIN_PLAYBACK_STREAM"),
    CommandInfo(command: .stat, since: 8, direction: .clientToServer, name: "STAT"),
    CommandInfo(command: .getPlaybackLatency, since: 8, direction: .clientToServer, name: "GET_PLAYBACK_LATENCY"),
    CommandInfo(command: .createUploadStream, since: 8, direction: .clientToServer, name: "CREATE_UPLOAD_STREAM"),
    CommandInfo(command: .deleteUploadStream, since: 8, direction: .clientToServer, name: "DELETE_UPLOAD_STREAM"),
    CommandInfo(command: .finishUploadStream, since: 8, direction: .clientToServer, name: "FINISH_UPLOAD_STREAM"),
    CommandInfo(command: .playSample, since: 8, direction: .clientToServer, name: "PLAY_SAMPLE"),
    CommandInfo(command: .removeSample, since: 8, direction: .clientToServer, name: "REMOVE_SAMPLE"),
    CommandInfo(command: .getServerInfo, since: 8, direction: .clientToServer, name: "GET_SERVER_INFO"),
    CommandInfo(command: .getSinkInfo, since: 8, direction: .clientToServer, name: "GET_SINK_INFO"),
    CommandInfo(command: .getSinkInfoList, since: 8, direction: .clientToServer, name: "GET_SINK_INFO_LIST"),
    CommandInfo(command: .getSourceInfo, since: 8, direction: .clientToServer, name: "GET_SOURCE_INFO"),
    CommandInfo(command: .getSourceInfoList, since: 8, direction: .clientToServer, name: "GET_SOURCE_INFO_LIST"),
    CommandInfo(command: .getModuleInfo, since: 8, direction: .clientToServer, name: "GET_MODULE_INFO"),
    CommandInfo(command: .getModuleInfoList, since: 8, direction: .clientToServer, name: "GET_MODULE_INFO_LIST"),
    CommandInfo(command: .getClientInfo, since: 8, direction: .clientToServer, name: "GET_CLIENT_INFO"),
    CommandInfo(command: .getClientInfoList, since: 8, direction: .clientToServer, name: "GET_CLIENT_INFO_LIST"),
    CommandInfo(command: .getSinkInputInfo, since: 8, direction: .clientToServer, name: "GET_SINK_INPUT_INFO"),
    CommandInfo(command: .getSinkInputInfoList, since: 8, direction: .clientToServer, name: "GET_SINK_INPUT_INFO_LIST"),
    CommandInfo(command: .getSourceOutputInfo, since: 8, direction: .clientToServer, name: "GET_SOURCE_OUTPUT_INFO"),
    CommandInfo(command: .getSourceOutputInfoList, since: 8, direction: .clientToServer, name: "GET_SOURCE_OUTPUT_INFO_LIST"),
    CommandInfo(command: .getSampleInfo, since: 8, direction: .clientToServer, name: "GET_SAMPLE_INFO"),
    CommandInfo(command: .getSampleInfoList, since: 8, direction: .clientToServer, name: "GET_SAMPLE_INFO_LIST"),
    CommandInfo(command: .subscribe, since: 8, direction: .clientToServer, name: "SUBSCRIBE"),
    CommandInfo(command: .setSinkVolume, since: 8, direction: .clientToServer, name: "SET_SINK_VOLUME"),
    CommandInfo(command: .setSinkInputVolume, since: 8, direction: .clientToServer, name: "SET_SINK_INPUT_VOLUME"),
    CommandInfo(command: .setSourceVolume, since: 8, direction: .clientToServer, name: "SET_SOURCE_VOLUME"),
    CommandInfo(command: .setSinkMute, since: 8, direction: .clientToServer, name: "SET_SINK_MUTE"),
    CommandInfo(command: .setSourceMute, since: 8, direction: .clientToServer, name: "SET_SOURCE_MUTE"),
    CommandInfo(command: .corkPlaybackStream, since: 8, direction: .clientToServer, name: "CORK_PLAYBACK_STREAM"),
    CommandInfo(command: .flushPlaybackStream, since: 8, direction: .clientToServer, name: "FLUSH_PLAYBACK_STREAM"),
    CommandInfo(command: .triggerPlaybackStream, since: 8, direction: .clientToServer, name: "TRIGGER_PLAYBACK_STREAM"),
    CommandInfo(command: .setDefaultSink, since: 8, direction: .clientToServer, name: "SET_DEFAULT_SINK"),
    CommandInfo(command: .setDefaultSource, since: 8, direction: .clientToServer, name: "SET_DEFAULT_SOURCE"),
    CommandInfo(command: .setPlaybackStreamName, since: 8, direction: .clientToServer, name: "SET_PLAYBACK_STREAM_NAME"),
    CommandInfo(command: .setRecordStreamName, since: 8, direction: .clientToServer, name: "SET_RECORD_STREAM_NAME"),
    CommandInfo(command: .killClient, since: 8, direction: .clientToServer, name: "KILL_CLIENT"),
    CommandInfo(command: .killSinkInput, since: 8, direction: .clientToServer, name: "KILL_SINK_INPUT"),
    CommandInfo(command: .killSourceOutput, since: 8, direction: .clientToServer, name: "KILL_SOURCE_OUTPUT"),
    CommandInfo(command: .loadModule, since: 8, direction: .clientToServer, name: "LOAD_MODULE"),
    CommandInfo(command: .unloadModule, since: 8, direction: .clientToServer, name: "UNLOAD_MODULE"),
    CommandInfo(command: .addAutoload, since: 8, direction: .clientToServer, name: "ADD_AUTOLOAD"),
    CommandInfo(command: .removeAutoload, since: 8, direction: .clientToServer, name: "REMOVE_AUTOLOAD"),
    CommandInfo(command: .getAutoloadInfo, since: 8, direction: .clientToServer, name: "GET_AUTOLOAD_INFO"),
    CommandInfo(command: .getAutoloadInfoList, since: 8, direction: .clientToServer, name: "GET_AUTOLOAD_INFO_LIST"),
    CommandInfo(command: .getRecordLatency, since: 8, direction: .clientToServer, name: "GET_RECORD_LATENCY"),
    CommandInfo(command: .corkRecordStream, since: 8, direction: .clientToServer, name: "CORK_RECORD_STREAM"),
    CommandInfo(command: .flushRecordStream, since: 8, direction: .clientToServer, name: "FLUSH_RECORD_STREAM"),
    CommandInfo(command: .prebufPlaybackStream, since: 8, direction: .clientToServer, name: "PREBUF_PLAYBACK_STREAM"),
    CommandInfo(command: .request, since: 8, direction: .serverToClient, name: "REQUEST"),
    CommandInfo(command: .overflow, since: 8, direction: .serverToClient, name: "OVERFLOW"),
    CommandInfo(command: .underflow, since: 8, direction: .serverToClient, name: "UNDERFLOW"),
    CommandInfo(command: .playbackStreamKilled, since: 8, direction: .serverToClient, name: "PLAYBACK_STREAM_KILLED"),
    CommandInfo(command: .recordStreamKilled, since: 8, direction: .serverToClient, name: "RECORD_STREAM_KILLED"),
    CommandInfo(command: .subscribeEvent, since: 8, direction: .serverToClient, name: "SUBSCRIBE_EVENT"),
    CommandInfo(command: .moveSinkInput, since: 10, direction: .clientToServer, name: "MOVE_SINK_INPUT"),
    CommandInfo(command: .moveSourceOutput, since: 10, direction: .clientToServer, name: "MOVE_SOURCE_OUTPUT"),
    CommandInfo(command: .setSinkInputMute, since: 11, direction: .clientToServer, name: "SET_SINK_INPUT_MUTE"),
    CommandInfo(command: .suspendSink, since: 11, direction: .clientToServer, name: "SUSPEND_SINK"),
    CommandInfo(command: .suspendSource, since: 11, direction: .clientToServer, name: "SUSPEND_SOURCE"),
    CommandInfo(command: .setPlaybackStreamBufferAttr, since: 12, direction: .clientToServer, name: "SET_PLAYBACK_STREAM_BUFFER_ATTR"),
    CommandInfo(command: .setRecordStreamBufferAttr, since: 12, direction: .clientToServer, name: "SET_RECORD_STREAM_BUFFER_ATTR"),
    CommandInfo(command: .updatePlaybackStreamSampleRate, since: 12, direction: .clientToServer, name: "UPDATE_PLAYBACK_STREAM_SAMPLE_RATE"),
    CommandInfo(command: .updateRecordStreamSampleRate, since: 12, direction: .clientToServer, name: "UPDATE_RECORD_STREAM_SAMPLE_RATE"),
    CommandInfo(command: .playbackStreamSuspended, since: 12, direction: .serverToClient, name: "PLAYBACK_STREAM_SUSPENDED"),
    CommandInfo(command: .recordStreamSuspended, since: 12, direction: .serverToClient, name: "RECORD_STREAM_SUSPENDED"),
    CommandInfo(command: .playbackStreamMoved, since: 12, direction: .serverToClient, name: "PLAYBACK_STREAM_MOVED"),
    CommandInfo(command: .recordStreamMoved, since: 12, direction: .serverToClient, name: "RECORD_STREAM_MOVED"),
    CommandInfo(command: .updateRecordStreamProplist, since: 13, direction: .clientToServer, name: "UPDATE_RECORD_STREAM_PROPLIST"),
    CommandInfo(command: .updatePlaybackStreamProplist, since: 13, direction: .clientToServer, name: "UPDATE_PLAYBACK_STREAM_PROPLIST"),
    CommandInfo(command: .updateClientProplist, since: 13, direction: .clientToServer, name: "UPDATE_CLIENT_PROPLIST"),
    CommandInfo(command: .removeRecordStreamProplist, since: 13, direction: .clientToServer, name: "REMOVE_RECORD_STREAM_PROPLIST"),
    CommandInfo(command: .removePlaybackStreamProplist, since: 13, direction: .clientToServer, name: "REMOVE_PLAYBACK_STREAM_PROPLIST"),
    CommandInfo(command: .removeClientProplist, since: 13, direction: .clientToServer, name: "REMOVE_CLIENT_PROPLIST"),
    CommandInfo(command: .started, since: 13, direction: .serverToClient, name: "STARTED"),
    CommandInfo(command: .extension, since: 14, direction: .both, name: "EXTENSION"),
    CommandInfo(command: .getCardInfo, since: 15, direction: .clientToServer, name: "GET_CARD_INFO"),
    CommandInfo(command: .getCardInfoList, since: 15, direction: .clientToServer, name: "GET_CARD_INFO_LIST"),
    CommandInfo(command: .setCardProfile, since: 15, direction: .clientToServer, name: "SET_CARD_PROFILE"),
    CommandInfo(command: .clientEvent, since: 15, direction: .serverToClient, name: "CLIENT_EVENT"),
    CommandInfo(command: .playbackStreamEvent, since: 15, direction: .serverToClient, name: "PLAYBACK_STREAM_EVENT"),
    CommandInfo(command: .recordStreamEvent, since: 15, direction: .serverToClient, name: "RECORD_STREAM_EVENT"),
    CommandInfo(command: .playbackBufferAttrChanged, since: 15, direction: .serverToClient, name: "PLAYBACK_BUFFER_ATTR_CHANGED"),
    CommandInfo(command: .recordBufferAttrChanged, since: 15, direction: .serverToClient, name: "RECORD_BUFFER_ATTR_CHANGED"),
    CommandInfo(command: .setSinkPort, since: 16, direction: .clientToServer, name: "SET_SINK_PORT"),
    CommandInfo(command: .setSourcePort, since: 16, direction: .clientToServer, name: "SET_SOURCE_PORT"),
    CommandInfo(command: .setSourceOutputVolume, since: 22, direction: .clientToServer, name: "SET_SOURCE_OUTPUT_VOLUME"),
    CommandInfo(command: .setSourceOutputMute, since: 22, direction: .clientToServer, name: "SET_SOURCE_OUTPUT_MUTE"),
    CommandInfo(command: .setPortLatencyOffset, since: 27, direction: .clientToServer, name: "SET_PORT_LATENCY_OFFSET"),
    CommandInfo(command: .enableSrbchannel, since: 30, direction: .both, name: "ENABLE_SRBCHANNEL"),
    CommandInfo(command: .disableSrbchannel, since: 30, direction: .both, name: "DISABLE_SRBCHANNEL"),
    CommandInfo(command: .registerMemfdShmid, since: 31, direction: .both, name: "REGISTER_MEMFD_SHMID"),
    CommandInfo(command: .sendObjectMessage, since: 35, direction: .clientToServer, name: "SEND_OBJECT_MESSAGE"),
]
