// The window: a header with the page switcher and the master switch of the page's
// kind, a page per capture kind and one for History, pending prompts on the page of
// their kind, and a status page in place of everything while the daemon cannot be
// reached. It lays out what `SettingsView` says; clicks go to the DaemonLink.
import CAdwaita
import Foundation
import SettingsModel

@MainActor
final class SettingsWindow {
    let window: UnsafeMutablePointer<GtkWidget>
    private let link: DaemonLink
    private let stack: UnsafeMutablePointer<GtkWidget>
    private let master: UnsafeMutablePointer<GtkWidget>
    private let status: UnsafeMutablePointer<GtkWidget>
    private let warning: UnsafeMutablePointer<GtkWidget>
    private let toasts: UnsafeMutablePointer<GtkWidget>
    private var pages: [SettingsKind: KindPage] = [:]
    private let history: RowList
    private var view: SettingsView?
    private var updatingMaster = false
    private var shownError: String?

    init(application: UnsafeMutablePointer<AdwApplication>, link: DaemonLink) {
        self.link = link
        window = adw_application_window_new(cast(application))
        gtk_window_set_title(cast(window), "Earmuff Settings")
        gtk_window_set_default_size(cast(window), 440, 640)
        gtk_widget_set_size_request(window, 360, 294)

        stack = adw_view_stack_new()
        gtk_widget_set_vexpand(stack, 1)
        let header = adw_header_bar_new()!
        let title = adw_view_switcher_title_new()!
        adw_view_switcher_title_set_stack(cast(title), cast(stack))
        adw_view_switcher_title_set_title(cast(title), "Earmuff Settings")
        adw_header_bar_set_title_widget(cast(header), title)
        master = gtk_switch_new()
        gtk_widget_set_valign(master, GTK_ALIGN_CENTER)
        adw_header_bar_pack_end(cast(header), master)

        status = adw_status_page_new()
        adw_status_page_set_icon_name(cast(status), "microphone-disabled-symbolic")
        gtk_widget_set_vexpand(status, 1)
        warning = gtk_label_new(nil).style("warning")
        gtk_label_set_wrap(cast(warning), 1)
        gtk_label_set_xalign(cast(warning), 0)
        gtk_label_set_selectable(cast(warning), 1)
        for side in [gtk_widget_set_margin_start, gtk_widget_set_margin_end, gtk_widget_set_margin_top] { side(warning, 12) }

        for kind in SettingsKind.allCases {
            let page = KindPage(kind, perform: { link.perform($0) })
            pages[kind] = page
            accessibleLabel(page.page, kind.title)
            let p = adw_view_stack_add_titled(cast(stack), page.page, kind.rawValue, kind.title)
            adw_view_stack_page_set_icon_name(p, Self.icon(kind))
        }
        let historyPage = adw_preferences_page_new()!
        history = RowList(title: "Recordings", description: "What each app recorded, newest first.", empty: "Nothing recorded yet.")
        adw_preferences_page_add(cast(historyPage), cast(history.group))
        accessibleLabel(historyPage, "History")
        let hp = adw_view_stack_add_titled(cast(stack), historyPage, "history", "History")
        adw_view_stack_page_set_icon_name(hp, "document-open-recent-symbolic")

        let bar = adw_view_switcher_bar_new()!
        adw_view_switcher_bar_set_stack(cast(bar), cast(stack))
        g_object_bind_property(
            UnsafeMutableRawPointer(title), "title-visible", UnsafeMutableRawPointer(bar), "reveal",
            G_BINDING_SYNC_CREATE)

        let box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0)!
        gtk_box_append(cast(box), header)
        gtk_box_append(cast(box), warning)
        gtk_box_append(cast(box), status)
        gtk_box_append(cast(box), stack)
        gtk_box_append(cast(box), bar)
        toasts = adw_toast_overlay_new()
        adw_toast_overlay_set_child(cast(toasts), box)
        adw_application_window_set_content(cast(window), toasts)

