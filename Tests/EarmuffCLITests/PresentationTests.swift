// What `earmuff` prints of the control protocol's payloads, and the times `log --since` takes.
import Consent
import ControlProtocol
import EarmuffCLI
import Foundation
import Testing
import Wording

@Suite struct PrintableOutput {
    @Test func controlCharactersAreShownNotObeyed() {
        #expect(ClientFormat.printable("plain /usr/bin/pacat") == "plain /usr/bin/pacat")
        #expect(ClientFormat.printable("a\u{1B}[2Kb") == "a\\x1B[2Kb")
        #expect(ClientFormat.printable("x\ny\tz\r") == "x\\x0Ay\\x09z\\x0D")
        #expect(ClientFormat.printable("\u{7F}\u{9B}") == "\\x7F\\x9B")
        #expect(ClientFormat.printable("evil\u{202E}gpj.exe") == "evil\\u{202E}gpj.exe")
        #expect(ClientFormat.printable("Zoom – ünïcode") == "Zoom – ünïcode")
    }

    @Test func tablesEventsAndDecisionsEscapeWhatAppsChose() {
        let forged = "/tmp/x\u{1B}[1A\u{1B}[2Kflatpak:us.zoom.Zoom (identified by flatpak)"
        let client = ClientInfo(id: 1, appKey: "exe:" + forged, displayName: "Zoom\u{1B}[31m", pid: 7, identifiedBy: "exe")
        let status = StatusPayload(
            daemon: DaemonInfo(pid: 1, version: "1", listenPath: "/l", controlPath: "/c", storePath: "/s", uptimeSeconds: 1),
            upstream: UpstreamInfo(server: "unix:/u", reachable: true), clients: [client], streams: [], prompts: [])
        let outputs = [
            ClientFormat.status(status),
            ClientFormat.event(.clientConnected(client), at: 0),
            ClientFormat.decision(AppInfo(key: "exe:" + forged, displayName: nil, state: .granted, reason: .user)),
            ClientFormat.prompt(PromptInfo(id: 1, appKey: "exe:" + forged, displayName: "a\nb", identifiedBy: .executable)),
        ]
        for text in outputs {
            #expect(!text.unicodeScalars.contains { $0.value == 0x1B }, "\(text)")
        }
    }
}

/// pw-record (a link to pw-cat) is named alike by the prompt, `status`, `apps`, `watch` and
/// the reply of `grant`; a table never shows "-" for an app whose name is known.
@Suite struct OneNamePerApp {
    static let key = "exe:/usr/bin/pw-cat"

    @Test func promptStatusAndAppsNameTheAppAlike() {
        let client = ClientInfo(
            id: 1, appKey: Self.key, displayName: nil, pid: 7, identifiedBy: "exe",
            executable: "/usr/bin/pw-cat", commandName: "pw-record")
        let prompt = PromptInfo(
            id: 2, appKey: Self.key, displayName: "pw-cat", identifiedBy: .executable, pid: 7,
            executable: "/usr/bin/pw-cat", commandName: "pw-record")
        let app = AppInfo(
            key: Self.key, state: .undetermined, reason: .none, identifiedBy: .executable,
            executable: "/usr/bin/pw-cat", commandName: "pw-record")
        let waiting = WaitingCaptureInfo(
            appKey: Self.key, kind: .microphone, displayName: nil, uid: 1000, source: "mic",
            since: 0, executable: "/usr/bin/pw-cat", commandName: "pw-record")
        var status = StatusPayload(
            daemon: DaemonInfo(pid: 1, version: "1", listenPath: "/l", controlPath: "/c", storePath: "/s", uptimeSeconds: 1),
            upstream: UpstreamInfo(server: "unix:/u", reachable: true), clients: [client], streams: [], prompts: [prompt])
        status.waiting = [waiting]
        #expect(PromptWording.title(prompt) == "pw-record wants to use your microphone")
        let statusNames = Self.names(ClientFormat.status(status))
        #expect(statusNames == ["pw-record", "pw-record", "pw-record"], "clients, prompts, waiting: \(statusNames)")
        #expect(Self.names(ClientFormat.apps([app])) == ["pw-record"])
        #expect(ClientFormat.event(.clientConnected(client), at: 0).contains("(pw-record, pid 7"))
        #expect(ClientFormat.decision(app) == "\(Self.key) (pw-record, identified by exe): microphone undetermined (none)\n")
        // Nothing but the key: still named, never "-".
        #expect(Self.names(ClientFormat.apps([AppInfo(key: Self.key, state: .granted, reason: .user)])) == ["pw-cat"])
    }

    /// The NAME cell of every row of every table in `text`.
    static func names(_ text: String) -> [String] {
        var column: Int?
        var names: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if let r = line.range(of: " NAME ") {
                column = line.distance(from: line.startIndex, to: r.lowerBound) + 1
            } else if line.isEmpty {
                column = nil
            } else if let c = column, line.count > c {
                names.append(String(line.dropFirst(c).prefix { $0 != " " }))
            }
        }
        return names
    }
}

@Suite struct UsageLogPresentation {
    @Test func sinceTakesDurationsAndDates() {
        let utc = TimeZone(identifier: "UTC")!
        #expect(SinceTime.parse("90s", now: 1000) == 910)
        #expect(SinceTime.parse("2h", now: 10_000) == 2800)
        #expect(SinceTime.parse("1.5d", now: 200_000) == 70400)
        #expect(SinceTime.parse("1970-01-02", now: 0, timeZone: utc) == 86400)
        #expect(SinceTime.parse("1970-01-01 01:02", now: 0, timeZone: utc) == 3720)
        #expect(SinceTime.parse("1970-01-01T00:00:30", now: 0, timeZone: utc) == 30)
        for bad in ["", "h", "-2h", "yesterday", "2h30m", "1970-13-01"] {
            #expect(SinceTime.parse(bad, now: 0) == nil, "\(bad)")
        }
    }

    @Test func logTableShowsSecondsAndLiveSessions() {
        let utc = TimeZone(identifier: "UTC")!
        let text = ClientFormat.usage(
            [
                UsageInfo(
                    appKey: "exe:/usr/bin/pacat", kind: "microphone", source: "sine", startedAt: 0, endedAt: 2,
                    realSeconds: 1.5, silencedSeconds: 0.5, decision: "granted (user)"),
                UsageInfo(appKey: "launcher:org.example.Notes", kind: "microphone", source: "mic", startedAt: 60),
            ], timeZone: utc)
        #expect(text.contains("1970-01-01 00:00:00"))
        #expect(text.contains("1.5 s") && text.contains("0.5 s"))
        #expect(text.contains("live"))
        #expect(ClientFormat.usage([]) == "no capture sessions\n")
    }
}
