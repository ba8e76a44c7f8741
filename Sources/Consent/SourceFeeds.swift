// What feeds a source, and so what it carries.
//
// A source that is not a monitor is not always a microphone: a virtual source
// carries whatever feeds it, and that may be a monitor (what the speakers
// play). Both servers say what feeds their virtual sources, each its own way:
//
// - PulseAudio's filters (module-remap-source, module-virtual-source,
//   module-echo-cancel, ...) name the source they read in the property
//   `device.master_device` and read it through a source output the module owns;
//   that source output is followed, since the property stays as it was when the
//   source output is moved to another source (PulseAudio 16.1);
//   module-virtual-source with an `uplink_sink` also mixes in what is played
//   into that sink (the module owns the sink, and so the sink's monitor);
// - pipewire-pulse shows a filter or loopback node (module-remap-source,
//   module-loopback, libpipewire-module-loopback, filter-chain, echo-cancel)
//   as a source and a source output sharing a `node.link-group`; the source
//   output records from a source (or, not linked yet, names its `target.object`,
//   and `stream.capture.sink` when that is a sink's monitor). Only source
//   outputs without a client count: an app's own recording may carry any
//   `node.link-group`, and would otherwise pass for the capture side of a filter.
//
// - a tunnel source (PulseAudio's module-tunnel-source, pipewire-pulse's) carries
//   what the source it reads on its server carries, and names it only by name
//   (`tunnel.remote.source`): a monitor's name (`.monitor`) is system audio, the
//   name of a source this server has is taken for that source (a tunnel to this
//   server, or to one whose source of that name is the same kind of thing), any
//   other name, or none, is not traced.
//
// A source is classified by following that chain to its end: a monitor at the
// end makes it system audio, a device of its own a microphone. Where the chain
// breaks (a filter without a master, a master or target not known, a group
// without a capture stream, `Audio/Source/Virtual`, which anything may be
// linked into, a loop), the source takes the stricter kind, system audio: its
// recordings stay silent for an app granted only the microphone.
import PulseWire

/// What the server says feeds a source.
public enum SourceFeed: Sendable, Equatable {
    /// A sink's monitor: what that sink plays.
    case monitor
    /// A source of its own (a capture device, a sine or pipe source).
    case device
    /// A PulseAudio filter reading the source of this name (`device.master_device`).
    case master(String)
    /// A pipewire-pulse filter or loopback: its capture side is the source output(s) of this `node.link-group`.
    case linkGroup(String)
    /// A tunnel to a source of a Pulse server, of this name if it says.
    case tunnel(String?)
    /// A virtual source whose feed the server does not say; why.
    case undetermined(String)

    /// The feed the server describes in a source record.
    public init(_ info: SourceInfo) {
        let props = info.proplist
        if info.isMonitor {
            self = .monitor
        } else if props["tunnel.remote.server"] != nil || props["tunnel.remote.source"] != nil {
            self = .tunnel(props["tunnel.remote.source"].flatMap { $0.isEmpty ? nil : $0 })
        } else if let master = props["device.master_device"], !master.isEmpty {
            self = .master(master)
        } else if let group = props["node.link-group"], !group.isEmpty {
            self = .linkGroup(group)
        } else if props["media.class"] == "Audio/Source/Virtual" {
            self = .undetermined("a virtual source anything may be linked into")
        } else if props["device.class"] == "filter" {
            self = .undetermined("a filter that names no source it reads")
        } else {
            self = .device
        }
    }
}

/// The capture side of a filter: a source output a module owns (PulseAudio), or one in a
/// `node.link-group` (pipewire-pulse).
public struct FilterCapture: Sendable, Equatable {
    /// Its `node.link-group`, if any.
    public var group: String?
    /// The module that owns it, or `invalidIndex`.
    public var ownerModule: UInt32
    /// The source it records from, or `invalidIndex` while it is not linked.
    public var source: UInt32
    /// `stream.capture.sink`: it records a sink's monitor.
    public var capturesSink: Bool
    /// `target.object`: the node it is to be linked to.
    public var target: String?

