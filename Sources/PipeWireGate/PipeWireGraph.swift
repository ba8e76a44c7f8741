// The registry of a PipeWire server as the gate mirrors it: clients (with
// what the server knows of their process), nodes, links and the `default`
// metadata; and what a capture stream captures, from what it links to or
// would link to. Pure: the gate feeds it events and asks it questions.
import Basics

/// A client of the server, from its registry properties.
public struct PipeWireClient: Sendable, Equatable {
    public let id: UInt32
    public var properties: [String: String]

    /// Set by the server from the socket's credentials (never by the client).
    public var pid: Int32? { properties["pipewire.sec.pid"].flatMap { Int32($0) } }
    public var uid: UInt32? { properties["pipewire.sec.uid"].flatMap { UInt32($0) } }
    public var gid: UInt32? { properties["pipewire.sec.gid"].flatMap { UInt32($0) } }
    /// The security label of the process (AppArmor, SELinux), as the kernel gave it.
    public var label: String? { properties["pipewire.sec.label"] }
    /// The Flatpak app id the portal vouched for.
    public var portalAppID: String? { properties["pipewire.access.portal.app_id"] }
    /// What the client calls itself: a hint for display only.
    public var applicationName: String? { properties["application.name"] }
    public var processBinary: String? { properties["application.process.binary"] }
    /// A JACK client (pipewire-jack says so at connect; any client can).
    public var isJack: Bool { properties["client.api"] == "jack" }
}

/// The audio format a node negotiated (its `Format` param).
public struct PipeWireAudioFormat: Sendable, Equatable {
    /// SPA's short name of the sample format: "S16LE", "F32LE", "F32P" (planar, native endian)…
    public var sample: String
    /// Channels and rate; nil for a JACK client's ports ("dsp" format: one channel each, at
    /// the graph's rate).
    public var channels: UInt32?
    public var rate: UInt32?

    public init(sample: String, channels: UInt32?, rate: UInt32?) {
        self.sample = sample
        self.channels = channels
        self.rate = rate
    }
}

/// A node: its registry properties, with its full ones once it is bound.
public struct PipeWireNode: Sendable, Equatable {
    public let id: UInt32
    public var properties: [String: String]
    /// What it negotiated, once it is bound and has.
    public var format: PipeWireAudioFormat?

    public var mediaClass: String { properties["media.class"] ?? "" }
    public var name: String { properties["node.name"] ?? "" }
    public var serial: String? { properties["object.serial"] }
    public var clientID: UInt32? { properties["client.id"].flatMap { UInt32($0) } }
    /// An application's capture stream.
    public var isCaptureStream: Bool { mediaClass == "Stream/Input/Audio" }
    /// A JACK client's node (pipewire-jack gives it no media class): it links its ports itself.
    public var isJack: Bool { properties["client.api"] == "jack" }
    /// A stream that asked never to be reconnected (`node.dont-reconnect`, GStreamer's
    /// `pipewiresrc`), known once its full properties are there.
    public var neverReconnects: Bool { properties["node.dont-reconnect"] == "true" }
    /// A node the server itself runs through the `adapter` factory (`factory.id` is set by
    /// the server) as a null sink (`factory.name`, from its bound properties), with no client
    /// (made by the server's configuration, or left by a client that has gone): it plays
    /// exactly what is linked into it, nothing else.
    public func isBareNullSink(adapter: UInt32?) -> Bool {
        clientID == nil && adapter != nil && properties["factory.id"] == adapter.map(String.init)
            && properties["factory.name"] == "support.null-audio-sink" && mediaClass == "Audio/Source/Virtual"
    }
    /// Known from the registry alone to be no capture stream (JACK nodes have no class there).
    public var cannotCapture: Bool { !mediaClass.isEmpty && !isCaptureStream }

    /// What capturing from this node captures; nil when it is no audio origin.
    public var capturedKind: Capability? {
        switch mediaClass {
        case "Audio/Sink", "Audio/Sink/Virtual": .systemAudio
        case "Stream/Output/Audio": .appAudio
        // A virtual source may be fed from anything: the stricter kind (as the source catalog says).
        case "Audio/Source/Virtual": .systemAudio
        case let c where c.hasPrefix("Audio/Source") || c == "Audio/Duplex": .microphone
        default: nil
        }
    }
}

