// Desktop prompts over the session bus, one dialog at a time.
//
// An event loop of its own ("desktop-prompts") owns the bus connection (sd-bus
// is single-threaded), watched through LoopBus; other threads post requests to
// it (`offer`, `withdraw`), so no relay or control thread ever waits on D-Bus. Prompts wait in order; the first is shown on the first channel that
// is available, in the configured order:
//   portal        org.freedesktop.impl.portal.Access.AccessDialog on the
//                 desktop's xdg-desktop-portal backend (GNOME, KDE, GTK);
//                 cancelled with org.freedesktop.impl.portal.Request.Close.
//                 Its reply is read in every shape the backends send
//                 (AccessDialogReply); when a deny does not say for how long,
//                 a second dialog asks. A backend whose reply cannot be read,
//                 or that fails, is not asked again while the daemon runs:
//                 the prompt moves on to the next channel at once
//   notification  org.freedesktop.Notifications with actions, when the
//                 server lists "actions" in GetCapabilities; withdrawn with
//                 CloseNotification. Closed by the person (reason 2) it is
//                 "not now"; closed otherwise (expired) the next channel
//                 takes the prompt
// With no bus, or no such service on it, a prompt is reported `unavailable`
// at once and the next channel (prompt-command, agents) takes it.
//
// Notices (`use-notices`) go out on the same connection: "NAME is using the
// microphone", once per app and run, with a "Stop" action that denies the app
// for the session (`onStop`); only the server that showed one can stop it.
// No notification server: no notice.
import Consent
import ControlProtocol
import DBus
import Glibc
import Runtime
import Wording

final class DesktopPrompter: @unchecked Sendable {
    // @unchecked Sendable: `loop` is thread-safe; everything else belongs to the loop, whose
    // entry points (`drive`, `connect`) check so. Other threads only post to the loop.
    enum Outcome: Sendable, Equatable {
        /// Answered, for `lifespan` (nil: the answer's own meaning).
        case answered(Consent.PromptAnswer, lifespan: RequestedLifespan?, via: PromptChannel)
        /// No desktop channel could show it.
        case unavailable
        /// The person closed the dialog or notification without answering.
        case dismissed(via: PromptChannel)
    }

    /// What a portal dialog asks.
    private enum Question {
        /// Allow or deny, and for how long.
        case answer
        /// The person denied, and the backend did not say for how long: ask.
        case howLongToDeny
    }

    private struct Shown {
        var prompt: PromptInfo
        var channel: PromptChannel
        var question: Question = .answer
        /// Channels still to try if this one turns out not to be provided.
        var rest: [PromptChannel]
        /// The well-known name that shows it (a portal backend's, the notification server's).
        var service: String = ""
        /// The unique name of the connection that owned `service` when it was shown: the only
        /// one whose answers count.
        var destination: String = ""
        var handle: String = ""
        var notification: UInt32 = 0
        var pendingCall: BusSlot?
    }

    /// Backends that implement the Access portal, in order of preference.
    static let portalBackends = [
        "org.freedesktop.impl.portal.desktop.gnome",
        "org.freedesktop.impl.portal.desktop.kde",
        "org.freedesktop.impl.portal.desktop.gtk",
    ]
    static let portalPath = "/org/freedesktop/portal/desktop"
    static let notificationsName = "org.freedesktop.Notifications"
    static let notificationsPath = "/org/freedesktop/Notifications"
    static let icon = "audio-input-microphone-symbolic"
    /// Whether Earmuff Settings is installed beside this program (where prompts send the person).
    static let settingsInstalled = ProcessInspector.settingsProgram.map { unsafe access($0, X_OK) == 0 } ?? false
    /// The AccessDialog choice that asks how long the answer lasts, and its options (their ids
    /// are lifespans as `RequestedLifespan(text:)` reads them).
    static let lifespanChoice = "lifespan"
    static let lifespanOptions = [
        ("always", "Always"), ("session", "Until I log out"), ("1h", "For an hour"),
        ("once", "Only this time"),
    ]

