// The desktop's microphone switches for Flatpak apps.
//
// Flatseal's Microphone switch and GNOME Settings' Microphone page read and
// write the xdg permission store (`org.freedesktop.impl.portal.PermissionStore`
// on the session bus, table `devices`, id `microphone`, app id → ["yes"] or
// ["no"]), as xdg-desktop-portal's Device portal does. This mirrors Earmuff's
// lasting decisions of `flatpak:` apps there and follows the store's `Changed`
// signal, so a switch flipped on the desktop becomes Earmuff's decision
// (reason `desktop`) and reaches live streams on their next frame:
//   granted → yes, denied → no, undetermined (reset, auto-reset) → the entry
//   is deleted; temporary decisions (once, session, timed) are not mirrored.
// At start the two are merged: an app Earmuff has decided is written to the
// store; an app only the store knows is decided as the store says.
//
// Echoes: the store announces every write, Earmuff's own included. Only
// entries that differ from the table last seen count as changes, and a change
// to a value Earmuff itself wrote to that entry and has not seen yet is its
// echo and is dropped (with the writes before it, which it has replaced). So
// Earmuff never re-decides from its own writes, even when several are in flight.
//
// Who may say so: any bus client can emit `Changed`, so a signal counts only
// when it comes from the connection that owns the store's name, that
// connection is the program the system installs for it (DesktopServices), and
// then only as a cue: the table is read back with `Lookup` and that decides.
//
// An event loop of its own ("desktop-perms") owns the bus connection (sd-bus
// is single-threaded), watched through LoopBus; others post requests to it. Without a session bus nothing is
// done, and nothing is said above debug level.
import Consent
import DBus
import Glibc
import Runtime

final class DesktopPermissions: @unchecked Sendable {
    // @unchecked Sendable: `loop` is thread-safe; everything else belongs to the loop, whose
    // entry points (`setUp`, `write`, `changed`) check so. Other threads only post to the loop.
    static let service = "org.freedesktop.impl.portal.PermissionStore"
    static let path = "/org/freedesktop/impl/portal/PermissionStore"
    static let table = "devices"
    static let id = "microphone"

    struct Handlers: Sendable {
        /// The desktop set a Flatpak app's microphone switch (granted or denied; undetermined: its entry was deleted).
        var changed: @Sendable (_ appID: String, PermissionState) -> Void
        /// The lasting decisions of Flatpak apps now, by app id.
        var current: @Sendable () -> [String: PermissionState]
    }

    private let handlers: Handlers
    private let loop: EventLoop

    // The loop's own.
    private var driver: LoopBus?
    private var bus: BusConnection? { driver?.bus }
    private var slot: BusSlot?
    /// The table as the store last announced it: app id → its first value.
    private var seen: [String: String] = [:]
    /// Values Earmuff wrote per app id and has not seen announced yet, oldest first ("" for a deletion).
    private var unechoed: [String: [String]] = [:]

    init(handlers: Handlers) throws(SystemError) {
        self.handlers = handlers
        loop = try EventLoop(name: "desktop-perms")
    }

    func start() {
        loop.start()
        loop.post { [self] in setUp() }
    }

    func stopAndJoin() {
        loop.post { [self] in
            slot = nil
            driver = nil
        }
        loop.stopAndJoin()
    }

    /// Mirrors a lasting decision of Flatpak app `appID` (from any thread).
    func mirror(appID: String, _ state: PermissionState) {
        loop.post { [self] in
            write(appID, state)
            driver?.drive()
        }
    }

    /// The store's value for a state; nil: no entry.
    static func value(_ state: PermissionState) -> String? {
        switch state {
        case .granted: "yes"
        case .denied: "no"
        case .undetermined: nil
        }
    }

    /// The state a store value means; nil for values that say neither (e.g. "ask").
    static func state(_ value: String?) -> PermissionState? {
        switch value {
        case "yes": .granted
        case "no": .denied
        case nil: .undetermined
        default: nil
        }
    }

    // MARK: the loop

    /// Connects, checks who the store is, merges the two, and follows the store from then on.
    private func setUp() {
        loop.assertInLoop()
        let b: BusConnection
        do {
            b = try BusConnection.session()
        } catch {
            Log.debug("desktop permission store: no session bus (\(error)); not mirrored")
            return
        }
        if let owner = b.startedOwner(of: Self.service), let why = DesktopServices.impostor(Self.service, owner: owner, bus: b) {
            Log.warn("desktop permission store: not trusted (\(why)); the desktop's switches are not followed")
            return
        }
        do {
            slot = try b.onSignal(path: Self.path, interface: Self.service, member: "Changed") { [unowned self] m in
                changed(m)
            }
            driver = try LoopBus(b, loop: loop) { [unowned self] error in
                Log.warn("desktop permission store: lost the session bus (\(error)); decisions are no longer mirrored")
                slot = nil
                driver = nil
            }
        } catch {
            Log.debug("desktop permission store: cannot follow the store (\(error)); not mirrored")
            slot = nil
            return
        }
        reconcile()
        driver?.drive()
    }

