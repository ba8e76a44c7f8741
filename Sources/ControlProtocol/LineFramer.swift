// Control protocol: line framing and limits.
//
// The control socket carries JSON lines: one UTF-8 JSON object per line, each
// line ended by "\n". `LineFramer` cuts an incoming byte stream into lines
// incrementally: a half-written line waits for more bytes, a line longer than
// the limit throws (the reader answers `too-large` and closes the connection).
// Message types live in Messages.swift; nothing in this module does I/O.

/// The control protocol version this build speaks.
public enum ControlProtocolVersion {
    /// The one version spoken today.
    public static let current = 1
    /// Every version this build accepts from a peer.
    public static let supported: ClosedRange<Int> = 1...1
}

/// Size limits of the control protocol, checked before anything is buffered further.
public enum ControlLimits {
    /// Longest line (without its "\n") the daemon accepts from a client: 64 KiB.
    public static let maxRequestLine = 64 * 1024
    /// Longest line a client accepts from the daemon (large `apps`/`status` replies): 16 MiB.
    public static let maxServerLine = 16 * 1024 * 1024
}

/// An error of the control protocol: framing, decoding or a peer's error reply.
public enum ControlProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A line exceeded `limit` bytes before its newline arrived.
    case lineTooLarge(limit: Int)
    /// The line is not a JSON object; the connection cannot be trusted further.
    case notJSON(String)
    /// The line is a JSON object, but not a valid message (missing or wrong field).
    case badMessage(id: Int?, String)
    /// The `type` is not one this build knows.
    case unknownType(id: Int?, String)

    public var description: String {
        switch self {
        case .lineTooLarge(let limit): "line longer than \(limit) bytes"
        case .notJSON(let why): "not a JSON object (\(why))"
        case .badMessage(_, let why): why
        case .unknownType(_, let type): "unknown message type '\(type)'"
        }
    }

    /// True when the connection must be closed after the error reply.
    public var closesConnection: Bool {
        switch self {
        case .lineTooLarge, .notJSON: true
        case .badMessage, .unknownType: false
        }
    }

    /// The request id the error refers to, when it could be read.
    public var requestID: Int? {
        switch self {
        case .lineTooLarge, .notJSON: nil
        case .badMessage(let id, _), .unknownType(let id, _): id
        }
    }

    /// The error reply a server sends for this problem.
    public var reply: ControlError {
        switch self {
        case .lineTooLarge(let limit):
            ControlError(.tooLarge, "request line longer than \(limit) bytes; send one JSON object per line, at most \(limit) bytes")
        case .notJSON(let why):
            ControlError(.badRequest, "request is not a JSON object (\(why)); send one JSON object per line")
        case .badMessage(_, let why):
            ControlError(.badRequest, why)
        case .unknownType(_, let type):
            ControlError(
                .unknownRequest,
                "unknown request type '\(type)'; see docs/control-protocol.md for the request types of version \(ControlProtocolVersion.current)")
        }
    }
}

/// Cuts a byte stream into lines. Incremental: feed bytes as they arrive.
///
/// Invariants: `buffer[start...]` holds the unconsumed bytes; `scanned` is the
/// index up to which `buffer` is known to hold no newline. A line is returned
/// without its "\n" (and without a "\r" before it); empty lines are skipped.
public struct LineFramer: Sendable {
    /// Longest line accepted, without its newline.
    public let limit: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0

    /// A framer that rejects lines longer than `limit` bytes.
    public init(limit: Int = ControlLimits.maxRequestLine) {
        precondition(limit > 0, "a line limit must be positive")
        self.limit = limit
    }

    /// Bytes held that do not yet form a complete line.
    public var bufferedCount: Int { buffer.count - start }

    /// Appends bytes read from the peer.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Returns the next complete line, or nil when more bytes are needed.
    /// Throws `.lineTooLarge` when a line is (or is becoming) longer than `limit`.
    public mutating func readLine() throws(ControlProtocolError) -> [UInt8]? {
        while true {
            var i = max(scanned, start)
            while i < buffer.count && buffer[i] != UInt8(ascii: "\n") { i += 1 }
            if i == buffer.count {
                scanned = i
                if buffer.count - start > limit { throw .lineTooLarge(limit: limit) }
                return nil
            }
            var end = i
            if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            if end - start > limit { throw .lineTooLarge(limit: limit) }
            let line = Array(buffer[start..<end])
            start = i + 1
            scanned = start
            if start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
                scanned = 0
            }
            if line.isEmpty { continue }
            return line
        }
    }

    /// Appends `bytes` and returns every line they complete.
    public mutating func feed<C: Collection>(_ bytes: C) throws(ControlProtocolError) -> [[UInt8]] where C.Element == UInt8 {
        append(bytes)
        var lines: [[UInt8]] = []
        while let line = try readLine() { lines.append(line) }
        return lines
    }
}