    private let channels: [PromptChannel]
    private let report: @Sendable (UInt64, Outcome) -> Void
    private let onStop: @Sendable (AppKey) -> Void
    private let loop: EventLoop

    // The loop's own (checked in `drive` and `connect`).
    private var driver: LoopBus?
    private var bus: BusConnection? { driver?.bus }
    private var signalSlots: [BusSlot] = []
    private var waiting: [PromptInfo] = []
    private var current: Shown?
    /// Portal backends whose replies could not be read, or that failed: not asked again.
    private var failedBackends: Set<String> = []
    /// Owners (unique bus names) of a portal backend's name that are not its program: not asked.
    private var distrustedOwners: Set<String> = []
    /// Portal backends seen to report no choices even with an Allow (xdg-desktop-portal-kde
    /// 5.27): asking them how long a denial lasts is pointless, so a denial there is lasting.
    private var backendsWithoutChoices: Set<String> = []
    /// Notices on screen: notification id → the app and the server (unique name) that shows it.
    private var notices: [UInt32: (app: AppKey, server: String)] = [:]

    /// `channels`: the desktop channels to try, in order. `report` and `onStop` (a notice's
    /// Stop) run on the prompter's loop.
    init(
        channels: [PromptChannel], report: @escaping @Sendable (UInt64, Outcome) -> Void,
        onStop: @escaping @Sendable (AppKey) -> Void = { _ in }
    ) throws(SystemError) {
        loop = try EventLoop(name: "desktop-prompts")
        self.channels = channels.filter { $0 == .portal || $0 == .notification }
        self.report = report
        self.onStop = onStop
    }

    func start() {
        loop.start()
    }

    /// Closes the dialog on screen and stops the loop.
    func stopAndJoin() {
        loop.post { [self] in
            if let c = current { withdrawNow(c.prompt.id) }
            current = nil
            signalSlots = []
            driver = nil
        }
        loop.stopAndJoin()
    }

    /// Queues a prompt for the desktop.
    func offer(_ p: PromptInfo) {
        loop.post { [self] in
            waiting.append(p)
            drive()
        }
    }

    /// Tells the person that `app` hears the microphone now (a notification with "Stop").
    func notice(_ app: AppKey, name: String, icon: String?) {
        loop.post { [self] in
            showNotice(app, name: name, icon: icon)
            driver?.drive()
        }
    }

    /// The prompt is resolved elsewhere or timed out: take it off the screen or the queue.
    func withdraw(_ prompt: UInt64) {
        loop.post { [self] in
            withdrawNow(prompt)
            drive()
        }
    }

    // MARK: the bus loop

    /// Handles what the bus has, shows the next prompt if none is shown, and re-arms the bus.
    private func drive() {
        loop.assertInLoop()
        if let driver {
            driver.drive()
        } else {
            showWaiting()
            driver?.drive()
        }
    }

    /// Shows waiting prompts until one is on screen (or none waits).
    private func showWaiting() {
        while current == nil, !waiting.isEmpty { showNext() }
    }

    private func lost(_ error: BusError) {
        Log.warn("desktop prompts: lost the session bus (\(error))")
        signalSlots = []
        driver = nil
        if let c = current {
            current = nil
            report(c.prompt.id, .unavailable)
        }
        drive()
    }

    private func connect() -> BusConnection? {
        loop.assertInLoop()
        if let bus { return bus }
        do {
            let b = try BusConnection.session()
            let d = try LoopBus(
                b, loop: loop, afterProcessing: { [unowned self] in showWaiting() },
                onLost: { [unowned self] in lost($0) })
            signalSlots = [
                try b.onSignal(path: Self.notificationsPath, interface: Self.notificationsName, member: "ActionInvoked") {
                    [unowned self] m in notificationAction(m)
                },
                try b.onSignal(
                    path: Self.notificationsPath, interface: Self.notificationsName,
                    member: "NotificationClosed"
                ) { [unowned self] m in notificationClosed(m) },
            ]
            driver = d
            return b
        } catch {
            Log.debug("desktop prompts: no session bus (\(error))")
            return nil
        }
    }

