// A D-Bus message, built and read through sd-bus (libsystemd).
//
// A thin owner of an `sd_bus_message *`: appending basic values and opening
// containers on the way out, peeking, reading and entering containers on the
// way in. sd-bus does all marshalling; nothing here knows the wire format.
// Like the connection it came from, a message belongs to one thread.
import CSystemd
import Glibc
import LinuxSystem

/// A D-Bus failure: an error reply (name and message) or a local sd-bus error (errno).
public struct BusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The D-Bus error name, e.g. `org.freedesktop.DBus.Error.ServiceUnknown`.
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// A local failure of `operation` with a negative errno from sd-bus.
    init(_ operation: String, errno code: Int32) {
        name = "errno.\(-code)"
        message = "\(operation): \(Errno(rawValue: -code))"
    }

    public var description: String { "\(name): \(message)" }

    /// Whether the error says nobody provides the service, object, interface or method.
    public var meansNotProvided: Bool {
        [
            "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
            "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownObject",
            "org.freedesktop.DBus.Error.UnknownInterface", "org.freedesktop.DBus.Error.Spawn.ChildExited",
            "org.freedesktop.DBus.Error.Spawn.ServiceNotFound", "org.freedesktop.DBus.Error.Spawn.ExecFailed",
        ].contains(name)
    }
}

/// One D-Bus message (method call, reply, error or signal).
@safe
public final class BusMessage {
    let raw: OpaquePointer

    /// Takes over a reference the caller owns.
    init(owning raw: OpaquePointer) { unsafe self.raw = raw }

    /// Adds a reference to a message sd-bus lends to a callback.
    init(borrowing raw: OpaquePointer) {
        unsafe self.raw = raw
        unsafe sd_bus_message_ref(raw)
    }

    deinit { unsafe sd_bus_message_unref(raw) }

    // MARK: header

    public var member: String? { unsafe sd_bus_message_get_member(raw).map { unsafe String(cString: $0) } }
    public var interface: String? { unsafe sd_bus_message_get_interface(raw).map { unsafe String(cString: $0) } }
    public var path: String? { unsafe sd_bus_message_get_path(raw).map { unsafe String(cString: $0) } }
    public var sender: String? { unsafe sd_bus_message_get_sender(raw).map { unsafe String(cString: $0) } }
    /// The signature of the whole body, e.g. `ua{sv}`.
    public var signature: String { unsafe sd_bus_message_get_signature(raw, 1).map { unsafe String(cString: $0) } ?? "" }

    /// The error this reply carries, or nil for a normal reply.
    public var error: BusError? {
        guard unsafe sd_bus_message_is_method_error(raw, nil) > 0, let e = unsafe sd_bus_message_get_error(raw) else { return nil }
        return unsafe BusError(
            name: e.pointee.name.map { unsafe String(cString: $0) } ?? "unknown",
            message: unsafe e.pointee.message.map { unsafe String(cString: $0) } ?? "")
    }

    /// Whether this is a call of `interface.member`.
    public func isCall(_ interface: String, _ member: String) -> Bool {
        unsafe sd_bus_message_is_method_call(raw, interface, member) > 0
    }

    /// A method return for this call, to fill with its results and `send`.
    public func methodReturn() throws(BusError) -> BusMessage {
        var m: OpaquePointer?
        let rc = unsafe sd_bus_message_new_method_return(raw, &m)
        guard rc >= 0, let m = unsafe m else { throw BusError("new method return", errno: rc) }
        return unsafe BusMessage(owning: m)
    }

    // MARK: writing

    private func check(_ rc: Int32, _ what: String) throws(BusError) {
        if rc < 0 { throw BusError(what, errno: rc) }
    }

    public func append(_ s: String) throws(BusError) { try appendText(s, type: "s") }

    public func append(objectPath s: String) throws(BusError) { try appendText(s, type: "o") }

    private func appendText(_ s: String, type: Character) throws(BusError) {
        let rc = unsafe s.withCString { p in unsafe sd_bus_message_append_basic(raw, CChar(type.asciiValue!), p) }
        try check(rc, "append \(type)")
    }

