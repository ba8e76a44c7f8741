// A capture kind's page (pending prompts of that kind, a note while its master
// switch is off, a row per app), and the plain list of rows the History page uses.
import CAdwaita
import SettingsModel

@MainActor
@safe
final class KindPage {
    let page: UnsafeMutablePointer<GtkWidget>
    private let prompts: RowList
    private let off: UnsafeMutablePointer<GtkWidget>
    private let offRow: UnsafeMutablePointer<GtkWidget>
    private let apps: UnsafeMutablePointer<GtkWidget>
    private let empty: UnsafeMutablePointer<GtkWidget>
    private var rows: [AppRowWidget] = []
    private var promptRows: [PromptRowView] = []
    private let perform: (SettingsIntent) -> Void
    /// Whether the window is narrow (see `AppRowWidget.setNarrow`).
    var narrow = false {
        didSet { for w in rows { w.setNarrow(narrow) } }
    }

    init(_ kind: SettingsKind, perform: @escaping (SettingsIntent) -> Void) {
        self.perform = perform
        unsafe page = adw_preferences_page_new()
        prompts = RowList(title: "Waiting for your answer", description: nil, empty: nil)
        unsafe off = adw_preferences_group_new()
        unsafe offRow = adw_action_row_new()
        unsafe adw_preferences_row_set_title(cast(offRow), "\(kind.accessTitle) is off")
        unsafe adw_action_row_set_icon_name(cast(offRow), "action-unavailable-symbolic")
        unsafe adw_preferences_group_add(cast(off), offRow)
        unsafe apps = adw_preferences_group_new()
        unsafe adw_preferences_group_set_title(cast(apps), kind.title)
        unsafe adw_preferences_group_set_description(cast(apps), kind.explanation)
        unsafe empty = adw_action_row_new()
        unsafe adw_preferences_row_set_title(cast(empty), "No app has asked to record \(kind.shortPhrase) yet.")
        unsafe gtk_widget_add_css_class(empty, "dim-label")
        unsafe adw_preferences_group_add(cast(apps), empty)
        unsafe [prompts.group, off, apps].forEach { g in unsafe adw_preferences_page_add(cast(page), cast(g)) }
    }

    func show(_ view: KindPageView, prompts pending: [PromptRowView]) {
        unsafe gtk_widget_set_visible(off, view.accessOn ? 0 : 1)
        unsafe adw_action_row_set_subtitle(cast(offRow), view.accessNote ?? "")
        unsafe gtk_widget_set_visible(empty, view.rows.isEmpty ? 1 : 0)

        if pending != promptRows {
            promptRows = pending
            unsafe prompts.show(pending.map { ($0.title, $0.subtitle) }) { [perform] i, row in
                let id = pending[i].id
                for (label, allow) in [("Deny", false), ("Allow", true)] {
                    let b = unsafe gtk_button_new_with_label(label)!
                    unsafe accessibleLabel(b, "\(label): \(pending[i].title)")
                    unsafe gtk_widget_set_valign(b, GTK_ALIGN_CENTER)
                    if allow { unsafe gtk_widget_add_css_class(b, "suggested-action") }
                    unsafe on(b, "clicked") { perform(.answer(prompt: id, allow: allow)) }
                    unsafe adw_action_row_add_suffix(cast(row), b)
                }
            }
        }
        unsafe gtk_widget_set_visible(prompts.group, pending.isEmpty ? 0 : 1)

        if rows.count == view.rows.count, zip(rows, view.rows).allSatisfy({ $0.canShow($1) }) {
            for (w, v) in zip(rows, view.rows) where w.view != v { w.update(v) }
            return
        }
        for w in rows {
            w.detach()
            unsafe adw_preferences_group_remove(cast(apps), w.row)
        }
        rows = view.rows.map { AppRowWidget($0, narrow: narrow, perform: perform) }
        for w in rows { unsafe adw_preferences_group_add(cast(apps), w.row) }
    }
}

/// A preferences group of plain rows (title and subtitle), replaced as a whole.
@MainActor
@safe
final class RowList {
    let group: UnsafeMutablePointer<GtkWidget>
    private var rows: [UnsafeMutablePointer<GtkWidget>] = unsafe []
    private let emptyRow: UnsafeMutablePointer<GtkWidget>?

    init(title: String, description: String?, empty: String?) {
        unsafe group = adw_preferences_group_new()
        unsafe adw_preferences_group_set_title(cast(group), title)
        if let description { unsafe adw_preferences_group_set_description(cast(group), description) }
        unsafe emptyRow = empty.map { text in
            let r = unsafe adw_action_row_new()!
            unsafe adw_preferences_row_set_title(cast(r), text)
            unsafe gtk_widget_add_css_class(r, "dim-label")
            return unsafe r
        }
        if let emptyRow = unsafe emptyRow { unsafe adw_preferences_group_add(cast(group), emptyRow) }
    }

    /// Shows one row per (title, subtitle); `decorate` adds what else a row has.
    func show(
        _ items: [(String, String)],
        decorate: (Int, UnsafeMutablePointer<GtkWidget>) -> Void = { _, _ in }
    ) {
        unsafe rows.forEach { r in unsafe adw_preferences_group_remove(cast(group), r) }
        unsafe rows = items.enumerated().map { i, item in
            let r = unsafe adw_action_row_new()!
            unsafe adw_preferences_row_set_use_markup(cast(r), 0)
            unsafe adw_preferences_row_set_title(cast(r), item.0)
            unsafe adw_action_row_set_subtitle(cast(r), item.1)
            unsafe decorate(i, r)
            unsafe adw_preferences_group_add(cast(group), r)
            return unsafe r
        }
        if let emptyRow = unsafe emptyRow { unsafe gtk_widget_set_visible(emptyRow, items.isEmpty ? 1 : 0) }
    }
}
