// What the source catalog says to the server and makes of its answers, without
// any I/O: a pure core that takes each packet from the server and returns what
// to do (send a request, report a source output, say the table changed). The
// loop handler in SourceCatalog.swift owns the socket and runs the actions.
//
// The conversation: AUTH (protocol 13, no shared memory), SET_CLIENT_NAME,
// SUBSCRIBE to sources, source outputs and the server, GET_SERVER_INFO,
// GET_SOURCE_OUTPUT_INFO_LIST and GET_SOURCE_INFO_LIST; then each
// SUBSCRIBE_EVENT about a source asks for that source again (or forgets it), a
// server change asks for the default source again, and a new or changed source
// output is asked where it records from.
import Consent
import PulseWire

/// Why the catalog's connection to the server ended.
struct SourceCatalogError: Error, CustomStringConvertible, Equatable {
    let description: String
    init(_ description: String) { self.description = description }
}

struct CatalogConversation {
    enum Action: Equatable {
        /// Send this packet (a tagstruct, not yet framed).
        case send([UInt8])
        /// Source output `index` records from source `source`, as asked at `askedAt` (monotonic seconds).
        case sourceOutput(index: UInt32, source: UInt32, askedAt: Double)
        /// The full source list arrived: the table is ready.
        case listed(sources: Int, monitors: Int)
        /// The table changed.
        case changed
    }

    private enum Pending: Equatable {
        case auth, setName, subscribe, serverInfo, sourceList, sourceInfo
        /// Asked at this monotonic time.
        case sourceOutputInfo(Double), sourceOutputList(Double)
    }

    /// What the server said so far.
    private(set) var table = SourceTable()
    /// PulseAudio itself (its package name, from GET_SERVER_INFO) announces every move; any
    /// other server, or one not identified yet, has to be asked.
    private(set) var announcesMoves = false
    private var pending: [UInt32: Pending] = [:]
    private var nextTag: UInt32 = 0
    private let version = introspectionVersion

    /// Whether a GET_SOURCE_OUTPUT_INFO_LIST is unanswered (one is asked at a time).
    var awaitsSourceOutputList: Bool {
        pending.values.contains { if case .sourceOutputList = $0 { true } else { false } }
    }

    /// The requests that open the connection.
    mutating func opening(now: Double) -> [Action] {
        var props = Proplist()
        props.set("application.name", string: "Earmuff source catalog")
        props.set("application.id", string: "org.earmuff.SourceCatalog")
        let version = version
        return [
            ask(.auth) { AuthRequest(versionWord: version).packet(tag: $0, version: 0) },
            ask(.setName) { SetClientName(proplist: props).packet(tag: $0, version: version) },
            ask(.subscribe) { Subscribe([.source, .sourceOutput, .server]).packet(tag: $0, version: version) },
            ask(.serverInfo) { EmptyRequest(.getServerInfo).packet(tag: $0) },
            // Source outputs first: the capture sides of filters are known by the time the sources are.
            ask(.sourceOutputList(now)) { EmptyRequest(.getSourceOutputInfoList).packet(tag: $0) },
            ask(.sourceList) { EmptyRequest(.getSourceInfoList).packet(tag: $0) },
        ]
    }

    /// Asks where every source output records from.
    mutating func askSourceOutputs(now: Double) -> Action {
        ask(.sourceOutputList(now)) { EmptyRequest(.getSourceOutputInfoList).packet(tag: $0) }
    }

    /// What to do about one frame from the server.
    mutating func handle(_ frame: Frame, now: Double) throws(SourceCatalogError) -> [Action] {
        guard frame.descriptor.isPacket else { return [] }
        let actions: [Action]
        do {
            actions = try handlePacket(frame.payload, now: now)
        } catch {
            throw SourceCatalogError("unreadable packet from the server (\(error)); reconnecting")
        }
        if authRefused { throw SourceCatalogError("the server refused authentication") }
        return actions
    }

    /// Set when the server answered AUTH with an error.
    private var authRefused = false

    private mutating func handlePacket(_ payload: [UInt8], now: Double) throws(WireError) -> [Action] {
        var r = TagStructReader(payload)
        let header = try PacketHeader.decode(from: &r)
        var actions: [Action] = []
        var changed = false
        switch Command(rawValue: header.command) {
        case .reply:
            switch pending.removeValue(forKey: header.tag) {
            case .serverInfo:
                let info = try ServerInfo.decode(from: &r, version: version)
                announcesMoves = info.packageName == "pulseaudio"
                changed = table.defaultSourceName != info.defaultSourceName
                table.defaultSourceName = info.defaultSourceName
            case .sourceList:
                let list = try SourceInfoReply.decode(from: &r, version: version).records
                table.replaceAll(list)
                actions.append(.listed(sources: list.count, monitors: list.filter(\.isMonitor).count))
                changed = true
            case .sourceInfo:
                for s in try SourceInfoReply.decode(from: &r, version: version).records { table.update(s) }
                changed = true
            case .sourceOutputInfo(let askedAt):
                let records = try SourceOutputInfoReply.decode(from: &r, version: version).records
                changed = records.reduce(false) { table.updateOutput($1) || $0 }
                for o in records { actions.append(.sourceOutput(index: o.index, source: o.source, askedAt: askedAt)) }
            case .sourceOutputList(let askedAt):
                let records = try SourceOutputInfoReply.decode(from: &r, version: version).records
                changed = table.replaceOutputs(records)
                for o in records { actions.append(.sourceOutput(index: o.index, source: o.source, askedAt: askedAt)) }
            case .auth, .setName, .subscribe, nil:
                break
            }
        case .error:
            // A source removed before its info was asked for: its remove event follows.
            if pending.removeValue(forKey: header.tag) == .auth { authRefused = true }
        case .subscribeEvent:
            let e = try SubscribeEvent.decode(from: &r, version: version)
            let version = version
            switch (e.facility, e.operation) {
            case (.source?, .remove?):
                table.remove(index: e.index)
                changed = true
            case (.source?, _):
                actions.append(ask(.sourceInfo) { GetSourceInfo(index: e.index).packet(tag: $0, version: version) })
            case (.sourceOutput?, .remove?):
                changed = table.removeOutput(index: e.index)
            case (.sourceOutput?, .new?), (.sourceOutput?, .change?):
                actions.append(
                    ask(.sourceOutputInfo(now)) {
                        GetSourceOutputInfo(index: e.index).packet(tag: $0, version: version)
                    })
            case (.server?, _):
                actions.append(ask(.serverInfo) { EmptyRequest(.getServerInfo).packet(tag: $0) })
            default:
                break
            }
        default:
            break
        }
        if changed { actions.append(.changed) }
        return actions
    }

    private mutating func ask(_ what: Pending, _ payload: (UInt32) -> [UInt8]) -> Action {
        let tag = nextTag
        nextTag &+= 1
        pending[tag] = what
        return .send(payload(tag))
    }
}