    private func showNext() {
        let p = waiting.removeFirst()
        show(p, on: channels)
    }

    /// Shows `p` on the first of `list` that works, else reports it unavailable.
    private func show(_ p: PromptInfo, on list: [PromptChannel]) {
        guard let b = connect() else { return report(p.id, .unavailable) }
        var rest = list
        while !rest.isEmpty {
            let c = rest.removeFirst()
            let shown: Shown? =
                switch c {
                case .portal: showPortal(p, bus: b, rest: rest)
                case .notification: showNotification(p, bus: b, rest: rest)
                case .command, .agent: nil
                }
            if let shown {
                current = shown
                let what = c == .notification ? "notification \(shown.notification) of" : "dialog of"
                Log.info("prompt \(p.id) for \(p.appKey) shown as \(what) \(shown.service) (\(shown.destination))")
                return
            }
        }
        report(p.id, .unavailable)
    }

    private func withdrawNow(_ id: UInt64) {
        waiting.removeAll { $0.id == id }
        guard let c = current, c.prompt.id == id else { return }
        current = nil
        guard let b = bus else { return }
        do {
            switch c.channel {
            case .portal:
                let m = try b.methodCall(
                    destination: c.destination, path: c.handle,
                    interface: "org.freedesktop.impl.portal.Request", member: "Close")
                try b.send(m)
            case .notification:
                let m = try b.methodCall(
                    destination: c.destination, path: Self.notificationsPath,
                    interface: Self.notificationsName, member: "CloseNotification")
                try m.append(c.notification)
                try b.send(m)
            case .command, .agent:
                break
            }
        } catch {
            Log.warn("desktop prompts: cannot close prompt \(id) on \(c.channel.rawValue): \(error)")
        }
    }

    /// The prompt was answered or dismissed on the desktop.
    private func finish(_ c: Shown, _ outcome: Outcome) {
        current = nil
        report(c.prompt.id, outcome)
    }

    // MARK: portal

    private func showPortal(
        _ p: PromptInfo, bus b: BusConnection, rest: [PromptChannel],
        question: Question = .answer
    ) -> Shown? {
        guard let (name, owner) = verifiedPortalBackend(b) else { return nil }
        let sender = String((b.uniqueName ?? "earmuff").compactMap { $0 == ":" ? nil : $0 == "." ? "_" : $0 })
        let suffix = question == .answer ? "" : "d"
        var shown = Shown(
            prompt: p, channel: .portal, question: question, rest: rest, service: name, destination: owner,
            handle: "\(Self.portalPath)/request/\(sender)/earmuff\(p.id)\(suffix)")
        do {
            // To the owner checked just now, not to the name, which may change hands.
            let m = try b.methodCall(
                destination: owner, path: Self.portalPath,
                interface: "org.freedesktop.impl.portal.Access", member: "AccessDialog")
            try m.append(objectPath: shown.handle)
            try m.append("") // app_id: Earmuff asks for the host
            try m.append("") // parent_window
            switch question {
            case .answer:
                try m.append(PromptWording.title(p))
                try m.append("Until you answer, it records silence.")
                try m.append(PromptWording.bodyLines(p).joined(separator: "\n"))
            case .howLongToDeny:
                try m.append(PromptWording.denialTitle(p))
                try m.append("For how long?")
                try m.append("It records silence meanwhile. " + PromptWording.changeLater(settingsInstalled: Self.settingsInstalled))
            }
            try m.open("a", "{sv}")
            try m.appendEntry("modal", "b") { () throws(BusError) in try m.append(false) }
            try m.appendEntry("grant_label", "s") { () throws(BusError) in
                try m.append(question == .answer ? "Allow" : "Deny")
            }
            try m.appendEntry("deny_label", "s") { () throws(BusError) in
                try m.append(question == .answer ? "Deny" : "Cancel")
            }
            try m.appendEntry("icon", "s") { () throws(BusError) in try m.append(Self.icon) }
            try m.appendEntry("choices", "a(ssa(ss)s)") { () throws(BusError) in
                try m.open("a", "(ssa(ss)s)")
                try m.open("r", "ssa(ss)s")
                try m.append(Self.lifespanChoice)
                try m.append("Remember")
                try m.open("a", "(ss)")
                for (id, label) in Self.lifespanOptions {
                    try m.open("r", "ss")
                    try m.append(id)
                    try m.append(label)
                    try m.close()
                }
                try m.close()
                try m.append("always")
                try m.close()
                try m.close()
            }
            try m.close()
            let id = p.id
            shown.pendingCall = try b.callAsync(m, timeout: 7 * 86_400) { [unowned self] reply in
                portalReplied(id, reply)
            }
            return shown
        } catch {
            portalFailed(name, "AccessDialog failed: \(error)")
            return nil
        }
    }

