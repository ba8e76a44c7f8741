// Where a raised prompt goes, and its timer.
//
// The consent engine decides that a prompt exists, when the prompt command is
// wanted (no agent connected) and when the prompt is closed; this carries it
// out over the channels of `prompt-via`, in order:
//   - desktop channels (portal, notification) listed before `command` get the
//     prompt first, one dialog at a time (DesktopPrompter);
//   - the prompt command runs, one process at a time (PromptCommandRunner),
//     when the engine wants it and no desktop channel could show the prompt;
//   - agents get every prompt from the engine whatever happens here.
// Timeouts run on one timer thread (DeadlineTimers). Closing a prompt cancels
// its timer, withdraws its dialog and ends its command. Notices (`use-notices`:
// an app hears the microphone) go to the desktop's notification server on the
// prompter's connection, whatever `prompt-via` says.
import Consent
import ControlProtocol
import LinuxSystem
import Runtime

final class PromptDelivery: @unchecked Sendable {
    // @unchecked Sendable: `entries` is locked; the parts are thread-safe.
    private enum DesktopState { case notOffered, offered, unavailable }

    private struct Entry {
        var desktop: DesktopState = .notOffered
        /// The engine asked for the prompt command; the environment to run it with.
        var commandEnvironment: [String: String]?
    }

    /// What the service hears back, on the timer, bus or command thread.
    struct Handlers: Sendable {
        var answered: @Sendable (_ prompt: UInt64, Consent.PromptAnswer, RequestedLifespan?, _ via: PromptChannel) -> Void
        var timedOut: @Sendable (_ prompt: UInt64) -> Void
        /// The person closed the desktop prompt without answering ("not now").
        var dismissed: @Sendable (_ prompt: UInt64, _ via: PromptChannel) -> Void
        /// The prompt command exited; `output` is the first line it printed.
        var commandExited: @Sendable (_ prompt: UInt64, _ status: Int32, _ output: String) -> Void
        /// The person pressed Stop on the notice that `app` hears the microphone.
        var stopped: @Sendable (_ app: AppKey) -> Void
    }

    let timers: DeadlineTimers
    private let desktop: DesktopPrompter?
    /// Whether the desktop shows prompts (a desktop channel is in `prompt-via`), not only notices.
    private let desktopPrompts: Bool
    private let commands: PromptCommandRunner?
    private let entries = Locked([UInt64: Entry]())

    /// The desktop channels tried before the prompt command, in `prompt-via` order.
    static func desktopChannels(_ via: [PromptChannel], commandConfigured: Bool) -> [PromptChannel] {
        var out: [PromptChannel] = []
        for c in via {
            if c == .command && commandConfigured { break }
            if c == .portal || c == .notification { out.append(c) }
        }
        return out
    }

    init(via: [PromptChannel], command: String?, notices: Bool, handlers: Handlers) throws(SystemError) {
        let runCommand = command.flatMap { via.contains(.command) ? $0 : nil }
        let channels = Self.desktopChannels(via, commandConfigured: runCommand != nil)
        let timers = try DeadlineTimers()
        self.timers = timers
        self.handlers = handlers
        commands = try runCommand.map { cmd throws(SystemError) in
            try PromptCommandRunner(command: cmd, timers: timers) { prompt, status, cancelled, output in
                if cancelled {
                    Log.info("prompt-command for prompt \(prompt) ended with the prompt (status \(status))")
                } else {
                    Log.info("prompt-command for prompt \(prompt) exited with \(status)")
                    handlers.commandExited(prompt, status, output)
                }
            }
        }
        // The desktop reports through a sink, pointed at `self` once `self` exists.
        let sink = ReportSink()
        desktopPrompts = !channels.isEmpty
        desktop =
            channels.isEmpty && !notices
            ? nil
            : try DesktopPrompter(channels: channels, report: { sink.deliver($0, $1) }, onStop: handlers.stopped)
        sink.target = { [unowned self] prompt, outcome in desktopReported(prompt, outcome) }
    }

    private let handlers: Handlers

    private func desktopReported(_ prompt: UInt64, _ outcome: DesktopPrompter.Outcome) {
        switch outcome {
        case let .answered(answer, lifespan, via):
            Log.info("prompt \(prompt) answered \(answer.rawValue) (\(lifespan?.name ?? "no lifespan given")) by \(via.rawValue)")
            handlers.answered(prompt, answer, lifespan, via)
        case let .dismissed(via):
            Log.info("prompt \(prompt) dismissed on the desktop (\(via.rawValue)): not now; asked again at the app's next capture")
            handlers.dismissed(prompt, via)
        case .unavailable:
            desktopUnavailable(prompt)
        }
    }

    func start() {
        timers.start()
        commands?.start()
        desktop?.start()
    }

    func stop() {
        desktop?.stopAndJoin()
        commands?.stopAndJoin()
        timers.stopAndJoin()
    }

    /// A prompt was raised: the desktop gets it if any desktop channel is configured.
    func raised(_ p: PromptInfo) {
        entries.withLock { $0[p.id] = Entry(desktop: desktopPrompts ? .offered : .unavailable) }
        if desktopPrompts { desktop?.offer(p) }
    }

    /// The engine wants the prompt command for this prompt (no agent is connected).
    func wantsCommand(_ prompt: UInt64, environment: [String: String]) {
        guard let commands else { return }
        let runNow = entries.withLock { e -> Bool in
            guard var entry = e[prompt] else { return false }
            entry.commandEnvironment = environment
            e[prompt] = entry
            return entry.desktop != .offered
        }
        if runNow { commands.enqueue(.init(prompt: prompt, environment: environment)) }
    }

    /// Calls `handlers.timedOut` after `seconds`, unless the prompt closes first.
    func scheduleTimeout(_ prompt: UInt64, after seconds: Double) {
        timers.schedule(key: prompt, after: seconds) { [handlers] in handlers.timedOut(prompt) }
    }

    /// Tells the person that `app` hears the microphone now (a desktop notice).
    func notice(_ app: AppKey, name: String, icon: String?) {
        desktop?.notice(app, name: name, icon: icon)
    }

    /// The prompt is resolved: stop everything that still shows it.
    func closed(_ prompt: UInt64) {
        timers.cancel(key: prompt)
        entries.withLock { _ = $0.removeValue(forKey: prompt) }
        desktop?.withdraw(prompt)
        commands?.cancel(prompt: prompt)
    }

    private func desktopUnavailable(_ prompt: UInt64) {
        let env = entries.withLock { e -> [String: String]? in
            e[prompt]?.desktop = .unavailable
            return e[prompt]?.commandEnvironment
        }
        if let env, let commands { commands.enqueue(.init(prompt: prompt, environment: env)) }
    }
}

/// Forwards desktop reports to a target set after initialisation.
private final class ReportSink: @unchecked Sendable {
    // @unchecked Sendable: `target` is set once before the desktop thread starts.
    var target: (@Sendable (UInt64, DesktopPrompter.Outcome) -> Void)?
    func deliver(_ prompt: UInt64, _ outcome: DesktopPrompter.Outcome) { target?(prompt, outcome) }
}
