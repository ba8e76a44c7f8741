// The indicator on the session bus: a StatusNotifierItem (`org.kde.StatusNotifierItem`,
// the tray protocol of KDE Plasma, XFCE, Budgie, LXQt and GNOME's AppIndicator extension)
// at /StatusNotifierItem, and its menu as `com.canonical.dbusmenu` at /MenuBar, which the
// tray draws itself. It exports what an `IndicatorView` says and nothing else, announces
// each change with the protocols' signals, and registers with the tray's watcher again
// whenever a watcher (re)appears: a panel restarted, or started after the indicator.
import DBus
import Foundation
import Glibc
import SettingsModel

final class StatusItem {
    static let watcher = "org.kde.StatusNotifierWatcher"
    static let itemInterface = "org.kde.StatusNotifierItem"
    static let menuInterface = "com.canonical.dbusmenu"
    static let itemPath = "/StatusNotifierItem"
    static let menuPath = "/MenuBar"

    let bus: BusConnection
    /// The well-known name the item is registered under.
    let name = "org.kde.StatusNotifierItem-\(getpid())-1"
    /// Carries out a clicked item's action.
    let perform: (IndicatorAction) -> Void
    private(set) var view: IndicatorView
    private var ids = IndicatorItemIDs()
    /// The current menu's items by id.
    private var items: [Int32: IndicatorItem] = [:]
    private var revision: UInt32 = 1
    private var slots: [BusSlot] = []
    private var registration: BusSlot?
    /// Each level's icon, drawn the first time a tray asks for it.
    private var icons: [IndicatorLevel: [IndicatorPixmap]] = [:]

    init(bus: BusConnection, view: IndicatorView, perform: @escaping (IndicatorAction) -> Void) throws(BusError) {
        self.bus = bus
        self.view = view
        self.perform = perform
        index(view.menu)
        slots.append(try bus.serve(path: Self.itemPath) { [unowned self] in self.answerItem($0) })
        slots.append(try bus.serve(path: Self.menuPath) { [unowned self] in self.answerMenu($0) })
        slots.append(
            try bus.onSignal(
                sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "NameOwnerChanged"
            ) { [unowned self] m in
                guard let watched = try? m.readString(), watched == Self.watcher, (try? m.readString()) != nil,
                    let owner = try? m.readString(), !owner.isEmpty
                else { return }
                self.register()
            })
        try bus.requestName(name)
        register()
    }

    /// Tells the watcher the item is here (again); a tray that is not there yet finds the
    /// item through `NameOwnerChanged` when it comes.
    func register() {
        guard
            let call = try? bus.methodCall(
                destination: Self.watcher, path: "/StatusNotifierWatcher",
                interface: Self.watcher, member: "RegisterStatusNotifierItem"),
            (try? call.append(name)) != nil
        else { return }
        registration = try? bus.callAsync(call, timeout: 10) { reply in
            if let e = reply.error, !e.meansNotProvided { log("the tray refused the indicator: \(e)") }
        }
    }

    /// Shows `new`, announcing what changed.
    func show(_ new: IndicatorView) {
        let old = view
        guard new != old else { return }
        view = new
        if new.level != old.level { emit(Self.itemInterface, "NewIcon") }
        if new.tooltipTitle != old.tooltipTitle || new.tooltipBody != old.tooltipBody { emit(Self.itemInterface, "NewToolTip") }
        if new.status != old.status { emit(Self.itemInterface, "NewStatus") { m throws(BusError) in try m.append(new.status) } }
        if new.menu != old.menu {
            index(new.menu)
            revision += 1
            emit(Self.menuInterface, "LayoutUpdated", path: Self.menuPath) { [revision] m throws(BusError) in
                try m.append(revision)
                try m.append(Int32(0))
            }
        }
    }

    private func index(_ menu: [IndicatorItem]) {
        items = [:]
        func walk(_ list: [IndicatorItem]) {
            for item in list {
                items[ids.id(item.key)] = item
                walk(item.children)
            }
        }
        walk(menu)
    }

    private func emit(
        _ interface: String, _ member: String, path: String = itemPath,
        _ arguments: (BusMessage) throws(BusError) -> Void = { _ in }
    ) {
        do throws(BusError) {
            let m = try bus.signal(path: path, interface: interface, member: member)
            try arguments(m)
            try bus.send(m)
        } catch {
            log("cannot send \(member): \(error)")
        }
    }

