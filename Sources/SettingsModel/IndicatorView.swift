// What the status indicator (earmuff-indicator, a StatusNotifierItem in the desktop's
// tray) shows for a state: its icon's state, its tooltip and its menu. Pure, like
// `SettingsView`: the indicator's D-Bus edge only exports what this returns and carries
// out the intent of the item a person clicks.
import Consent
import ControlProtocol
import Wording

/// Who hears something now, as the icon says it.
public enum IndicatorLevel: String, Sendable, CaseIterable, Equatable {
    /// The daemon cannot be reached.
    case away
    /// Nobody gets real audio of any kind.
    case nobody
    /// Some app gets real system audio or another app's audio, nobody the microphone.
    case otherAudio
    /// Some app gets real microphone audio.
    case microphone
    /// Microphone access is off (and nobody gets real audio of another kind).
    case off
}

/// What a menu item does when clicked.
public enum IndicatorAction: Sendable, Equatable {
    case intent(SettingsIntent)
    case openSettings
}

/// One item of the indicator's menu; `children` make it a submenu.
public struct IndicatorItem: Sendable, Equatable {
    /// What names it across revisions of the menu: equal keys get equal ids.
    public var key: String
    public var label: String
    public var enabled = true
    public var separator = false
    public var action: IndicatorAction?
    public var children: [IndicatorItem] = []

    public init(key: String, label: String, enabled: Bool = true, action: IndicatorAction? = nil, children: [IndicatorItem] = []) {
        (self.key, self.label, self.enabled, self.action, self.children) = (key, label, enabled, action, children)
    }

    static func separator(_ key: String) -> IndicatorItem {
        var s = IndicatorItem(key: key, label: "")
        s.separator = true
        return s
    }
}

/// The indicator for one state.
public struct IndicatorView: Sendable, Equatable {
    public var level: IndicatorLevel
    /// The StatusNotifierItem status: "Passive" when there is nothing to see (a tray may
    /// tuck the item away), else "Active".
    public var status: String
    /// The tooltip's title and its body, one line per app that hears something.
    public var tooltipTitle: String
    public var tooltipBody: [String]
    public var menu: [IndicatorItem]

    /// `settingsInstalled`: whether the menu offers to open Earmuff Settings.
    public init(_ state: SettingsState, settingsInstalled: Bool) {
        let names = SettingsView.names(state)
        let hearing = Self.hearing(state, names: names)
        let micOn = state.accessEnabled(.microphone)
        switch state.reachability {
        case .connected:
            if hearing.contains(where: { $0.kind == .microphone }) {
                level = .microphone
            } else if !hearing.isEmpty {
                level = .otherAudio
            } else {
                level = micOn ? .nobody : .off
            }
        default:
            level = .away
        }

        var lines = hearing.map { "\($0.name) hears \($0.kind.shortPhrase)" }
        var items: [IndicatorItem] = []
        for h in hearing {
            let id = "\(h.key)\u{0}\(h.kind.rawValue)"
            items.append(
                IndicatorItem(
                    key: "hears:\(id)", label: "\(h.name) hears \(h.kind.shortPhrase)",
                    children: [
                        IndicatorItem(key: "deny:\(id)", label: "Deny", action: .intent(.choose(key: h.key, kind: h.kind, .deny))),
                        IndicatorItem(
                            key: "deny-session:\(id)", label: "Deny for this session",
                            action: .intent(.choose(key: h.key, kind: h.kind, .deny, .session))),
                    ]))
        }
        let prompts = state.reachability == .connected ? state.prompts : []
        if !prompts.isEmpty {
            if !items.isEmpty { items.append(.separator("after-hearing")) }
            for p in prompts {
                items.append(
                    IndicatorItem(
                        key: "prompt:\(p.id)", label: PromptWording.title(p),
                        children: [
                            IndicatorItem(key: "allow-prompt:\(p.id)", label: "Allow", action: .intent(.answer(prompt: p.id, allow: true))),
                            IndicatorItem(key: "deny-prompt:\(p.id)", label: "Deny", action: .intent(.answer(prompt: p.id, allow: false))),
                        ]))
            }
            lines.append(prompts.count == 1 ? "1 app waits for your answer" : "\(prompts.count) apps wait for your answer")
        }
        switch level {
        case .away:
            lines = ["Earmuff is not running"]
            items.append(IndicatorItem(key: "away", label: "Earmuff is not running", enabled: false))
        case .nobody where lines.isEmpty:
            lines = ["Nobody hears the microphone"]
            items.append(IndicatorItem(key: "nobody", label: "Nobody hears the microphone", enabled: false))
        default:
            break
        }
        if !micOn && state.reachability == .connected { lines.append("Microphone access is off") }
        if state.reachability == .connected {
            items.append(.separator("before-access"))
            items.append(
                IndicatorItem(
                    key: micOn ? "access-off" : "access-on", label: micOn ? "Turn off microphone access" : "Turn on microphone access",
                    action: .intent(.setAccess(.microphone, on: !micOn))))
        }
        if settingsInstalled {
            if state.reachability != .connected { items.append(.separator("before-access")) }
            items.append(IndicatorItem(key: "settings", label: "Open Earmuff Settings", action: .openSettings))
        }

        status = (level == .away || level == .nobody) && prompts.isEmpty ? "Passive" : "Active"
        tooltipTitle =
            switch level {
            case .microphone: "Earmuff: an app hears the microphone"
            case .otherAudio: "Earmuff: an app hears other audio"
            case .off: "Earmuff: microphone access is off"
            case .nobody, .away: "Earmuff"
            }
        tooltipBody = lines
        menu = items
    }

    /// One app that hears one kind of capture for real now.
    struct Hearing: Equatable {
        var key: String
        var kind: SettingsKind
        var name: String
    }

    /// Every app and kind with a stream of real audio, microphone first, then by name.
    static func hearing(_ state: SettingsState, names: [String: String]) -> [Hearing] {
        guard state.reachability == .connected else { return [] }
        var seen = Set<String>()
        var out: [Hearing] = []
        for s in state.streams where s.audio == .real {
            let kind = SettingsKind(s.kind)
            guard seen.insert("\(s.appKey)\u{0}\(kind.rawValue)").inserted else { continue }
            let name = names[s.appKey] ?? AppNameResolver.shownName(appKey: s.appKey, systemName: nil, commandName: nil, executable: nil)
            out.append(Hearing(key: s.appKey, kind: kind, name: name))
        }
        let order = SettingsKind.allCases
        return out.sorted {
            (order.firstIndex(of: $0.kind)!, $0.name.lowercased(), $0.key) < (order.firstIndex(of: $1.kind)!, $1.name.lowercased(), $1.key)
        }
    }
}

/// The ids of menu items across revisions: an item keeps its id while its key stays in the
/// menu, and a key never gets an id another key had, so a click on an item of a menu a
/// tray still shows from before a change never does what another item now does.
public struct IndicatorItemIDs: Sendable {
    private var ids: [String: Int32] = [:]
    private var next: Int32 = 1

    public init() {}

    /// The id of `key` (the root is 0).
    public mutating func id(_ key: String) -> Int32 {
        if let id = ids[key] { return id }
        let id = next
        next += 1
        ids[key] = id
        return id
    }
}
