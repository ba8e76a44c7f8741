// What a prompt says, the same on every channel (desktop dialog, notification,
// the settings window; the terminal agent adds the details): the name the
// system gives the app (its desktop entry, else its ID or executable:
// AppNameResolver.shownName), what it wants in words, its purpose or the fact
// that it gave none, and one short line on how sure Earmuff is of who it is.
// The key, the process and the executable are details, for the agent, the
// settings window's app page and `earmuff apps`. A name the app chose itself
// appears only as "calls itself ...".

import Consent
import ControlProtocol

/// The title and body lines of a prompt.
public enum PromptWording {
    /// Shown instead of a purpose when the app declared none.
    public static let noReason = "gave no reason"

    /// The name to show, the one `status`, `apps` and the settings window show too
    /// (`AppNameResolver.shownName`): the desktop entry's, else the app's own ID or script,
    /// else the command it was started as (a link to its executable), else the executable's name.
    public static func name(_ p: PromptInfo) -> String { p.shownName }

    /// "Firefox wants to use your microphone" (or to record system audio, or another app's audio).
    public static func title(_ p: PromptInfo) -> String {
        let what =
            switch kind(p) {
            case .systemAudio: "record what your computer plays"
            case .appAudio: "record another app's audio"
            case .microphone: "use your microphone"
            }
        return "\(cell(name(p), max: 60)) wants to \(what)"
    }

    /// "Deny pacat the microphone" (or system audio, or another app's audio): the question
    /// that asks how long a denial lasts.
    public static func denialTitle(_ p: PromptInfo) -> String {
        let what =
            switch kind(p) {
            case .systemAudio: "what your computer plays"
            case .appAudio: "other apps' audio"
            case .microphone: "the microphone"
            }
        return "Deny \(cell(name(p), max: 60)) \(what)"
    }

    /// "the microphone", "system audio", "other apps' audio".
    static func kindName(_ p: PromptInfo) -> String {
        switch kind(p) {
        case .systemAudio: "system audio"
        case .appAudio: "other apps' audio"
        case .microphone: "the microphone"
        }
    }

    /// The capture kind a prompt is about; prompts from daemons that do not name it are
    /// system audio when the source is a monitor, else microphone.
    public static func kind(_ p: PromptInfo) -> Capability {
        p.kind ?? (isMonitor(p.source) ? .systemAudio : .microphone)
    }

    /// The purpose in quotes, or "gave no reason".
    public static func purpose(_ p: PromptInfo) -> String {
        p.purpose.map { "“\(cell($0, max: 200))”" } ?? noReason
    }

    /// The purpose as a line of its own: in quotes, or "It gave no reason."
    public static func reason(_ p: PromptInfo) -> String {
        p.purpose.map { "“\(cell($0, max: 200))”" } ?? "It \(noReason)."
    }

    /// What it would hear, in words: "From your default microphone.", "From the microphone mic.",
    /// "Everything your computer plays (out.monitor).", "What other apps play (out.monitor)."
    public static func source(_ p: PromptInfo) -> String {
        let source = p.source.map { cell($0, max: 80) } ?? ""
        let place = source.isEmpty ? "" : " (\(source))"
        switch kind(p) {
        case .systemAudio: return "Everything your computer plays\(place)."
        case .appAudio: return "What other apps play\(place)."
        case .microphone: return source.isEmpty ? "From your default microphone." : "From the microphone \(source)."
        }
    }

    /// One short line on how sure Earmuff is of who the app is.
    public static func trust(_ p: PromptInfo) -> String {
        let id = p.appKey.split(separator: ":", maxSplits: 1).last.map { cell(String($0), max: 60) } ?? p.appKey
        switch (p.strength, p.identifiedBy) {
        case (.sandbox?, .flatpak): return "Checked: the Flatpak app \(id)."
        case (.sandbox?, .snap): return "Checked: the snap \(id)."
        case (.sandbox?, .launcher): return "Checked: started as \(id) by earmuff run."
        case (_, .uninspectable): return "Not verified: its process hides itself, so it only ever records silence."
        case (_, .sandboxed): return "Not verified: a sandbox that does not say which app it holds."
        default: return "Not verified: any program of yours could use this name."
        }
    }

