// Command policy for proxied clients (default deny for what captures behind
// Earmuff's back). Runs on the client loop before a request is forwarded; a
// refused request is answered ERROR(tag, ACCESS) and never reaches the server.
//
// What is refused (protocol reference section 9), unless the app is listed in
// `trusted-apps`:
// - LOAD_MODULE, UNLOAD_MODULE, EXIT: modules can open unmediated endpoints
//   (native-protocol-tcp with auth-anonymous), loop the microphone into a pipe
//   or the network (loopback, pipe-sink, rtp-send, tunnels), or remove policy.
// - MOVE/KILL of, and volume/mute changes on, source outputs and sink inputs
//   the client did not create (rerouting another app's capture or playback).
// - KILL_CLIENT of any client but itself.
// - SET_DEFAULT_SOURCE / SET_DEFAULT_SINK by apps without microphone consent:
//   making a monitor the default source makes other, consented apps transmit it.
// - EXTENSION writes (stream-restore WRITE/DELETE persistently reroute streams;
//   device-manager reorders devices) and any unknown extension or subcommand.
// - SEND_OBJECT_MESSAGE other than read-only queries.
// - The obsolete autoload commands, which PulseAudio itself would disconnect for.
import Consent
import PulseWire

enum CommandPolicy {
    /// Nil to forward, or why the request is refused.
    static func refusal(for command: Command, payload: [UInt8], session: SessionState, trusted: Bool,
                        granted: () -> Bool) -> String? {
        if trusted { return nil }
        do {
            return try decide(command, payload: payload, session: session, granted: granted)
        } catch {
            return "cannot parse its arguments (\(error)), so it cannot be checked"
        }
    }

    private static func decide(_ command: Command, payload: [UInt8], session: SessionState,
                               granted: () -> Bool) throws -> String? {
        var r = TagStructReader(payload)
        _ = try r.readU32()
        _ = try r.readU32()
        switch command {
        case .loadModule, .unloadModule, .exit:
            return "\(command.info.name) is not allowed for proxied apps (add the app to trusted-apps to allow it)"
        case .addAutoload, .removeAutoload, .getAutoloadInfo, .getAutoloadInfoList:
            return "obsolete command"
        case .moveSourceOutput, .killSourceOutput, .setSourceOutputVolume, .setSourceOutputMute:
            let index = try r.readU32()
            let own = session.ownSourceOutputs.withLock { $0.contains(index) }
            return own ? nil : "source output \(index) belongs to another client"
        case .moveSinkInput, .killSinkInput, .setSinkInputVolume, .setSinkInputMute:
            let index = try r.readU32()
            let own = session.ownSinkInputs.withLock { $0.contains(index) }
            return own ? nil : "sink input \(index) belongs to another client"
        case .killClient:
            let index = try r.readU32()
            let own = session.clientIndex.withLock { $0 == index }
            return own ? nil : "client \(index) is another client"
        case .setDefaultSource, .setDefaultSink:
            return granted() ? nil : "changing the default device needs microphone consent"
        case .extension:
            return try extensionRefusal(&r)
        case .sendObjectMessage:
            _ = try r.readString() // object path
            let message = try r.readString() ?? ""
            let readOnly = ["list-handlers", "help", "list-codecs", "get-codec", "get-profile-sticky",
                            "pipewire-pulse:list-modules", "pipewire-pulse:describe-module"]
            return readOnly.contains(message) ? nil : "object message \"\(message)\" can change device state"
        default:
            return nil
        }
    }

    /// Read-only subcommands of the restore modules are allowed; everything else is refused.
    private static func extensionRefusal(_ r: inout TagStructReader) throws -> String? {
        _ = try r.readU32() // module index
        let name = try r.readString() ?? ""
        let sub = try r.readU32()
        let readOnly: [String: Set<UInt32>] = [
            "module-stream-restore": [0, 1, 4],        // TEST, READ, SUBSCRIBE
            "module-device-restore": [0, 1, 3, 4],     // TEST, SUBSCRIBE, READ_FORMATS_ALL, READ_FORMATS
            "module-device-manager": [0, 1, 6],        // TEST, READ, SUBSCRIBE
        ]
        guard let allowed = readOnly[name] else { return "extension \"\(name)\" is not known to be read-only" }
        return allowed.contains(sub) ? nil : "\(name) subcommand \(sub) changes stored routing"
    }
}
