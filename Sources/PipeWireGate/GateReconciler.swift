// The PipeWire gate's decisions (see PipeWireGate.swift for what the gate
// does and why): the registry's events, and the observer's answers, in; the
// requests they call for out, as GateActions, in the order decided. It keeps
// the graph mirror (PipeWireGraph) and what the gate made and set, and calls
// no PipeWire function: the gate (PipeWireGate) feeds it the connection's
// events, sends what it returns, and tells it of the few requests whose
// failure it must know of. So every decision, and every race the gate was
// found to lose, can be played against it without a server.
import Basics
import Glibc

final class GateReconciler {
    /// The silent source's node name.
    static let silentNodeName = OwnNodes.silence

    private struct Stream {
        let client: UInt32
        var real = false
        /// Its full properties arrived (its own target, `stream.capture.sink`).
        var described = false
        /// The observer was told of it (its client and full properties are known).
        var announced = false
        var origin: CaptureOrigin?
        /// What this gate last set as its metadata target (nil: nothing, or overridden since).
        var routedTo: String?
        /// A `target.object` someone else set while it was silenced, put back when it is real.
        var displaced: String?
        /// The node this gate last linked into it, and the input ports it used (streams the
        /// session manager never moves).
        var linkedFrom: PendingLink?
        /// The gate links it from now on, if it is a stream the session manager never moves:
        /// its access changed since it started, or the session manager linked it to a source
        /// before the gate's route reached it (and the gate destroyed that link).
        var gateLinks = false
        /// A JACK client's links the gate destroyed while it was silenced (output port, input
        /// port), made again when it may record: JACK clients connect their ports once.
        var severed: [(output: UInt32, input: UInt32)] = []
        /// The session manager left it with no link (see `watchUnlinked`): the gate links it.
        var managerGaveUp = false
        /// The tag of its valve (a stream that never reconnects), which it records from.
        var valve: UInt32?
        /// It was there when the gate connected (an earlier Earmuff routed it): the session
        /// manager has linked it already, so it is neither hidden from it nor cleared at birth.
        var found = false
        /// Its properties claim a volume control's `application.id`, which its app may not: no
        /// indicator would count it, so it never records (see `checkClaim`).
        var impostor = false
        /// Whether the sound system's other clients (pipewire-pulse's) may see it, as last set
        /// (nil: not known, it was there when the gate connected). See `conceal`.
        var shown: Bool? = true
    }

    /// A null sink of the gate's own, like the silent source, that one stream which never
    /// reconnects records from: the gate links the stream's source into it while the stream
    /// may be real, nothing while it may not. Made under its tag (the silent source's is 0).
    private struct Valve {
        /// Its global id, once the server made it.
        var id: UInt32?
        /// The stream it serves (nil: the spare).
        var stream: UInt32?
        /// What the gate last linked into it.
        var feed: PendingLink?
        /// Made by an earlier Earmuff (it lingers), found when this gate connected.
        var adopted = false
    }

    /// The tag the silent source is made under.
    static let silentTag: UInt32 = 0

    /// How long a stream the session manager links may stay with no link at all after one into
    /// it was destroyed, before the gate links it itself.
    static let unlinkedGrace = 1.0

    /// Links this gate asked for: from which node, into which input ports. A port that is gone
    /// before the link was made (the session manager reconfigured the stream) ends the wait.
    private struct PendingLink {
        let node: UInt32
        let inputs: [UInt32]
    }

    private weak var observer: PipeWireGateObserver?
    /// The requests decided and not yet taken (`take`), in order.
    private var outbox: [GateAction] = []
    /// This process, whose client is the gate's own connection.
    private let ownPID: Int32
    private var graph = PipeWireGraph()
    private var gated: Set<UInt32> = []
    private var trusted: Set<UInt32> = []
    private var sessionManagers: Set<UInt32> = []
    private var streams: [UInt32: Stream] = [:]
    private var destroying: Set<UInt32> = []
    /// New capture streams hidden from the session managers until the gate has routed them
    /// (see `hideUntilRouted`).
    private var unseen: Set<UInt32> = []
    private var silentID: UInt32?
    private var valves: [UInt32: Valve] = [:]
    private var nextValveTag: UInt32 = 1
    /// The valve kept ready for the next stream that never reconnects.
    private var spare: UInt32?
    /// The connection is gone, or the gate blinded: it decides nothing more.
    private(set) var lost = false
    /// The gate's own client (the one whose process is this one), once listed.
    private var ownClient: UInt32?
    private var announcedReady = false
    private var metadataBound = false
    /// Held clients identified and waiting for the gate to be ready, and whether each is released restricted.
    private var held: [UInt32: Bool] = [:]
    /// Gated clients released restricted ("rx": what a shown object gets back).
    private var sandboxed: Set<UInt32> = []
    /// What each gated client was last given of what it could record from (`withhold`):
    /// hidden (true) or shown, by object id.
    private var withheld: [UInt32: [UInt32: Bool]] = [:]
    /// What `withhold` last worked from: the objects it sets, counted by each change, and what
    /// it gave each client from. A client is gone over again only when one of those changed
    /// (a node, a port, its grants), or at its release.
    private var withholdObjects: [WithheldObject] = []
    private var withholdGeneration = 0
    private var withholdInputs: [UInt32: WithholdInputs] = [:]
    /// Gated clients that connected while this gate ran: they were given everything at their
    /// release but what this gate hid. Of one that was there before (released by an earlier
    /// Earmuff, which may have hidden anything), every object is set once.
    private var releasedHere: Set<UInt32> = []
    /// The registry has listed what was there when the gate connected, and the gate knows which
    /// of those nodes it adopts: until then it changes nothing.
    private var listed = false
    /// The server has answered the gate's first sync: the registry's listing is complete.
    private var synced = false
    /// No silent source was there: the gate asked for its own, and the listing ends once it is made.
    private var makingSilentSource = false
    /// Nodes listed under one of the gate's names with no client (the server's configuration
    /// made them, or an earlier Earmuff left them), bound to learn what they are.
    private var candidates: Set<UInt32> = []
    /// Those that are bare null sinks: the silent source and valves to adopt, by name.
    private var adoptable: [UInt32: String] = [:]

    /// A reconciler for a gate whose connection has just asked the server for a sync, to know
    /// when the registry has listed what was there (`listingComplete`), in process `ownPID`.
    init(observer: PipeWireGateObserver, ownPID: Int32 = getpid()) {
        self.observer = observer
        self.ownPID = ownPID
    }

