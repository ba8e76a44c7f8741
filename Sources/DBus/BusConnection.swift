// A connection to the session bus through sd-bus (libsystemd).
//
// sd-bus objects are not thread-safe: a connection and everything made from
// it (messages, slots) belong to the one thread that drives it. That thread
// waits on `fd` for `events` (and until `deadline`), then calls `process()`
// until it returns false, and asks for `events` and `deadline` again, as
// sd-event does; replies and signals reach the handlers given to `callAsync`
// and `onSignal` from inside `process()`.
import CSystemd
import Glibc
import LinuxSystem

/// A registration (pending async call or signal match); dropping it cancels it.
@safe
public final class BusSlot {
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) { unsafe self.raw = raw }
    deinit { unsafe sd_bus_slot_unref(raw) }
}

/// The Swift closure behind a slot; released by the slot's destroy callback.
private final class HandlerBox {
    let handler: (BusMessage) -> Void
    init(_ handler: @escaping (BusMessage) -> Void) { self.handler = handler }
}

private let dispatchToBox: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message = unsafe message, let userdata = unsafe userdata else { return 0 }
    unsafe Unmanaged<HandlerBox>.fromOpaque(userdata).takeUnretainedValue().handler(BusMessage(borrowing: message))
    return 0
}

private let releaseBox: sd_bus_destroy_t = { userdata in
    if let userdata = unsafe userdata { unsafe Unmanaged<HandlerBox>.fromOpaque(userdata).release() }
}

/// The Swift closure behind an exported object; released by the slot's destroy callback.
private final class ObjectBox {
    let handler: (BusMessage) -> Bool
    init(_ handler: @escaping (BusMessage) -> Bool) { self.handler = handler }
}

private let dispatchToObject: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message = unsafe message, let userdata = unsafe userdata else { return 0 }
    return unsafe Unmanaged<ObjectBox>.fromOpaque(userdata).takeUnretainedValue().handler(BusMessage(borrowing: message)) ? 1 : 0
}

private let releaseObject: sd_bus_destroy_t = { userdata in
    if let userdata = unsafe userdata { unsafe Unmanaged<ObjectBox>.fromOpaque(userdata).release() }
}

/// One bus connection, used by one thread.
@safe
public final class BusConnection {
    private let bus: OpaquePointer

    /// Connects to the user's session bus: `$DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`. Fails at once when there is none.
    public static func session() throws(BusError) -> BusConnection {
        var bus: OpaquePointer?
        let rc = unsafe sd_bus_open_user(&bus)
        guard rc >= 0, let bus = unsafe bus else { throw BusError("connect to the session bus", errno: rc) }
        return unsafe BusConnection(bus)
    }

    /// Connects to the system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket`. Fails at once when there is none.
    public static func system() throws(BusError) -> BusConnection {
        var bus: OpaquePointer?
        let rc = unsafe sd_bus_open_system(&bus)
        guard rc >= 0, let bus = unsafe bus else { throw BusError("connect to the system bus", errno: rc) }
        return unsafe BusConnection(bus)
    }

    private init(_ bus: OpaquePointer) { unsafe self.bus = bus }

    deinit { unsafe sd_bus_flush_close_unref(bus) }

    /// This connection's unique name, e.g. `:1.42`.
    public var uniqueName: String? {
        var p: UnsafePointer<CChar>?
        guard unsafe sd_bus_get_unique_name(bus, &p) >= 0, let p = unsafe p else { return nil }
        return unsafe String(cString: p)
    }

    /// The socket to poll.
    public var fd: Int32 { unsafe sd_bus_get_fd(bus) }

    /// The poll events to wait for now.
    public var events: Int16 { unsafe Int16(truncatingIfNeeded: max(0, sd_bus_get_events(bus))) }

    /// When (CLOCK_MONOTONIC seconds) sd-bus next needs `process()` even without input (a call
    /// timing out, messages already read and queued: then a time in the past), or nil for never.
    /// Ask again after every `process()` and every call: it changes with them.
    public var deadline: Double? {
        var usec: UInt64 = 0
        guard unsafe sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max else { return nil }
        return Double(usec) / 1e6
    }

