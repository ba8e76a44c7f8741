// The desktop's microphone switches of Flatpak apps (the xdg permission store,
// followed on the desktop-perms loop): a switch set there is a lasting
// decision (reason desktop); one the engine refuses (apps.d fixes it) is
// shown as it is in force again. GNOME's switch for the microphone as a whole
// (followed on the gnome-privacy loop) is the master switch's for the microphone.
import Consent
import Runtime

final class DesktopDecisions: Sendable {
    private let decisions: Decisions
    private let records: any ConsentRecords
    private let desktop: any DesktopSwitches

    init(decisions: Decisions, records: any ConsentRecords, desktop: any DesktopSwitches) {
        self.decisions = decisions
        self.records = records
        self.desktop = desktop
    }

    /// The desktop switched a Flatpak app's microphone: a lasting decision (reason desktop).
    func decide(_ appID: String, _ state: PermissionState) {
        guard let key = AppKey(parsing: "flatpak:\(appID)"), key.value == appID else {
            Log.warn("desktop permission store: ignored app id \"\(appID)\" (not a Flatpak app id)")
            return
        }
        if let refused = decisions.setDecision(key, state, reason: state == .undetermined ? .reset : .desktop) {
            Log.warn("desktop permission store: \(refused)")
            // Show the decision in force on the switch again.
            if case let .governedByPolicy(_, fixed) = refused { desktop.mirror(appID: appID, fixed) }
            return
        }
        records.logEvent(
            kind: "desktop-permission", app: key, detail: "the desktop's microphone switch set \(state.rawValue)",
            at: wallClockNow())
    }

    /// GNOME's microphone switch was turned off (`disabled`) or on: Earmuff's master switch
    /// for the microphone follows, on disk before anything else is decided.
    func microphoneSwitched(disabled: Bool) {
        decisions.withEngine { e in ((), e.setAccess(.microphone, enabled: !disabled)) }
        records.flushDecisions()
        records.logEvent(
            kind: "desktop-access", app: nil,
            detail: "GNOME's microphone switch turned microphone access \(disabled ? "off" : "on")", at: wallClockNow())
        Log.info("GNOME's microphone switch: microphone access \(disabled ? "off" : "on")")
    }

    /// Whether Earmuff's master switch for the microphone is off.
    func microphoneAccessOff() -> Bool {
        decisions.engine.withLock { !$0.accessEnabled(.microphone) }
    }

    /// Lasting microphone decisions of Flatpak apps (apps.d policy over stored ones), by app id:
    /// what the desktop's switches show.
    func current() -> [String: PermissionState] {
        decisions.engine.withLock { e in
            var out: [String: PermissionState] = [:]
            for d in e.storedDecisions where d.appKey.kind == "flatpak" && d.capability == .microphone {
                out[d.appKey.value] = d.state
            }
            for (key, decl) in e.policy.declarations where key.kind == "flatpak" {
                if let fixed = decl.decision { out[key.value] = fixed }
            }
            return out
        }
    }
}

extension DesktopPermissions.Handlers {
    /// What the permission store reports, to `switches` once it is bound.
    init(_ switches: Late<DesktopDecisions>) {
        self.init(
            changed: { appID, state in switches.value?.decide(appID, state) },
            current: { switches.value?.current() ?? [:] })
    }
}

extension GnomeMicrophoneSwitch.Handlers {
    /// What GNOME's switch reports, to `switches` once it is bound (off until then: fail closed).
    init(_ switches: Late<DesktopDecisions>) {
        self.init(
            changed: { disabled in switches.value?.microphoneSwitched(disabled: disabled) },
            accessOff: { switches.value?.microphoneAccessOff() ?? true })
    }
}