    /// The requests decided since the last call, in the order to send them.
    func take() -> [GateAction] {
        defer { outbox = [] }
        return outbox
    }

    private func emit(_ action: GateAction) { outbox.append(action) }

    /// Makes a spare valve, unless one is there, with the channels of the default source (so a
    /// stream recording through it loses none of them).
    private func makeSpareValve() {
        guard spare == nil, silentID != nil, !lost else { return }
        let tag = nextValveTag
        nextValveTag += 1
        var channels = graph.defaultSource().map { graph.outputPorts(of: $0.id).map(\.channel).filter { !$0.isEmpty } } ?? []
        if channels.isEmpty { channels = ["FL", "FR"] }
        emit(.createValve(tag: tag, name: Self.valvePrefix + String(tag), channels: channels))
        valves[tag] = Valve()
        spare = tag
    }

    /// Gives `stream`, a capture stream that never reconnects and is not linked yet, the spare
    /// valve (once it has its ports), and makes the next spare.
    private func assignValve(_ stream: UInt32, _ s: inout Stream) {
        guard s.valve == nil, s.described, let node = graph.nodes[stream], node.isCaptureStream,
            node.neverReconnects, graph.links(into: stream).isEmpty,
            let tag = spare, let id = valves[tag]?.id, graph.hasOutputPort(id)
        else { return }
        s.valve = tag
        s.routedTo = nil
        valves[tag]?.stream = stream
        spare = nil
        observer?.routed("stream \(stream): records through valve \(id)")
        makeSpareValve()
    }

    /// Destroys the valve under `tag` (its stream is gone).
    private func dropValve(_ tag: UInt32) {
        guard let valve = valves.removeValue(forKey: tag) else { return }
        dropOwn(tag: valve.adopted ? nil : tag, id: valve.id)
    }

    /// The ids of the gate's own nodes: the silent source and the valves.
    private var gateNodes: Set<UInt32> {
        var ids = Set(valves.values.compactMap(\.id))
        if let silentID { ids.insert(silentID) }
        return ids
    }

    /// The object serial of node `id`: what pipewire-pulse indexes it by (a source-output's index).
    func serial(of id: UInt32) -> UInt32? { graph.nodes[id]?.serial.flatMap { UInt32($0) } }

    // MARK: what the gate reports of its requests

    /// The valve asked for under `tag` could not be asked for: there is no spare.
    func valveNotMade(tag: UInt32) {
        valves[tag] = nil
        if spare == tag { spare = nil }
    }

    /// Node `id` could not be bound; returns whether it was one of the gate's candidates (which
    /// is then no longer waited for, as it is none).
    func bindFailed(node id: UInt32) -> Bool {
        candidates.remove(id) != nil
    }

    /// The `default` metadata could not be bound: the gate has no metadata to route with.
    func metadataNotBound() { metadataBound = false }

    /// The daemon's decision for `stream` (a flip after a grant, deny or reset).
    func setAccess(stream id: UInt32, real: Bool) {
        guard var s = streams[id], s.real != real, !s.impostor else { return }
        s.real = real
        s.gateLinks = true
        streams[id] = s
        reconcile()
    }

    // MARK: PipeWireEvents

    func global(id: UInt32, type: String, properties: [String: String]) {
        graph.add(id: id, type: type, properties: properties)
        switch type {
        case "Client":
            let client = graph.clients[id]!
            let admission = observer?.admit(client) ?? .soundSystem
            switch admission {
            case .soundSystem:
                trusted.insert(id)
                if client.pid == ownPID { ownClient = id }
            case .sessionManager:
                trusted.insert(id)
                sessionManagers.insert(id)
            case .app, .sandboxedApp:
                gated.insert(id)
                if admission == .sandboxedApp { sandboxed.insert(id) }
                if listed { releasedHere.insert(id) }
            }
            if client.properties["pipewire.access"] == OwnNodes.holdAccess { held[id] = admission == .sandboxedApp }
            if trusted.contains(id) { restrict(gated.sorted(), nodes: [], soundSystem: [id]) }
            restrict([id], nodes: gateNodes, soundSystem: trusted)
            for (sid, s) in streams where s.client == id { announce(sid) }
        case "Node":
            if !listed, let node = graph.nodes[id], node.clientID == nil, Self.isGateName(node.name) {
                candidates.insert(id)
                emit(.bindNode(id)) // (failing, it is no candidate: `bindFailed`)
            }
            // Every node of an app may record: a capture stream, a JACK client's node (its class
            // says nothing), any other node once something capturable is linked into it (`isOther`).
            guard let node = graph.nodes[id], id != silentID else { break }
            // No client: the server's own node (a module's); a trusted client's: left alone.
            guard let client = node.clientID, !trusted.contains(client) else { break }
            // A node of another class is bound only once it records (`announce`).
            streams[id] = Stream(client: client, described: node.cannotCapture, found: !listed, shown: listed ? true : nil)
            if !node.cannotCapture {
                emit(.bindNode(id))
            }
            // Held on the silent source first, then decided at once: a stream that may be real
            // is let go before the session manager has configured it, so it is never linked to
            // the silent source (a stream that does not reconnect would stay there).
            reconcile()
            announce(id)
            if node.isCaptureStream && listed { hideUntilRouted(id) }
        case "Port":
            if let node = graph.ports[id]?.node, streams[node] != nil {
                announce(node)
                reportJackFormat(node)
            }
        case "Metadata" where graph.defaultMetadataID == id:
            emit(.bindMetadata(id))
            metadataBound = true // (until it fails: `metadataNotBound`)
        default:
            break
        }
        reconcile()
    }