    // MARK: /StatusNotifierItem

    private func answerItem(_ call: BusMessage) -> Bool {
        reply(call) { r throws(BusError) in
            if let answered = try answerProperties(call, r, Self.itemInterface, Self.itemProperties, itemProperty) {
                return answered
            } else if call.isCall("org.freedesktop.DBus.Introspectable", "Introspect") {
                try r.append(Self.itemIntrospection)
            } else if call.isCall(Self.itemInterface, "Activate") {
                // A tray that activates rather than opening the menu (ItemIsMenu says it need not).
                if items.values.contains(where: { $0.action == .openSettings }) { perform(.openSettings) }
            } else if call.isCall(Self.itemInterface, "SecondaryActivate") || call.isCall(Self.itemInterface, "ContextMenu")
                || call.isCall(Self.itemInterface, "Scroll")
            {
                // The menu is the tray's to show; nothing else to do.
            } else {
                return false
            }
            return true
        }
    }

    static let itemProperties = [
        "Category", "Id", "Title", "Status", "WindowId", "IconName", "IconPixmap",
        "OverlayIconName", "AttentionIconName", "AttentionIconPixmap", "ToolTip", "ItemIsMenu", "Menu",
    ]

    typealias Property = (signature: String, value: (BusMessage) throws(BusError) -> Void)

    private func itemProperty(_ name: String) -> Property? {
        let view = self.view
        switch name {
        case "Category": return ("s", { m throws(BusError) in try m.append("Hardware") })
        case "Id": return ("s", { m throws(BusError) in try m.append("earmuff") })
        case "Title": return ("s", { m throws(BusError) in try m.append("Earmuff") })
        case "Status": return ("s", { m throws(BusError) in try m.append(view.status) })
        case "WindowId": return ("i", { m throws(BusError) in try m.append(Int32(0)) })
        case "IconName", "OverlayIconName", "AttentionIconName": return ("s", { m throws(BusError) in try m.append("") })
        case "IconPixmap":
            let icon = icons[view.level] ?? IndicatorIcon.pixmaps(view.level)
            icons[view.level] = icon
            return ("a(iiay)", { m throws(BusError) in try Self.append(icon, to: m) })
        case "AttentionIconPixmap": return ("a(iiay)", { m throws(BusError) in try Self.append([], to: m) })
        case "ToolTip":
            return (
                "(sa(iiay)ss)",
                { m throws(BusError) in
                    try m.open("r", "sa(iiay)ss")
                    try m.append("")
                    try Self.append([], to: m)
                    try m.append(view.tooltipTitle)
                    try m.append(view.tooltipBody.map(Self.escapeMarkup).joined(separator: "\n"))
                    try m.close()
                }
            )
        case "ItemIsMenu": return ("b", { m throws(BusError) in try m.append(true) })
        case "Menu": return ("o", { m throws(BusError) in try m.append(objectPath: Self.menuPath) })
        default: return nil
        }
    }

    private static func append(_ pixmaps: [IndicatorPixmap], to m: BusMessage) throws(BusError) {
        try m.open("a", "(iiay)")
        for p in pixmaps {
            try m.open("r", "iiay")
            try m.append(p.width)
            try m.append(p.height)
            try m.append(bytes: p.argb)
            try m.close()
        }
        try m.close()
    }