    /// `deadline` as a `poll` timeout in milliseconds (-1: none), for a thread that waits on
    /// the bus alone with `poll`.
    public var pollTimeout: Int32 {
        guard let deadline else { return -1 }
        var t = timespec()
        unsafe clock_gettime(CLOCK_MONOTONIC, &t)
        let left = deadline - (Double(t.tv_sec) + Double(t.tv_nsec) / 1e9)
        return Int32((max(0, min(3600, left)) * 1000).rounded(.up))
    }

    /// Handles one pending item (incoming message, timeout); returns whether there was one.
    /// Throws when the connection is lost.
    public func process() throws(BusError) -> Bool {
        let rc = unsafe sd_bus_process(bus, nil)
        if rc < 0 { throw BusError("process the bus", errno: rc) }
        return rc > 0
    }

    /// A method call to fill with arguments.
    public func methodCall(
        destination: String, path: String, interface: String,
        member: String
    ) throws(BusError) -> BusMessage {
        var m: OpaquePointer?
        let rc = unsafe sd_bus_message_new_method_call(bus, &m, destination, path, interface, member)
        guard rc >= 0, let m = unsafe m else { throw BusError("new call \(interface).\(member)", errno: rc) }
        return unsafe BusMessage(owning: m)
    }

    /// Sends `call` and waits for its reply (other traffic is queued meanwhile).
    /// Throws the error reply, or a timeout after `timeout` seconds.
    public func call(_ call: BusMessage, timeout: Double) throws(BusError) -> BusMessage {
        var err = unsafe sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { unsafe sd_bus_error_free(&err) }
        var reply: OpaquePointer?
        let rc = unsafe sd_bus_call(bus, call.raw, UInt64(timeout * 1_000_000), &err, &reply)
        if rc < 0 {
            if let name = unsafe err.name {
                throw unsafe BusError(name: String(cString: name), message: err.message.map { unsafe String(cString: $0) } ?? "")
            }
            throw BusError("call", errno: rc)
        }
        guard let reply = unsafe reply else { throw BusError("call", errno: -EIO) }
        return unsafe BusMessage(owning: reply)
    }

    /// Sends `call`; `reply` runs from `process()` with the reply or an error reply
    /// (sd-bus makes one on timeout). Keep the slot until then: dropping it cancels.
    public func callAsync(
        _ call: BusMessage, timeout: Double,
        reply: @escaping (BusMessage) -> Void
    ) throws(BusError) -> BusSlot {
        let box = unsafe Unmanaged.passRetained(HandlerBox(reply))
        var slot: OpaquePointer?
        let rc = unsafe sd_bus_call_async(bus, &slot, call.raw, dispatchToBox, box.toOpaque(), UInt64(timeout * 1_000_000))
        return try unsafe adopt(slot, rc, box, "call")
    }

    /// Sends `call` without waiting for (or wanting) a reply; or a reply or signal.
    public func send(_ call: BusMessage) throws(BusError) {
        if unsafe sd_bus_message_is_method_call(call.raw, nil, nil) > 0 { _ = unsafe sd_bus_message_set_expect_reply(call.raw, 0) }
        let rc = unsafe sd_bus_send(bus, call.raw, nil)
        if rc < 0 { throw BusError("send", errno: rc) }
    }

    /// Runs `handler` for every matching signal until the slot is dropped. Nil matches any.
    public func onSignal(
        sender: String? = nil, path: String? = nil, interface: String, member: String? = nil,
        handler: @escaping (BusMessage) -> Void
    ) throws(BusError) -> BusSlot {
        let box = unsafe Unmanaged.passRetained(HandlerBox(handler))
        var slot: OpaquePointer?
        let rc = unsafe sd_bus_match_signal(bus, &slot, sender, path, interface, member, dispatchToBox, box.toOpaque())
        return try unsafe adopt(slot, rc, box, "match \(interface)")
    }

    private func adopt(
        _ slot: OpaquePointer?, _ rc: Int32, _ box: Unmanaged<HandlerBox>,
        _ what: String
    ) throws(BusError) -> BusSlot {
        guard rc >= 0, let slot = unsafe slot else {
            unsafe box.release()
            throw BusError(what, errno: rc < 0 ? rc : -EIO)
        }
        unsafe sd_bus_slot_set_destroy_callback(slot, releaseBox)
        return unsafe BusSlot(slot)
    }

