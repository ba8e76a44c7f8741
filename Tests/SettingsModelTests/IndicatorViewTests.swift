// What the status indicator shows for a state, and what its menu items do.
import Consent
import ControlProtocol
import SettingsModel
import Testing

@Suite struct IndicatorViewTests {
    typealias S = SettingsViewTests

    static func stream(_ app: AppInfo, _ kind: Capability, _ audio: AudioDelivery, client: UInt64 = 1) -> StreamInfo {
        StreamInfo(client: client, stream: 0, appKey: app.key, source: "mic", sampleSpec: "s16le 1ch 48000Hz", audio: audio, kind: kind)
    }

    static func labels(_ items: [IndicatorItem]) -> [String] {
        items.map { $0.separator ? "—" : $0.label + ($0.children.isEmpty ? "" : " › " + $0.children.map(\.label).joined(separator: " | ")) }
    }

    @Test func nobodyRecordingIsPassiveAndSaysSo() {
        let v = IndicatorView(S.state(apps: [S.firefox]), settingsInstalled: true)
        #expect(v.level == .nobody && v.status == "Passive")
        #expect(v.tooltipTitle == "Earmuff" && v.tooltipBody == ["Nobody hears the microphone"])
        #expect(Self.labels(v.menu) == ["Nobody hears the microphone", "—", "Turn off microphone access", "Open Earmuff Settings"])
        #expect(v.menu[0].enabled == false)
    }

    @Test func anAppRecordingSilenceLightsNothing() {
        let v = IndicatorView(
            S.state(apps: [S.recorder], streams: [Self.stream(S.recorder, .microphone, .silenced)]),
            settingsInstalled: false)
        #expect(v.level == .nobody && v.status == "Passive")
        #expect(!Self.labels(v.menu).contains { $0.contains("pacat") })
    }

    @Test func eachAppThatHearsIsNamedPerKindWithDeny() {
        let streams = [
            Self.stream(S.monitor, .systemAudio, .real, client: 2), Self.stream(S.firefox, .microphone, .real),
            Self.stream(S.firefox, .microphone, .real, client: 3), Self.stream(S.recorder, .microphone, .silenced),
        ]
        let v = IndicatorView(S.state(apps: [S.firefox, S.recorder, S.monitor], streams: streams), settingsInstalled: false)
        #expect(v.level == .microphone && v.status == "Active")
        #expect(v.tooltipTitle == "Earmuff: an app hears the microphone")
        #expect(v.tooltipBody == ["org.mozilla.firefox hears the microphone", "obs hears system audio"])
        #expect(
            Self.labels(v.menu) == [
                "org.mozilla.firefox hears the microphone › Deny | Deny for this session",
                "obs hears system audio › Deny | Deny for this session", "—", "Turn off microphone access",
            ])
        #expect(
            v.menu[0].children.map(\.action) == [
                .intent(.choose(key: S.firefox.key, kind: .microphone, .deny)),
                .intent(.choose(key: S.firefox.key, kind: .microphone, .deny, .session)),
            ])
        #expect(v.menu[1].children[0].action == .intent(.choose(key: S.monitor.key, kind: .systemAudio, .deny)))
    }

    @Test func onlyOtherAudioIsItsOwnLevel() {
        let v = IndicatorView(
            S.state(
                apps: [S.monitor], streams: [Self.stream(S.monitor, .systemAudio, .real)],
                access: [AccessInfo(kind: .microphone, enabled: false)]), settingsInstalled: true)
        #expect(v.level == .otherAudio)
        #expect(v.tooltipBody == ["obs hears system audio", "Microphone access is off"])
    }

    @Test func accessOffIsShownAndTheSwitchTurnsItOn() {
        let v = IndicatorView(S.state(apps: [], access: [AccessInfo(kind: .microphone, enabled: false)]), settingsInstalled: false)
        #expect(v.level == .off && v.status == "Active")
        #expect(v.tooltipBody == ["Microphone access is off"])
        #expect(v.menu.last?.label == "Turn on microphone access")
        #expect(v.menu.last?.action == .intent(.setAccess(.microphone, on: true)))
        let on = IndicatorView(S.state(apps: []), settingsInstalled: false)
        #expect(on.menu.last?.action == .intent(.setAccess(.microphone, on: false)))
        #expect(on.menu.last?.key != v.menu.last?.key, "a click on a menu shown before the switch changed does not switch it back")
    }

    @Test func waitingPromptsAreAnswerable() {
        let p = PromptInfo(
            id: 7, appKey: "exe:/usr/bin/pacat", displayName: "pacat", identifiedBy: .executable,
            systemName: "Sound Recorder", kind: .microphone)
        let v = IndicatorView(S.state(apps: [S.recorder], prompts: [p]), settingsInstalled: false)
        #expect(v.status == "Active", "a prompt waiting is worth seeing")
        #expect(Self.labels(v.menu).first == "Sound Recorder wants to use your microphone › Allow | Deny")
        #expect(v.menu[0].children.map(\.action) == [.intent(.answer(prompt: 7, allow: true)), .intent(.answer(prompt: 7, allow: false))])
        #expect(v.tooltipBody == ["1 app waits for your answer"])
    }

    @Test func aDaemonAwayIsDimmedAndOffersOnlySettings() {
        var s = SettingsState()
        s.lost(.notRunning(path: "/run/user/1000/earmuff/control"))
        let v = IndicatorView(s, settingsInstalled: true)
        #expect(v.level == .away && v.status == "Passive")
        #expect(v.tooltipBody == ["Earmuff is not running"])
        #expect(Self.labels(v.menu) == ["Earmuff is not running", "—", "Open Earmuff Settings"])
    }

    @Test func itemIDsStayWithTheirItemAndAreNeverGivenToAnother() {
        var ids = IndicatorItemIDs()
        let deny = ids.id("deny:a")
        let settings = ids.id("settings")
        #expect(deny != 0 && settings != 0 && deny != settings)
        #expect(ids.id("deny:b") != deny && ids.id("deny:a") == deny)
    }

    @Test func eachLevelHasItsOwnIcon() {
        let icons = IndicatorLevel.allCases.map { IndicatorIcon.draw($0, size: 22) }
        #expect(Set(icons.map(\.argb)).count == IndicatorLevel.allCases.count)
        for icon in icons {
            #expect(icon.width == 22 && icon.height == 22 && icon.argb.count == 22 * 22 * 4)
            let opaque = stride(from: 0, to: icon.argb.count, by: 4).filter { icon.argb[$0] > 0 }.count
            #expect(opaque > 22 * 22 / 10 && opaque < 22 * 22 / 2, "a glyph, neither empty nor a block: \(opaque) pixels")
        }
        // The colour of the most opaque pixel: orange for the microphone, blue for other audio.
        func strongest(_ level: IndicatorLevel) -> [UInt8] {
            let p = IndicatorIcon.draw(level, size: 32).argb
            let i = stride(from: 0, to: p.count, by: 4).max { p[$0] < p[$1] }!
            return Array(p[i..<i + 4])
        }
        #expect(strongest(.microphone) == [255, 0xff, 0x78, 0x00])
        #expect(strongest(.otherAudio) == [255, 0x35, 0x84, 0xe4])
        #expect(strongest(.nobody) == [255, 0x8c, 0x8c, 0x8c])
        #expect(strongest(.away)[0] < 128, "dimmed")
    }
}
