// The PipeWire gate's decisions, without a server: registry events as the
// gate's connection would deliver them go into a GateReconciler, and the
// requests it returns are checked. Each race the end-to-end tests found
// (Tests/EndToEndTests/PipeWireGateTests.swift) is played here event by event.
import Basics
@testable import PipeWireGate
import Testing

/// The daemon as the gate asks it: admissions, decisions and grants set by the test, and
/// what the gate told it, kept.
final class ObserverStub: PipeWireGateObserver {
    var admissions: [UInt32: PipeWireAdmission] = [:]
    var decisions: [UInt32: Bool] = [:]
    var grants: [UInt32: Set<Capability>] = [:]
    var claims: Set<String> = []
    private(set) var started: [(stream: UInt32, client: UInt32, origin: CaptureOrigin)] = []
    private(set) var moved: [(stream: UInt32, origin: CaptureOrigin)] = []
    private(set) var ended: [UInt32] = []
    private(set) var gone: [UInt32] = []
    private(set) var lost: [String] = []
    private(set) var readyCount = 0
    private(set) var notices: [String] = []

    func admit(_ client: PipeWireClient) -> PipeWireAdmission { admissions[client.id] ?? .app }
    func clientGone(_ client: UInt32) { gone.append(client) }
    func captureStarted(_ stream: UInt32, client: UInt32, origin: CaptureOrigin) -> Bool {
        started.append((stream, client, origin))
        return decisions[stream] ?? false
    }
    func captureMoved(_ stream: UInt32, origin: CaptureOrigin) -> Bool {
        moved.append((stream, origin))
        return decisions[stream] ?? false
    }
    func captureEnded(_ stream: UInt32) { ended.append(stream) }
    func granted(_ client: UInt32) -> Set<Capability> { grants[client] ?? [] }
    func mayClaim(_ client: UInt32, volumeControl id: String) -> Bool { claims.contains(id) }
    func captureFormat(_ stream: UInt32, format: PipeWireAudioFormat) {}
    func ready() { readyCount += 1 }
    func connectionLost(_ reason: String) { lost.append(reason) }
    func refused(_ reason: String) {}
    func noticed(_ attempt: String) { notices.append(attempt) }
    func routed(_ action: String) {}
    func later(_ seconds: Double, _ body: @escaping () -> Void) {}
}

/// A session's graph as the gate meets it, fed event by event into a reconciler. The ids:
///   0 the server's core, 2 the `adapter` factory, 30 the `default` metadata;
///   31 the gate's own client (this process), 32 WirePlumber, 33 pipewire-pulse;
///   40 the microphone (ports 401 FL, 402 FR), 41 a sink (411 its monitor's FL),
///   42 another app's playback stream (421 its output), of client 59;
///   43 the silent source (431 out, 432 in), 44 the first valve (441, 442 out; 443, 444 in);
///   60 an app, 61 a JACK client; their nodes from 70 on.
final class GateWorld {
    static let ownPID: Int32 = 4242
    let observer = ObserverStub()
    let gate: GateReconciler
    /// What the reconciler asked for since the last `take()`.
    private(set) var actions: [GateAction] = []

    init() {
        gate = GateReconciler(observer: observer, ownPID: Self.ownPID)
        observer.admissions = [31: .soundSystem, 32: .sessionManager, 33: .soundSystem]
    }

    /// What was asked since the last call.
    func take() -> [GateAction] {
        actions += gate.take()
        defer { actions = [] }
        return actions
    }

    private func collect() { actions += gate.take() }

    func global(_ id: UInt32, _ type: String, _ properties: [String: String]) {
        gate.global(id: id, type: type, properties: properties)
        collect()
    }

    func removed(_ id: UInt32) {
        gate.globalRemoved(id: id)
        collect()
    }

    func client(_ id: UInt32, pid: Int32 = 5000, _ extra: [String: String] = [:]) {
        global(id, "Client", ["pipewire.sec.pid": String(pid)].merging(extra) { $1 })
    }

    func node(_ id: UInt32, _ properties: [String: String]) {
        global(id, "Node", ["object.serial": String(id + 100)].merging(properties) { $1 })
    }

    func port(_ id: UInt32, node: UInt32, out: Bool, _ channel: String) {
        global(id, "Port", ["node.id": String(node), "port.direction": out ? "out" : "in", "audio.channel": channel])
    }

    func link(_ id: UInt32, from output: (node: UInt32, port: UInt32), to input: (node: UInt32, port: UInt32)) {
        global(
            id, "Link",
            [
                "link.output.node": String(output.node), "link.output.port": String(output.port),
                "link.input.node": String(input.node), "link.input.port": String(input.port),
            ])
    }

    func info(_ id: UInt32, _ properties: [String: String]) {
        gate.nodeInfo(id: id, properties: properties)
        collect()
    }

