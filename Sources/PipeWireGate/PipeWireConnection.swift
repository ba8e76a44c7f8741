// One manager connection to a PipeWire server (CPipeWireShim), driven from
// outside: whoever owns it watches `descriptor` and calls `dispatch()` when it
// is readable. Every call, and every event it delivers, happens on the
// thread that made it; the owner keeps to that.
import CPipeWireShim
import Glibc
import LinuxSystem

/// What the server reports over the connection.
public protocol PipeWireEvents: AnyObject {
    func global(id: UInt32, type: String, properties: [String: String])
    func globalRemoved(id: UInt32)
    func nodeInfo(id: UInt32, properties: [String: String])
    /// The format a bound node negotiated (again when it changes).
    func nodeFormat(id: UInt32, format: PipeWireAudioFormat)
    /// `key` nil: every key of `subject` (every subject at `UInt32.max`) is gone; `value` nil: `key` is.
    func metadata(subject: UInt32, key: String?, value: String?)
    /// The node made by `createNode` under `tag` has this global id.
    func created(tag: UInt32, id: UInt32)
    /// The server refused something, or (`fatal`) the connection is gone.
    func error(id: UInt32, code: Int32, message: String, fatal: Bool)
    /// The server has handled every request sent before `sync()` returned `seq`.
    func synced(seq: Int32)
}

/// A failed PipeWire call: which, and the errno it gave.
public struct PipeWireError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let code: Int32
    public var description: String { "\(call): \(Errno(rawValue: abs(code)))" }
}

/// Safe to use: it owns the libpipewire handle, which no caller sees, and drops it once.
@safe
public final class PipeWireConnection {
    private var handle: OpaquePointer?
    fileprivate weak var events: PipeWireEvents?

    /// Connects to `remote` (nil: libpipewire's default, $PIPEWIRE_REMOTE or pipewire-0).
    public init(remote: String?, events: PipeWireEvents) throws(PipeWireError) {
        self.events = events
        var table = earmuff_pw_events()
        unsafe table.global = { context, id, type, props in
            unsafe eventsOwner(context)?.global(id: id, type: type.map { unsafe String(cString: $0) } ?? "", properties: unsafe propertiesDictionary(props))
        }
        unsafe table.global_removed = { context, id in unsafe eventsOwner(context)?.globalRemoved(id: id) }
        unsafe table.node_info = { context, id, props in unsafe eventsOwner(context)?.nodeInfo(id: id, properties: propertiesDictionary(props)) }
        unsafe table.node_format = { context, id, format, channels, rate in
            unsafe eventsOwner(context)?.nodeFormat(
                id: id,
                format: PipeWireAudioFormat(
                    sample: format.map { unsafe String(cString: $0) } ?? "", channels: channels == 0 ? nil : channels, rate: rate == 0 ? nil : rate))
        }
        unsafe table.metadata = { context, subject, key, _, value in
            unsafe eventsOwner(context)?.metadata(
                subject: subject, key: key.map { unsafe String(cString: $0) },
                value: unsafe value.map { unsafe String(cString: $0) })
        }
        unsafe table.created = { context, tag, id in unsafe eventsOwner(context)?.created(tag: tag, id: id) }
        unsafe table.synced = { context, seq in unsafe eventsOwner(context)?.synced(seq: seq) }
        unsafe table.error = { context, id, res, message, fatal in
            unsafe eventsOwner(context)?.error(id: id, code: res, message: message.map { unsafe String(cString: $0) } ?? "", fatal: fatal != 0)
        }
        var code: Int32 = 0
        let context = unsafe Unmanaged.passUnretained(self).toOpaque()
        let made: OpaquePointer? =
            if let remote {
                unsafe remote.withCString { unsafe earmuff_pw_connect($0, &table, context, &code) }
            } else {
                unsafe earmuff_pw_connect(nil, &table, context, &code)
            }
        guard let made = unsafe made else { throw PipeWireError(call: "pw_context_connect", code: code) }
        unsafe handle = unsafe made
    }

    deinit { close() }

    /// Disconnects (also done when the connection is released).
    public func close() {
        if let handle = unsafe handle { unsafe earmuff_pw_disconnect(handle) }
        unsafe handle = nil
    }

    /// The descriptor to watch for input (pw_loop_get_fd).
    public var descriptor: Int32 { unsafe handle.map(earmuff_pw_fd) ?? -1 }

    /// Handles whatever is ready (pw_loop_iterate with no wait).
    public func dispatch() throws(PipeWireError) {
        guard let handle = unsafe handle else { return }
        let r = unsafe earmuff_pw_dispatch(handle)
        if r < 0 { throw PipeWireError(call: "pw_loop_iterate", code: r) }
    }

    /// Asks the server to say (`synced`) once it has handled every request sent so far; the
    /// sequence number it will say.
    public func sync() throws(PipeWireError) -> Int32 {
        guard let handle = unsafe handle else { throw PipeWireError(call: "pw_core_sync", code: -ENOTCONN) }
        let seq = unsafe earmuff_pw_sync(handle)
        if seq < 0 { throw PipeWireError(call: "pw_core_sync", code: seq) }
        return seq
    }

    public func bindNode(_ id: UInt32) throws(PipeWireError) {
        try unsafe check("pw_registry_bind(node \(id))") { unsafe earmuff_pw_bind_node($0, id) }
    }

