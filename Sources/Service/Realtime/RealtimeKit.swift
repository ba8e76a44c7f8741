// RealtimeKit (org.freedesktop.RealtimeKit1 on the system bus): the broker the relay's
// audio threads ask for real-time scheduling first.
import DBus
import Glibc
import Relay

/// RealtimeKit on the system bus.
struct RealtimeKit: RealtimeBroker {
    static let service = "org.freedesktop.RealtimeKit1"
    static let path = "/org/freedesktop/RealtimeKit1"
    let name = "RealtimeKit"
    let bus: BusConnection
    let maxRealtimePriority: Int32
    let minNiceLevel: Int32
    let rtTimeMax: Int64

    init(bus: BusConnection) throws(BusError) {
        self.bus = bus
        maxRealtimePriority = try Self.property(bus, "MaxRealtimePriority", "i") { m throws(BusError) in try m.readInt32() }
        minNiceLevel = try Self.property(bus, "MinNiceLevel", "i") { m throws(BusError) in try m.readInt32() }
        rtTimeMax = try Self.property(bus, "RTTimeUSecMax", "x") { m throws(BusError) in try m.readInt64() }
    }

    /// Connects to it on the system bus; nil, and why not, when it cannot be asked.
    static func onSystemBus(_ bus: () throws(BusError) -> BusConnection = BusConnection.system) -> (RealtimeKit?, String?) {
        do {
            return (try RealtimeKit(bus: bus()), nil)
        } catch {
            return (nil, "RealtimeKit: \(error)")
        }
    }

    func makeRealtime(_ tid: pid_t, _ priority: Int32) throws(BusError) {
        let m = try bus.methodCall(
            destination: Self.service, path: Self.path,
            interface: Self.service, member: "MakeThreadRealtimeWithPID")
        try m.append(UInt64(getpid()))
        try m.append(UInt64(tid))
        try m.append(UInt32(priority))
        _ = try bus.call(m, timeout: 5)
    }

    func makeHighPriority(_ tid: pid_t, _ nice: Int32) throws(BusError) {
        let m = try bus.methodCall(
            destination: Self.service, path: Self.path,
            interface: Self.service, member: "MakeThreadHighPriorityWithPID")
        try m.append(UInt64(getpid()))
        try m.append(UInt64(tid))
        try m.append(nice)
        _ = try bus.call(m, timeout: 5)
    }

    private static func property<T>(
        _ bus: BusConnection, _ name: String, _ type: String,
        _ read: (BusMessage) throws(BusError) -> T
    ) throws(BusError) -> T {
        let m = try bus.methodCall(
            destination: Self.service, path: Self.path,
            interface: "org.freedesktop.DBus.Properties", member: "Get")
        try m.append(Self.service)
        try m.append(name)
        let reply = try bus.call(m, timeout: 5)
        try reply.enter("v", type)
        return try read(reply)
    }
}