    func metadata(_ subject: UInt32, _ key: String?, _ value: String?) {
        gate.metadata(subject: subject, key: key, value: value)
        collect()
    }

    func created(tag: UInt32, id: UInt32) {
        gate.created(tag: tag, id: id)
        collect()
    }

    /// The server answered the gate's first sync: the listing is complete.
    func listingComplete() {
        gate.listingComplete()
        collect()
    }

    /// The registry's listing when the gate connects (with `before`, what else is there), the
    /// sync that ends it, then the silent source made and the first valve; returns the world
    /// with nothing asked yet.
    @discardableResult
    func connect(before: () -> Void = {}) -> GateWorld {
        global(0, "Core", [:])
        global(2, "Factory", ["factory.name": "adapter"])
        client(31, pid: Self.ownPID)
        client(32, ["application.name": "WirePlumber"])
        client(33, ["application.name": "pipewire-pulse"])
        global(30, "Metadata", ["metadata.name": "default"])
        metadata(0, "default.audio.source", #"{"name":"mic"}"#)
        metadata(0, "default.audio.sink", #"{"name":"out"}"#)
        node(40, ["media.class": "Audio/Source", "node.name": "mic"])
        port(401, node: 40, out: true, "FL")
        port(402, node: 40, out: true, "FR")
        node(41, ["media.class": "Audio/Sink", "node.name": "out"])
        port(411, node: 41, out: true, "FL")
        client(59, ["application.name": "player"])
        node(42, ["media.class": "Stream/Output/Audio", "node.name": "player", "client.id": "59"])
        port(421, node: 42, out: true, "FL")
        before()
        listingComplete()
        created(tag: GateReconciler.silentTag, id: 43)
        node(43, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        port(431, node: 43, out: true, "MONO")
        port(432, node: 43, out: false, "MONO")
        created(tag: 1, id: 44)
        node(44, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.valvePrefix + "1", "client.id": "31"])
        port(441, node: 44, out: true, "FL")
        port(442, node: 44, out: true, "FR")
        port(443, node: 44, out: false, "FL")
        port(444, node: 44, out: false, "FR")
        _ = take()
        return self
    }

    /// A capture stream of `client` (one mono input port, `id * 10 + 1`), as the registry lists it.
    func captureStream(_ id: UInt32, client: UInt32, _ extra: [String: String] = [:]) {
        node(id, ["media.class": "Stream/Input/Audio", "node.name": "rec\(id)", "client.id": String(client)].merging(extra) { $1 })
        port(id * 10 + 1, node: id, out: false, "MONO")
    }
}

extension [GateAction] {
    /// The `target.object` values set for `stream`, in order (nil: removed).
    func targets(of stream: UInt32, key: String = "target.object") -> [String?] {
        compactMap {
            if case let .setMetadata(subject, k, value) = $0, subject == stream, k == key { return .some(value) }
            return nil
        }
    }

    /// The links asked for into `node`: (output node, output port, input port).
    func links(into node: UInt32) -> [(from: UInt32, output: UInt32, input: UInt32)] {
        compactMap {
            if case let .link(outputNode, outputPort, inputNode, inputPort) = $0, inputNode == node {
                return (outputNode, outputPort, inputPort)
            }
            return nil
        }
    }

    func index(of action: GateAction) -> Int? { firstIndex(of: action) }

    /// The objects hidden from and shown to `client` by `withhold`.
    func withheld(for client: UInt32) -> (hidden: Set<UInt32>, shown: Set<UInt32>) {
        var hidden: Set<UInt32> = [], shown: Set<UInt32> = []
        for case let .withhold(c, hide, show, _) in self where c == client {
            hidden.formUnion(hide)
            shown.formUnion(show)
        }
        return (hidden, shown)
    }
}

@Suite struct GateReconcilerTests {
    /// Nothing is changed before the gate knows which node is its silent source; once it has
    /// its ports the daemon hears it is ready and a spare valve is asked for, with the
    /// default source's channels.
    @Test func theGateIsReadyOnceTheSilentSourceHasItsPortsAndKeepsASpareValve() {
        let w = GateWorld()
        var made: [GateAction] = []
        w.connect {
            // A capture stream of an app that was there (an earlier Earmuff routed it): untouched until listed.
            w.client(60)
            w.captureStream(70, client: 60)
            made = w.take()
        }
        #expect(!made.contains { if case .setMetadata = $0 { true } else { false } })
        #expect(!made.contains { if case .destroy = $0 { true } else { false } })
        #expect(w.observer.readyCount == 1)
        let w2 = GateWorld()
        w2.global(0, "Core", [:])
        w2.global(2, "Factory", ["factory.name": "adapter"])
        w2.client(31, pid: GateWorld.ownPID)
        w2.node(40, ["media.class": "Audio/Source", "node.name": "mic"])
        w2.port(401, node: 40, out: true, "FL")
        w2.port(402, node: 40, out: true, "FR")
        w2.listingComplete()
        w2.created(tag: GateReconciler.silentTag, id: 43)
        w2.node(43, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        #expect(w2.observer.readyCount == 0)
        #expect(!w2.take().contains { if case .createValve = $0 { true } else { false } })
        w2.port(431, node: 43, out: true, "MONO")
        #expect(w2.observer.readyCount == 1)
        #expect(w2.take().contains(.createValve(tag: 1, name: OwnNodes.valvePrefix + "1", channels: ["FL", "FR"])))
    }

    /// A new capture stream is held on silence from its first registry event, before its
    /// client is known (the server may list the stream first): its target names the silent
    /// source, and the session manager does not see it until then. Its client, once listed,
    /// has it decided in that same event.
    @Test func aStreamIsHeldOnSilenceFromItsFirstEventBeforeItsClientIsKnown() {
        let w = GateWorld().connect()
        w.captureStream(70, client: 60)
        let first = w.take()
        #expect(first.targets(of: 70) == [OwnNodes.silence])
        #expect(first.contains(.hide(70, from: 32)))
        #expect(first.contains(.after(GateReconciler.unlinkedGrace, .showUnrouted(stream: 70, serial: "170"))))
        #expect(w.observer.started.isEmpty)
        w.client(60)
        let decided = w.take()
        #expect(w.observer.started.map(\.stream) == [70])
        #expect(w.observer.started.first?.origin == CaptureOrigin(kind: .microphone, source: "mic", node: 40))
        // Still silenced: the route stays, nothing else is set.
        #expect(decided.targets(of: 70).isEmpty)
        // The new client never sees the gate's nodes, and may only read the sound system's clients.
        #expect(decided.contains(.hide(43, from: 60)) && decided.contains(.hide(44, from: 60)))
        #expect(decided.contains(.readOnly(31, for: 60)) && decided.contains(.readOnly(32, for: 60)))
    }

    /// A stream held before its client was known to be the sound system's own is let go.
    @Test func aStreamOfTheSoundSystemHeldBeforeItsClientWasKnownIsLetGo() {
        let w = GateWorld().connect()
        w.captureStream(70, client: 34)
        w.metadata(70, "target.object", OwnNodes.silence) // the route, as the server echoes it
        _ = w.take()
        w.observer.admissions[34] = .soundSystem
        w.client(34)
        #expect(w.take().targets(of: 70) == [nil])
        #expect(w.observer.started.isEmpty)
        // It is no stream of the gate's any more: a link into it stays.
        w.link(80, from: (40, 401), to: (70, 701))
        #expect(!w.take().contains(.destroy(80)))
    }

    /// Decided real at birth: the hold goes in the same event, and so does whatever an earlier
    /// node with the same id left in the metadata (`target.node` too).
    @Test func aStreamDecidedRealAtBirthIsLetGoAtOnce() {
        let w = GateWorld().connect()
        w.client(60)
        w.observer.decisions[70] = true
        w.captureStream(70, client: 60)
        let actions = w.take()
        #expect(actions.targets(of: 70).last == .some(nil))
        #expect(actions.targets(of: 70, key: "target.node") == [nil])
        // The hold came first, then its removal (the server handles them in order).
        #expect(actions.targets(of: 70).first == .some(OwnNodes.silence))
    }

    /// A link appearing into a silenced stream from anything but the silent source is
    /// destroyed at once, however it came (the session manager's first link, an app's
    /// `pw-link`); the silent source's own link stays, and nothing may be linked into the
    /// silent source itself (it would come out of it into every silenced stream).
    @Test func aLinkIntoASilencedStreamIsDestroyed() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        _ = w.take()
        w.link(80, from: (43, 431), to: (70, 701))
        #expect(!w.take().contains(.destroy(80)))
        w.link(81, from: (40, 401), to: (70, 701))
        #expect(w.take().contains(.destroy(81)))
        // Once asked, not again while the server works on it.
        w.metadata(0, "default.audio.source", #"{"name":"mic"}"#)
        #expect(!w.take().contains(.destroy(81)))
        w.link(82, from: (40, 401), to: (43, 432))
        #expect(w.take().contains(.destroy(82)))
    }

    /// A real stream is left to the session manager: a link into it from its source stays.
    @Test func aLinkIntoARealStreamStays() {
        let w = GateWorld().connect()
        w.client(60)
        w.observer.decisions[70] = true
        w.captureStream(70, client: 60)
        _ = w.take()
        w.link(81, from: (40, 401), to: (70, 701))
        #expect(!w.take().contains(.destroy(81)))
    }

    /// A target the client sets while it is silenced is put aside (the silent source is its
    /// target again) and put back when it may record.
    @Test func aTargetSetByTheClientIsPutAsideAndRestored() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        w.metadata(70, "target.object", OwnNodes.silence)
        _ = w.take()
        w.metadata(70, "target.object", "mic")
        #expect(w.take().targets(of: 70) == [OwnNodes.silence])
        w.metadata(70, "target.object", OwnNodes.silence)
        _ = w.take()
        w.gate.setAccess(stream: 70, real: true)
        #expect(w.take().targets(of: 70) == ["mic"])
        // Silenced again: back on the silent source.
        w.metadata(70, "target.object", "mic")
        w.observer.decisions[70] = false
        w.gate.setAccess(stream: 70, real: false)
        #expect(w.take().targets(of: 70) == [OwnNodes.silence])
    }

    /// A stream that records a sink's monitor is routed to the silent source by serial (a
    /// name is looked up among the sinks for it).
    @Test func aMonitorRecordingIsRoutedBySerial() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60, ["stream.capture.sink": "true"])
        #expect(w.take().targets(of: 70) == ["143"])
        #expect(w.observer.started.first?.origin.kind == .systemAudio)
    }

