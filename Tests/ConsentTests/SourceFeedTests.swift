// What feeds a source decides its kind: the records below are what PulseAudio
// 16.1 and pipewire-pulse 0.3.65 list for virtual sources loaded with pactl
// (module-remap-source, module-virtual-source, module-echo-cancel, module-loopback,
// libpipewire-module-loopback, a null sink made an `Audio/Source/Virtual`).
import PulseWire
import Testing
@testable import Consent

@Suite struct SourceFeedTests {
    static func source(
        _ index: UInt32, _ name: String, monitorOf sink: UInt32 = invalidIndex, module: UInt32 = invalidIndex,
        driver: String? = nil, _ props: [String: String] = [:]
    ) -> SourceInfo {
        var s = SourceInfo(index: index, name: name, monitorOfSink: sink, monitorOfSinkName: sink == invalidIndex ? nil : "sink")
        s.ownerModule = module
        s.driver = driver
        for (k, v) in props.sorted(by: { $0.key < $1.key }) { s.proplist.set(k, string: v) }
        return s
    }

    static func output(_ index: UInt32, source: UInt32, module: UInt32 = invalidIndex, _ props: [String: String]) -> SourceOutputInfo {
        var o = SourceOutputInfo(index: index, source: source)
        o.ownerModule = module
        for (k, v) in props.sorted(by: { $0.key < $1.key }) { o.proplist.set(k, string: v) }
        return o
    }

    /// PulseAudio: a monitor, a sine microphone, and filters whose `device.master_device` names what they read.
    static let pulseAudio: [SourceInfo] = [
        source(0, "out.monitor", monitorOf: 0, module: 1, driver: "module-null-sink.c", ["device.class": "monitor"]),
        source(1, "mic", module: 2, driver: "module-sine-source.c", ["device.class": "abstract"]),
        source(
            2, "remapped", module: 3, driver: "module-remap-source.c",
            ["device.master_device": "out.monitor", "device.class": "filter"]),
        source(
            3, "virt", module: 4, driver: "module-virtual-source.c",
            ["device.master_device": "out.monitor", "device.class": "filter"]),
        source(
            5, "remap2", module: 7, driver: "module-remap-source.c",
            ["device.master_device": "remapped", "device.class": "filter"]),
        source(
            6, "micremap", module: 8, driver: "module-remap-source.c",
            ["device.master_device": "mic", "device.class": "filter"]),
        source(
            7, "mic-ec", module: 9, driver: "module-echo-cancel.c",
            ["device.master_device": "mic", "device.class": "filter"]),
        source(8, "ec-sink.monitor", monitorOf: 4, module: 9, driver: "module-echo-cancel.c", ["device.class": "monitor"]),
    ]

    static func table(_ infos: [SourceInfo], outputs: [SourceOutputInfo] = []) -> SourceTable {
        var t = SourceTable()
        t.replaceAll(infos)
        t.replaceOutputs(outputs)
        return t
    }

    @Test func pulseAudioFiltersTakeTheKindOfTheSourceTheyRead() {
        let t = Self.table(Self.pulseAudio)
        func kind(_ name: String) -> Capability? { t.kind(sourceIndex: invalidIndex, sourceName: name) }
        #expect(kind("remapped") == .systemAudio)
        #expect(kind("virt") == .systemAudio)
        #expect(kind("remap2") == .systemAudio) // through two filters
        #expect(kind("micremap") == .microphone)
        #expect(kind("mic-ec") == .microphone) // echo cancellation owns a sink too, and reads the mic
        #expect(kind("mic") == .microphone)
        #expect(t.feedExplanation(of: 5) == "remap2 is system-audio: fed by remapped, fed by out.monitor")
        #expect(t.feedExplanation(of: 6) == "micremap is microphone: fed by mic")
        #expect(t.feedExplanation(of: 1) == nil)
    }