    /// The first portal backend that runs (or can be started) as the program the system
    /// installs for its name, and its owner's unique name. Others are marked failed.
    private func verifiedPortalBackend(_ b: BusConnection) -> (String, String)? {
        for name in Self.portalBackends where !failedBackends.contains(name) && b.isProvided(name) {
            guard let owner = b.startedOwner(of: name) else {
                portalFailed(name, "it could not be started")
                continue
            }
            if let why = DesktopServices.impostor(name, owner: owner, bus: b) {
                // Passed over while that process holds the name: once the desktop's own backend
                // has it again, prompts go to it.
                if distrustedOwners.insert(owner).inserted {
                    Log.warn(
                        "desktop prompts: \(name) is held by \(owner), which is not trusted: \(why); "
                            + "prompts go to the next channel while it holds the name")
                }
                continue
            }
            return (name, owner)
        }
        return nil
    }

    /// `name` cannot be used for prompts: logged once, never asked again while the daemon runs.
    private func portalFailed(_ name: String, _ why: String) {
        guard failedBackends.insert(name).inserted else { return }
        Log.warn("desktop prompts: \(name): \(why); not asked again while Earmuff runs, prompts go to the next channel")
    }

    private func portalReplied(_ id: UInt64, _ reply: BusMessage) {
        guard let c = current, c.prompt.id == id, c.channel == .portal else { return }
        current = nil
        if let e = reply.error {
            // Not provided: a backend for other portals only (xdg-desktop-portal-gnome 43 has no
            // Access dialog; GNOME Shell shows it there). Either way, not asked again.
            portalFailed(c.service, e.meansNotProvided ? "it has no Access dialog (\(e.name))" : "AccessDialog answered \(e)")
            return show(c.prompt, on: [.portal] + c.rest)
        }
        let verdict: AccessDialogReply.Verdict
        do {
            let read = try AccessDialogReply.read(reply, choiceIDs: [Self.lifespanChoice])
            if read.response == 0, read.choices == nil { backendsWithoutChoices.insert(c.service) }
            verdict = read.verdict(choice: Self.lifespanChoice)
        } catch {
            verdict = .unreadable("\(error) in a reply of signature \(reply.signature)")
        }
        switch (verdict, c.question) {
        case let (.answered(answer, lifespan), .answer):
            report(id, .answered(answer, lifespan: lifespan, via: .portal))
        case let (.answered(answer, lifespan), .howLongToDeny):
            // "Only this time" reads as an allow-once answer; here it is how long the denial lasts.
            report(id, .answered(.deny, lifespan: answer == .once ? .once : lifespan, via: .portal))
        case (.deniedForUnknownTime, .answer) where backendsWithoutChoices.contains(c.service):
            report(id, .answered(.deny, lifespan: nil, via: .portal))
        case (.deniedForUnknownTime, .answer):
            Log.info("prompt \(id): denied on \(c.service), which does not say for how long; asking")
            if let b = bus, let shown = showPortal(c.prompt, bus: b, rest: c.rest, question: .howLongToDeny) {
                current = shown
            } else {
                report(id, .answered(.deny, lifespan: nil, via: .portal))
            }
        case (.deniedForUnknownTime, .howLongToDeny), (.dismissed, _):
            report(id, .dismissed(via: .portal))
        case let (.unreadable(why), _):
            portalFailed(c.service, "unreadable AccessDialog reply: \(why)")
            show(c.prompt, on: [.portal] + c.rest)
        }
    }

