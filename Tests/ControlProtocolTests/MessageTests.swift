import Consent
import ControlProtocol
import ControlSamples
import Foundation
import Testing

private func line(_ s: String) -> [UInt8] { Array(s.utf8) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
private func object(_ bytes: [UInt8]) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(bytes.dropLast())) as? [String: Any])
}

@Suite struct ClientMessageTests {
    @Test func decodesEveryRequest() throws {
        let cases: [(String, ClientMessage)] = [
            (#"{"type":"hello","id":1,"version":1,"client":"earmuff-cli"}"#, ClientMessage(id: 1, .hello(version: 1, client: "earmuff-cli"))),
            (#"{"type":"status","id":2}"#, .request(.status, id: 2)),
            (#"{"type":"apps"}"#, .request(.apps, id: nil)),
            (
                #"{"type":"set-decision","id":3,"app":"exe:/usr/bin/parecord","state":"granted","reason":"user"}"#,
                .request(.setDecision(app: "exe:/usr/bin/parecord", state: .granted, reason: "user"), id: 3)
            ),
            (
                #"{"type":"set-decision","id":4,"app":"Firefox","state":"denied"}"#,
                .request(.setDecision(app: "Firefox", state: .denied, reason: nil), id: 4)
            ),
            (#"{"type":"reset","id":5,"app":"launcher:org.example.Notes"}"#, .request(.reset(app: "launcher:org.example.Notes"), id: 5)),
            (
                #"{"type":"set-decision","id":10,"app":"obs","state":"granted","kind":"system-audio"}"#,
                .request(.setDecision(app: "obs", state: .granted, reason: nil, kind: .systemAudio), id: 10)
            ),
            (#"{"type":"reset","id":11,"app":"obs","kind":"app-audio"}"#, .request(.reset(app: "obs", kind: .appAudio), id: 11)),
            (#"{"type":"subscribe","id":6}"#, .request(.subscribe, id: 6)),
            (#"{"type":"become-agent","id":7}"#, .request(.becomeAgent, id: 7)),
            (#"{"type":"answer-prompt","id":8,"prompt":12,"answer":"once"}"#, .request(.answerPrompt(prompt: 12, answer: .once), id: 8)),
            (
                #"{"type":"set-decision","id":10,"app":"x:y","state":"granted","lifespan":"timed","seconds":7200}"#,
                .request(.setDecision(app: "x:y", state: .granted, reason: nil, lifespan: .timed(seconds: 7200)), id: 10)
            ),
            (
                #"{"type":"set-decision","id":11,"app":"x:y","state":"denied","lifespan":"session"}"#,
                .request(.setDecision(app: "x:y", state: .denied, reason: nil, lifespan: .session), id: 11)
            ),
            (
                #"{"type":"answer-prompt","id":12,"prompt":3,"answer":"deny","lifespan":"once"}"#,
                .request(.answerPrompt(prompt: 3, answer: .deny, lifespan: .once), id: 12)
            ),
            (
                #"{"type":"answer-prompt","id":13,"prompt":3,"answer":"allow","lifespan":"always"}"#,
                .request(.answerPrompt(prompt: 3, answer: .allow, lifespan: .always), id: 13)
            ),
            (
                #"{"type":"register-launcher","id":9,"appId":"org.example.Notes","purpose":"voice notes"}"#,
                .request(.registerLauncher(appID: "org.example.Notes", purpose: "voice notes"), id: 9)
            ),
        ]
        for (wire, expected) in cases {
            #expect(try ControlCodec.decodeClientMessage(line(wire)) == expected, "\(wire)")
            // And back: encoding then decoding gives the same message.
            let encoded = ControlCodec.encodeLine(expected)
            #expect(encoded.last == 10)
            #expect(!encoded.dropLast().contains(10))
            #expect(try ControlCodec.decodeClientMessage(Array(encoded.dropLast())) == expected)
        }
    }

    @Test func aBadLifespanIsABadRequest() {
        for wire in [
            #"{"type":"set-decision","id":1,"app":"x:y","state":"granted","lifespan":"forever"}"#,
            #"{"type":"set-decision","id":1,"app":"x:y","state":"granted","lifespan":"timed"}"#,
            #"{"type":"set-decision","id":1,"app":"x:y","state":"granted","lifespan":"timed","seconds":0}"#,
        ] {
            #expect(throws: ControlProtocolError.self, "\(wire)") { try ControlCodec.decodeClientMessage(line(wire)) }
        }
    }

    @Test func garbageIsNotJSONAndCloses() {
        for wire in ["hello there", "{\"type\":", "[1,2]", "42", "\"status\""] {
            #expect {
                _ = try ControlCodec.decodeClientMessage(line(wire))
            } throws: { e in
                guard let e = e as? ControlProtocolError, case .notJSON = e else { return false }
                return e.closesConnection && e.reply.code == .badRequest
            }
        }
    }

    @Test func unknownTypeKeepsTheIdAndTheConnection() {
        #expect(throws: ControlProtocolError.unknownType(id: 5, "frobnicate")) {
            _ = try ControlCodec.decodeClientMessage(line(#"{"type":"frobnicate","id":5}"#))
        }
        let e = ControlProtocolError.unknownType(id: 5, "frobnicate")
        #expect(!e.closesConnection)
        #expect(e.reply.code == .unknownRequest)
        #expect(e.requestID == 5)
    }

    @Test func missingOrInvalidFieldsAreBadRequests() {
        let bad = [
            #"{"id":3}"#,
            #"{"type":"set-decision","id":3,"state":"granted"}"#,
            #"{"type":"set-decision","id":3,"app":"x:y","state":"maybe"}"#,
            #"{"type":"answer-prompt","id":3,"prompt":"twelve","answer":"allow"}"#,
            #"{"type":"answer-prompt","id":3,"prompt":1,"answer":"sure"}"#,
            #"{"type":"reset","id":3,"app":7}"#,
            #"{"type":"reset","id":3,"app":"x:y","kind":"camera"}"#,
        ]
        for wire in bad {
            #expect {
                _ = try ControlCodec.decodeClientMessage(line(wire))
            } throws: { e in
                guard let e = e as? ControlProtocolError, case .badMessage(let id, let message) = e else { return false }
                return id == 3 && !e.closesConnection && !message.isEmpty && !message.contains("\n")
            }
        }
    }
}

@Suite struct ServerMessageTests {
    static let status = Sample.status
    static let app = Sample.app

    static let all: [ServerMessage] = [
        .response(id: nil, .hello(ServerHello(daemonVersion: "0.1.0", pid: 42))),
        .response(id: 1, .hello(ServerHello(daemonVersion: "0.1.0", pid: 42))),
        .response(id: 2, .ok),
        .response(id: nil, .ok),
        .response(id: 3, .status(status)),
        .response(id: 4, .apps([app, AppInfo(key: "exe:/usr/bin/pacat", state: .undetermined, reason: .none)])),
        .response(id: 5, .app(app)),
        .response(id: 6, .launcher(LauncherInfo(appKey: "launcher:org.example.Notes", socketPath: "/run/user/1000/earmuff/launch/org.example.Notes"))),
        .response(id: 7, .error(ControlError(.unknownApp, "no known app matches 'fire'; run 'earmuff apps'"))),
        .response(id: 8, .error(ControlError(ControlErrorCode("from-the-future"), "x"))),
        .prompt(status.prompts[0]),
        .event(.clientConnected(status.clients[0])),
        .event(.clientDisconnected(status.clients[0])),
        .event(.streamStarted(status.streams[0])),
        .event(.streamEnded(status.streams[0])),
        .event(.promptRaised(status.prompts[0])),
        .event(.promptResolved(PromptResolution(prompt: 1, appKey: "exe:/usr/bin/parecord", outcome: .allow, by: "agent"))),
        .event(.decisionChanged(app)),
    ]

    @Test func everyMessageRoundTrips() throws {
        for m in Self.all {
            let bytes = ControlCodec.encodeLine(m)
            #expect(bytes.last == 10)
            #expect(!bytes.dropLast().contains(10), "one line: \(text(bytes))")
            #expect(try ControlCodec.decodeServerMessage(Array(bytes.dropLast())) == m, "\(text(bytes))")
        }
    }

    @Test func greetingHasTheDocumentedShape() throws {
        let o = try object(ControlCodec.encodeLine(ServerMessage.response(id: nil, .hello(ServerHello(daemonVersion: "0.1.0", pid: 42)))))
        #expect(o["type"] as? String == "hello")
        #expect(o["version"] as? Int == 1)
        #expect(o["daemon"] as? String == "earmuff")
        #expect(o["daemonVersion"] as? String == "0.1.0")
        #expect(o["pid"] as? Int == 42)
        #expect(o["id"] == nil)
    }

    @Test func errorIsFlatWithIdCodeAndMessage() throws {
        let o = try object(
            ControlCodec.encodeLine(ServerMessage.response(id: 7, .error(ControlError(.ambiguousApp, "two apps are named 'python3'; use the app key")))))
        #expect(o["type"] as? String == "error")
        #expect(o["id"] as? Int == 7)
        #expect(o["code"] as? String == "ambiguous-app")
        #expect(o["message"] as? String == "two apps are named 'python3'; use the app key")
    }

    @Test func eventsNameTheirKindAndSubject() throws {
        let o = try object(ControlCodec.encodeLine(ServerMessage.event(.streamStarted(Self.status.streams[0]))))
        #expect(o["type"] as? String == "event")
        #expect(o["event"] as? String == "stream-started")
        let stream = try #require(o["stream"] as? [String: Any])
        #expect(stream["audio"] as? String == "silenced")
        #expect(stream["sampleSpec"] as? String == "s16le 2ch 44100Hz")
    }

    @Test func anUnknownCaptureKindNamesTheKindsThereAre() {
        for wire in [
            #"{"type":"set-access","id":3,"kind":"camera","enabled":true}"#,
            #"{"type":"set-decision","id":3,"app":"x:y","state":"granted","kind":"camera"}"#,
        ] {
            #expect(throws: ControlProtocolError.badMessage(id: 3, "unknown capture kind \"camera\"; use microphone, system-audio, app-audio")) {
                _ = try ControlCodec.decodeClientMessage(line(wire))
            }
        }
    }

    @Test func domainEnumsAreWrittenAsTheirWireNames() throws {
        let app = AppInfo(
            key: "exe:/usr/bin/obs", state: .granted, reason: .userOnce, identifiedBy: .executable,
            kind: .systemAudio, lifespan: .timed, expiresAt: 100, afterwards: .undetermined, strength: .weak)
        #expect(
            text(ControlCodec.encodeLine(ServerMessage.response(id: 2, .app(app)))) == #"{"app":{"afterwards":"undetermined","#
                + #""expiresAt":100,"identifiedBy":"exe","key":"exe:/usr/bin/obs","kind":"system-audio","lifespan":"timed","#
                + #""reason":"user-once","state":"granted","strength":"weak"},"id":2,"type":"app"}"# + "\n")
        let set = ClientMessage.request(.setAccess(kind: .appAudio, enabled: false), id: 4)
        #expect(text(ControlCodec.encodeLine(set)) == #"{"enabled":false,"id":4,"kind":"app-audio","type":"set-access"}"# + "\n")
        let waiting = WaitingCaptureInfo(appKey: "exe:/x", kind: .microphone, displayName: nil, uid: 1, source: "mic", since: 5)
        #expect(
            try ControlCodec.decodeServerMessage(
                Array(
                    ControlCodec.encodeLine(
                        ServerMessage.response(
                            id: 1,
                            .status(
                                StatusPayload(
                                    daemon: Self.status.daemon, upstream: Self.status.upstream,
                                    waiting: [waiting])))
                    ).dropLast()))
                == .response(id: 1, .status(StatusPayload(daemon: Self.status.daemon, upstream: Self.status.upstream, waiting: [waiting]))))
    }

    @Test func anAppInfoCarriesItsDesktopEntrysNameAndIcon() throws {
        let app = AppInfo(
            key: "exe:/usr/bin/gnome-sound-recorder", displayName: "recorder", state: .granted, reason: .user,
            systemName: "Sound Recorder", icon: "org.gnome.SoundRecorder")
        let bytes = ControlCodec.encodeLine(ServerMessage.response(id: 3, .apps([app])))
        #expect(
            text(bytes) == #"{"apps":[{"displayName":"recorder","icon":"org.gnome.SoundRecorder","#
                + #""key":"exe:/usr/bin/gnome-sound-recorder","reason":"user","state":"granted","systemName":"Sound Recorder"}],"#
                + #""id":3,"type":"apps"}"# + "\n")
        #expect(try ControlCodec.decodeServerMessage(Array(bytes.dropLast())) == .response(id: 3, .apps([app])))
    }

    @Test func absentFieldsAreLeftOut() throws {
        let o = try object(ControlCodec.encodeLine(ServerMessage.response(id: 1, .app(AppInfo(key: "exe:/bin/x", state: .undetermined, reason: .none)))))
        let app = try #require(o["app"] as? [String: Any])
        #expect(Set(app.keys) == ["key", "state", "reason"])
    }

    @Test func nonFiniteNumbersBecomeAnInternalError() throws {
        var s = Self.status
        s.daemon.uptimeSeconds = .infinity
        let bytes = ControlCodec.encodeLine(ServerMessage.response(id: 1, .status(s)))
        guard case .response(_, .error(let e)) = try ControlCodec.decodeServerMessage(Array(bytes.dropLast())) else {
            Issue.record("expected an error line, got \(text(bytes))")
            return
        }
        #expect(e.code == .internal)
    }

    @Test func unknownServerTypesAreReportedNotFatal() {
        #expect(throws: ControlProtocolError.unknownType(id: 3, "novelty")) {
            _ = try ControlCodec.decodeServerMessage(line(#"{"type":"novelty","id":3}"#))
        }
    }
}

@Suite struct UsageLogMessages {
    @Test func logRequestAndUsageReplyRoundTrip() throws {
        let request = ClientMessage.request(.log(app: "pacat", since: 1_700_000_000.5, limit: 20), id: 4)
        let line = ControlCodec.encodeLine(request)
        #expect(try ControlCodec.decodeClientMessage(Array(line.dropLast())) == request)
        let bare = ClientMessage.request(.log(app: nil, since: nil, limit: nil), id: 5)
        #expect(String(decoding: ControlCodec.encodeLine(bare), as: UTF8.self) == #"{"id":5,"type":"log"}"# + "\n")
        let reply = ServerMessage.response(
            id: 4,
            .usage([
                UsageInfo(
                    appKey: "exe:/usr/bin/pacat", kind: "microphone", source: "sine", startedAt: 1, endedAt: 3,
                    realSeconds: 1.5, silencedSeconds: 0.5, decision: "undetermined → granted (user)")
            ]))
        #expect(try ControlCodec.decodeServerMessage(Array(ControlCodec.encodeLine(reply).dropLast())) == reply)
    }
}
