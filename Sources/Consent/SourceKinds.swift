// What a record stream captures, decided from what the server says.
//
// The server describes every source (GET_SOURCE_INFO): a source whose
// `monitor_of_sink` is a sink index is that sink's monitor, and carries what
// it plays (system audio); any other source carries what feeds it, followed
// to its end (SourceFeeds.swift): a capture device (microphone), or a monitor
// through however many filters (system audio). A stream created with
// `direct_on_input` records one other app's playback (app audio), whichever
// monitor the server puts it on. A stream's source is known only from the
// CREATE_RECORD_STREAM reply (or a later RECORD_STREAM_MOVED): the request may
// name the default source, which may itself be a monitor. A source this table
// does not know yet has no kind, and its streams stay silent until it does;
// nor has a source under Earmuff's own names (its silent source, a native
// stream's valve, which carries whatever that stream may hear): no grant
// reaches through one.
import Basics
import PulseWire

/// The server's sources as far as consent needs them, kept from its replies and events.
public struct SourceTable: Sendable, Equatable {
    /// What is kept of one source.
    public struct Entry: Sendable, Equatable {
        public var name: String?
        public var isMonitor: Bool
        /// What the server says feeds it.
        public var feed: SourceFeed
        /// The module that owns it (`invalidIndex` for none), and its driver.
        public var ownerModule: UInt32
        public var driver: String?
    }

    /// Sources by index.
    public private(set) var sources: [UInt32: Entry] = [:]
    /// The capture sides of filters and loopbacks (source outputs of modules or link groups), by source-output index.
    public private(set) var filterCaptures: [UInt32: FilterCapture] = [:]
    /// The server's default source (GET_SERVER_INFO), which may be a monitor.
    public var defaultSourceName: String?

    public init() {}

    /// Adds or replaces a source from its record.
    public mutating func update(_ info: SourceInfo) {
        sources[info.index] = Entry(
            name: info.name, isMonitor: info.isMonitor, feed: SourceFeed(info),
            ownerModule: info.ownerModule, driver: info.driver)
    }

    /// Replaces every source with a GET_SOURCE_INFO_LIST reply.
    public mutating func replaceAll(_ infos: [SourceInfo]) {
        sources = [:]
        for i in infos { update(i) }
    }

    /// Forgets a source (SUBSCRIBE_EVENT remove).
    public mutating func remove(index: UInt32) { sources[index] = nil }

    /// Keeps (or forgets) a source output as the capture side of a filter, from its record;
    /// true when that changed what the table holds.
    @discardableResult
    public mutating func updateOutput(_ info: SourceOutputInfo) -> Bool {
        let capture = FilterCapture(info)
        guard filterCaptures[info.index] != capture else { return false }
        filterCaptures[info.index] = capture
        return true
    }

    /// Replaces every capture side with a GET_SOURCE_OUTPUT_INFO_LIST reply; true when that changed anything.
    @discardableResult
    public mutating func replaceOutputs(_ infos: [SourceOutputInfo]) -> Bool {
        var captures: [UInt32: FilterCapture] = [:]
        for i in infos { captures[i.index] = FilterCapture(i) }
        guard captures != filterCaptures else { return false }
        filterCaptures = captures
        return true
    }

    /// Forgets a source output (SUBSCRIBE_EVENT remove); true when it was a capture side.
    @discardableResult
    public mutating func removeOutput(index: UInt32) -> Bool { filterCaptures.removeValue(forKey: index) != nil }

    /// The kind a source records, from the index and name the server gave for a stream;
    /// nil when this table does not know that source (or knows another source under that
    /// index: it is behind the server, and the stream waits, silent, until it catches up).
    public func kind(sourceIndex: UInt32, sourceName: String?) -> Capability? {
        let index: UInt32?
        if sourceIndex != invalidIndex {
            index = sources[sourceIndex] == nil ? nil : sourceIndex
            if let entry = sources[sourceIndex], let sourceName, entry.name != sourceName { return nil }
        } else if let sourceName {
            let named = sources.filter { $0.value.name == sourceName }
            index = named.count == 1 ? named.first?.key : nil
        } else {
            index = nil
        }
        guard let index, !OwnNodes.isOwn(sources[index]?.name) else { return nil }
        return followFeed(of: index).kind
    }

    /// The kind of a stream the server created: app audio for `direct_on_input`, else its source's.
    public func kind(sourceIndex: UInt32, sourceName: String?, directOnInput: Bool) -> Capability? {
        directOnInput ? .appAudio : kind(sourceIndex: sourceIndex, sourceName: sourceName)
    }

    /// The source a CREATE_RECORD_STREAM request names (by index, by name, or the default source
    /// when it names none), as this table knows it; nil when the table cannot tell which.
    public func resolve(sourceIndex: UInt32, sourceName: String?) -> (index: UInt32, name: String)? {
        if sourceIndex != invalidIndex {
            guard let name = sources[sourceIndex]?.name else { return nil }
            return (sourceIndex, name)
        }
        guard let name = sourceName == nil || sourceName == "@DEFAULT_SOURCE@" ? defaultSourceName : sourceName else { return nil }
        let named = sources.filter { $0.value.name == name }
        guard named.count == 1, let entry = named.first else { return nil }
        return (entry.key, name)
    }

    /// The kind a CREATE_RECORD_STREAM request is expected to capture, before the server has
    /// said which source it chose (used only to apply `missing-purpose` to the right kind):
    /// the named or default source's kind when known, else microphone.
    public func expectedKind(sourceIndex: UInt32, sourceName: String?, directOnInput: Bool) -> Capability {
        if directOnInput { return .appAudio }
        switch sourceName {
        case "@DEFAULT_MONITOR@": return .systemAudio
        case nil where sourceIndex == invalidIndex, "@DEFAULT_SOURCE@":
            return kind(sourceIndex: invalidIndex, sourceName: defaultSourceName) ?? .microphone
        default:
            return kind(sourceIndex: sourceIndex, sourceName: sourceName) ?? .microphone
        }
    }
}
