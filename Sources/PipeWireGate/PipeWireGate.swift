// The PipeWire gate: Earmuff's manager connection to the session's PipeWire.
//
// It mirrors the registry (PipeWireGraph), uses a silent source (a
// `support.null-audio-sink` adapter node of media class Audio/Source/Virtual,
// which produces exact zeros: the one PipeWire's configuration defines after
// `earmuff setup`, else one of its own), and keeps every capture stream of a
// gated client that may not be real on that source:
//   - `target.object` of the stream in the `default` metadata names the
//     silent source, so the session manager links it there (a value the
//     client set itself is put aside, and put back once the stream may be real);
//   - any link into the stream from another node is destroyed the moment
//     it appears.
// When a stream may be real, the metadata key goes (or the client's own
// value comes back) and the session manager links it to its source again,
// without the client reconnecting. A stream the session manager never moves
// (`node.dont-reconnect`: GStreamer's pipewiresrc, which also stops for good
// when it is relinked) records from a valve of its own for as long as it
// lives: another null sink of the gate's, into which the gate links the
// stream's source while it may be real and nothing while it may not, so a
// flip never touches the stream's own link. A spare valve is kept ready, so
// the stream is pinned to one the moment its full properties say it never
// reconnects. JACK clients, which link their own ports, are unlinked while
// silenced and linked again when they may record.
//
// Before all that, a gated client is not shown what it could record from
// (sources, other apps' streams) of a kind its app is not granted (`withhold`):
// PipeWire 0.3.65 lets a client link only what it sees. The police of links
// above is the second wall, for what cannot be hidden.
//
// What the gate makes (nodes, links) lingers, so silence does not depend on
// its connection: a stream keeps its route while Earmuff is gone, and the next
// gate adopts what it finds when it connects (`finishListing`).
//
// With Earmuff's module-access configuration (`earmuff setup`), the server
// holds every ordinary client at connect (`pipewire.access` = `OwnNodes.holdAccess`)
// until a manager sets its permissions: the gate releases each one with a
// single permission update once the observer has identified it and the
// silent source and the metadata are there, so no stream of it can appear
// before the gate can route it.
//
// The decisions are the reconciler's (GateReconciler): it is told every event
// and returns the requests they call for (GateAction). This class only owns
// the connection, passes the reconciler its events and sends what it returns,
// in order, after each; so the decisions are tested without a server.
//
// A new capture stream is held on silence from its first registry event, and
// the observer decides it in the same dispatch once its client is known, as
// recording from the default source; a target its full properties name comes
// a round trip later, as a move. The session manager is shown the stream
// again after that route, so it links it where the gate said. Everything runs
// on the thread that drives the connection.
import Basics

/// What the observer makes of a client that connected.
public enum PipeWireAdmission: Sendable, Equatable {
    /// The sound system's own (the server's clients, the portal, Earmuff), checked by process,
    /// not by name: its streams are left alone.
    case soundSystem
    /// The session manager (WirePlumber): left alone, and it links streams, so it meets each
    /// new capture stream only once the gate has routed it.
    case sessionManager
    /// An app: its capture streams are decided.
    case app
    /// A sandboxed app (Flatpak): decided, and released with what WirePlumber gives one ("rx").
    case sandboxedApp
}

/// What the gate asks of the daemon (called on the gate's thread; must not block).
public protocol PipeWireGateObserver: AnyObject {
    /// A client connected: whose it is (and so whether its capture streams are decided).
    func admit(_ client: PipeWireClient) -> PipeWireAdmission
    func clientGone(_ client: UInt32)
    /// A capture stream of a gated client exists, recording from `origin`: may it be real?
    func captureStarted(_ stream: UInt32, client: UInt32, origin: CaptureOrigin) -> Bool
    /// It records from elsewhere now: may it be real?
    func captureMoved(_ stream: UInt32, origin: CaptureOrigin) -> Bool
    func captureEnded(_ stream: UInt32)
    /// The kinds the app of `client` may record (`withhold` shows it the sources of those
    /// kinds only); asked at each reconcile, so it must be cheap.
    func granted(_ client: UInt32) -> Set<Capability>
    /// Whether the app of `client` may call itself the volume control `id`, which desktop
    /// indicators do not count as a recording (see `VolumeControls`).
    func mayClaim(_ client: UInt32, volumeControl id: String) -> Bool
    /// It negotiated this format (again when it changes).
    func captureFormat(_ stream: UInt32, format: PipeWireAudioFormat)
    /// The silent source is there, with its ports: silenced streams can be routed to it.
    func ready()
    /// The connection failed; the gate does nothing more.
    func connectionLost(_ reason: String)
    /// The server refused a request (for the log).
    func refused(_ reason: String)
    /// What an app tried that the gate stopped (for the log, as a warning).
    func noticed(_ attempt: String)
    /// What the gate did to the graph (for the debug log).
    func routed(_ action: String)
    /// Calls `body` on the gate's thread after `seconds`.
    func later(_ seconds: Double, _ body: @escaping () -> Void)
}

public final class PipeWireGate: PipeWireEvents {
    /// The silent source's node name.
    public static let silentNodeName = GateReconciler.silentNodeName