    /// The tooltip's body may be drawn as markup: an app's name is text.
    static func escapeMarkup(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    // MARK: /MenuBar

    private func answerMenu(_ call: BusMessage) -> Bool {
        reply(call) { r throws(BusError) in
            if call.isCall(Self.menuInterface, "GetLayout") {
                let parent = try call.readInt32()
                let depth = try call.readInt32()
                let names = try call.readStrings()
                try r.append(revision)
                try appendNode(parent, depth: depth, names: names, to: r)
            } else if call.isCall(Self.menuInterface, "GetGroupProperties") {
                let wanted = try call.readInt32s()
                let names = try call.readStrings()
                try r.open("a", "(ia{sv})")
                for id in wanted where id == 0 || items[id] != nil {
                    try r.open("r", "ia{sv}")
                    try r.append(id)
                    try appendProperties(id, names: names, to: r)
                    try r.close()
                }
                try r.close()
            } else if call.isCall(Self.menuInterface, "GetProperty") {
                let id = try call.readInt32()
                let name = try call.readString()
                guard let value = properties(id).first(where: { $0.0 == name })?.1 else { return false }
                try r.open("v", value.signature)
                try value.value(r)
                try r.close()
            } else if call.isCall(Self.menuInterface, "Event") {
                let id = try call.readInt32()
                if try call.readString() == "clicked" { clicked(id, by: call.sender) }
            } else if call.isCall(Self.menuInterface, "EventGroup") {
                try call.enter("a", "(isvu)")
                while try call.peek() != nil {
                    try call.enter("r", "isvu")
                    let id = try call.readInt32()
                    if try call.readString() == "clicked" { clicked(id, by: call.sender) }
                    try call.skip("vu")
                    try call.exit()
                }
                try call.exit()
                try r.open("a", "i")
                try r.close()
            } else if call.isCall(Self.menuInterface, "AboutToShow") {
                try r.append(false)
            } else if call.isCall(Self.menuInterface, "AboutToShowGroup") {
                try r.open("a", "i")
                try r.close()
                try r.open("a", "i")
                try r.close()
            } else if let answered = try answerProperties(
                call, r, Self.menuInterface,
                ["Version", "TextDirection", "Status", "IconThemePath"], menuProperty)
            {
                return answered
            } else if call.isCall("org.freedesktop.DBus.Introspectable", "Introspect") {
                try r.append(Self.menuIntrospection)
            } else {
                return false
            }
            return true
        }
    }

    /// Fills `r` for a `Properties.Get` or `GetAll` of `interface` (whose properties are
    /// `names`, written by `property`); whether it answered, or nil for another call.
    private func answerProperties(
        _ call: BusMessage, _ r: BusMessage, _ interface: String, _ names: [String],
        _ property: (String) -> Property?
    ) throws(BusError) -> Bool? {
        if call.isCall("org.freedesktop.DBus.Properties", "Get") {
            let (asked, name) = (try call.readString(), try call.readString())
            guard asked == interface, let write = property(name) else { return false }
            try r.open("v", write.signature)
            try write.value(r)
            try r.close()
            return true
        }
        guard call.isCall("org.freedesktop.DBus.Properties", "GetAll") else { return nil }
        guard try call.readString() == interface else { return false }
        try r.open("a", "{sv}")
        for name in names {
            if let write = property(name) { try r.appendEntry(name, write.signature) { () throws(BusError) in try write.value(r) } }
        }
        try r.close()
        return true
    }

    private func menuProperty(_ name: String) -> Property? {
        switch name {
        case "Version": ("u", { m throws(BusError) in try m.append(UInt32(3)) })
        case "TextDirection": ("s", { m throws(BusError) in try m.append("ltr") })
        case "Status": ("s", { m throws(BusError) in try m.append("normal") })
        case "IconThemePath": ("as", { m throws(BusError) in try m.append(strings: []) })
        default: nil
        }
    }

    /// A click on item `id`, from the bus peer `sender`. The tray that draws the menu runs
    /// beside the indicator; a click from a sandboxed app (one run with the session bus, which
    /// could otherwise allow its own prompt here) is ignored and logged.
    private func clicked(_ id: Int32, by sender: String?) {
        // An id from a menu shown before a change names no item now, or the same item.
        guard let item = items[id], let action = item.action, item.enabled else { return }
        let refused: String? = if let sender { bus.sandboxed(sender) } else { "it has no sender" }
        if let why = refused {
            log("ignored a click on “\(item.label)” from \(sender ?? "nobody"): \(why)")
            return
        }
        perform(action)
    }

    /// The dbusmenu properties of item `id` (0: the root).
    private func properties(_ id: Int32) -> [(String, Property)] {
        if id == 0 { return [("children-display", ("s", { m throws(BusError) in try m.append("submenu") }))] }
        guard let item = items[id] else { return [] }
        if item.separator { return [("type", ("s", { m throws(BusError) in try m.append("separator") }))] }
        var out: [(String, Property)] = [("label", ("s", { m throws(BusError) in try m.append(Self.escapeMnemonic(item.label)) }))]
        if !item.enabled { out.append(("enabled", ("b", { m throws(BusError) in try m.append(false) }))) }
        if !item.children.isEmpty { out.append(("children-display", ("s", { m throws(BusError) in try m.append("submenu") }))) }
        return out
    }

    /// In a dbusmenu label an underscore marks the access key: an app's name is text.
    static func escapeMnemonic(_ s: String) -> String { s.replacingOccurrences(of: "_", with: "__") }

    private func appendProperties(_ id: Int32, names: [String], to m: BusMessage) throws(BusError) {
        try m.open("a", "{sv}")
        for (name, value) in properties(id) where names.isEmpty || names.contains(name) {
            try m.appendEntry(name, value.signature) { () throws(BusError) in try value.value(m) }
        }
        try m.close()
    }

    /// The layout node of item `id` with its children, `depth` levels down (-1: all).
    private func appendNode(_ id: Int32, depth: Int32, names: [String], to m: BusMessage) throws(BusError) {
        try m.open("r", "ia{sv}av")
        try m.append(id)
        try appendProperties(id, names: names, to: m)
        try m.open("a", "v")
        let children = id == 0 ? view.menu : (items[id]?.children ?? [])
        if depth != 0 {
            for child in children {
                try m.open("v", "(ia{sv}av)")
                try appendNode(ids.id(child.key), depth: depth - 1, names: names, to: m)
                try m.close()
            }
        }
        try m.close()
        try m.close()
    }

    // MARK: replies

    /// Runs `body` with a method return for `call` and sends it when `body` says it
    /// answered; a call it cannot read gets an error reply. Returns whether it was answered.
    private func reply(_ call: BusMessage, _ body: (BusMessage) throws(BusError) -> Bool) -> Bool {
        do throws(BusError) {
            let r = try call.methodReturn()
            guard try body(r) else { return false }
            try bus.send(r)
        } catch {
            try? bus.replyError(to: call, name: "org.freedesktop.DBus.Error.InvalidArgs", message: error.message)
        }
        return true
    }

    static let itemIntrospection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.kde.StatusNotifierItem">
            <method name="ContextMenu"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="Activate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="SecondaryActivate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="Scroll"><arg name="delta" type="i" direction="in"/><arg name="orientation" type="s" direction="in"/></method>
            <signal name="NewIcon"/><signal name="NewToolTip"/><signal name="NewTitle"/>
            <signal name="NewStatus"><arg name="status" type="s"/></signal>
            <property name="Category" type="s" access="read"/><property name="Id" type="s" access="read"/>
            <property name="Title" type="s" access="read"/><property name="Status" type="s" access="read"/>
            <property name="WindowId" type="i" access="read"/><property name="IconName" type="s" access="read"/>
            <property name="IconPixmap" type="a(iiay)" access="read"/><property name="OverlayIconName" type="s" access="read"/>
            <property name="AttentionIconName" type="s" access="read"/>
            <property name="AttentionIconPixmap" type="a(iiay)" access="read"/>
            <property name="ToolTip" type="(sa(iiay)ss)" access="read"/>
            <property name="ItemIsMenu" type="b" access="read"/><property name="Menu" type="o" access="read"/>
          </interface>
        </node>
        """

    static let menuIntrospection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="com.canonical.dbusmenu">
            <method name="GetLayout"><arg type="i" direction="in"/><arg type="i" direction="in"/><arg type="as" direction="in"/>
              <arg type="u" direction="out"/><arg type="(ia{sv}av)" direction="out"/></method>
            <method name="GetGroupProperties"><arg type="ai" direction="in"/><arg type="as" direction="in"/>
              <arg type="a(ia{sv})" direction="out"/></method>
            <method name="GetProperty"><arg type="i" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
            <method name="Event"><arg type="i" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/>
              <arg type="u" direction="in"/></method>
            <method name="EventGroup"><arg type="a(isvu)" direction="in"/><arg type="ai" direction="out"/></method>
            <method name="AboutToShow"><arg type="i" direction="in"/><arg type="b" direction="out"/></method>
            <method name="AboutToShowGroup"><arg type="ai" direction="in"/><arg type="ai" direction="out"/>
              <arg type="ai" direction="out"/></method>
            <signal name="ItemsPropertiesUpdated"><arg type="a(ia{sv})"/><arg type="a(ias)"/></signal>
            <signal name="LayoutUpdated"><arg type="u"/><arg type="i"/></signal>
            <signal name="ItemActivationRequested"><arg type="i"/><arg type="u"/></signal>
            <property name="Version" type="u" access="read"/><property name="TextDirection" type="s" access="read"/>
            <property name="Status" type="s" access="read"/><property name="IconThemePath" type="as" access="read"/>
          </interface>
        </node>
        """
}

func log(_ message: String) {
    FileHandle.standardError.write(Data("earmuff-indicator: \(message)\n".utf8))
}