    /// Where the person changes an answer later: Earmuff Settings when it is installed.
    public static func changeLater(settingsInstalled: Bool) -> String {
        settingsInstalled
            ? "You can change this later in Earmuff Settings."
            : "You can change this later with earmuff grant, deny or reset."
    }

    /// How the app was identified, and how much that says (the daemon's strength and caveat).
    public static func identity(_ p: PromptInfo) -> String {
        let how: String =
            switch p.identifiedBy {
            case .flatpak: "its Flatpak sandbox"
            case .snap: "its snap confinement"
            case .systemdScope: "its systemd unit"
            case .launcher: "the socket of its earmuff run"
            case .executable: "the executable the kernel reports"
            case .script: "the script on its interpreter's command line"
            case .sandboxed: "a sandbox whose metadata cannot be confirmed"
            case .uninspectable: "nothing: its process cannot be inspected"
            }
        let strength: String =
            switch p.strength {
            case .sandbox?: "strong against its sandbox only: \(sandboxOnly(p.identifiedBy))"
            case .weak?: "weak: any program of yours could pose as it"
            case nil: "strength unknown"
            }
        let caveat = p.caveat.map { "; \(cell($0, max: 160))" } ?? ""
        return "\(p.appKey), identified by \(p.identifiedBy): \(how) (\(strength)\(caveat))"
    }

    /// What a strength means, for tables: "strong against its sandbox only", "weak".
    public static func strengthLabel(_ strength: IdentityStrength?) -> String? {
        switch strength {
        case .sandbox?: "strong against its sandbox only"
        case .weak?: "weak"
        case nil: nil
        }
    }

    /// Who else can build an identity that the app's own sandbox cannot forge.
    private static func sandboxOnly(_ method: IdentificationMethod) -> String {
        switch method {
        case .flatpak:
            "the app cannot change its scope or metadata from inside, but any unsandboxed program of yours can build both (an app-flatpak-ID-N.scope of its own, a /.flatpak-info bound with bwrap)"
        case .snap:
            "the confined app cannot change its AppArmor label, but an unconfined program of yours can run under the same profile (aa-exec)"
        case .launcher:
            "the app cannot leave its earmuff run's socket, but any unsandboxed program of yours can start earmuff run with the same --app-id"
        default:
            "any unsandboxed program of yours can build the same"
        }
    }

    /// "microphone mic" / "system audio (out.monitor)" / "another app's audio (out.monitor)" / "the default microphone".
    public static func device(_ p: PromptInfo) -> String {
        let source = p.source ?? ""
        switch kind(p) {
        case .systemAudio: return source.isEmpty ? "system audio" : "system audio (\(cell(source, max: 80)))"
        case .appAudio: return source.isEmpty ? "another app's audio" : "another app's audio (\(cell(source, max: 80)))"
        case .microphone: return source.isEmpty ? "the default microphone" : "microphone \(cell(source, max: 80))"
        }
    }

    /// The body as lines: the purpose, what it would hear, how sure Earmuff is of who it is, the
    /// name it gives itself when that differs, and that access is off when it is.
    public static func bodyLines(_ p: PromptInfo) -> [String] {
        var lines = [reason(p), source(p), trust(p)]
        if let claimed = p.displayName, !claimed.isEmpty, claimed != name(p) {
            lines.append("It calls itself “\(cell(claimed, max: 60))”.")
        }
        if p.accessOff == true {
            lines.append("Access to \(kindName(p)) is off: it records silence whatever you answer.")
        }
        return lines
    }

    private static func isMonitor(_ source: String?) -> Bool { source?.hasSuffix(".monitor") == true }

    private static func cell(_ text: String, max: Int) -> String { TextFormat.cell(text, max: max) }
}

/// The notice that an app hears the microphone (`use-notices`).
public enum UseNoticeWording {
    /// "Podcast Recorder is using the microphone".
    public static func title(_ name: String) -> String { "\(TextFormat.cell(name, max: 60)) is using the microphone" }

    /// What it means and what Stop does, and where every app's choice is (Earmuff Settings, when installed).
    public static func body(settingsInstalled: Bool) -> String {
        "It hears you: it was allowed to. Stop denies it the microphone until you log out."
            + (settingsInstalled ? " Earmuff Settings shows what each app may do." : "")
    }
}