    /// Tunnel sources, as PulseAudio 16.1 lists module-tunnel-source's (`tunnel.remote.*`):
    /// they carry what the source they read carries, told by its name.
    @Test func aTunnelTakesTheKindOfTheSourceItNames() {
        func tunnel(_ index: UInt32, _ name: String, _ remote: String?) -> SourceInfo {
            var props = ["tunnel.remote.server": "unix:/run/user/1000/pulse/native", "device.icon_name": "audio-input-microphone"]
            props["tunnel.remote.source"] = remote
            return Self.source(index, name, module: 40 + index, driver: "module-tunnel.c", props)
        }
        let t = Self.table(
            Self.pulseAudio + [
                tunnel(30, "tun-monitor", "out.monitor"), tunnel(31, "tun-mic", "mic"),
                tunnel(32, "tun-remapped", "remapped"), tunnel(33, "tun-far", "alsa_input.far"),
                tunnel(34, "tun-default", nil), tunnel(35, "tun-self", "tun-self"),
            ])
        func kind(_ name: String) -> Capability? { t.kind(sourceIndex: invalidIndex, sourceName: name) }
        #expect(kind("tun-monitor") == .systemAudio)
        #expect(kind("tun-mic") == .microphone)
        #expect(kind("tun-remapped") == .systemAudio)
        #expect(kind("tun-far") == .systemAudio) // not traced: the stricter kind
        #expect(kind("tun-default") == .systemAudio)
        #expect(kind("tun-self") == .systemAudio)
        #expect(t.feedExplanation(of: 30) == "tun-monitor is system-audio: a tunnel to out.monitor, a monitor")
        #expect(t.feedExplanation(of: 31) == "tun-mic is microphone: fed by mic")
        #expect(t.feedExplanation(of: 33) == "tun-far is system-audio: a tunnel to alsa_input.far, which this server does not have")
    }

    /// A valve carries whatever its native stream may hear (a microphone, through a grant of
    /// that stream's app), whatever it looks like: none of Earmuff's own nodes has a kind, by
    /// name or by index, so a stream of one stays silent whatever its app was granted.
    @Test func earmuffsOwnNodesHaveNoKind() {
        let t = Self.table(
            Self.pulseAudio + [
                Self.source(20, "earmuff.valve.3", module: 30, ["device.class": "abstract"]),
                Self.source(21, "earmuff.silence", ["media.class": "Audio/Source/Virtual"]),
            ])
        #expect(t.kind(sourceIndex: invalidIndex, sourceName: "earmuff.valve.3") == nil)
        #expect(t.kind(sourceIndex: 20, sourceName: nil) == nil)
        #expect(t.kind(sourceIndex: 21, sourceName: "earmuff.silence") == nil)
        #expect(t.kind(sourceIndex: 1, sourceName: "mic") == .microphone)
    }

    @Test func aPulseAudioFilterFollowsItsSourceOutputWhenMoved() {
        // PulseAudio 16.1 keeps `device.master_device = "mic"` after the filter's source output
        // (owned by its module) is moved to the monitor.
        var t = Self.table(Self.pulseAudio, outputs: [Self.output(4, source: 1, module: 8, [:])])
        #expect(t.kind(sourceIndex: 6, sourceName: "micremap") == .microphone)
        #expect(t.filterCaptures[4]?.ownerModule == 8)
        t.updateOutput(Self.output(4, source: 0, module: 8, [:]))
        #expect(t.kind(sourceIndex: 6, sourceName: "micremap") == .systemAudio)
        #expect(t.feedExplanation(of: 6) == "micremap is system-audio: fed by out.monitor")
        // Other filters still follow the name they give.
        #expect(t.kind(sourceIndex: 7, sourceName: "mic-ec") == .microphone)
    }

    @Test func aVirtualSourceWithAnUplinkSinkCarriesWhatIsPlayedThere() {
        // module-virtual-source master=mic uplink_sink=up: the module owns the sink `up` (and its monitor).
        let t = Self.table(
            Self.pulseAudio + [
                Self.source(
                    9, "v2", module: 10, driver: "module-virtual-source.c",
                    ["device.master_device": "mic", "device.class": "filter"]),
                Self.source(
                    10, "up.monitor", monitorOf: 5, module: 10, driver: "module-virtual-source.c",
                    ["device.class": "monitor"]),
            ])
        #expect(t.kind(sourceIndex: 9, sourceName: "v2") == .systemAudio)
    }