    // MARK: notifications

    private func showNotification(_ p: PromptInfo, bus b: BusConnection, rest: [PromptChannel]) -> Shown? {
        do throws(BusError) {
            let caps = try b.call(
                try b.methodCall(
                    destination: Self.notificationsName, path: Self.notificationsPath,
                    interface: Self.notificationsName, member: "GetCapabilities"),
                timeout: 10
            ).readStrings()
            guard caps.contains("actions") else {
                Log.debug("desktop prompts: the notification server has no actions (\(caps.joined(separator: " ")))")
                return nil
            }
            // The server that answered, which must not be a sandboxed app that took the name.
            guard let owner = b.owner(of: Self.notificationsName) else { return nil }
            if let why = DesktopServices.sandboxed(owner, bus: b) {
                Log.warn("desktop prompts: the notification server is not trusted: \(why); prompts go to the next channel")
                return nil
            }
            let markup = caps.contains("body-markup")
            let lines = (PromptWording.bodyLines(p) + [PromptWording.changeLater(settingsInstalled: Self.settingsInstalled)])
                .map { markup ? escapeMarkup($0) : $0 }
            let m = try b.methodCall(
                destination: owner, path: Self.notificationsPath,
                interface: Self.notificationsName, member: "Notify")
            try m.append("Earmuff")
            try m.append(UInt32(0))
            try m.append(p.icon ?? Self.icon)
            try m.append(PromptWording.title(p))
            try m.append(lines.joined(separator: "\n"))
            // GNOME Shell shows the first three as buttons; other servers list them all.
            try m.append(strings: ["allow", "Allow", "once", "Allow once", "deny", "Deny", "session", "Allow until logout"])
            try m.open("a", "{sv}")
            try m.appendEntry("urgency", "y") { () throws(BusError) in try m.append(byte: 2) }
            try m.appendEntry("resident", "b") { () throws(BusError) in try m.append(true) }
            try m.appendEntry("category", "s") { () throws(BusError) in try m.append("device") }
            try m.close()
            try m.append(Int32(0)) // never expires: Earmuff withdraws it
            let id = try b.call(m, timeout: 10).readUInt32()
            return Shown(
                prompt: p, channel: .notification, rest: rest, service: Self.notificationsName, destination: owner,
                notification: id)
        } catch {
            if !error.meansNotProvided { Log.warn("desktop prompts: notification failed: \(error)") }
            return nil
        }
    }

    /// Whether `m` comes from the notification server that showed `c`, and that server still
    /// owns the name: any bus client can send these signals (broadcast or to Earmuff alone),
    /// and only the server's own count as the person's answer.
    private func fromItsServer(_ m: BusMessage, _ c: Shown) -> Bool {
        fromServer(m, c.destination, of: c.service, for: "prompt \(c.prompt.id)")
    }

    /// Whether `m` (`signal`, by default its member) comes from `server`, which still owns
    /// `service` (see `fromItsServer`).
    private func fromServer(
        _ m: BusMessage, _ server: String, of service: String, signal: String? = nil,
        for what: String
    ) -> Bool {
        guard m.sender == server, bus?.owner(of: service) == server else {
            Log.warn(
                "desktop prompts: ignored \(signal ?? m.member ?? "a signal") for \(what) from \(m.sender ?? "?"): "
                    + "it is not \(service), which is \(server)")
            return false
        }
        return true
    }