    /// A stream with `node.dont-reconnect` (GStreamer's pipewiresrc) is pinned to the spare
    /// valve once its full properties say so, a new spare is asked for, and the session
    /// manager sees it only after that pin. A grant links its source into the valve, a deny
    /// unlinks it; the stream's own link is never touched.
    @Test func aStreamThatNeverReconnectsIsPinnedToAValve() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        _ = w.take()
        w.info(70, ["node.dont-reconnect": "true"])
        let pinned = w.take()
        #expect(pinned.targets(of: 70) == [OwnNodes.valvePrefix + "1"])
        #expect(pinned.contains { if case .createValve(tag: 2, _, _) = $0 { true } else { false } })
        let pin = pinned.firstIndex(of: .setMetadata(subject: 70, key: "target.object", value: OwnNodes.valvePrefix + "1"))
        let shown = pinned.firstIndex(of: .show(70, to: 32))
        #expect(pin != nil && shown != nil && pin! < shown!)
        w.link(85, from: (44, 441), to: (70, 701))
        #expect(w.take().isEmpty)
        w.observer.decisions[70] = true
        w.gate.setAccess(stream: 70, real: true)
        let granted = w.take()
        #expect(granted.links(into: 44).map(\.from) == [40, 40])
        #expect(granted.links(into: 44).map(\.input) == [443, 444])
        #expect(granted.links(into: 70).isEmpty && !granted.contains(.destroy(85)))
        w.link(86, from: (40, 401), to: (44, 443))
        w.link(87, from: (40, 402), to: (44, 444))
        _ = w.take()
        w.gate.setAccess(stream: 70, real: false)
        let denied = w.take()
        #expect(denied.contains(.destroy(86)) && denied.contains(.destroy(87)) && !denied.contains(.destroy(85)))
    }

    /// The session manager may link a new stream that never reconnects before the gate's pin
    /// reaches it: the gate links the valve itself, and destroys the other link only once the
    /// valve's is there (left unlinked, the stream would end).
    @Test func aNeverReconnectingStreamLinkedBeforeItsPinGetsTheValveBeforeTheOldLinkGoes() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        w.info(70, ["node.dont-reconnect": "true"])
        _ = w.take()
        w.link(81, from: (43, 431), to: (70, 701))
        let linked = w.take()
        #expect(linked.links(into: 70).map(\.from) == [44])
        #expect(!linked.contains(.destroy(81)))
        w.link(85, from: (44, 441), to: (70, 701))
        #expect(w.take().contains(.destroy(81)))
    }

    /// A stream the session manager left unlinked (WirePlumber does not link one again once
    /// its link was destroyed) is, after the grace, hidden from it for good and linked by the
    /// gate; a timer for a node that is gone, or a stream linked again meanwhile, does nothing.
    @Test func aStreamLeftUnlinkedIsLinkedByTheGate() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        w.link(80, from: (43, 431), to: (70, 701))
        _ = w.take()
        w.removed(80)
        let watch = GateAction.after(GateReconciler.unlinkedGrace, .checkUnlinked(stream: 70, serial: "170"))
        #expect(w.take().contains(watch))
        w.gate.fire(.checkUnlinked(stream: 70, serial: "999"))
        #expect(w.take().isEmpty)
        w.gate.fire(.checkUnlinked(stream: 70, serial: "170"))
        let fired = w.take()
        #expect(fired.contains(.hide(70, from: 32)))
        #expect(fired.links(into: 70).map(\.from) == [43])
        // From now on the gate links it: a grant links its source, and the silent link goes once that is there.
        w.link(88, from: (43, 431), to: (70, 701))
        _ = w.take()
        w.observer.decisions[70] = true
        w.gate.setAccess(stream: 70, real: true)
        #expect(w.take().links(into: 70).map(\.from) == [40])
        w.link(89, from: (40, 401), to: (70, 701))
        #expect(w.take().contains(.destroy(88)))
    }

    /// A stream not routed within the grace (no valve could be made) is shown to the session
    /// manager as it is; one routed by then, or a node of another serial, is not shown again.
    @Test func aStreamNotRoutedInTimeIsShownToTheSessionManager() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        let held = w.take()
        #expect(held.contains(.hide(70, from: 32)) && !held.contains(.show(70, to: 32)))
        w.gate.fire(.showUnrouted(stream: 70, serial: "999"))
        #expect(w.take().isEmpty)
        w.gate.fire(.showUnrouted(stream: 70, serial: "170"))
        #expect(w.take() == [.show(70, to: 32), .after(GateReconciler.unlinkedGrace, .checkUnlinked(stream: 70, serial: "170"))])
        w.gate.fire(.showUnrouted(stream: 70, serial: "170"))
        #expect(w.take().isEmpty)
    }

    /// A stream the session manager is shown but never links (WirePlumber gave up on its first
    /// link: "wrong ports", the node id having been another stream's a moment before) is linked
    /// by the gate after the grace, to the silent source while it may not record; one the
    /// session manager linked by then is left to it.
    @Test func aStreamTheSessionManagerNeverLinksIsLinkedByTheGate() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        w.info(70, [:])
        let routed = w.take()
        let watch = GateAction.after(GateReconciler.unlinkedGrace, .checkUnlinked(stream: 70, serial: "170"))
        #expect(routed.contains(.show(70, to: 32)) && routed.contains(watch))
        w.gate.fire(.checkUnlinked(stream: 70, serial: "170"))
        let fired = w.take()
        #expect(fired.contains(.hide(70, from: 32)))
        #expect(fired.links(into: 70).map(\.from) == [43])

        w.client(61)
        w.captureStream(71, client: 61)
        w.info(71, [:])
        #expect(w.take().contains(.after(GateReconciler.unlinkedGrace, .checkUnlinked(stream: 71, serial: "171"))))
        w.link(90, from: (43, 431), to: (71, 711))
        _ = w.take()
        w.gate.fire(.checkUnlinked(stream: 71, serial: "171"))
        #expect(w.take().isEmpty)
    }

    /// A JACK client links its own ports: while it may not record, each link into it is
    /// destroyed and kept (in the metadata too, for the next Earmuff), and made again when it may.
    @Test func aJackClientIsUnlinkedWhileSilencedAndRelinkedWhenItMayRecord() {
        let w = GateWorld().connect()
        w.client(61, ["client.api": "jack"])
        w.node(72, ["node.name": "jack_rec", "client.id": "61", "client.api": "jack"])
        w.port(721, node: 72, out: false, "")
        w.info(72, ["client.api": "jack"])
        #expect(w.observer.started.map(\.stream) == [72])
        _ = w.take()
        w.link(81, from: (40, 401), to: (72, 721))
        let cut = w.take()
        #expect(cut.contains(.destroy(81)))
        #expect(cut.targets(of: 72, key: GateReconciler.severedKey) == ["172 401:721"])
        // No silent source for it: the session manager does not move it.
        #expect(cut.targets(of: 72).isEmpty)
        w.removed(81)
        _ = w.take()
        w.observer.decisions[72] = true
        w.gate.setAccess(stream: 72, real: true)
        let relinked = w.take()
        #expect(relinked.contains(.link(outputNode: 40, outputPort: 401, inputNode: 72, inputPort: 721)))
        #expect(relinked.targets(of: 72, key: GateReconciler.severedKey) == [nil])
    }

    /// pipewire-jack ends a client when an object it bound leaves its view: a JACK client is
    /// hidden what it may not record from at its release, and nothing afterwards, whereas an
    /// app is hidden each new source.
    @Test func aJackClientIsHiddenNothingAfterItsRelease() {
        let w = GateWorld().connect()
        w.client(61, ["client.api": "jack", "pipewire.access": OwnNodes.holdAccess])
        w.client(60, ["pipewire.access": OwnNodes.holdAccess])
        let released = w.take()
        #expect(released.contains(.release(client: 61, restricted: false)))
        #expect(released.withheld(for: 61).hidden == [40, 401, 402, 42, 421])
        #expect(released.withheld(for: 60).hidden == [40, 401, 402, 42, 421])
        w.node(45, ["media.class": "Audio/Source", "node.name": "usb-mic"])
        let later = w.take()
        #expect(later.withheld(for: 61).hidden.isEmpty)
        #expect(later.withheld(for: 60).hidden == [45])
        // A grant shows a JACK client what it may record from (the new source it was never
        // hidden); a deny after that hides nothing.
        w.observer.grants[61] = [.microphone]
        w.gate.grantsChanged(client: 61)
        #expect(w.take().withheld(for: 61).shown == [40, 401, 402])
        w.observer.grants[61] = []
        w.gate.grantsChanged(client: 61)
        #expect(w.take().withheld(for: 61).hidden.isEmpty)
    }

    /// A client found at connect is released again, and may have bound anything; a node's
    /// registry event does not say it is a JACK client's, its full properties do, a round trip
    /// later. Until they have come, nothing is hidden from a client with such a node
    /// (pipewire-jack ends a client when an object it bound leaves its view); once they say it
    /// is no JACK client, what it may not record from is hidden.
    @Test func aFoundClientIsHiddenNothingUntilItsNodesSayWhetherItIsAJackClient() {
        let w = GateWorld()
        w.global(0, "Core", [:])
        w.global(2, "Factory", ["factory.name": "adapter"])
        w.client(31, pid: GateWorld.ownPID)
        w.global(30, "Metadata", ["metadata.name": "default"])
        w.node(40, ["media.class": "Audio/Source", "node.name": "mic"])
        w.port(401, node: 40, out: true, "FL")
        w.client(61, ["pipewire.access": OwnNodes.holdAccess])
        w.node(72, ["node.name": "jack_rec", "client.id": "61"])
        w.port(721, node: 72, out: false, "")
        w.client(60, ["pipewire.access": OwnNodes.holdAccess])
        w.captureStream(73, client: 60)
        w.listingComplete()
        w.created(tag: GateReconciler.silentTag, id: 43)
        w.node(43, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        w.port(431, node: 43, out: true, "MONO")
        let released = w.take()
        #expect(released.contains(.release(client: 61, restricted: false)))
        #expect(released.contains(.release(client: 60, restricted: false)))
        #expect(released.withheld(for: 61) == ([], []))
        #expect(released.withheld(for: 60) == ([], []))
        w.info(72, ["node.name": "jack_rec", "client.id": "61", "client.api": "jack"])
        #expect(w.take().withheld(for: 61) == ([], []))
        w.info(73, ["media.class": "Stream/Input/Audio", "node.name": "rec73", "client.id": "60"])
        let described = w.take()
        #expect(described.withheld(for: 60) == ([40, 401], []))
        #expect(described.withheld(for: 61) == ([], []))
    }

    /// A gated client sees a source or another app's stream only while its app is granted that
    /// kind; sinks (their monitors are policed) and the gate's own nodes are never in it.
    @Test func withholdFollowsTheGrantedKinds() {
        let w = GateWorld().connect()
        w.observer.grants[60] = [.microphone]
        w.client(60, ["pipewire.access": OwnNodes.holdAccess])
        let released = w.take()
        #expect(released.withheld(for: 60).hidden == [42, 421])
        #expect(released.withheld(for: 60).shown.isEmpty)
        // Hidden before the release, in the same order as the gate's own nodes.
        let hideOwn = released.firstIndex(of: .hide(43, from: 60))
        let withhold = released.firstIndex { if case .withhold(client: 60, _, _, _) = $0 { true } else { false } }
        let release = released.firstIndex(of: .release(client: 60, restricted: false))
        #expect(hideOwn! < withhold! && withhold! < release!)
        w.observer.grants[60] = [.appAudio]
        w.gate.grantsChanged(client: 60)
        let flipped = w.take().withheld(for: 60)
        #expect(flipped.hidden == [40, 401, 402] && flipped.shown == [42, 421])
        // No change, nothing sent.
        w.gate.grantsChanged(client: 60)
        #expect(w.take().isEmpty)
        // An app's own stream is never hidden from it.
        w.node(46, ["media.class": "Stream/Output/Audio", "node.name": "own", "client.id": "60"])
        #expect(w.take().withheld(for: 60).hidden.isEmpty)
    }

    /// What a client is shown is set again whenever a node, a port or its grants change, and
    /// only then; a client id the server gives again is a new client, set afresh.
    @Test func withholdFollowsTheGraphAndAReusedClientIdStartsAfresh() {
        let w = GateWorld().connect()
        w.observer.grants[60] = [.microphone]
        w.client(60)
        #expect(w.take().withheld(for: 60) == ([42, 421], []))
        // A link, a target: nothing of what it may see changed.
        w.link(90, from: (42, 421), to: (41, 412))
        w.metadata(0, "default.audio.source", #"{"name":"mic"}"#)
        #expect(w.take().withheld(for: 60) == ([], []))
        // A port of the player's stream appears: it is hidden too.
        w.port(422, node: 42, out: true, "FR")
        #expect(w.take().withheld(for: 60) == ([422], []))
        // The grants of the app changed though the daemon has not said so yet: seen at the next event.
        w.observer.grants[60] = [.microphone, .appAudio]
        w.link(91, from: (40, 401), to: (41, 412))
        #expect(w.take().withheld(for: 60) == ([], [42, 421, 422]))
        w.observer.grants[60] = [.microphone]
        w.gate.grantsChanged(client: 60)
        #expect(w.take().withheld(for: 60) == ([42, 421, 422], []))
        // The same grants, the same graph, but a new client: it is set from the start.
        w.removed(60)
        w.client(60)
        #expect(w.take().withheld(for: 60) == ([42, 421, 422], []))
    }

    /// A sandboxed app is released, and shown what a grant shows it, with "rx" only.
    @Test func aSandboxedAppIsReleasedRestricted() {
        let w = GateWorld().connect()
        w.observer.admissions[62] = .sandboxedApp
        w.client(62, ["pipewire.access": OwnNodes.holdAccess])
        #expect(w.take().contains(.release(client: 62, restricted: true)))
        w.observer.grants[62] = [.microphone]
        w.gate.grantsChanged(client: 62)
        #expect(w.take() == [.withhold(client: 62, hide: [], show: [40, 401, 402], restricted: true)])
    }

    /// A held client is released only once the silent source has its ports and the metadata
    /// is bound, so no stream of it appears before the gate can route it.
    @Test func aHeldClientWaitsForTheSilentSourceAndTheMetadata() {
        let w = GateWorld()
        w.global(0, "Core", [:])
        w.client(31, pid: GateWorld.ownPID)
        w.client(60, ["pipewire.access": OwnNodes.holdAccess])
        w.listingComplete()
        w.created(tag: GateReconciler.silentTag, id: 43)
        w.node(43, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        w.port(431, node: 43, out: true, "MONO")
        #expect(!w.take().contains(.release(client: 60, restricted: false)))
        w.global(30, "Metadata", ["metadata.name": "default"])
        let bound = w.take()
        #expect(bound.contains(.bindMetadata(30)))
        #expect(bound.contains(.release(client: 60, restricted: false)))
    }

    /// A gated client that was there when the gate connected (released by an earlier Earmuff,
    /// which may have hidden anything) has every object set once: each hidden or shown; then
    /// only what changes.
    @Test func aClientFoundAtConnectGetsEveryObjectSetOnce() {
        let w = GateWorld()
        w.observer.grants[60] = [.microphone]
        w.connect { w.client(60) }
        let w2 = GateWorld()
        w2.observer.grants[60] = [.microphone]
        w2.global(0, "Core", [:])
        w2.client(60)
        w2.node(40, ["media.class": "Audio/Source", "node.name": "mic"])
        w2.port(401, node: 40, out: true, "FL")
        w2.node(42, ["media.class": "Stream/Output/Audio", "node.name": "player", "client.id": "59"])
        w2.client(31, pid: GateWorld.ownPID)
        w2.listingComplete()
        w2.created(tag: GateReconciler.silentTag, id: 43)
        let listed = w2.take().withheld(for: 60)
        #expect(listed.hidden == [42] && listed.shown == [40, 401])
        w2.node(43, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        w2.port(431, node: 43, out: true, "MONO")
        #expect(w2.take().withheld(for: 60) == ([], []))
        // A client that connects while the gate runs was given everything at its release: only the hidden is set.
        w2.client(63)
        #expect(w2.take().withheld(for: 63) == ([40, 401, 42], []))
    }

    /// A capture that may not record is hidden from pipewire-pulse's connections (no desktop
    /// indicator lists it), not from the session manager; a grant shows it again.
    @Test func aSilencedCaptureIsHiddenFromTheSoundSystemsClients() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        let held = w.take()
        #expect(held.contains(.hide(70, from: 33)) && !held.contains(.hide(70, from: 31)))
        w.observer.decisions[70] = true
        w.gate.setAccess(stream: 70, real: true)
        #expect(w.take().contains(.show(70, to: 33)))
        // A pipewire-pulse connection opened later is not shown it while it is hidden.
        w.gate.setAccess(stream: 70, real: false)
        _ = w.take()
        w.observer.admissions[34] = .soundSystem
        w.client(34)
        #expect(w.take().contains(.hide(70, from: 34)))
    }

    /// A capture claiming a volume control's `application.id` its app may not claim records
    /// silence, whatever was decided, and is no stream of the app's from then on.
    @Test func aCaptureClaimingAVolumeControlRecordsSilence() {
        let w = GateWorld().connect()
        w.client(60)
        w.observer.decisions[70] = true
        w.captureStream(70, client: 60)
        w.link(81, from: (40, 401), to: (70, 701))
        _ = w.take()
        w.info(70, [VolumeControls.claimKey: "org.PulseAudio.pavucontrol"])
        let claimed = w.take()
        #expect(w.observer.ended == [70])
        #expect(claimed.targets(of: 70) == [OwnNodes.silence] && claimed.contains(.destroy(81)))
        // A grant changes nothing.
        w.gate.setAccess(stream: 70, real: true)
        #expect(w.take().isEmpty)
    }

    /// Blinded (the server's core or the gate's own client leaves its view: a client with M
    /// on the gate's client hid everything) is a lost connection: nothing more is decided.
    @Test(arguments: [UInt32(0), 31])
    func theBlindedGateIsAConnectionLoss(_ gone: UInt32) {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        _ = w.take()
        w.removed(gone)
        #expect(w.observer.lost.count == 1)
        #expect(w.gate.lost)
        // What seems to go after that is not acted on: the stream is not ended, nor the silent source made again.
        w.removed(43)
        w.removed(70)
        #expect(w.take().isEmpty)
        #expect(w.observer.ended.isEmpty)
    }

    /// What an earlier Earmuff (or the server's configuration) left is adopted once the
    /// listing is complete: the bare null sink named as the silent source is used and the
    /// gate's own dropped; a valve still feeding a stream goes on serving it (no new pin, the
    /// next valve numbered after it); a valve that serves no stream is destroyed.
    @Test func whatAnEarlierEarmuffLeftIsAdopted() {
        let w = GateWorld()
        var listing: [GateAction] = []
        w.connect {
            w.node(50, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence])
            w.port(501, node: 50, out: true, "MONO")
            w.node(51, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.valvePrefix + "3"])
            w.port(511, node: 51, out: true, "MONO")
            w.port(512, node: 51, out: false, "MONO")
            w.node(52, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.valvePrefix + "5"])
            // Named as the gate's, but no null sink of the server's: not adopted.
            w.node(53, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.valvePrefix + "9"])
            w.client(60)
            w.captureStream(70, client: 60, ["node.dont-reconnect": "true"])
            w.link(85, from: (51, 511), to: (70, 701))
            w.metadata(70, "target.object", OwnNodes.valvePrefix + "3")
            let bound = w.take()
            #expect(bound.contains(.bindNode(50)) && bound.contains(.bindNode(51)) && bound.contains(.bindNode(52)))
            let nullSink = ["factory.id": "2", "factory.name": "support.null-audio-sink"]
            w.info(50, nullSink)
            w.info(51, nullSink)
            w.info(52, nullSink)
            w.info(53, ["factory.id": "2", "factory.name": "support.null-audio-source"])
            w.info(70, ["node.dont-reconnect": "true"])
            // The answer to the gate's first sync ends the listing.
            w.listingComplete()
            listing = w.take()
        }
        // The server's silent source is there: the gate makes none of its own (to destroy it again).
        #expect(!listing.contains(.createSilentSource) && !listing.contains(.forgetNode(tag: GateReconciler.silentTag)))
        #expect(listing.contains(.destroy(52)) && !listing.contains(.forgetNode(tag: 5)))
        #expect(!listing.contains(.destroy(51)) && !listing.contains(.destroy(53)) && !listing.contains(.destroy(85)))
        #expect(listing.targets(of: 70).isEmpty)
        #expect(listing.contains { if case .createValve(tag: 6, _, _) = $0 { true } else { false } })
        // The adopted valve feeds its stream once it may record.
        w.observer.decisions[70] = true
        w.gate.setAccess(stream: 70, real: true)
        #expect(w.take().links(into: 51).map(\.from) == [40])
    }

    /// Someone destroys the silent source: it is made again, what WirePlumber links into the
    /// held streams meanwhile is destroyed, and a stream routed by serial is routed to the new
    /// one (one routed by name already is).
    @Test func aDestroyedSilentSourceIsMadeAgain() {
        let w = GateWorld().connect()
        w.client(60)
        w.captureStream(70, client: 60)
        w.captureStream(71, client: 60, ["stream.capture.sink": "true"])
        w.metadata(70, "target.object", OwnNodes.silence)
        w.metadata(71, "target.object", "143")
        _ = w.take()
        w.removed(43)
        #expect(w.take().contains(.createSilentSource))
        w.link(81, from: (40, 401), to: (70, 701))
        #expect(w.take().contains(.destroy(81)))
        w.created(tag: GateReconciler.silentTag, id: 47)
        w.node(47, ["media.class": "Audio/Source/Virtual", "node.name": OwnNodes.silence, "client.id": "31"])
        w.port(471, node: 47, out: true, "MONO")
        let again = w.take()
        #expect(again.contains(.hide(47, from: 60)))
        #expect(again.targets(of: 70).isEmpty)
        #expect(again.targets(of: 71) == ["147"])
    }
}