    func globalRemoved(id: UInt32) {
        // The server's core and the gate's own client go only with the connection: gone from
        // the registry, the gate was blinded (a client with M on the gate's client set its
        // permissions, hiding everything: the server removes the core first). It sees no new
        // client or stream from now on, so it drops the connection (a cut, shown in status)
        // before it acts on anything else that seems to go, and the door connects anew.
        guard !lost else { return }
        if id == 0 || id == ownClient {
            lost = true
            observer?.connectionLost(
                "the gate was blinded: \(id == 0 ? "the server's core" : "its own client") "
                    + "left its view (its permissions were changed)")
            return
        }
        adoptable[id] = nil
        if candidates.remove(id) != nil { finishListing() }
        if let link = graph.links[id] { watchUnlinked(link.inputNode) }
        if let (tag, valve) = valves.first(where: { $0.value.id == id }) {
            // Destroyed by another client (the gate destroys one only once its stream is gone):
            // its stream is routed as one without a valve from now on.
            observer?.routed("valve \(id) was destroyed")
            if let stream = valve.stream, streams[stream] != nil {
                streams[stream]?.valve = nil
                streams[stream]?.routedTo = nil
                streams[stream]?.gateLinks = true
            }
            if spare == tag { spare = nil }
            dropValve(tag)
        }
        if id == silentID {
            // Destroyed by another client: WirePlumber moves the held streams to their sources,
            // whose links the police destroys until the new silent source takes them.
            silentID = nil
            for sid in streams.keys { streams[sid]?.routedTo = nil }
            observer?.routed("the silent source was destroyed: making it again")
            emit(.createSilentSource)
        }
        if let s = streams.removeValue(forKey: id) {
            if let tag = s.valve { dropValve(tag) }
            if s.announced { observer?.captureEnded(id) }
        }
        if gated.remove(id) != nil { observer?.clientGone(id) }
        sandboxed.remove(id)
        withheld[id] = nil
        withholdInputs[id] = nil
        releasedHere.remove(id)
        trusted.remove(id)
        sessionManagers.remove(id)
        held[id] = nil
        destroying.remove(id)
        unseen.remove(id)
        graph.remove(id: id)
        reconcile()
    }

    func nodeInfo(id: UInt32, properties: [String: String]) {
        graph.update(node: id, properties: properties)
        if candidates.remove(id) != nil {
            if let node = graph.nodes[id], node.isBareNullSink(adapter: adapterFactory) { adoptable[id] = node.name }
            finishListing()
            return
        }
        streams[id]?.described = true
        announce(id)
        checkClaim(id)
        reconcile()
    }

    /// A capture whose full properties claim a volume control's `application.id` (desktop
    /// indicators do not count those: a volume control records every source to draw its
    /// level) is a recording no indicator would show. Its properties are its client's, not the
    /// gate's to rename, so unless its app is that volume control it records silence for as
    /// long as it lives, whatever was decided, and is no stream of the app's from then on.
    private func checkClaim(_ id: UInt32) {
        guard var s = streams[id], !s.impostor, isCapture(id) || graph.nodes[id]?.isCaptureStream == true,
            let claim = graph.nodes[id]?.properties[VolumeControls.claimKey], VolumeControls.owners[claim] != nil,
            observer?.mayClaim(s.client, volumeControl: claim) == false
        else { return }
        s.impostor = true
        s.real = false
        s.gateLinks = true
        streams[id] = s
        observer?.noticed(
            "client \(s.client): its stream \(id) claims to be the volume control \(claim), which desktop "
                + "indicators do not count: it records silence")
        if s.announced { observer?.captureEnded(id) }
    }

    func nodeFormat(id: UInt32, format: PipeWireAudioFormat) {
        guard graph.nodes[id] != nil, graph.nodes[id]?.format != format else { return }
        graph.nodes[id]?.format = format
        if streams[id]?.announced == true { observer?.captureFormat(id, format: format) }
    }

    func metadata(subject: UInt32, key: String?, value: String?) {
        graph.setMetadata(subject: subject, key: key, value: value)
        if var s = streams[subject], key == nil || key == "target.object", !isGateTarget(value) {
            // Someone else set (or removed) the target: route again; a silenced stream's own
            // wish is kept for when it may be real (a valve's stream's, for what feeds its valve).
            s.routedTo = nil
            if s.valve != nil { s.displaced = value } else if !s.real, let value { s.displaced = value }
            streams[subject] = s
        }
        reconcile()
    }

    func created(tag: UInt32, id: UInt32) {
        if tag == Self.silentTag && !listed {
            silentID = id
            finishListing()
        } else {
            if tag == Self.silentTag { silentID = id } else { valves[tag]?.id = id }
            restrict(graph.clients.keys.sorted(), nodes: [id], soundSystem: [])
        }
        reconcile()
    }

    func error(id: UInt32, code: Int32, message: String, fatal: Bool) {
        if fatal {
            guard !lost else { return }
            lost = true
            observer?.connectionLost(message.isEmpty ? "the PipeWire connection closed" : message)
        } else {
            observer?.refused("object \(id): \(message) (\(code))")
        }
    }

    /// The server answered the gate's first sync: every object there when the gate connected
    /// has been listed.
    func listingComplete() {
        synced = true
        finishListing()
    }

    /// Once the listing is complete and every candidate is known: adopts the silent source the
    /// server's configuration defines (or an earlier Earmuff left), else makes one and waits for
    /// it, and the valves earlier Earmuffs left, whose streams keep recording through them. No
    /// node is made only to be destroyed: a JACK client sees every node that appears, and
    /// pipewire-jack 0.3.65 ends its client when one it is binding is gone.
    private func finishListing() {
        guard !listed, synced, candidates.isEmpty else { return }
        if silentID == nil {
            if let found = adoptable.filter({ $0.value == Self.silentNodeName }).keys.min() {
                observer?.routed("using the silent source \(found) that was there")
                silentID = found
            } else {
                if !makingSilentSource {
                    makingSilentSource = true
                    emit(.createSilentSource)
                }
                return
            }
        }
        listed = true
        for (id, name) in adoptable.sorted(by: { $0.key < $1.key }) {
            guard name.hasPrefix(Self.valvePrefix), let tag = UInt32(name.dropFirst(Self.valvePrefix.count)), valves[tag] == nil
            else { continue }
            valves[tag] = Valve(id: id, stream: nil, feed: nil, adopted: true)
            nextValveTag = max(nextValveTag, tag + 1)
        }
        adoptable = [:]
        restrict(graph.clients.keys.sorted(), nodes: gateNodes, soundSystem: trusted)
        for id in streams.keys.sorted() {
            guard var found = streams[id] else { continue }
            // Its target, when it names one of the gate's nodes, is an earlier Earmuff's route,
            // not the stream's own wish (the metadata came before the gate knew those nodes).
            if isGateTarget(found.displaced) { found.displaced = nil }
            reclaimValve(id, &found)
            streams[id] = found
        }
        for (tag, valve) in valves.sorted(by: { $0.key < $1.key }) where valve.adopted && valve.stream == nil {
            observer?.routed("valve \(valve.id ?? 0), left by an earlier Earmuff, serves no stream: destroyed")
            dropValve(tag)
        }
        reconcile()
    }