    /// Reads the table and merges it with Earmuff's decisions (see the file comment).
    private func reconcile() {
        guard let b = bus else { return }
        do {
            seen = try lookUp(b)
        } catch {
            // No store on this bus.
            Log.debug("desktop permission store: \(Self.table)/\(Self.id) not read (\(error))")
        }
        let mine = handlers.current()
        for (app, value) in seen.sorted(by: { $0.key < $1.key }) where mine[app] == nil || mine[app] == .undetermined {
            if let state = Self.state(value), state != .undetermined {
                Log.info("desktop permission store: flatpak:\(app) is \(value) there and undecided here; now \(state.rawValue)")
                handlers.changed(app, state)
            }
        }
        for (app, state) in mine.sorted(by: { $0.key < $1.key }) { write(app, state) }
    }

    /// Writes `state` for `app` unless the store already says so.
    private func write(_ app: String, _ state: PermissionState) {
        loop.assertInLoop()
        guard let b = bus, !app.isEmpty else { return }
        let value = Self.value(state)
        // What the store will hold once the writes in flight are done.
        let expected = unechoed[app]?.last.map { $0.isEmpty ? nil : $0 } ?? seen[app]
        guard expected != value else { return }
        do {
            let call: BusMessage
            if let value {
                call = try b.methodCall(
                    destination: Self.service, path: Self.path, interface: Self.service,
                    member: "SetPermission")
                try call.append(Self.table)
                try call.append(true)
                try call.append(Self.id)
                try call.append(app)
                try call.append(strings: [value])
            } else {
                call = try b.methodCall(
                    destination: Self.service, path: Self.path, interface: Self.service,
                    member: "DeletePermission")
                try call.append(Self.table)
                try call.append(Self.id)
                try call.append(app)
            }
            _ = try b.call(call, timeout: 10)
            unechoed[app, default: []].append(value ?? "")
            Log.info("desktop permission store: \(Self.table)/\(Self.id) \(app) = \(value ?? "(deleted)")")
        } catch {
            Log.debug("desktop permission store: cannot write \(app) (\(error))")
        }
    }

    /// The table as the store holds it now: app id → first value (empty: no entry).
    private func lookUp(_ b: BusConnection) throws(BusError) -> [String: String] {
        let call = try b.methodCall(destination: Self.service, path: Self.path, interface: Self.service, member: "Lookup")
        try call.append(Self.table)
        try call.append(Self.id)
        do {
            return try Self.readPermissions(try b.call(call, timeout: 10))
        } catch  where error.name == "org.freedesktop.portal.Error.NotFound" {
            return [:] // "No entry for microphone": nobody has set a switch yet, or all were deleted
        }
    }

    /// The store's `Changed(table, id, deleted, data, permissions)`: a cue to read the table
    /// again, taken only from the store itself (see the file comment).
    private func changed(_ m: BusMessage) {
        loop.assertInLoop()
        do {
            guard try m.readString() == Self.table, try m.readString() == Self.id, let b = bus else { return }
            guard let sender = m.sender, b.owner(of: Self.service) == sender else {
                Log.warn("desktop permission store: ignored a Changed signal from \(m.sender ?? "?"), which is not the store")
                return
            }
            let now = try lookUp(b)
            let before = seen
            seen = now
            for app in Set(before.keys).union(now.keys).sorted() where before[app] != now[app] {
                let value = now[app]
                // The table read back holds the newest of our writes that has landed, and
                // those before it are gone past: all of them are echoes.
                if var mine = unechoed[app], let landed = mine.firstIndex(of: value ?? "") {
                    mine.removeFirst(landed + 1)
                    unechoed[app] = mine.isEmpty ? nil : mine
                    continue // our own write, announced
                }
                guard let state = Self.state(value) else { continue }
                Log.info("desktop permission store: flatpak:\(app) switched to \(value ?? "(deleted)") on the desktop; now \(state.rawValue)")
                handlers.changed(app, state)
            }
        } catch {
            Log.warn("desktop permission store: unreadable Changed signal (\(error))")
        }
    }

    /// Reads Lookup's `a{sas}v` into app id → first value.
    private static func readPermissions(_ m: BusMessage) throws(BusError) -> [String: String] {
        var out: [String: String] = [:]
        try m.enter("a", "{sas}")
        while try m.peek() != nil {
            try m.enter("e", "sas")
            let app = try m.readString()
            let values = try m.readStrings()
            try m.exit()
            if let first = values.first { out[app] = first }
        }
        try m.exit()
        try m.skip("v")
        return out
    }
}
