// The consent service: the parts that carry out what the pure ConsentEngine
// decides, built here in dependency order, each with its collaborators
// passed to `init`:
//   - Decisions: every engine call; flips stream access flags and sends
//     permission replies under the engine's lock, hands the rest off (the
//     store writer, the prompt channels, control connections, the relay);
//   - SessionEvents: the relay's session observer (loop threads);
//   - CaptureKinds: what each stream captures, from the source catalog;
//   - PermissionCalls: the permission extension on an app's connection;
//   - PromptAnswers: agents, desktop answers, the prompt command, timeouts;
//   - DesktopDecisions: the desktop's microphone switches;
//   - ConsentViews: status, apps and the control events (read only);
//   - StreamRegistry and UsageRows: the live sessions and streams, and
//     their usage rows.
// ConsentService adds the daemon's own collaborators; the prompt threads and
// the desktop permission store report back into parts built after them,
// through a sink bound at the end of its `init`.
import Consent
import ConsentStore
import LinuxSystem

/// The parts, each built with its collaborators; the daemon passes the real ones (from
/// `ConsentService`), tests pass fakes.
struct ConsentParts: Sendable {
    let registry: StreamRegistry
    let views: ConsentViews
    let decisions: Decisions
    let kinds: CaptureKinds
    let permissions: PermissionCalls
    let prompts: PromptAnswers
    let desktopDecisions: DesktopDecisions
    let observer: SessionEvents

    init(
        engine: ConsentEngine, configuration: Configuration, paths: DaemonPaths, storePath: String,
        records: any ConsentRecords, channels: any PromptChannels, timers: any Timers, desktop: any DesktopSwitches,
        entries: any AppEntries, clients: any ClientLink, control: any ControlOutput, catalog: any SourceDirectory,
        snap: (any SnapAccess)?
    ) {
        let engine = Locked(engine)
        let answeredVia = AnswerChannels()
        registry = StreamRegistry()
        views = ConsentViews(
            engine: engine, registry: registry, entries: entries, configuration: configuration,
            paths: paths, storePath: storePath)
        decisions = Decisions(
            engine: engine, registry: registry, views: views, records: records, prompts: channels,
            timers: timers, desktop: desktop, clients: clients, control: control, snap: snap,
            answeredVia: answeredVia, configuration: configuration)
        kinds = CaptureKinds(decisions: decisions, registry: registry, catalog: catalog)
        permissions = PermissionCalls(decisions: decisions, clients: clients)
        prompts = PromptAnswers(decisions: decisions, registry: registry, answeredVia: answeredVia)
        desktopDecisions = DesktopDecisions(decisions: decisions, records: records, desktop: desktop)
        observer = SessionEvents(
            decisions: decisions, registry: registry, kinds: kinds, permissions: permissions,
            snap: snap, configuration: configuration)
    }
}

/// The parts with the daemon's own collaborators: the store writer, desktop entries, the
/// prompt threads and the desktop's switches.
final class ConsentService: Sendable {
    let parts: ConsentParts
    /// SQLite writes, coalesced, on the store worker.
    let writer: StoreWriter
    /// The sockets of `earmuff run --app-id` and the processes that own them.
    let launchers: LauncherSockets
    /// Desktop entries, for the name and icon a prompt shows.
    private let desktopEntries: DesktopEntries
    private let delivery: PromptDelivery
    /// The desktop's microphone switches of Flatpak apps (xdg permission store).
    private let desktopPermissions: DesktopPermissions
    /// GNOME's switch for the microphone as a whole (org.gnome.desktop.privacy).
    private let gnomeSwitch: GnomeMicrophoneSwitch

    /// `clients`: the relay's sessions; `control`: control connections; `catalog`: what each
    /// source of the server is; `snapGate`: snapd's say on snap connections (nil: not checked).
    init(
        configuration: Configuration, declarations: [AppKey: AppDeclaration], store: PermissionStore,
        paths: DaemonPaths, clients: any ClientLink, control: any ControlOutput, catalog: any SourceDirectory,
        snapGate: (any SnapAccess)? = nil
    ) throws {
        writer = try StoreWriter(store: store)
        desktopEntries = try DesktopEntries()
        launchers = try LauncherSockets(directory: paths.launcherDirectory)
        // The prompt threads and the permission store report into parts built after them.
        let answers = Late<PromptAnswers>()
        delivery = try PromptDelivery(
            via: configuration.promptVia,
            command: configuration.promptCommand.isEmpty ? nil : configuration.promptCommand,
            notices: configuration.useNotices, handlers: .init(answers))
        let switches = Late<DesktopDecisions>()
        desktopPermissions = try DesktopPermissions(handlers: .init(switches))
        gnomeSwitch = try GnomeMicrophoneSwitch(handlers: .init(switches))
        let engine = ConsentEngine(
            policy: ConsentPolicy(configuration: configuration, declarations: declarations),
            decisions: try store.allDecisions() + store.timedDecisions(), apps: try store.apps(),
            accessOff: try store.accessOff())
        parts = ConsentParts(
            engine: engine, configuration: configuration, paths: paths, storePath: store.path,
            records: writer, channels: delivery, timers: delivery.timers,
            desktop: DesktopMirrors(permissions: desktopPermissions, gnome: gnomeSwitch),
            entries: desktopEntries, clients: clients, control: control, catalog: catalog, snap: snapGate)
        answers.bind(parts.prompts)
        switches.bind(parts.desktopDecisions)
    }

    /// Indexes desktop entries and starts the prompt threads (timers, desktop, prompt
    /// command). Call before apps can connect.
    func start() {
        desktopEntries.build()
        delivery.start()
        parts.decisions.expireLapsed()
        desktopPermissions.start()
        gnomeSwitch.start()
    }

    func stop() {
        gnomeSwitch.stopAndJoin()
        desktopPermissions.stopAndJoin()
        delivery.stop()
    }

    /// Writes everything queued for the store (before it is closed).
    func flushStore() { writer.flush() }
}
