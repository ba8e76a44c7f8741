// Command policy for proxied clients: a table gives every request an access
// class; a request without one is refused (default deny). Runs in the client
// half before a request is forwarded; a refused request is answered
// ERROR(tag, ACCESS) and never reaches the server.
//
// What is refused (protocol reference section 9):
// - LOAD_MODULE, UNLOAD_MODULE, EXIT, unless the app is in `trusted-apps`:
//   modules can open unmediated endpoints (native-protocol-tcp with
//   auth-anonymous), loop the microphone into a pipe or the network
//   (loopback, pipe-sink, rtp-send, tunnels), or remove policy.
// - Changing a shared device (volume, mute, suspend, port, card profile,
//   latency offset of any sink or source) without microphone consent or
//   `trusted-apps`: muting or suspending the microphone silences every other
//   app's recording, a consented one's included.
// - MOVE/KILL of, and volume/mute changes on, source outputs and sink inputs
//   the client did not create (rerouting another app's capture or playback).
// - KILL_CLIENT of any client but itself.
// - SET_DEFAULT_SOURCE / SET_DEFAULT_SINK by apps without microphone consent
//   (or trust): making a monitor the default source makes other, consented
//   apps transmit it.
// Trust covers exactly these three; nothing else in the policy is skipped for it.
// - EXTENSION writes (stream-restore WRITE/DELETE persistently reroute streams;
//   device-manager reorders devices) and any unknown extension or subcommand.
//   (Requests to Earmuff's own `module-earmuff` never get here: the client
//   half answers them itself, see ConsentService/PermissionCalls.swift.)
// - SEND_OBJECT_MESSAGE other than read-only queries.
// - The obsolete autoload commands, which PulseAudio itself would disconnect for.
import Consent
import PulseWire
import StreamState

/// How a request is checked before it is forwarded (as PipeWire's
/// pulse-server gives each command its access check in `commands.h`).
enum AccessClass: Equatable, Sendable {
    /// Forwarded for every client: queries, its own streams, its own properties.
    case open
    /// Only for apps in `trusted-apps`: loading and unloading modules, EXIT.
    case trustedOnly
    /// Obsolete autoload commands (PulseAudio itself disconnects for them).
    case obsolete
    /// Only on a source output the client created.
    case ownSourceOutput
    /// Only on a sink input the client created.
    case ownSinkInput
    /// Only on the client itself.
    case ownClient
    /// Only for apps whose microphone access is granted (or trusted): default devices.
    case needsCaptureConsent
    /// Changes a device every app shares: only with microphone consent (or trust).
    case deviceChange
    /// Only the read-only subcommands of known extensions.
    case readOnlyExtension
    /// Only the read-only object messages.
    case readOnlyObjectMessage
}

enum CommandPolicy {
    /// The access class of every request a client may send. A command that
    /// is not in the table is refused (default deny), so an opcode added to
    /// the protocol later is refused until it is classified here.
    static let table: [Command: AccessClass] = {
        var t: [Command: AccessClass] = [:]
        let open: [Command] = [
            .auth, .setClientName, .updateClientProplist, .removeClientProplist,
            .createPlaybackStream, .deletePlaybackStream, .createRecordStream, .deleteRecordStream,
            .createUploadStream, .deleteUploadStream, .finishUploadStream, .playSample, .removeSample,
            .drainPlaybackStream, .corkPlaybackStream, .flushPlaybackStream, .triggerPlaybackStream,
            .prebufPlaybackStream, .corkRecordStream, .flushRecordStream,
            .setPlaybackStreamName, .setRecordStreamName,
            .setPlaybackStreamBufferAttr, .setRecordStreamBufferAttr,
            .updatePlaybackStreamSampleRate, .updateRecordStreamSampleRate,
            .updatePlaybackStreamProplist, .updateRecordStreamProplist,
            .removePlaybackStreamProplist, .removeRecordStreamProplist,
            .getPlaybackLatency, .getRecordLatency,
            .lookupSink, .lookupSource, .stat, .getServerInfo, .subscribe,
            .getSinkInfo, .getSinkInfoList, .getSourceInfo, .getSourceInfoList,
            .getModuleInfo, .getModuleInfoList, .getClientInfo, .getClientInfoList,
            .getSinkInputInfo, .getSinkInputInfoList, .getSourceOutputInfo, .getSourceOutputInfoList,
            .getSampleInfo, .getSampleInfoList, .getCardInfo, .getCardInfoList,
        ]
        for c in open { t[c] = .open }
        for c: Command in [.loadModule, .unloadModule, .exit] { t[c] = .trustedOnly }
        for c: Command in [.addAutoload, .removeAutoload, .getAutoloadInfo, .getAutoloadInfoList] { t[c] = .obsolete }
        for c: Command in [.moveSourceOutput, .killSourceOutput, .setSourceOutputVolume, .setSourceOutputMute] {
            t[c] = .ownSourceOutput
        }
        for c: Command in [.moveSinkInput, .killSinkInput, .setSinkInputVolume, .setSinkInputMute] { t[c] = .ownSinkInput }
        t[.killClient] = .ownClient
        t[.setDefaultSource] = .needsCaptureConsent
        t[.setDefaultSink] = .needsCaptureConsent
        for c: Command in [
            .setSinkVolume, .setSourceVolume, .setSinkMute, .setSourceMute, .suspendSink, .suspendSource,
            .setCardProfile, .setSinkPort, .setSourcePort, .setPortLatencyOffset,
        ] {
            t[c] = .deviceChange
        }
        t[.extension] = .readOnlyExtension
        t[.sendObjectMessage] = .readOnlyObjectMessage
        return t
    }()