    public func bindMetadata(_ id: UInt32) throws(PipeWireError) {
        try unsafe check("pw_registry_bind(metadata \(id))") { unsafe earmuff_pw_bind_metadata($0, id) }
    }

    /// Sets `key` of `subject` in the bound metadata (nil removes it).
    public func setMetadata(subject: UInt32, key: String, value: String?) throws(PipeWireError) {
        try unsafe check("pw_metadata_set_property(\(subject), \(key))") { h in
            unsafe key.withCString { k in
                if let value {
                    unsafe value.withCString { unsafe earmuff_pw_metadata_set(h, subject, k, nil, $0) }
                } else {
                    unsafe earmuff_pw_metadata_set(h, subject, k, nil, nil)
                }
            }
        }
    }

    /// Creates a node of this connection through `factory`, with `properties`, under `tag` (a
    /// node made before under it is destroyed).
    public func createNode(tag: UInt32, factory: String, properties: [(String, String)]) throws(PipeWireError) {
        let keys = unsafe properties.map { unsafe strdup($0.0) }
        let values = unsafe properties.map { unsafe strdup($0.1) }
        defer { unsafe (keys + values).forEach { unsafe free($0) } }
        try unsafe check("pw_core_create_object(\(factory))") { h in
            unsafe keys.map { unsafe UnsafePointer($0) }.withUnsafeBufferPointer { k in
                unsafe values.map { unsafe UnsafePointer($0) }.withUnsafeBufferPointer { v in
                    var props = unsafe earmuff_pw_props(count: properties.count, keys: k.baseAddress, values: v.baseAddress)
                    return unsafe factory.withCString { unsafe earmuff_pw_create_node(h, tag, $0, &props) }
                }
            }
        }
    }

    /// Destroys the node made under `tag`.
    public func destroyNode(tag: UInt32) {
        guard let handle = unsafe handle else { return }
        _ = unsafe earmuff_pw_destroy_node(handle, tag)
    }

    /// Links port `outputPort` of `outputNode` to port `inputPort` of `inputNode` (the link is this connection's).
    public func link(_ outputNode: UInt32, _ outputPort: UInt32, to inputNode: UInt32, _ inputPort: UInt32) throws(PipeWireError) {
        try unsafe check("link-factory(\(outputNode):\(outputPort) → \(inputNode):\(inputPort))") {
            unsafe earmuff_pw_create_link($0, outputNode, outputPort, inputNode, inputPort)
        }
    }

    /// Asks the server to destroy global `id`.
    public func destroy(_ id: UInt32) throws(PipeWireError) {
        try unsafe check("pw_registry_destroy(\(id))") { unsafe earmuff_pw_destroy($0, id) }
    }

    /// Shows `object`, hidden before, to `client` again.
    public func show(_ object: UInt32, to client: UInt32) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(client), \(object))") { unsafe earmuff_pw_show($0, client, object) }
    }

    /// Hides `object` from `client` (until `show`).
    public func hide(_ object: UInt32, from client: UInt32) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(client), \(object))") { unsafe earmuff_pw_hide($0, client, object) }
    }

    /// Shows `objects`, hidden before, to `client` again, with what its release gave it of
    /// everything ("rwxm", or "rx" when `restricted`).
    public func show(_ objects: [UInt32], to client: UInt32, restricted: Bool) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(client), \(objects.count) objects)") { handle in
            unsafe objects.withUnsafeBufferPointer { unsafe earmuff_pw_show_all(handle, client, $0.baseAddress, Int32($0.count), restricted ? 1 : 0) }
        }
    }

    /// Hides `objects` from `client` (until `show`).
    public func hide(_ objects: [UInt32], from client: UInt32) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(client), \(objects.count) objects)") { handle in
            unsafe objects.withUnsafeBufferPointer { unsafe earmuff_pw_hide_all(handle, client, $0.baseAddress, Int32($0.count)) }
        }
    }

    /// Lets `client` only read `object`: it can neither destroy it nor call its methods.
    public func readOnly(_ object: UInt32, for client: UInt32) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(client), \(object))") { unsafe earmuff_pw_read_only($0, client, object) }
    }

    /// Ends module-access's hold on client `id` with one permission update: every object
    /// "rwxm", or "rx" when `restricted`.
    public func releaseClient(_ id: UInt32, restricted: Bool) throws(PipeWireError) {
        try unsafe check("pw_client_update_permissions(\(id))") { unsafe earmuff_pw_release_client($0, id, restricted ? 1 : 0) }
    }

    private func check(_ call: String, _ body: (OpaquePointer) -> Int32) throws(PipeWireError) {
        guard let handle = unsafe handle else { throw PipeWireError(call: call, code: -ENOTCONN) }
        let r = unsafe body(handle)
        if r < 0 { throw PipeWireError(call: call, code: r) }
    }
}

private func eventsOwner(_ context: UnsafeMutableRawPointer?) -> PipeWireEvents? {
    guard let context = unsafe context else { return nil }
    return unsafe Unmanaged<PipeWireConnection>.fromOpaque(context).takeUnretainedValue().events
}

private func propertiesDictionary(_ props: UnsafePointer<earmuff_pw_props>?) -> [String: String] {
    guard let p = unsafe props?.pointee, let keys = unsafe p.keys, let values = unsafe p.values else { return [:] }
    var d: [String: String] = [:]
    for i in unsafe 0..<p.count {
        if let k = unsafe keys[i], let v = unsafe values[i] { unsafe d[String(cString: k)] = unsafe String(cString: v) }
    }
    return d
}