    private func notificationAction(_ m: BusMessage) {
        guard let id = try? m.readUInt32(), let key = try? m.readString() else { return }
        if let n = notices[id] {
            guard fromServer(m, n.server, of: Self.notificationsName, signal: "Stop", for: "notice \(id)"), key == "stop"
            else { return }
            notices[id] = nil
            Log.info("notice \(id): Stop for \(n.app)")
            return onStop(n.app)
        }
        guard let c = current, c.channel == .notification, c.notification == id, fromItsServer(m, c) else { return }
        let answer: Consent.PromptAnswer
        var lifespan: RequestedLifespan?
        if key == "session" {
            (answer, lifespan) = (.allow, .session)
        } else {
            guard let a = Consent.PromptAnswer(rawValue: key) else { return }
            answer = a
        }
        withdrawNow(c.prompt.id) // resident: it stays up unless closed
        report(c.prompt.id, .answered(answer, lifespan: lifespan, via: .notification))
    }

    /// Closed by the person (reason 2): "not now". Expired or closed by anyone else: the
    /// notification cannot hold the prompt, so the next channel takes it.
    private func notificationClosed(_ m: BusMessage) {
        guard let id = try? m.readUInt32() else { return }
        if notices[id]?.server == m.sender { notices[id] = nil }
        guard let c = current, c.channel == .notification, c.notification == id,
            fromItsServer(m, c)
        else { return }
        let reason = (try? m.readUInt32()) ?? 0
        if reason == 2 { return finish(c, .dismissed(via: .notification)) }
        current = nil
        Log.info("prompt \(c.prompt.id): its notification closed without an answer (reason \(reason)); next channel")
        show(c.prompt, on: c.rest)
    }
}

extension DesktopPrompter {
    private func showNotice(_ app: AppKey, name: String, icon: String?) {
        loop.assertInLoop()
        guard let b = connect() else { return }
        do throws(BusError) {
            guard let owner = b.owner(of: Self.notificationsName) else {
                return Log.debug("notice for \(app): no notification server")
            }
            if let why = DesktopServices.sandboxed(owner, bus: b) {
                return Log.warn("notice for \(app): the notification server is not trusted: \(why)")
            }
            let caps = try b.call(
                try b.methodCall(
                    destination: owner, path: Self.notificationsPath,
                    interface: Self.notificationsName, member: "GetCapabilities"),
                timeout: 10
            ).readStrings()
            let m = try b.methodCall(
                destination: owner, path: Self.notificationsPath,
                interface: Self.notificationsName, member: "Notify")
            try m.append("Earmuff")
            try m.append(UInt32(0))
            try m.append(icon ?? Self.icon)
            try m.append(UseNoticeWording.title(name))
            try m.append(UseNoticeWording.body(settingsInstalled: Self.settingsInstalled))
            try m.append(strings: caps.contains("actions") ? ["stop", "Stop"] : [])
            try m.open("a", "{sv}")
            try m.appendEntry("category", "s") { () throws(BusError) in try m.append("device") }
            try m.close()
            try m.append(Int32(-1))
            let id = try b.call(m, timeout: 10).readUInt32()
            notices[id] = (app, owner)
            Log.info("notice \(id) for \(app): \(UseNoticeWording.title(name))")
        } catch {
            if !error.meansNotProvided { Log.warn("notice for \(app) failed: \(error)") }
        }
    }
}

/// Escapes text for a notification body that is read as markup.
private func escapeMarkup(_ s: String) -> String {
    s.map { c -> String in
        switch c {
        case "&": "&amp;"
        case "<": "&lt;"
        case ">": "&gt;"
        default: String(c)
        }
    }.joined()
}