    /// Nil to forward, or why the request is refused.
    /// `trusted` and `granted` are asked only for the classes that depend on them (not for
    /// the open queries most requests are).
    static func refusal(
        for command: Command, payload: [UInt8], session: SessionState,
        trusted: @autoclosure () -> Bool, granted: () -> Bool
    ) -> String? {
        guard let access = table[command] else {
            return "\(command.info.name) is not a request Earmuff forwards"
        }
        do {
            return try decide(command, access: access, payload: payload, session: session, trusted: trusted, granted: granted)
        } catch {
            return "cannot parse its arguments (\(error)), so it cannot be checked"
        }
    }

    private static func decide(
        _ command: Command, access: AccessClass, payload: [UInt8], session: SessionState,
        trusted: () -> Bool, granted: () -> Bool
    ) throws -> String? {
        var r = TagStructReader(payload)
        _ = try r.readU32()
        _ = try r.readU32()
        switch access {
        case .open:
            return nil
        case .trustedOnly:
            return trusted() ? nil : "\(command.info.name) is not allowed for proxied apps (add the app to trusted-apps to allow it)"
        case .obsolete:
            return "obsolete command"
        case .ownSourceOutput:
            let index = try r.readU32()
            let own = session.ownSourceOutputs.withLock { $0.contains(index) }
            return own ? nil : "source output \(index) belongs to another client"
        case .ownSinkInput:
            let index = try r.readU32()
            let own = session.ownSinkInputs.withLock { $0.contains(index) }
            return own ? nil : "sink input \(index) belongs to another client"
        case .ownClient:
            let index = try r.readU32()
            let own = session.clientIndex.withLock { $0 == index }
            return own ? nil : "client \(index) is another client"
        case .needsCaptureConsent:
            return trusted() || granted() ? nil : "changing the default device needs microphone consent"
        case .deviceChange:
            return trusted() || granted() ? nil : "\(command.info.name) changes a device every app shares and needs microphone consent"
        case .readOnlyExtension:
            return try extensionRefusal(&r)
        case .readOnlyObjectMessage:
            _ = try r.readString() // object path
            let message = try r.readString() ?? ""
            let readOnly = [
                "list-handlers", "help", "list-codecs", "get-codec", "get-profile-sticky",
                "pipewire-pulse:list-modules", "pipewire-pulse:describe-module",
            ]
            return readOnly.contains(message) ? nil : "object message \"\(message)\" can change device state"
        }
    }

    /// Read-only subcommands of the restore modules are allowed; everything else is refused.
    private static func extensionRefusal(_ r: inout TagStructReader) throws -> String? {
        _ = try r.readU32() // module index
        let name = try r.readString() ?? ""
        let sub = try r.readU32()
        let readOnly: [String: Set<UInt32>] = [
            "module-stream-restore": [0, 1, 4], // TEST, READ, SUBSCRIBE
            "module-device-restore": [0, 1, 3, 4], // TEST, SUBSCRIBE, READ_FORMATS_ALL, READ_FORMATS
            "module-device-manager": [0, 1, 6], // TEST, READ, SUBSCRIBE
        ]
        guard let allowed = readOnly[name] else { return "extension \"\(name)\" is not known to be read-only" }
        return allowed.contains(sub) ? nil : "\(name) subcommand \(sub) changes stored routing"
    }
}