    /// What `clients` may do with the gate's own `nodes` and with the sound system's clients
    /// (`soundSystem`: the server's, the session manager's, the portal's, the gate's own).
    /// Clients still held are left out (they see nothing yet: this is applied to them just
    /// before their release), and so are the session managers and the gate's own connection.
    ///   - The nodes are hidden from every other client, pipewire-pulse included: they are no
    ///     one's source, listed to no app, and cannot be recorded, linked into or destroyed.
    ///   - A sound system client is not shown a capture that may not record (`conceal`).
    ///   - An app may only read the sound system's clients: it can neither destroy them (the
    ///     gate's connection, which would leave new streams unrouted until it is back) nor set
    ///     their permissions (the gate's own: blinding it to every client and stream).
    private func restrict(_ clients: [UInt32], nodes: Set<UInt32>, soundSystem: Set<UInt32>) {
        for id in clients {
            guard let client = graph.clients[id], !sessionManagers.contains(id), held[id] == nil, client.pid != ownPID else { continue }
            for node in nodes.sorted() {
                emit(.hide(node, from: id))
            }
            if trusted.contains(id) {
                for (stream, s) in streams.sorted(by: { $0.key < $1.key }) where s.shown == false {
                    emit(.hide(stream, from: id))
                }
            }
            guard gated.contains(id) else { continue }
            for object in soundSystem.sorted() where object != id {
                emit(.readOnly(object, for: id))
            }
        }
    }

    /// Destroys a node of the gate's own: the object (it lingers) and the connection's proxy.
    private func dropOwn(tag: UInt32?, id: UInt32?) {
        if let id { emit(.destroy(id)) }
        if let tag { emit(.forgetNode(tag: tag)) }
    }

    /// The node names the gate gives its own nodes.
    private static func isGateName(_ name: String) -> Bool { OwnNodes.isOwn(name) }
    private static let valvePrefix = OwnNodes.valvePrefix

    /// The `adapter` factory's global id.
    private var adapterFactory: UInt32? { graph.factories.first { $0.value == "adapter" }?.key }

    /// A stream found when the gate connected that records through a valve an earlier Earmuff
    /// made: it goes on doing so.
    private func reclaimValve(_ stream: UInt32, _ s: inout Stream) {
        guard s.found, s.valve == nil else { return }
        let from = Set(graph.links(into: stream).map(\.outputNode))
        guard let (tag, valve) = valves.first(where: { $0.value.adopted && $0.value.stream == nil && $0.value.id.map(from.contains) == true })
        else { return }
        s.valve = tag
        valves[tag]?.stream = stream
        observer?.routed("stream \(stream): records through valve \(valve.id ?? 0), as before")
    }

    // MARK: policy

    /// How the metadata names the silent source for `stream`: by node name, where it can be.
    /// WirePlumber follows a name or a serial, but it remembers a serial target as the app's
    /// own choice (restore-stream) and sends the app's next streams, granted or not, to the
    /// silent source; a name it does not remember. It looks a name up among the nodes of the
    /// direction the stream records from, though, so a stream recording a sink's monitor
    /// (`stream.capture.sink`) can only be named the source by serial.
    private func silentTarget(for stream: UInt32) -> String? {
        silentID.flatMap { target(for: stream, at: $0) }
    }

    /// How the metadata names `node`, one of the gate's own, for `stream` (see `silentTarget`).
    private func target(for stream: UInt32, at node: UInt32) -> String? {
        guard let n = graph.nodes[node] else { return nil }
        return graph.nodes[stream]?.properties["stream.capture.sink"] == "true" ? n.serial : n.name
    }

    /// The silent source, by either of its names (a stream may be routed by the one, then the other).
    private func isSilentTarget(_ value: String?) -> Bool {
        guard let value, let silentID else { return false }
        return value == Self.silentNodeName || value == graph.nodes[silentID]?.serial
    }

    /// One of the gate's own nodes (the silent source, a valve), by either of its names.
    private func isGateTarget(_ value: String?) -> Bool {
        guard let value else { return false }
        return gateNodes.contains { graph.nodes[$0].map { $0.name == value || $0.serial == value } ?? false }
    }

    /// A capture stream, a JACK client with an input port, or another node of an app into which
    /// something capturable is linked (or was, until the gate destroyed the link).
    private func isCapture(_ id: UInt32) -> Bool {
        guard let node = graph.nodes[id], let s = streams[id] else { return false }
        if isOther(id) { return !s.severed.isEmpty || !graph.feeds(into: id, of: s.client).isEmpty }
        return node.isCaptureStream || node.isJack && graph.hasInputPort(id)
    }

    /// A node of an app that is neither a capture stream nor a JACK client: a sink, a source, a
    /// playback stream, a filter, a node of no class. It records what is linked into it, like a
    /// JACK client (`reconcileSelfLinked`): an app that links a microphone into a node it calls
    /// a sink is recording.
    private func isOther(_ id: UInt32) -> Bool {
        guard let node = graph.nodes[id] else { return false }
        return node.cannotCapture || streams[id]?.described == true && !node.isCaptureStream && !node.isJack
    }

    /// Tells the observer of a stream once its client is known and it is known to capture: a
    /// capture stream from its registry class (a target its full properties name comes as a
    /// move), a JACK client once its full properties and an input port are there.
    private func announce(_ id: UInt32) {
        guard var s = streams[id], !s.announced, !s.impostor, s.described || graph.nodes[id]?.isCaptureStream == true,
            gated.contains(s.client), isCapture(id), let observer
        else { return }
        let other = isOther(id)
        let origin =
            other
            ? selfLinkedOrigin(id, s, feeds: graph.feeds(into: id, of: s.client))
            : graph.origin(of: id, target: s.displaced, ignoring: gateNodes)
        if other, let node = graph.nodes[id] {
            observer.noticed(
                "client \(s.client): its node \(id) (\(node.name), class \(node.mediaClass.isEmpty ? "none" : node.mediaClass)) "
                    + "is no capture stream but \(origin.source) is linked into it: decided as a \(origin.kind.rawValue) capture")
            // Its format, for the silence it is owed.
            emit(.bindNode(id))
        }
        s.announced = true
        s.origin = origin
        streams[id] = s
        let real = observer.captureStarted(id, client: s.client, origin: origin)
        streams[id]?.real = real
        if let format = graph.nodes[id]?.format { observer.captureFormat(id, format: format) }
        reportJackFormat(id)
        checkClaim(id)
        if real && !s.described && !s.found {
            // Decided at birth: the hold goes at once, and whatever an earlier node with this id
            // left in the metadata (the server keeps a removed node's entries, where the mirror
            // cannot see them, and gives its id to the next node) goes with it.
            setTarget(id, nil)
            setTarget(id, nil, key: "target.node")
        }
    }