    private weak var observer: PipeWireGateObserver?
    private var connection: PipeWireConnection!
    private let reconciler: GateReconciler
    /// The sync asked for at connect: its answer says the registry has listed what was there.
    private var listingSync: Int32?

    /// Connects to `remote` (nil: libpipewire's default) and asks for a sync: its answer ends the listing.
    public init(remote: String?, observer: PipeWireGateObserver) throws(PipeWireError) {
        self.observer = observer
        reconciler = GateReconciler(observer: observer)
        connection = try PipeWireConnection(remote: remote, events: self)
        listingSync = try connection.sync()
    }

    /// Makes the silent source (again, when someone destroyed it). One that the server's own
    /// configuration defines, when there is one, is used instead (`GateReconciler.finishListing`).
    private func createSilentSource() throws(PipeWireError) {
        try connection.createNode(tag: GateReconciler.silentTag, factory: "adapter", properties: OwnNodes.silentSourceArguments)
    }

    /// The descriptor to watch for input.
    public var descriptor: Int32 { connection.descriptor }

    /// Handles what the server sent.
    public func dispatch() throws(PipeWireError) { try connection.dispatch() }

    public func close() { connection.close() }

    /// The object serial of node `id`: what pipewire-pulse indexes it by (a source-output's index).
    public func serial(of id: UInt32) -> UInt32? { reconciler.serial(of: id) }

    /// The daemon's decision for `stream` (a flip after a grant, deny or reset).
    public func setAccess(stream id: UInt32, real: Bool) {
        reconciler.setAccess(stream: id, real: real)
        send()
    }

    /// The daemon's decisions for `client`'s app changed: what it sees follows.
    public func grantsChanged(client: UInt32) {
        reconciler.grantsChanged(client: client)
        send()
    }

    // MARK: PipeWireEvents

    public func global(id: UInt32, type: String, properties: [String: String]) {
        reconciler.global(id: id, type: type, properties: properties)
        send()
    }

    public func globalRemoved(id: UInt32) {
        reconciler.globalRemoved(id: id)
        send()
    }

    public func nodeInfo(id: UInt32, properties: [String: String]) {
        reconciler.nodeInfo(id: id, properties: properties)
        send()
    }

    public func nodeFormat(id: UInt32, format: PipeWireAudioFormat) {
        reconciler.nodeFormat(id: id, format: format)
        send()
    }

    public func metadata(subject: UInt32, key: String?, value: String?) {
        reconciler.metadata(subject: subject, key: key, value: value)
        send()
    }

    public func created(tag: UInt32, id: UInt32) {
        reconciler.created(tag: tag, id: id)
        send()
    }

    public func error(id: UInt32, code: Int32, message: String, fatal: Bool) {
        reconciler.error(id: id, code: code, message: message, fatal: fatal)
        send()
    }

    public func synced(seq: Int32) {
        guard seq == listingSync else { return }
        listingSync = nil
        reconciler.listingComplete()
        send()
    }

    // MARK: the requests

    /// Sends what the reconciler decided, in order. A request that fails is logged; the few
    /// whose failure changes what the reconciler knows are reported back to it.
    private func send() {
        for action in reconciler.take() {
            do { try perform(action) } catch {
                switch action {
                case let .bindNode(id) where reconciler.bindFailed(node: id):
                    break // a candidate that cannot be bound is none
                case .createSilentSource:
                    observer?.connectionLost("\(error)")
                case let .createValve(tag, _, _):
                    reconciler.valveNotMade(tag: tag)
                    observer?.refused("\(error)")
                case .bindMetadata:
                    reconciler.metadataNotBound()
                    observer?.refused("\(error)")
                default:
                    observer?.refused("\(error)")
                }
            }
        }
    }

    private func perform(_ action: GateAction) throws(PipeWireError) {
        switch action {
        case .createSilentSource:
            try createSilentSource()
        case let .createValve(tag, name, channels):
            try connection.createNode(
                tag: tag, factory: "adapter",
                properties: OwnNodes.nullSourceArguments(
                    name: name, description: "Earmuff", channels: channels))
        case let .forgetNode(tag):
            connection.destroyNode(tag: tag)
        case let .destroy(id):
            try connection.destroy(id)
        case let .bindNode(id):
            try connection.bindNode(id)
        case let .bindMetadata(id):
            try connection.bindMetadata(id)
        case let .setMetadata(subject, key, value):
            try connection.setMetadata(subject: subject, key: key, value: value)
        case let .link(outputNode, outputPort, inputNode, inputPort):
            try connection.link(outputNode, outputPort, to: inputNode, inputPort)
        case let .hide(object, client):
            try connection.hide(object, from: client)
        case let .show(object, client):
            try connection.show(object, to: client)
        case let .readOnly(object, client):
            try connection.readOnly(object, for: client)
        case let .withhold(client, hide, show, restricted):
            try connection.hide(hide, from: client)
            try connection.show(show, to: client, restricted: restricted)
        case let .release(client, restricted):
            try connection.releaseClient(client, restricted: restricted)
        case let .after(seconds, timer):
            observer?.later(seconds) { [weak self] in
                guard let self else { return }
                reconciler.fire(timer)
                send()
            }
        }
    }
}
