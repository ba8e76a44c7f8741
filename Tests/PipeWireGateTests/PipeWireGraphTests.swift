// What a capture stream records from, read from registry records as PipeWire
// 0.3.65 and WirePlumber 0.4 write them.
import Basics
import PipeWireGate
import Testing

@Suite struct PipeWireGraphTests {
    /// A graph with a microphone (id 40), a sink (41), an app's playback stream (42), the gate's
    /// silent source (43), a capture stream (50) and the defaults WirePlumber sets.
    static func graph() -> PipeWireGraph {
        var g = PipeWireGraph()
        g.add(id: 30, type: "Metadata", properties: ["metadata.name": "default"])
        g.add(id: 40, type: "Node", properties: ["media.class": "Audio/Source", "node.name": "mic", "object.serial": "140"])
        g.add(id: 41, type: "Node", properties: ["media.class": "Audio/Sink", "node.name": "out", "object.serial": "141"])
        g.add(id: 42, type: "Node", properties: ["media.class": "Stream/Output/Audio", "node.name": "player", "object.serial": "142"])
        g.add(
            id: 43, type: "Node",
            properties: [
                "media.class": "Audio/Source/Virtual", "node.name": "earmuff.silence",
                "object.serial": "143",
            ])
        g.add(id: 50, type: "Node", properties: ["media.class": "Stream/Input/Audio", "node.name": "pw-record", "client.id": "49"])
        g.setMetadata(subject: 0, key: "default.audio.source", value: #"{"name":"mic"}"#)
        g.setMetadata(subject: 0, key: "default.audio.sink", value: #"{ "name": "out" }"#)
        return g
    }

    /// The gate adopts a node under its names only when the server runs it as a null sink
    /// through `adapter` and no client owns it: never by name, class or a client's word.
    @Test func onlyABareNullSinkOfTheAdapterFactoryIsAdoptable() {
        var g = PipeWireGraph()
        g.add(id: 7, type: "Factory", properties: ["factory.name": "client-node"])
        g.add(id: 10, type: "Factory", properties: ["factory.name": "adapter"])
        let adapter = g.factories.first { $0.value == "adapter" }?.key
        #expect(adapter == 10)
        let bare: [String: String] = [
            "media.class": "Audio/Source/Virtual", "node.name": "earmuff.silence", "factory.id": "10",
            "factory.name": "support.null-audio-sink",
        ]
        let cases: [(String, [String: String], Bool)] = [
            ("the server's", bare, true),
            ("a live client's", bare.merging(["client.id": "49"]) { $1 }, false),
            ("a client node claiming the factory", bare.merging(["factory.id": "7"]) { $1 }, false),
            ("a microphone through adapter", bare.merging(["factory.name": "api.alsa.pcm.source"]) { $1 }, false),
            ("its bound properties not there yet", bare.filter { $0.key != "factory.name" }, false),
            ("another class", bare.merging(["media.class": "Audio/Sink"]) { $1 }, false),
        ]
        for (what, properties, adoptable) in cases {
            g.add(id: 20, type: "Node", properties: properties)
            #expect(g.nodes[20]?.isBareNullSink(adapter: adapter) == adoptable, "\(what)")
        }
        g.add(id: 20, type: "Node", properties: bare)
        #expect(g.nodes[20]?.isBareNullSink(adapter: nil) == false, "no adapter factory known")
        g.remove(id: 10)
        #expect(g.factories[10] == nil)
    }

    /// What an app sees only once granted its kind: a source, another app's stream; not a
    /// sink (its monitor is policed), nor what records or has no class.
    @Test func aSourceOrAnotherAppsStreamIsWithheldASinkIsNot() {
        var g = Self.graph()
        g.add(id: 44, type: "Node", properties: ["media.class": "Audio/Duplex", "node.name": "interface"])
        g.add(id: 45, type: "Node", properties: ["media.class": "Audio/Sink/Virtual", "node.name": "effects"])
        g.add(id: 46, type: "Node", properties: ["client.api": "jack", "node.name": "jack_rec"])
        let kinds = [40: Capability.microphone, 41: nil, 42: .appAudio, 43: .systemAudio, 44: .microphone, 45: nil, 46: nil, 50: nil]
        for (id, kind) in kinds { #expect(g.nodes[UInt32(id)]?.withheldKind == kind, "node \(id)") }
    }

    @Test func aStreamWithNoLinkOrTargetRecordsTheDefaultSource() {
        let g = Self.graph()
        #expect(g.nodes[50]?.isCaptureStream == true)
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .microphone, source: "mic", node: 40))
    }

    @Test func aLinkSaysWhatIsCaptured() {
        var g = Self.graph()
        g.add(id: 60, type: "Link", properties: ["link.output.node": "41", "link.input.node": "50"])
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .systemAudio, source: "out", node: 41))
        g.remove(id: 60)
        g.add(id: 61, type: "Link", properties: ["link.output.node": "42", "link.input.node": "50"])
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .appAudio, source: "player", node: 42))
    }

    /// What feeds an app's node of another class (here a sink of client 49): a source, another
    /// sink's monitor, another app's stream and a source of its own do; its own playback stream
    /// and a node of no class (a JACK client's) do not.
    @Test func feedsAreWhatIsCapturableLinkedIntoANode() {
        var g = Self.graph()
        g.add(id: 51, type: "Node", properties: ["media.class": "Audio/Sink", "node.name": "evil", "client.id": "49"])
        g.add(id: 52, type: "Node", properties: ["media.class": "Stream/Output/Audio", "node.name": "own-player", "client.id": "49"])
        g.add(id: 53, type: "Node", properties: ["media.class": "Audio/Source", "node.name": "own-alsa", "client.id": "49"])
        g.add(id: 54, type: "Node", properties: ["node.name": "jack-app", "client.id": "48"])
        for (link, from) in [(64, "54"), (63, "53"), (62, "52"), (61, "42"), (60, "41"), (65, "40")] {
            g.add(id: UInt32(link), type: "Link", properties: ["link.output.node": from, "link.input.node": "51"])
        }
        let feeds = g.feeds(into: 51, of: 49)
        #expect(feeds.map(\.link.id) == [60, 61, 63, 65])
        #expect(feeds.map(\.origin.kind) == [.systemAudio, .appAudio, .microphone, .microphone])
        #expect(feeds.first?.origin == CaptureOrigin(kind: .systemAudio, source: "out", node: 41))
        #expect(g.feeds(into: 51, of: 48).count == 5, "another client's playback stream is app audio")
    }

    @Test func theSilentSourceIsNotWhatAStreamCaptures() {
        var g = Self.graph()
        g.add(id: 62, type: "Link", properties: ["link.output.node": "43", "link.input.node": "50"])
        #expect(g.origin(of: 50, target: nil, ignoring: [43]).kind == .microphone)
        #expect(g.origin(of: 50, target: "141", ignoring: [43]) == CaptureOrigin(kind: .systemAudio, source: "out", node: 41))
    }

    @Test func targetsByNameSerialOrIdAndTheSinkCaptureFlag() {
        var g = Self.graph()
        #expect(g.origin(of: 50, target: "out", ignoring: [43]).kind == .systemAudio)
        #expect(g.origin(of: 50, target: "142", ignoring: [43]).kind == .appAudio)
        #expect(g.origin(of: 50, target: "40", ignoring: [43]).kind == .microphone)
        g.update(node: 50, properties: ["stream.capture.sink": "true"])
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .systemAudio, source: "out.monitor", node: 41))
        g.update(node: 50, properties: ["target.object": "mic"])
        #expect(g.origin(of: 50, target: nil, ignoring: [43]).kind == .microphone)
    }

    @Test func aVirtualSourceIsTheStricterKindAndRemovalForgets() {
        var g = Self.graph()
        g.add(id: 44, type: "Node", properties: ["media.class": "Audio/Source/Virtual", "node.name": "remapped"])
        #expect(g.origin(of: 50, target: "remapped", ignoring: [43]).kind == .systemAudio)
        g.remove(id: 30)
        #expect(g.defaultMetadataID == nil)
        #expect(g.defaultNode("default.audio.source") == nil)
        // No default named: the first capture device.
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .microphone, source: "mic", node: 40))
        g.remove(id: 40)
        #expect(g.origin(of: 50, target: nil, ignoring: [43]) == CaptureOrigin(kind: .microphone, source: "default source"))
    }

    @Test func portsArePairedByChannelElseTheOnlyOneElseByPosition() {
        var g = Self.graph()
        for (id, node, dir, ch) in [
            (70, "40", "out", "MONO"), (71, "41", "out", "FL"), (72, "41", "out", "FR"),
            (80, "50", "in", "FR"), (81, "50", "in", "FL"),
        ] as [(UInt32, String, String, String)] {
            g.add(id: id, type: "Port", properties: ["node.id": node, "port.direction": dir, "audio.channel": ch])
        }
        #expect(g.portPairs(from: 41, to: 50).map { [$0.output, $0.input] } == [[72, 80], [71, 81]])
        #expect(g.portPairs(from: 40, to: 50).map { [$0.output, $0.input] } == [[70, 80], [70, 81]])
        #expect(g.portPairs(from: 42, to: 50).isEmpty)
        g.remove(id: 70)
        #expect(g.portPairs(from: 40, to: 50).isEmpty)
    }
}