    /// Brings the graph to what the decisions say: silenced streams on the silent source,
    /// nothing else linked into them; real streams where they asked to go.
    private func reconcile() {
        // Nothing is done before the gate knows which node is the silent source: a stream found
        // on the server's own would be cut from it.
        guard listed else { return }
        func silentReady() -> Bool {
            silentID.map(graph.hasOutputPort) ?? false
        }
        if !announcedReady, silentReady() {
            announcedReady = true
            observer?.ready()
        }
        // Held clients go once their streams can be routed: to the silent source, by the metadata.
        // What they may not see or change is set first: the release (their default permissions)
        // leaves those objects as they are, so a client never sees the gate's nodes, even for a
        // moment (pipewire-pulse, held too, opens a connection for each Pulse client).
        if !held.isEmpty, metadataBound, silentReady() {
            let release = held.sorted { $0.key < $1.key }
            held = [:]
            restrict(release.map(\.key), nodes: gateNodes, soundSystem: trusted)
            withhold(release.map(\.key), releasing: true)
            for (id, restricted) in release {
                observer?.routed("client \(id): released\(restricted ? " (rx)" : "")")
                emit(.release(client: id, restricted: restricted))
            }
        }
        // The silent source is a null sink: whatever is linked into its input would come out
        // of it into every silenced stream. Nothing may be.
        if let silentID {
            for link in graph.links(into: silentID) where !destroying.contains(link.id) { unlink(link, from: silentID) }
        }
        // Nor may anything be linked into the spare valve; a valve whose stream is no capture
        // stream of a gated client after all goes.
        if announcedReady { makeSpareValve() }
        for (tag, valve) in valves.sorted(by: { $0.key < $1.key }) {
            if let stream = valve.stream, streams[stream]?.valve != tag {
                dropValve(tag)
            } else if valve.stream == nil, let id = valve.id {
                for link in graph.links(into: id) where !destroying.contains(link.id) { unlink(link, from: id) }
            }
        }
        for id in streams.keys.sorted() {
            // Another node of an app is a capture from the moment something capturable is linked into it.
            if streams[id]?.announced == false, isOther(id) { announce(id) }
            guard var s = streams[id] else { continue }
            if trusted.contains(s.client) {
                // Held before its client was known to be the sound system's own: let go.
                if isSilentTarget(graph.metadata[id]?["target.object"]) { setTarget(id, nil) }
                streams[id] = nil
                continue
            }
            // A node not known yet to capture (a JACK client before its ports) is not touched.
            guard isCapture(id) else { continue }
            if graph.nodes[id]?.isJack == true || isOther(id) {
                reconcileSelfLinked(id, &s)
                streams[id] = s
                continue
            }
            assignValve(id, &s)
            if let tag = s.valve, let valveID = valves[tag]?.id {
                let origin = graph.origin(of: id, target: s.displaced, ignoring: gateNodes)
                reconcileValved(id, &s, valve: tag, valveID: valveID, origin: origin)
                streams[id] = s
                noteOrigin(id, s, origin)
                continue
            }
            let target = graph.metadata[id]?["target.object"]
            let origin = graph.origin(of: id, target: s.real ? nil : s.displaced, ignoring: gateNodes)
            if s.real {
                // The gate's own route may never have come back: the server passes the
                // metadata's events only to a client that has just bound it until the
                // metadata's owner has answered that client's ping (seen in 2 of 8 runs).
                if isSilentTarget(target) || isSilentTarget(s.routedTo) {
                    setTarget(id, s.displaced)
                    s.displaced = nil
                    s.routedTo = nil
                }
                // WirePlumber notes where it moved a stream as `target.node`, which it follows
                // when `target.object` is gone: a note of the silent source goes too.
                if let silentID, graph.metadata[id]?["target.node"] == String(silentID) {
                    setTarget(id, nil, key: "target.node")
                }
            } else if let silence = silentTarget(for: id), target != silence, s.routedTo != silence {
                setTarget(id, silence)
                s.routedTo = silence
            }
            // A stream that asked not to be reconnected (GStreamer's pipewiresrc) is linked once by
            // the session manager and never moved: after a flip the gate links it itself, and
            // unlinks what it had only once the new link is there (left unlinked, it would end).
            let dontReconnect = graph.nodes[id]?.neverReconnects == true
            // The session manager linked it to the silent source before the route was lifted.
            if s.real, dontReconnect, let silentID, graph.links(into: id).contains(where: { $0.outputNode == silentID }) {
                s.gateLinks = true
            }
            let selfLinked = s.gateLinks && (dontReconnect || s.managerGaveUp)
            var keepOld = false
            if selfLinked {
                let wanted = s.real ? origin.node : silentID
                s.linkedFrom = link(id, from: wanted, pending: s.linkedFrom)
                keepOld = !graph.links(into: id).contains { $0.outputNode == wanted }
            }
            for link in graph.links(into: id) where !destroying.contains(link.id) && !keepOld {
                // Silenced: nothing but the silent source. Real: the session manager moves the
                // stream off the silent source itself (reconfiguring its ports); only a stream
                // the gate links has its silent link removed by the gate.
                guard s.real ? selfLinked && link.outputNode == silentID : link.outputNode != silentID else { continue }
                unlink(link, from: id)
                // The session manager will not link it again: the gate does.
                if dontReconnect && !s.real && !s.gateLinks {
                    s.gateLinks = true
                    s.linkedFrom = self.link(id, from: silentID, pending: nil)
                }
            }
            streams[id] = s
            noteOrigin(id, s, origin)
        }
        // Routed streams are shown to the session managers again, after their route (the
        // server handles one connection's requests in order).
        for id in unseen.sorted() where isRouted(id) { show(id) }
        conceal()
        withhold(gated.sorted())
    }