        onNotify(stack, "visible-child-name") { [weak self] in self?.showMaster() }
        onNotify(window, "default-width") { [weak self] in self?.fitWidth() }
        // A switch says it is active only once its handle has moved (a 100 ms animation), so a
        // click or a key that toggles it is carried out at once, before its handle moves;
        // a change made otherwise (a drag) when it is done.
        let click = gtk_gesture_click_new()!
        gtk_event_controller_set_propagation_phase(click, GTK_PHASE_CAPTURE)
        onRelease(click) { [weak self] in self?.setAccess(toggled: true) }
        gtk_widget_add_controller(master, click)
        on(master, "activate") { [weak self] in self?.setAccess(toggled: true) }
        onNotify(master, "active") { [weak self] in self?.setAccess(toggled: false) }
        link.changed = { [weak self] in self?.refresh() }
        refresh()
    }

    static func icon(_ kind: SettingsKind) -> String {
        switch kind {
        case .microphone: "audio-input-microphone-symbolic"
        case .systemAudio: "audio-speakers-symbolic"
        case .appAudio: "applications-multimedia-symbolic"
        }
    }

    private var visibleKind: SettingsKind? {
        gtk_widget_get_visible(stack) != 0
            ? adw_view_stack_get_visible_child_name(cast(stack)).flatMap { SettingsKind(rawValue: String(cString: $0)) } : nil
    }

    /// Below this width (in pixels) rows lay out their choices narrow.
    static let narrowWidth: Int32 = 420

    /// Lays the rows out for the window's width (its default size follows the window's).
    private func fitWidth() {
        var width: Int32 = 0, height: Int32 = 0
        gtk_window_get_default_size(cast(window), &width, &height)
        let narrow = width > 0 && width < Self.narrowWidth
        for page in pages.values where page.narrow != narrow { page.narrow = narrow }
    }

    /// Asks for the visible page's kind to be switched as the header's switch is now, or to
    /// the other position (`toggled`: clicked, and its handle still moving), unless it is so.
    private func setAccess(toggled: Bool) {
        guard !updatingMaster, let kind = visibleKind, let page = view?.pages.first(where: { $0.kind == kind }) else { return }
        let on = (gtk_switch_get_active(cast(master)) != 0) != toggled
        if on != page.accessOn { link.perform(.setAccess(kind, on: on)) }
    }

    /// The header's switch is the visible page's master switch.
    private func showMaster() {
        guard let kind = visibleKind, let page = view?.pages.first(where: { $0.kind == kind }) else {
            gtk_widget_set_visible(master, 0)
            return
        }
        gtk_widget_set_visible(master, 1)
        accessibleLabel(master, page.kind.accessTitle)
        gtk_widget_set_tooltip_text(master, page.kind.accessTitle)
        updatingMaster = true
        gtk_switch_set_active(cast(master), page.accessOn ? 1 : 0)
        updatingMaster = false
    }

    private var refreshing = false
    private var refreshAgain = false

    /// Shows the link's state; a change that arrives meanwhile is shown right after.
    private func refresh() {
        if refreshing {
            refreshAgain = true
            return
        }
        refreshing = true
        defer { refreshing = false }
        repeat {
            refreshAgain = false
            show(link.state)
        } while refreshAgain
    }

    private func show(_ state: SettingsState) {
        let new = SettingsView(state, now: Date().timeIntervalSince1970)
        let connected = state.reachability == .connected
        gtk_widget_set_visible(stack, connected ? 1 : 0)
        gtk_widget_set_visible(status, connected ? 0 : 1)
        gtk_widget_set_visible(warning, connected && new.notice != nil ? 1 : 0)
        if let notice = new.notice {
            adw_status_page_set_title(cast(status), notice.title)
            adw_status_page_set_description(cast(status), Self.escaped(notice.detail))
            gtk_label_set_text(cast(warning), "\(notice.title). \(notice.detail)")
        }
        if new != view {
            for p in new.pages { pages[p.kind]?.show(p, prompts: new.prompts.filter { $0.kind == p.kind }) }
            history.show(new.history.map { ($0.title, $0.subtitle) })
            view = new
        }
        showMaster()
        if let e = state.lastError, e != shownError {
            adw_toast_overlay_add_toast(cast(toasts), adw_toast_new(Self.escaped(e)))
        }
        shownError = state.lastError
    }

    /// Text for properties that GTK reads as Pango markup.
    static func escaped(_ s: String) -> String {
        let e = g_markup_escape_text(s, -1)!
        defer { g_free(e) }
        return String(cString: e)
    }
}
