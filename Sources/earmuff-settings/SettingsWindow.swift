// The window: a header with the page switcher and the master switch of the page's
// kind, a page per capture kind and one for History, pending prompts on the page of
// their kind, and a status page in place of everything while the daemon cannot be
// reached. It lays out what `SettingsView` says; clicks go to the DaemonLink.
import CAdwaita
import Foundation
import SettingsModel

@MainActor
@safe
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
        unsafe window = adw_application_window_new(cast(application))
        unsafe gtk_window_set_title(cast(window), "Earmuff Settings")
        unsafe gtk_window_set_default_size(cast(window), 440, 640)
        unsafe gtk_widget_set_size_request(window, 360, 294)

        unsafe stack = adw_view_stack_new()
        unsafe gtk_widget_set_vexpand(stack, 1)
        let header = unsafe adw_header_bar_new()!
        let title = unsafe adw_view_switcher_title_new()!
        unsafe adw_view_switcher_title_set_stack(cast(title), cast(stack))
        unsafe adw_view_switcher_title_set_title(cast(title), "Earmuff Settings")
        unsafe adw_header_bar_set_title_widget(cast(header), title)
        unsafe master = gtk_switch_new()
        unsafe gtk_widget_set_valign(master, GTK_ALIGN_CENTER)
        unsafe adw_header_bar_pack_end(cast(header), master)

        unsafe status = adw_status_page_new()
        unsafe adw_status_page_set_icon_name(cast(status), "microphone-disabled-symbolic")
        unsafe gtk_widget_set_vexpand(status, 1)
        unsafe warning = gtk_label_new(nil).style("warning")
        unsafe gtk_label_set_wrap(cast(warning), 1)
        unsafe gtk_label_set_xalign(cast(warning), 0)
        unsafe gtk_label_set_selectable(cast(warning), 1)
        unsafe [gtk_widget_set_margin_start, gtk_widget_set_margin_end, gtk_widget_set_margin_top].forEach { [warning] side in unsafe side(warning, 12) }

        for kind in SettingsKind.allCases {
            let page = KindPage(kind, perform: { link.perform($0) })
            pages[kind] = page
            unsafe accessibleLabel(page.page, kind.title)
            let p = unsafe adw_view_stack_add_titled(cast(stack), page.page, kind.rawValue, kind.title)
            unsafe adw_view_stack_page_set_icon_name(p, Self.icon(kind))
        }
        let historyPage = unsafe adw_preferences_page_new()!
        history = RowList(title: "Recordings", description: "What each app recorded, newest first.", empty: "Nothing recorded yet.")
        unsafe adw_preferences_page_add(cast(historyPage), cast(history.group))
        unsafe accessibleLabel(historyPage, "History")
        let hp = unsafe adw_view_stack_add_titled(cast(stack), historyPage, "history", "History")
        unsafe adw_view_stack_page_set_icon_name(hp, "document-open-recent-symbolic")

        let bar = unsafe adw_view_switcher_bar_new()!
        unsafe adw_view_switcher_bar_set_stack(cast(bar), cast(stack))
        unsafe g_object_bind_property(
            UnsafeMutableRawPointer(title), "title-visible", UnsafeMutableRawPointer(bar), "reveal",
            G_BINDING_SYNC_CREATE)

        let box = unsafe gtk_box_new(GTK_ORIENTATION_VERTICAL, 0)!
        unsafe gtk_box_append(cast(box), header)
        unsafe gtk_box_append(cast(box), warning)
        unsafe gtk_box_append(cast(box), status)
        unsafe gtk_box_append(cast(box), stack)
        unsafe gtk_box_append(cast(box), bar)
        unsafe toasts = adw_toast_overlay_new()
        unsafe adw_toast_overlay_set_child(cast(toasts), box)
        unsafe adw_application_window_set_content(cast(window), toasts)

        unsafe onNotify(stack, "visible-child-name") { [weak self] in self?.showMaster() }
        unsafe onNotify(window, "default-width") { [weak self] in self?.fitWidth() }
        // A switch says it is active only once its handle has moved (a 100 ms animation), so a
        // click or a key that toggles it is carried out at once, before its handle moves;
        // a change made otherwise (a drag) when it is done.
        let click = unsafe gtk_gesture_click_new()!
        unsafe gtk_event_controller_set_propagation_phase(click, GTK_PHASE_CAPTURE)
        unsafe onRelease(click) { [weak self] in self?.setAccess(toggled: true) }
        unsafe gtk_widget_add_controller(master, click)
        unsafe on(master, "activate") { [weak self] in self?.setAccess(toggled: true) }
        unsafe onNotify(master, "active") { [weak self] in self?.setAccess(toggled: false) }
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
        unsafe gtk_widget_get_visible(stack) != 0
            ? adw_view_stack_get_visible_child_name(cast(stack)).flatMap { unsafe SettingsKind(rawValue: String(cString: $0)) } : nil
    }

    /// Below this width (in pixels) rows lay out their choices narrow.
    static let narrowWidth: Int32 = 420

    /// Lays the rows out for the window's width (its default size follows the window's).
    private func fitWidth() {
        var width: Int32 = 0, height: Int32 = 0
        unsafe gtk_window_get_default_size(cast(window), &width, &height)
        let narrow = width > 0 && width < Self.narrowWidth
        for page in pages.values where page.narrow != narrow { page.narrow = narrow }
    }

    /// Asks for the visible page's kind to be switched as the header's switch is now, or to
    /// the other position (`toggled`: clicked, and its handle still moving), unless it is so.
    private func setAccess(toggled: Bool) {
        guard !updatingMaster, let kind = visibleKind, let page = view?.pages.first(where: { $0.kind == kind }) else { return }
        let on = unsafe (gtk_switch_get_active(cast(master)) != 0) != toggled
        if on != page.accessOn { link.perform(.setAccess(kind, on: on)) }
    }

    /// The header's switch is the visible page's master switch.
    private func showMaster() {
        guard let kind = visibleKind, let page = view?.pages.first(where: { $0.kind == kind }) else {
            unsafe gtk_widget_set_visible(master, 0)
            return
        }
        unsafe gtk_widget_set_visible(master, 1)
        unsafe accessibleLabel(master, page.kind.accessTitle)
        unsafe gtk_widget_set_tooltip_text(master, page.kind.accessTitle)
        updatingMaster = true
        unsafe gtk_switch_set_active(cast(master), page.accessOn ? 1 : 0)
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
        unsafe gtk_widget_set_visible(stack, connected ? 1 : 0)
        unsafe gtk_widget_set_visible(status, connected ? 0 : 1)
        unsafe gtk_widget_set_visible(warning, connected && new.notice != nil ? 1 : 0)
        if let notice = new.notice {
            unsafe adw_status_page_set_title(cast(status), notice.title)
            unsafe adw_status_page_set_description(cast(status), Self.escaped(notice.detail))
            unsafe gtk_label_set_text(cast(warning), "\(notice.title). \(notice.detail)")
        }
        if new != view {
            for p in new.pages { pages[p.kind]?.show(p, prompts: new.prompts.filter { $0.kind == p.kind }) }
            unsafe history.show(new.history.map { ($0.title, $0.subtitle) })
            view = new
        }
        showMaster()
        if let e = state.lastError, e != shownError {
            unsafe adw_toast_overlay_add_toast(cast(toasts), adw_toast_new(Self.escaped(e)))
        }
        shownError = state.lastError
    }

    /// Text for properties that GTK reads as Pango markup.
    static func escaped(_ s: String) -> String {
        let e = unsafe g_markup_escape_text(s, -1)!
        defer { unsafe g_free(e) }
        return unsafe String(cString: e)
    }
}