    /// Default deny: a gated client sees what it could record from (a source, another app's
    /// stream; a node with every port of it) only while its app is granted that kind, so it
    /// cannot link it. PipeWire 0.3.65's link factory finds a link's nodes through the
    /// registry, which shows a client only what it may read; what a client does not see, it
    /// can neither list nor link, nor ask another client of its own to. Hidden before the
    /// release, shown on a grant, hidden on a deny or reset; a node that appears later is
    /// hidden a round trip after every client was told of it (a link made in that moment is
    /// policed). Sinks stay shown (`withheldKind`): what is linked from their monitors is policed.
    /// What the server holds outlives the gate.
    ///
    /// A JACK client keeps what it was shown until it disconnects: pipewire-jack 0.3.65 ends
    /// its client ("JACK shut down") when an object it has bound goes from its view, so it is
    /// hidden nothing after its release, and the gate's police unlinks it while it may not
    /// record. (A client that says it is a JACK client only keeps what a grant showed it.)
    private func withhold(_ clients: [UInt32], releasing: Bool = false) {
        guard let observer else { return }
        // The gate's own nodes are hidden from every client (`restrict`), one being made too.
        let own = gateNodes
        func isOwn(_ node: PipeWireNode) -> Bool {
            own.contains(node.id) || Self.isGateName(node.name) && node.clientID.map { graph.clients[$0]?.pid == ownPID } ?? true
        }
        var kinds: [UInt32: Capability] = [:]
        for (id, node) in graph.nodes where !isOwn(node) {
            if let kind = node.withheldKind { kinds[id] = kind }
        }
        var objects = kinds.map { WithheldObject(object: $0.key, node: $0.key, owner: graph.nodes[$0.key]?.clientID, kind: $0.value) }
        for port in graph.ports.values {
            if let kind = kinds[port.node] {
                objects.append(WithheldObject(object: port.id, node: port.node, owner: graph.nodes[port.node]?.clientID, kind: kind))
            }
        }
        objects.sort { $0.object < $1.object }
        if objects != withholdObjects {
            withholdObjects = objects
            withholdGeneration += 1
        }
        for client in clients where gated.contains(client) && held[client] == nil && graph.clients[client] != nil {
            let granted = observer.granted(client)
            let jack = isJackClient(client)
            // What this client was last given follows from these alone: unchanged, it is given the same.
            let inputs = WithholdInputs(
                objects: withholdGeneration, granted: granted, jack: jack,
                releasedHere: releasedHere.contains(client), restricted: sandboxed.contains(client))
            guard releasing || withholdInputs[client] != inputs else { continue }
            withholdInputs[client] = inputs
            let before = withheld[client] ?? [:]
            // (A client found when the gate connected is released again, and may have bound anything.)
            let keeps = jack && !(releasing && releasedHere.contains(client))
            var given: [UInt32: Bool] = [:]
            var hide: [UInt32] = [], show: [UInt32] = []
            var changed: Set<Capability> = []
            for o in objects where o.owner != client {
                let was = before[o.object] ?? (releasedHere.contains(client) ? false : nil)
                let hidden = !granted.contains(o.kind)
                if hidden && keeps && was != true {
                    given[o.object] = was // left as it is (unknown: as an earlier Earmuff left it)
                    continue
                }
                given[o.object] = hidden
                guard was != hidden else { continue }
                if hidden { hide.append(o.object) } else { show.append(o.object) }
                changed.insert(o.kind)
            }
            withheld[client] = given
            guard !changed.isEmpty else { continue }
            emit(.withhold(client: client, hide: hide, show: show, restricted: sandboxed.contains(client)))
            observer.routed(
                "client \(client): \(hide.count) objects hidden, \(show.count) shown "
                    + "(\(changed.map(\.rawValue).sorted().joined(separator: ", ")); granted: "
                    + "\(granted.isEmpty ? "nothing" : granted.map(\.rawValue).sorted().joined(separator: ", ")))")
        }
    }

    /// One object `withhold` sets for each gated client: a node it could record from, or a port
    /// of one, with the node's client (a client is never hidden its own) and the kind it takes.
    private struct WithheldObject: Equatable {
        let object: UInt32
        let node: UInt32
        let owner: UInt32?
        let kind: Capability
    }

    /// What `withhold` gave a client from: the objects (by `withholdGeneration`), its app's
    /// grants, and what it is. Given the same, it would give the client what it gave it last.
    private struct WithholdInputs: Equatable {
        let objects: Int
        let granted: Set<Capability>
        let jack: Bool
        let releasedHere: Bool
        let restricted: Bool
    }

    /// A client of pipewire-jack: it says so, or it has a JACK node; or it may be one, as it
    /// has a node whose full properties have not come yet. What the registry lists of a
    /// pipewire-jack 0.3.65 client and of its node does not say `client.api`; the node's full
    /// properties do, a round trip after the node is listed. So a client found at connect is
    /// known to be JACK's only after the listing has ended, and this gate may release it again
    /// before that: were it hidden anything then (the microphone's node and port, which it had
    /// bound while it was granted), pipewire-jack would end it. Once the node's properties say
    /// it is no JACK client, `withhold` hides from it what it may not see.
    private func isJackClient(_ id: UInt32) -> Bool {
        graph.clients[id]?.isJack == true || graph.nodes.values.contains { $0.clientID == id && $0.isJack }
            || streams.values.contains { $0.client == id && !$0.described }
    }

    /// The daemon's decisions for `client`'s app changed: what it sees follows.
    func grantsChanged(client: UInt32) {
        guard listed else { return }
        withhold([client])
    }

    /// A capture that may not record is no recording on the desktop: it is hidden from the
    /// sound system's clients other than the session managers and the gate, that is from
    /// pipewire-pulse's connections, so no Pulse client (a desktop's microphone indicator,
    /// a mixer) lists it as a source-output; it is shown to them again once it may record.
    /// What the server holds outlives the gate, so it stays hidden while Earmuff is gone.
    /// A new stream is seen by them for the moment before its decision reaches the server
    /// (it is linked to nothing then); a found one is set either way, as an earlier
    /// Earmuff left it is not known.
    private func conceal() {
        let viewers = trusted.subtracting(sessionManagers).filter { held[$0] == nil && graph.clients[$0]?.pid != ownPID }
        for id in streams.keys.sorted() {
            guard let s = streams[id] else { continue }
            let capture = isCapture(id) || graph.nodes[id]?.isCaptureStream == true
            // A capture is set once it is decided (in the dispatch that made it, for a stream of a known client).
            guard !capture || s.announced else { continue }
            let shown = s.real || !capture
            guard s.shown != shown else { continue }
            streams[id]?.shown = shown
            observer?.routed("stream \(id): \(shown ? "shown to" : "hidden from") the sound system's clients")
            for viewer in viewers.sorted() {
                emit(shown ? .show(id, to: viewer) : .hide(id, from: viewer))
            }
        }
    }