    /// Serves the object at `path`: `handler` gets every method call to it (any interface,
    /// `org.freedesktop.DBus.Properties` and `Introspectable` included) and returns whether it
    /// replied; sd-bus answers the calls it did not with an error. Until the slot is dropped.
    public func serve(path: String, handler: @escaping (BusMessage) -> Bool) throws(BusError) -> BusSlot {
        let box = unsafe Unmanaged.passRetained(ObjectBox(handler))
        var slot: OpaquePointer?
        let rc = unsafe sd_bus_add_object(bus, &slot, path, dispatchToObject, box.toOpaque())
        guard rc >= 0, let slot = unsafe slot else {
            unsafe box.release()
            throw BusError("serve \(path)", errno: rc < 0 ? rc : -EIO)
        }
        unsafe sd_bus_slot_set_destroy_callback(slot, releaseObject)
        return unsafe BusSlot(slot)
    }

    /// Takes the well-known `name` (queueing nothing: fails when another owner has it).
    public func requestName(_ name: String) throws(BusError) {
        let rc = unsafe sd_bus_request_name(bus, name, 0)
        if rc < 0 { throw BusError("take \(name)", errno: rc) }
    }

    /// A signal to fill with arguments and `send`.
    public func signal(path: String, interface: String, member: String) throws(BusError) -> BusMessage {
        var m: OpaquePointer?
        let rc = unsafe sd_bus_message_new_signal(bus, &m, path, interface, member)
        guard rc >= 0, let m = unsafe m else { throw BusError("new signal \(interface).\(member)", errno: rc) }
        return unsafe BusMessage(owning: m)
    }

    /// Sends an error reply to `call`.
    public func replyError(to call: BusMessage, name: String, message: String) throws(BusError) {
        var err = unsafe sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { unsafe sd_bus_error_free(&err) }
        _ = unsafe sd_bus_error_set(&err, name, message)
        let rc = unsafe sd_bus_reply_method_error(call.raw, &err)
        if rc < 0 { throw BusError("reply \(name)", errno: rc) }
    }

    /// The unique name that owns `name` now, or nil when nobody does.
    public func owner(of name: String) -> String? {
        guard let m = try? busCall("GetNameOwner"), (try? m.append(name)) != nil,
            let r = try? call(m, timeout: 5)
        else { return nil }
        return try? r.readString()
    }

    /// Asks the bus to start the service that owns `name` (a no-op when it runs), then
    /// returns its owner; nil when it cannot be started within `timeout` seconds.
    public func startedOwner(of name: String, timeout: Double = 10) -> String? {
        if let o = owner(of: name) { return o }
        guard let m = try? busCall("StartServiceByName"), (try? m.append(name)) != nil, (try? m.append(UInt32(0))) != nil,
            (try? call(m, timeout: timeout)) != nil
        else { return nil }
        return owner(of: name)
    }

    /// The pid of the process behind the connection `uniqueName`, as the bus daemon saw it.
    public func processID(of uniqueName: String) -> Int32? {
        guard let m = try? busCall("GetConnectionUnixProcessID"), (try? m.append(uniqueName)) != nil,
            let r = try? call(m, timeout: 5), let pid = try? r.readUInt32()
        else { return nil }
        return Int32(bitPattern: pid)
    }

    private func busCall(_ member: String) throws(BusError) -> BusMessage {
        try methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: member)
    }

    /// Why the peer `name` (a unique or well-known name) is not a process beside this one: the
    /// bus does not say which process it is, the process cannot be inspected, or it lives in a
    /// mount namespace of its own (a sandbox). Nil when it runs beside this process.
    public func sandboxed(_ name: String) -> String? {
        guard let pid = processID(of: name) else { return "the bus does not say which process \(name) is" }
        guard let theirs = readSymbolicLink("/proc/\(pid)/ns/mnt"), let ours = readSymbolicLink("/proc/self/ns/mnt") else {
            return "process \(pid) cannot be inspected"
        }
        return theirs == ours ? nil : "process \(pid) runs in a sandbox (a mount namespace of its own)"
    }

    /// Whether `name` has an owner now or can be started by the bus.
    public func isProvided(_ name: String) -> Bool {
        guard
            let m = try? methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "NameHasOwner")
        else { return false }
        if (try? m.append(name)) != nil, let r = try? call(m, timeout: 5), (try? r.readBool()) == true { return true }
        guard
            let list = try? methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "ListActivatableNames"),
            let r = try? call(list, timeout: 5), let names = try? r.readStrings()
        else { return false }
        return names.contains(name)
    }
}