extension PipeWireNode {
    /// The kind a client must be granted to see this node (and link from it): a source's or
    /// another app's stream's kind. Nil for a sink, whose monitor PipeWire 0.3.65 lets any
    /// client that sees the sink link by the sink's id: hiding it would hide the sink from
    /// players too, so what is linked from it is policed instead.
    public var withheldKind: Capability? {
        mediaClass.hasPrefix("Audio/Sink") ? nil : capturedKind
    }
}

/// A link from one node's output port to another node's input port.
public struct PipeWireLink: Sendable, Equatable {
    public let id: UInt32
    public let outputNode: UInt32
    public let inputNode: UInt32
    public var outputPort: UInt32?
    public var inputPort: UInt32?
}

/// A port of a node.
public struct PipeWirePort: Sendable, Equatable {
    public let id: UInt32
    public let node: UInt32
    public let isOutput: Bool
    /// The channel it carries (`FL`, `MONO`…).
    public let channel: String
}

/// Where a capture stream records from, and what that is.
public struct CaptureOrigin: Sendable, Equatable {
    public var kind: Capability
    /// The node's name (or what the stream asked for, when no node has it).
    public var source: String
    /// The node, when one is known.
    public var node: UInt32?

    public init(kind: Capability, source: String, node: UInt32? = nil) {
        self.kind = kind
        self.source = source
        self.node = node
    }
}

public struct PipeWireGraph: Sendable {
    public var clients: [UInt32: PipeWireClient] = [:]
    public var nodes: [UInt32: PipeWireNode] = [:]
    public var links: [UInt32: PipeWireLink] = [:]
    public var ports: [UInt32: PipeWirePort] = [:]
    /// The node factories, by global id: their names (`adapter`, `client-node`…).
    public var factories: [UInt32: String] = [:]
    /// The metadata named `default` (its global id), once known.
    public var defaultMetadataID: UInt32?
    /// Its properties by subject, then key.
    public var metadata: [UInt32: [String: String]] = [:]

    public init() {}

    /// A global appeared. Returns what it is.
    public mutating func add(id: UInt32, type: String, properties: [String: String]) {
        switch type {
        case "Client": clients[id] = PipeWireClient(id: id, properties: properties)
        case "Node": nodes[id] = PipeWireNode(id: id, properties: properties)
        case "Link":
            if let out = properties["link.output.node"].flatMap({ UInt32($0) }),
                let into = properties["link.input.node"].flatMap({ UInt32($0) })
            {
                links[id] = PipeWireLink(
                    id: id, outputNode: out, inputNode: into,
                    outputPort: properties["link.output.port"].flatMap { UInt32($0) },
                    inputPort: properties["link.input.port"].flatMap { UInt32($0) })
            }
        case "Port":
            if let node = properties["node.id"].flatMap({ UInt32($0) }) {
                ports[id] = PipeWirePort(
                    id: id, node: node, isOutput: properties["port.direction"] == "out",
                    channel: properties["audio.channel"] ?? "")
            }
        case "Factory": factories[id] = properties["factory.name"]
        case "Metadata" where properties["metadata.name"] == "default":
            defaultMetadataID = id
        default: break
        }
    }

    public mutating func remove(id: UInt32) {
        clients[id] = nil
        nodes[id] = nil
        links[id] = nil
        ports[id] = nil
        factories[id] = nil
        metadata[id] = nil
        if defaultMetadataID == id {
            defaultMetadataID = nil
            metadata = [:]
        }
    }

    /// A node's full properties (from its info): they complete the registry's.
    public mutating func update(node id: UInt32, properties: [String: String]) {
        nodes[id]?.properties.merge(properties) { _, new in new }
    }

    public mutating func setMetadata(subject: UInt32, key: String?, value: String?) {
        guard let key else {
            if subject == UInt32.max { metadata = [:] } else { metadata[subject] = nil }
            return
        }
        metadata[subject, default: [:]][key] = value
    }

    /// The links that feed `node`.
    public func links(into node: UInt32) -> [PipeWireLink] {
        links.values.filter { $0.inputNode == node }.sorted { $0.id < $1.id }
    }

    /// The input ports of `node`, in id order.
    public func inputPorts(of node: UInt32) -> [PipeWirePort] {
        ports.values.filter { $0.node == node && !$0.isOutput }.sorted { $0.id < $1.id }
    }

    /// The output ports of `node`, in id order.
    public func outputPorts(of node: UInt32) -> [PipeWirePort] {
        ports.values.filter { $0.node == node && $0.isOutput }.sorted { $0.id < $1.id }
    }