    /// Whether `id`, hidden from the session managers at birth, is routed: its full properties
    /// came and, if it never reconnects, it records through a valve; or it is no gated capture
    /// stream after all (nothing to route).
    private func isRouted(_ id: UInt32) -> Bool {
        guard let s = streams[id] else { return true }
        return s.described && (s.valve != nil || graph.nodes[id]?.neverReconnects != true)
    }

    /// What `id` records from may have changed (a link, a target, the default source): the
    /// observer decides it again.
    private func noteOrigin(_ id: UInt32, _ s: Stream, _ origin: CaptureOrigin) {
        guard s.announced, !s.impostor, origin != s.origin, let observer else { return }
        streams[id]?.origin = origin
        let real = observer.captureMoved(id, origin: origin)
        if real != s.real { setAccess(stream: id, real: real) }
    }

    /// A stream that never reconnects records from its valve whatever it may: its target is the
    /// valve and nothing else stays linked into it; into the valve goes what the stream records
    /// from while it may be real, nothing while it may not.
    private func reconcileValved(_ id: UInt32, _ s: inout Stream, valve tag: UInt32, valveID: UInt32, origin: CaptureOrigin) {
        if let pin = target(for: id, at: valveID), graph.metadata[id]?["target.object"] != pin, s.routedTo != pin {
            setTarget(id, pin)
            s.routedTo = pin
        }
        let links = graph.links(into: id)
        let fromValve = links.contains { $0.outputNode == valveID }
        // The session manager linked it elsewhere before the pin reached it, or gave up on it:
        // the gate links the valve.
        if !fromValve, !links.isEmpty || s.managerGaveUp {
            s.linkedFrom = link(id, from: valveID, pending: s.linkedFrom)
        }
        for link in links where link.outputNode != valveID && !destroying.contains(link.id) {
            // What it may record from stays until the valve's link is there (left unlinked, it would end).
            if !fromValve, s.real || link.outputNode == silentID { continue }
            unlink(link, from: id)
        }
        let feed = s.real ? origin.node : nil
        let pending = valves[tag]?.feed
        valves[tag]?.feed = link(valveID, from: feed, pending: pending)
        for link in graph.links(into: valveID) where link.outputNode != feed && !destroying.contains(link.id) {
            unlink(link, from: valveID)
        }
    }

    /// A JACK client links its own ports and no session manager moves it: while it may not
    /// record, every link into it is destroyed (its unconnected inputs read zeros) and kept, to
    /// be made again when it may. Its kind follows what it links. Another node of an app
    /// (`isOther`) is kept the same way, for the links that bring it something capturable
    /// (`PipeWireGraph.feeds`); while it may record, it records only the kind it was decided
    /// for: a link of another kind is destroyed, and not made again.
    private func reconcileSelfLinked(_ id: UInt32, _ s: inout Stream) {
        // What an earlier Earmuff cut, before it was gone, is made again when it may record.
        if s.found, s.severed.isEmpty, graph.links(into: id).isEmpty { s.severed = recallSevered(id) }
        defer { noteSevered(id, s.severed) }
        let other = isOther(id)
        let feeds = other ? graph.feeds(into: id, of: s.client) : []
        let origin = other ? selfLinkedOrigin(id, s, feeds: feeds) : jackOrigin(id, s)
        if s.announced, !s.impostor, origin != s.origin, let observer {
            s.origin = origin
            let real = observer.captureMoved(id, origin: origin)
            if real != s.real {
                s.real = real
                s.gateLinks = true
            }
        }
        if s.real {
            for (output, input) in s.severed {
                guard let out = graph.ports[output], graph.ports[input]?.node == id,
                    graph.nodes[out.node]?.capturedKind == origin.kind
                else { continue }
                observer?.routed("stream \(id): relinking port \(output) of node \(out.node)")
                emit(.link(outputNode: out.node, outputPort: output, inputNode: id, inputPort: input))
            }
            s.severed = []
            guard other else { return }
            for (link, feed) in feeds where feed.kind != origin.kind && !destroying.contains(link.id) {
                observer?.noticed(
                    "client \(s.client): \(feed.source) linked into its node \(id), which may record "
                        + "\(origin.kind.rawValue) only: unlinked")
                unlink(link, from: id)
            }
            return
        }
        let cut = other ? feeds.map(\.link) : graph.links(into: id)
        for link in cut where !destroying.contains(link.id) {
            if let output = link.outputPort, let input = link.inputPort { s.severed.append((output, input)) }
            unlink(link, from: id)
        }
    }

    /// The key under which the links the gate cut into a self-linked node are kept in the
    /// `default` metadata, with the node's serial: they outlive Earmuff, so the next one makes
    /// them again when the node may record ("<serial> <output port>:<input port> …"). Anyone may
    /// write the metadata: a link it names is made only into that node's own input ports, and
    /// only from a node of the kind the node was decided for.
    static let severedKey = "earmuff.severed"

    /// Keeps `severed` for node `id` in the metadata (the mirror follows at once).
    private func noteSevered(_ id: UInt32, _ severed: [(output: UInt32, input: UInt32)]) {
        guard let serial = graph.nodes[id]?.serial else { return }
        let value = severed.isEmpty ? nil : ([serial] + severed.map { "\($0.output):\($0.input)" }).joined(separator: " ")
        guard graph.metadata[id]?[Self.severedKey] != value else { return }
        graph.setMetadata(subject: id, key: Self.severedKey, value: value)
        setTarget(id, value, key: Self.severedKey)
    }

    /// The links kept for node `id` (see `severedKey`), if they are of this node.
    private func recallSevered(_ id: UInt32) -> [(output: UInt32, input: UInt32)] {
        guard let words = graph.metadata[id]?[Self.severedKey]?.split(separator: " "),
            let serial = words.first, String(serial) == graph.nodes[id]?.serial
        else { return [] }
        let pairs: [(output: UInt32, input: UInt32)] = words.dropFirst().compactMap { word in
            let ports = word.split(separator: ":").compactMap { UInt32($0) }
            return ports.count == 2 ? (ports[0], ports[1]) : nil
        }
        if !pairs.isEmpty { observer?.routed("stream \(id): \(pairs.count) link(s) an earlier Earmuff cut, to make again when it may record") }
        return pairs
    }

    /// What a JACK client records from: what it links (or linked, while silenced), else the
    /// default source.
    private func jackOrigin(_ id: UInt32, _ s: Stream) -> CaptureOrigin {
        if graph.links(into: id).isEmpty, let origin = severedOrigin(s) { return origin }
        return graph.origin(of: id, target: nil, ignoring: gateNodes)
    }

