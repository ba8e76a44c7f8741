// Where the real sound server is, as a PulseAudio client names it (`PULSE_SERVER`).

/// A sound server address in `PULSE_SERVER` syntax.
public enum UpstreamAddress: Equatable, Sendable, CustomStringConvertible {
    case unix(String)

    /// Parses one server string: `unix:/path`, or an absolute path. A
    /// `PULSE_SERVER` list takes its first Unix entry; `{machine-id}` prefixes
    /// are ignored. TCP servers are refused: credentials and identity only exist
    /// on Unix sockets.
    public static func parse(_ text: String) throws(UpstreamError) -> UpstreamAddress {
        let entries = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !entries.isEmpty else { throw UpstreamError("empty server string") }
        var unsupported: [String] = []
        for var entry in entries {
            if entry.hasPrefix("{"), let close = entry.firstIndex(of: "}") {
                entry = String(entry[entry.index(after: close)...])
            }
            if entry.hasPrefix("unix:") {
                let path = String(entry.dropFirst(5))
                if path.hasPrefix("/") { return .unix(path) }
            } else if entry.hasPrefix("/") {
                return .unix(entry)
            }
            unsupported.append(entry)
        }
        throw UpstreamError(
            "no Unix socket in server string \"\(text)\" (\(unsupported.joined(separator: ", ")) not supported); give one as unix:/path/to/native")
    }

    public var path: String {
        switch self {
        case .unix(let p): p
        }
    }

    public var description: String { "unix:\(path)" }
}

/// A server string that Earmuff cannot use.
public struct UpstreamError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ d: String) { description = d }
}
