// What a prompt says, the same on every channel (terminal agent, desktop
// dialog, notification): the name the system gives the app (its desktop
// entry, else its ID or executable: AppNameResolver.shownName), how it was identified and how far that can be
// trusted, the purpose or the fact that it gave none, and what it records.
// A name the app chose itself appears only as "calls itself ...".

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

    /// "Firefox wants to use the microphone" (or to record system audio, or another app's audio).
    public static func title(_ p: PromptInfo) -> String {
        let what = switch kind(p) {
        case .systemAudio: "record what your computer plays"
        case .appAudio: "record another app's audio"
        case .microphone: "use the microphone"
        }
        return "\(cell(name(p), max: 60)) wants to \(what)"
    }

    /// "Deny pacat the microphone" (or system audio, or another app's audio): the question
    /// that asks how long a denial lasts.
    public static func denialTitle(_ p: PromptInfo) -> String {
        let what = switch kind(p) {
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

    /// How the app was identified, and how much that says (the daemon's strength and caveat).
    public static func identity(_ p: PromptInfo) -> String {
        let how: String = switch p.identifiedBy {
        case .flatpak: "its Flatpak sandbox"
        case .snap: "its snap confinement"
        case .systemdScope: "its systemd unit"
        case .launcher: "the socket of its earmuff run"
        case .executable: "the executable the kernel reports"
        case .script: "the script on its interpreter's command line"
        case .sandboxed: "a sandbox whose metadata cannot be confirmed"
        case .uninspectable: "nothing: its process cannot be inspected"
        }
        let strength: String = switch p.strength {
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

    /// The body as lines: purpose, identity, device, and the claimed name when it differs.
    public static func bodyLines(_ p: PromptInfo) -> [String] {
        var lines = [
            "Purpose: \(purpose(p))",
            "Who: \(identity(p))",
            "Records from: \(device(p))",
        ]
        if let claimed = p.displayName, !claimed.isEmpty, claimed != name(p) {
            lines.append("Calls itself “\(cell(claimed, max: 60))”")
        }
        if let command = p.commandName, !command.isEmpty, let exe = p.executable {
            lines.append("Program: \(cell(command, max: 60)), a link to \(cell(exe, max: 120))")
        }
        if let pid = p.pid { lines.append("Process: \(pid)") }
        if p.accessOff == true {
            lines.append("Access to \(kindName(p)) is off in Earmuff: every app records silence until it is on again (earmuff access on)")
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

    public static let body = "It hears you: it was allowed to. Stop denies it the microphone until you log out."
}