    @Test func aFeedThatCannotBeFollowedIsSystemAudio() {
        var infos = Self.pulseAudio
        infos.append(
            Self.source(
                20, "orphan", driver: "module-remap-source.c",
                ["device.master_device": "gone", "device.class": "filter"]))
        infos.append(Self.source(21, "nameless", ["device.class": "filter"]))
        infos.append(Self.source(22, "loop-a", ["device.master_device": "loop-b"]))
        infos.append(Self.source(23, "loop-b", ["device.master_device": "loop-a"]))
        infos.append(Self.source(24, "vmic", ["media.class": "Audio/Source/Virtual"]))
        let t = Self.table(infos)
        for name in ["orphan", "nameless", "loop-a", "loop-b", "vmic"] {
            #expect(t.kind(sourceIndex: invalidIndex, sourceName: name) == .systemAudio, "\(name)")
        }
        #expect(t.feedExplanation(of: 20) == "orphan is system-audio: it reads gone, not known")
    }

    /// pipewire-pulse: the mic of the PipeWire tests was once exactly this, a loopback of a sink's monitor.
    static let pipeWire: [SourceInfo] = [
        source(27, "out.monitor", monitorOf: 27, driver: "PipeWire", ["device.class": "monitor", "media.class": "Audio/Sink"]),
        source(31, "mic", driver: "PipeWire", ["media.class": "Audio/Source", "node.virtual": "true"]),
        source(
            54, "remapped", module: 536870912, driver: "PipeWire",
            ["media.class": "Audio/Source", "device.class": "filter", "node.link-group": "loopback-9638-10"]),
        source(
            60, "micremap", module: 536870913, driver: "PipeWire",
            ["media.class": "Audio/Source", "device.class": "filter", "node.link-group": "loopback-9638-12"]),
    ]

    @Test func pipeWireFiltersTakeTheKindOfWhatTheirCaptureSideRecords() {
        let outputs = [
            Self.output(
                55, source: 27,
                [
                    "node.link-group": "loopback-9638-10", "target.object": "out",
                    "stream.capture.sink": "true",
                ]),
            Self.output(61, source: 31, ["node.link-group": "loopback-9638-12", "target.object": "mic"]),
            Self.output(70, source: 31, [:]), // an app's recording: no module, no link group, not kept
        ]
        var t = Self.table(Self.pipeWire, outputs: outputs)
        #expect(t.filterCaptures.keys.sorted() == [55, 61])
        #expect(t.kind(sourceIndex: 54, sourceName: "remapped") == .systemAudio)
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .microphone)

        // The capture side moved to the monitor (pactl move-source-output): the filter follows it.
        let changed1 = t.updateOutput(Self.output(61, source: 27, ["node.link-group": "loopback-9638-12", "target.object": "mic"]))
        #expect(changed1)
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .systemAudio)
        let changed2 = t.updateOutput(Self.output(61, source: 27, ["node.link-group": "loopback-9638-12", "target.object": "mic"]))
        #expect(!changed2)

        // Not linked: its target decides; with none, or without its capture side, system audio.
        let changed3 = t.updateOutput(Self.output(61, source: invalidIndex, ["node.link-group": "loopback-9638-12", "target.object": "mic"]))
        #expect(changed3)
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .microphone)
        t.updateOutput(Self.output(61, source: invalidIndex, ["node.link-group": "loopback-9638-12"]))
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .systemAudio)
        let changed4 = t.removeOutput(index: 61)
        #expect(changed4)
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .systemAudio)
        let changed5 = t.removeOutput(index: 70)
        #expect(!changed5)
    }

    @Test func anAppsRecordingNeverPassesForAFiltersCaptureSide() {
        // A loopback whose capture side is a virtual sink (no source output): its source carries
        // what is played there. An app records the mic with the group's `node.link-group`
        // (PULSE_PROP), which pipewire-pulse passes on: it is a client's, and does not count.
        var claimed = Self.output(80, source: 31, ["node.link-group": "loopback-9638-12"])
        claimed.client = 140
        let t = Self.table(Self.pipeWire, outputs: [claimed])
        #expect(t.filterCaptures.isEmpty)
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .systemAudio)
    }

    @Test func aGroupIsAsStrictAsTheStrictestOfItsCaptureStreams() {
        // A filter with two inputs (echo cancellation's capture, say), one of them on the monitor.
        let group = ["node.link-group": "loopback-9638-12"]
        let t = Self.table(Self.pipeWire, outputs: [Self.output(61, source: 31, group), Self.output(62, source: 27, group)])
        #expect(t.kind(sourceIndex: 60, sourceName: "micremap") == .systemAudio)
    }
}