    /// The capture side described by a source-output record; nil for a client's recording (an
    /// app may give its stream any `node.link-group` it likes; a module's or a native PipeWire
    /// node's stream has no client), and for one no module owns and in no link group.
    public init?(_ info: SourceOutputInfo) {
        let group = info.proplist["node.link-group"].flatMap { $0.isEmpty ? nil : $0 }
        guard info.client == invalidIndex, group != nil || info.ownerModule != invalidIndex else { return nil }
        self.group = group
        ownerModule = info.ownerModule
        source = info.source
        capturesSink = info.proplist["stream.capture.sink"] == "true"
        target = info.proplist["target.object"]
    }
}

extension SourceTable {
    /// The kind source `index` carries, following what feeds it (see the file comment), and how
    /// it was found: the chain of source names after the first, or why it is taken as system audio.
    func followFeed(of index: UInt32, visited: Set<UInt32> = []) -> (kind: Capability, via: String) {
        guard let entry = sources[index] else { return (.systemAudio, "its feed is not known") }
        guard !visited.contains(index) else { return (.systemAudio, "its feed loops") }
        let seen = visited.union([index])
        switch entry.feed {
        case .monitor:
            return (.systemAudio, visited.isEmpty ? "a monitor" : "")
        case .device:
            return (.microphone, "")
        case .undetermined(let why):
            return (.systemAudio, why)
        case .tunnel(let remote):
            guard let remote else { return (.systemAudio, "a tunnel that does not say what it reads") }
            if remote.hasSuffix(".monitor") { return (.systemAudio, "a tunnel to \(remote), a monitor") }
            let named = sources.filter { $0.value.name == remote && $0.key != index }
            guard named.count == 1, let next = named.first?.key else {
                return (.systemAudio, "a tunnel to \(remote), which this server does not have")
            }
            return follow(index: next, from: seen)
        case .master(let name):
            if entry.driver == "module-virtual-source.c", entry.ownerModule != invalidIndex,
                sources.values.contains(where: { $0.feed == .monitor && $0.ownerModule == entry.ownerModule })
            {
                return (.systemAudio, "it mixes in what is played into its uplink sink")
            }
            // Where its module's source output records now, else the name it gave.
            let captures =
                entry.ownerModule == invalidIndex
                ? []
                : filterCaptures.values.filter { $0.ownerModule == entry.ownerModule }
            return captures.isEmpty ? follow(name: name, from: seen) : follow(captures, from: seen)
        case .linkGroup(let group):
            let captures = filterCaptures.values.filter { $0.group == group }
            guard !captures.isEmpty else { return (.systemAudio, "no capture stream of its link group \(group) is known") }
            return follow(captures, from: seen)
        }
    }

    /// The strictest kind the capture sides of a filter record.
    private func follow(_ captures: [FilterCapture], from seen: Set<UInt32>) -> (kind: Capability, via: String) {
        var result: (kind: Capability, via: String) = (.microphone, "")
        for c in captures.sorted(by: { $0.source < $1.source }) {
            let step: (kind: Capability, via: String)
            if c.source != invalidIndex, sources[c.source] != nil {
                step = follow(index: c.source, from: seen)
            } else if c.capturesSink {
                step = (.systemAudio, "it records a sink's monitor\(c.target.map { " (\($0))" } ?? "")")
            } else if c.source != invalidIndex {
                step = (.systemAudio, "it records a source not known")
            } else if let target = c.target {
                step = follow(name: target, from: seen)
            } else {
                step = (.systemAudio, "it records from no source yet")
            }
            if step.kind == .systemAudio { return step }
            result = step
        }
        return result
    }

    private func follow(name: String, from seen: Set<UInt32>) -> (kind: Capability, via: String) {
        let named = sources.filter { $0.value.name == name }
        guard named.count == 1, let index = named.first?.key else { return (.systemAudio, "it reads \(name), not known") }
        return follow(index: index, from: seen)
    }

    private func follow(index: UInt32, from seen: Set<UInt32>) -> (kind: Capability, via: String) {
        let next = followFeed(of: index, visited: seen)
        let name = sources[index]?.name ?? "#\(index)"
        return (next.kind, next.via.isEmpty ? "fed by \(name)" : "fed by \(name), \(next.via)")
    }

    /// Why source `index` carries the kind it does, for the log: nil for a monitor or a device of its own.
    public func feedExplanation(of index: UInt32) -> String? {
        guard let entry = sources[index], entry.feed != .monitor, entry.feed != .device else { return nil }
        let (kind, via) = followFeed(of: index)
        return "\(entry.name ?? "#\(index)") is \(kind.rawValue): \(via)"
    }
}
