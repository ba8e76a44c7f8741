/// A `'P'` property list: ordered key/value entries exactly as on the wire
/// (duplicates kept, so it re-encodes byte for byte). Values are raw bytes;
/// string values carry their trailing NUL.
public struct Proplist: Equatable, Sendable {
    /// The entries in wire order.
    public var entries: [(key: String, value: [UInt8])]

    /// An empty proplist.
    public init() { entries = [] }

    /// A proplist of the given entries.
    public init(_ entries: [(key: String, value: [UInt8])]) { self.entries = entries }

    /// Number of entries.
    public var count: Int { entries.count }

    /// Whether there are no entries.
    public var isEmpty: Bool { entries.isEmpty }

    /// Raw value of `key` (the last one if it appears more than once, as PulseAudio keeps).
    public func value(forKey key: String) -> [UInt8]? {
        entries.last(where: { $0.key == key })?.value
    }

    /// String value of `key`: nil unless the value is NUL-terminated UTF-8 with no inner NUL.
    public subscript(key: String) -> String? {
        guard let value = value(forKey: key), let terminator = value.last, terminator == 0 else { return nil }
        let text = value.dropLast()
        guard !text.contains(0) else { return nil }
        return String(validating: text, as: UTF8.self)
    }

    /// Same as `self[key]`.
    public subscript(string key: String) -> String? { self[key] }

    /// Sets a raw value: replaces the first entry of `key` and drops later duplicates, or appends.
    public mutating func set(_ key: String, value: [UInt8]) {
        if let first = entries.firstIndex(where: { $0.key == key }) {
            entries[first].value = value
            var index = entries.index(after: first)
            while index < entries.endIndex {
                if entries[index].key == key { entries.remove(at: index) } else { index += 1 }
            }
        } else {
            entries.append((key: key, value: value))
        }
    }

    /// Sets a string value (stored with its trailing NUL).
    public mutating func set(_ key: String, string: String) {
        set(key, value: Array(string.utf8) + [0])
    }

    /// Removes every entry of `key`.
    public mutating func remove(_ key: String) {
        entries.removeAll(where: { $0.key == key })
    }

    /// Compares entries in order.
    public static func == (lhs: Proplist, rhs: Proplist) -> Bool {
        lhs.entries.count == rhs.entries.count
            && zip(lhs.entries, rhs.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

extension Proplist {
    /// Well-known property names.
    public enum Key {
        /// `application.name`
        public static let applicationName = "application.name"
        /// `application.process.id`
        public static let processID = "application.process.id"
        /// `application.process.binary`
        public static let processBinary = "application.process.binary"
        /// `media.name`
        public static let mediaName = "media.name"
    }
}