    public func append(_ v: UInt32) throws(BusError) {
        var v = v
        try unsafe check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "u")), &v), "append u")
    }

    public func append(byte v: UInt8) throws(BusError) {
        var v = v
        try unsafe check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "y")), &v), "append y")
    }

    public func append(_ v: Int32) throws(BusError) {
        var v = v
        try unsafe check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "i")), &v), "append i")
    }

    public func append(_ v: UInt64) throws(BusError) {
        var v = v
        try unsafe check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "t")), &v), "append t")
    }

    public func append(_ v: Bool) throws(BusError) {
        var b: Int32 = v ? 1 : 0
        try unsafe check(sd_bus_message_append_basic(raw, CChar(UInt8(ascii: "b")), &b), "append b")
    }

    /// Appends `ay`.
    public func append(bytes: [UInt8]) throws(BusError) {
        let rc = unsafe bytes.withUnsafeBytes { unsafe sd_bus_message_append_array(raw, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count) }
        try check(rc, "append ay")
    }

    /// Appends `as`.
    public func append(strings: [String]) throws(BusError) {
        try open("a", "s")
        for s in strings { try append(s) }
        try close()
    }

    /// Opens an array (`a`), struct (`r`), dict entry (`e`) or variant (`v`) of the given contents.
    public func open(_ type: Character, _ contents: String) throws(BusError) {
        let rc = unsafe contents.withCString { unsafe sd_bus_message_open_container(raw, CChar(type.asciiValue!), $0) }
        try check(rc, "open \(type)\(contents)")
    }

    public func close() throws(BusError) { try unsafe check(sd_bus_message_close_container(raw), "close container") }

    /// Appends one `{sv}` entry whose variant is written by `value`.
    public func appendEntry(_ key: String, _ signature: String, _ value: () throws(BusError) -> Void) throws(BusError) {
        try open("e", "sv")
        try append(key)
        try open("v", signature)
        try value()
        try close()
        try close()
    }

    // MARK: reading

    /// The type and contents of the next item; nil at the end of the current container.
    public func peek() throws(BusError) -> (type: Character, contents: String)? {
        var t: CChar = 0
        var contents: UnsafePointer<CChar>?
        let rc = unsafe sd_bus_message_peek_type(raw, &t, &contents)
        try check(rc, "peek")
        guard rc > 0 else { return nil }
        return unsafe (Character(UnicodeScalar(UInt8(bitPattern: t))), contents.map { unsafe String(cString: $0) } ?? "")
    }

    public func readString() throws(BusError) -> String { try readText("s") }

    public func readObjectPath() throws(BusError) -> String { try readText("o") }

    private func readText(_ type: Character) throws(BusError) -> String {
        var p: UnsafePointer<CChar>?
        try unsafe check(sd_bus_message_read_basic(raw, CChar(type.asciiValue!), &p), "read \(type)")
        return unsafe p.map { unsafe String(cString: $0) } ?? ""
    }

    public func readUInt32() throws(BusError) -> UInt32 {
        var v: UInt32 = 0
        try unsafe check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "u")), &v), "read u")
        return v
    }

    public func readInt32() throws(BusError) -> Int32 {
        var v: Int32 = 0
        try unsafe check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "i")), &v), "read i")
        return v
    }

    public func readInt64() throws(BusError) -> Int64 {
        var v: Int64 = 0
        try unsafe check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "x")), &v), "read x")
        return v
    }

    public func readBool() throws(BusError) -> Bool {
        var v: Int32 = 0
        try unsafe check(sd_bus_message_read_basic(raw, CChar(UInt8(ascii: "b")), &v), "read b")
        return v != 0
    }

    /// Reads `as`.
    public func readStrings() throws(BusError) -> [String] { try readArray("s") { () throws(BusError) in try readString() } }

    /// Reads `ai`.
    public func readInt32s() throws(BusError) -> [Int32] { try readArray("i") { () throws(BusError) in try readInt32() } }

    /// Reads an array of `element`, each item with `read`.
    private func readArray<T>(_ element: String, _ read: () throws(BusError) -> T) throws(BusError) -> [T] {
        try enter("a", element)
        var out: [T] = []
        while try peek() != nil { out.append(try read()) }
        try exit()
        return out
    }

    public func enter(_ type: Character, _ contents: String) throws(BusError) {
        let rc = unsafe contents.withCString { unsafe sd_bus_message_enter_container(raw, CChar(type.asciiValue!), $0) }
        try check(rc, "enter \(type)\(contents)")
    }

    public func exit() throws(BusError) { try unsafe check(sd_bus_message_exit_container(raw), "exit container") }

    /// Skips the next complete item of the given signature.
    public func skip(_ types: String) throws(BusError) {
        try unsafe check(types.withCString { unsafe sd_bus_message_skip(raw, $0) }, "skip \(types)")
    }
}
