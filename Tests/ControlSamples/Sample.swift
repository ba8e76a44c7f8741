// Control-protocol payloads for the tests of the wire (ControlProtocolTests) and of
// what the command line prints of them (EarmuffCLITests).
import ControlProtocol

/// Payloads as the daemon sends them.
public enum Sample {
    public static let status = StatusPayload(
        daemon: DaemonInfo(
            pid: 42, version: "0.1.0", listenPath: "/run/user/1000/earmuff/native",
            controlPath: "/run/user/1000/earmuff/control", storePath: "/home/u/.local/state/earmuff/permissions.sqlite",
            uptimeSeconds: 3723),
        upstream: UpstreamInfo(server: "unix:/run/user/1000/pulse/native", reachable: true),
        clients: [ClientInfo(id: 3, appKey: "exe:/usr/bin/parecord", displayName: "parecord", pid: 1234, identifiedBy: "exe", executable: "/usr/bin/parecord")],
        streams: [
            StreamInfo(
                client: 3, stream: 0, appKey: "exe:/usr/bin/parecord", source: "sine.monitor", sampleSpec: "s16le 2ch 44100Hz",
                audio: .silenced, bytesReal: 0, bytesSilenced: 88200)
        ],
        prompts: [
            PromptInfo(
                id: 1, appKey: "exe:/usr/bin/parecord", displayName: "parecord", identifiedBy: .executable, pid: 1234,
                purpose: "test \"quotes\"\nand newline", source: "sine", raisedAt: 1_700_000_000.5)
        ])

    public static let app = AppInfo(
        key: "flatpak:org.mozilla.firefox", displayName: "Firefox", state: .granted, reason: .user,
        purpose: "video calls", identifiedBy: .flatpak, decidedAt: 1_700_000_000, lastUsed: 1_700_000_100)
}