    /// What another node of an app records from: the oldest capturable thing linked into it,
    /// else what was last linked while it was silenced, else what it was decided for.
    private func selfLinkedOrigin(_ id: UInt32, _ s: Stream, feeds: [(link: PipeWireLink, origin: CaptureOrigin)]) -> CaptureOrigin {
        feeds.first?.origin ?? severedOrigin(s)
            ?? s.origin ?? CaptureOrigin(kind: .microphone, source: graph.nodes[id]?.name ?? String(id))
    }

    /// The node of the last link the gate destroyed into a silenced node, if it is still there.
    private func severedOrigin(_ s: Stream) -> CaptureOrigin? {
        guard let last = s.severed.last, let port = graph.ports[last.output], let n = graph.nodes[port.node],
            let kind = n.capturedKind
        else { return nil }
        return CaptureOrigin(kind: kind, source: n.name, node: n.id)
    }

    /// A JACK client negotiates nothing: its ports carry 32-bit float, one channel each, at the
    /// graph's rate. Its format is that, with as many channels as it has input ports.
    private func reportJackFormat(_ id: UInt32) {
        guard streams[id]?.announced == true, graph.nodes[id]?.isJack == true else { return }
        let channels = UInt32(graph.inputPorts(of: id).count)
        nodeFormat(id: id, format: PipeWireAudioFormat(sample: "F32P", channels: channels, rate: nil))
    }

    /// The session manager sees a new node at the moment the gate does, and may link it before
    /// the gate's route reaches it: to the default source (a stream that never reconnects would
    /// then be destroyed by it once the gate cut that link), or to the silent source before
    /// its full properties say it never reconnects (`pipewiresrc` does not survive the move to
    /// its valve). So a new capture stream is hidden from every session manager at once (it
    /// drops whatever it began) and shown again once it is routed (`isRouted`, at the end of
    /// `reconcile`), or after `unlinkedGrace` if it is not by then (no valve could be made):
    /// routed as it is, the session manager meets it anew.
    private func hideUntilRouted(_ stream: UInt32) {
        guard !sessionManagers.isEmpty, let serial = graph.nodes[stream]?.serial else { return }
        unseen.insert(stream)
        for manager in sessionManagers.sorted() {
            emit(.hide(stream, from: manager))
        }
        emit(.after(Self.unlinkedGrace, .showUnrouted(stream: stream, serial: serial)))
    }

    /// A timer the gate asked for (`GateAction.after`) is due.
    func fire(_ timer: GateTimer) {
        switch timer {
        case let .showUnrouted(stream, serial):
            guard unseen.contains(stream), graph.nodes[stream]?.serial == serial else { return }
            observer?.routed("stream \(stream): not routed in time: shown to the session manager as it is")
            show(stream)
        case let .checkUnlinked(id, serial):
            guard var s = streams[id], !s.managerGaveUp, graph.nodes[id]?.serial == serial, !lost,
                graph.nodes[id]?.isCaptureStream == true, graph.links(into: id).isEmpty
            else { return }
            s.managerGaveUp = true
            s.gateLinks = true
            streams[id] = s
            observer?.routed("stream \(id): left unlinked by the session manager: hidden from it, the gate links it")
            for manager in sessionManagers.sorted() {
                emit(.hide(id, from: manager))
            }
            reconcile()
        }
    }

    /// Shows `stream`, hidden by `hideUntilRouted`, to the session managers again, and watches
    /// that they link it: WirePlumber 0.4.13 gives up on a stream whose first link it could not
    /// make ("wrong ports", when the stream's node id was another stream's a moment before), and
    /// then no link of it ever appears or goes.
    private func show(_ stream: UInt32) {
        guard unseen.remove(stream) != nil else { return }
        observer?.routed("stream \(stream): shown to the session manager")
        for manager in sessionManagers.sorted() {
            emit(.show(stream, to: manager))
        }
        watchUnlinked(stream)
    }

    /// A link into `id` is gone, or the session manager was just shown it. A stream the session
    /// manager links is left with none only for a moment, unless the session manager gave up on it: WirePlumber 0.4.13 does not link a
    /// stream again when its link was destroyed by someone else, nor when the link it was making
    /// failed (the gate cut it before the route reached it) after the stream had a format; and a
    /// link it makes of a stream it is shown again never becomes active. A stream still unlinked
    /// after `unlinkedGrace` is hidden from the session manager for good (it would otherwise
    /// try to link it again later, and the same link twice fails) and linked by the gate from
    /// then on, as a stream that never reconnects is.
    private func watchUnlinked(_ id: UInt32) {
        guard streams[id] != nil, let serial = graph.nodes[id]?.serial else { return }
        emit(.after(Self.unlinkedGrace, .checkUnlinked(stream: id, serial: serial)))
    }

    /// Asks the server to destroy `link` into `node` (once).
    private func unlink(_ link: PipeWireLink, from node: UInt32) {
        destroying.insert(link.id)
        observer?.routed("node \(node): unlinking node \(link.outputNode) (link \(link.id))")
        emit(.destroy(link.id))
    }

    /// Links `from` into `stream` unless it is linked (nil: nothing pending) or was asked to be
    /// (`pending`, the links are on their way to ports that are still there); returns what is
    /// pending now.
    private func link(_ stream: UInt32, from: UInt32?, pending: PendingLink?) -> PendingLink? {
        guard let from else { return nil }
        if graph.links(into: stream).contains(where: { $0.outputNode == from }) { return nil }
        if let pending, pending.node == from, pending.inputs.allSatisfy({ graph.ports[$0] != nil }) { return pending }
        let pairs = graph.portPairs(from: from, to: stream)
        guard !pairs.isEmpty else { return nil } // its ports are not known yet: next event
        observer?.routed("stream \(stream): linking node \(from) (\(pairs.count) port\(pairs.count == 1 ? "" : "s"))")
        for (output, input) in pairs {
            emit(.link(outputNode: from, outputPort: output, inputNode: stream, inputPort: input))
        }
        return PendingLink(node: from, inputs: pairs.map(\.input))
    }

    private func setTarget(_ stream: UInt32, _ value: String?, key: String = "target.object") {
        observer?.routed("stream \(stream): \(key) \(value ?? "removed")")
        emit(.setMetadata(subject: stream, key: key, value: value))
    }
}