    /// Whether `node` has an input port (a JACK client that records).
    public func hasInputPort(_ node: UInt32) -> Bool { ports.values.contains { $0.node == node && !$0.isOutput } }

    /// Whether `node` has an output port (a node of the gate's own that is ready to be linked).
    public func hasOutputPort(_ node: UInt32) -> Bool { ports.values.contains { $0.node == node && $0.isOutput } }

    /// Which output port of `source` should feed each input port of `sink`: the same channel,
    /// else the only output, else by position.
    public func portPairs(from source: UInt32, to sink: UInt32) -> [(output: UInt32, input: UInt32)] {
        let outs = outputPorts(of: source)
        let ins = inputPorts(of: sink)
        guard !outs.isEmpty else { return [] }
        return ins.enumerated().map { i, p in
            (outs.first { $0.channel == p.channel && !p.channel.isEmpty }?.id ?? outs[outs.count == 1 ? 0 : i % outs.count].id, p.id)
        }
    }

    /// The node a target names: an object serial, a global id or a node name.
    public func node(named target: String) -> PipeWireNode? {
        if let n = nodes.values.first(where: { $0.serial == target }) { return n }
        if let id = UInt32(target), let n = nodes[id] { return n }
        return nodes.values.first { $0.name == target }
    }

    /// The links that bring something capturable into `node` of `client`, with what each
    /// carries: from any node with a captured kind (a source, a sink's monitor, a stream's
    /// output), but for the client's own playback streams (its own audio). Oldest first.
    public func feeds(into node: UInt32, of client: UInt32) -> [(link: PipeWireLink, origin: CaptureOrigin)] {
        links(into: node).compactMap { link in
            guard let n = nodes[link.outputNode], let kind = n.capturedKind,
                !(n.clientID == client && n.mediaClass == "Stream/Output/Audio")
            else { return nil }
            return (link, CaptureOrigin(kind: kind, source: n.name, node: n.id))
        }
    }

    /// The default source or sink's node name, from the `default` metadata (`{"name":"mic"}`).
    public func defaultNode(_ key: String) -> String? {
        guard let json = metadata[0]?[key] else { return nil }
        guard let range = json.firstRange(of: "\"name\"") else { return nil }
        let rest = json[range.upperBound...].drop { $0 == " " || $0 == ":" }
        guard rest.first == "\"" else { return nil }
        return String(rest.dropFirst().prefix { $0 != "\"" })
    }

    /// The default source: as the `default` metadata names it, else (a session manager that
    /// keeps it elsewhere) the first capture device.
    public func defaultSource() -> PipeWireNode? {
        if let name = defaultNode("default.audio.source"), let n = node(named: name) { return n }
        return nodes.values.filter { $0.mediaClass == "Audio/Source" }.min { $0.id < $1.id }
    }

    /// What capture stream `stream` records from: the first node linked into it (other than
    /// those `ignoring` names: the gate's own silent source and valves), else where it asks to go (`target`: its own
    /// `target.object`, or what it set in the metadata), a sink's monitor when it says
    /// `stream.capture.sink`, else the default source.
    public func origin(of stream: UInt32, target: String?, ignoring gate: Set<UInt32>) -> CaptureOrigin {
        for link in links(into: stream) where !gate.contains(link.outputNode) {
            if let n = nodes[link.outputNode], let kind = n.capturedKind { return CaptureOrigin(kind: kind, source: n.name, node: n.id) }
        }
        let props = nodes[stream]?.properties ?? [:]
        let asked = target ?? props["target.object"] ?? props["node.target"]
        if let asked, let n = node(named: asked), !gate.contains(n.id), let kind = n.capturedKind {
            return CaptureOrigin(kind: kind, source: n.name, node: n.id)
        }
        if props["stream.capture.sink"] == "true" {
            let sink = defaultNode("default.audio.sink")
            return CaptureOrigin(
                kind: .systemAudio, source: (sink ?? "default sink") + ".monitor",
                node: sink.flatMap { node(named: $0)?.id })
        }
        if let n = defaultSource(), let kind = n.capturedKind {
            return CaptureOrigin(kind: kind, source: n.name, node: n.id)
        }
        return CaptureOrigin(kind: .microphone, source: asked ?? defaultNode("default.audio.source") ?? "default source")
    }
}
