// A capture kind's page (pending prompts of that kind, a note while its master
// switch is off, a row per app), and the plain list of rows the History page uses.
import CAdwaita
import SettingsModel

@MainActor
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
        page = adw_preferences_page_new()
        prompts = RowList(title: "Waiting for your answer", description: nil, empty: nil)
        off = adw_preferences_group_new()
        offRow = adw_action_row_new()
        adw_preferences_row_set_title(cast(offRow), "\(kind.accessTitle) is off")
        adw_action_row_set_icon_name(cast(offRow), "action-unavailable-symbolic")
        adw_preferences_group_add(cast(off), offRow)
        apps = adw_preferences_group_new()
        adw_preferences_group_set_title(cast(apps), kind.title)
        adw_preferences_group_set_description(cast(apps), kind.explanation)
        empty = adw_action_row_new()
        adw_preferences_row_set_title(cast(empty), "No app has asked to record \(kind.shortPhrase) yet.")
        gtk_widget_add_css_class(empty, "dim-label")
        adw_preferences_group_add(cast(apps), empty)
        for g in [prompts.group, off, apps] { adw_preferences_page_add(cast(page), cast(g)) }
    }

    func show(_ view: KindPageView, prompts pending: [PromptRowView]) {
        gtk_widget_set_visible(off, view.accessOn ? 0 : 1)
        adw_action_row_set_subtitle(cast(offRow), view.accessNote ?? "")
        gtk_widget_set_visible(empty, view.rows.isEmpty ? 1 : 0)

        if pending != promptRows {
            promptRows = pending
            prompts.show(pending.map { ($0.title, $0.subtitle) }) { [perform] i, row in
                let id = pending[i].id
                for (label, allow) in [("Deny", false), ("Allow", true)] {
                    let b = gtk_button_new_with_label(label)!
                    accessibleLabel(b, "\(label): \(pending[i].title)")
                    gtk_widget_set_valign(b, GTK_ALIGN_CENTER)
                    if allow { gtk_widget_add_css_class(b, "suggested-action") }
                    on(b, "clicked") { perform(.answer(prompt: id, allow: allow)) }
                    adw_action_row_add_suffix(cast(row), b)
                }
            }
        }
        gtk_widget_set_visible(prompts.group, pending.isEmpty ? 0 : 1)

        if rows.count == view.rows.count, zip(rows, view.rows).allSatisfy({ $0.canShow($1) }) {
            for (w, v) in zip(rows, view.rows) where w.view != v { w.update(v) }
            return
        }
        for w in rows {
            w.detach()
            adw_preferences_group_remove(cast(apps), w.row)
        }
        rows = view.rows.map { AppRowWidget($0, narrow: narrow, perform: perform) }
        for w in rows { adw_preferences_group_add(cast(apps), w.row) }
    }
}

/// A preferences group of plain rows (title and subtitle), replaced as a whole.
@MainActor
final class RowList {
    let group: UnsafeMutablePointer<GtkWidget>
    private var rows: [UnsafeMutablePointer<GtkWidget>] = []
    private let emptyRow: UnsafeMutablePointer<GtkWidget>?

    init(title: String, description: String?, empty: String?) {
        group = adw_preferences_group_new()
        adw_preferences_group_set_title(cast(group), title)
        if let description { adw_preferences_group_set_description(cast(group), description) }
        emptyRow = empty.map { text in
            let r = adw_action_row_new()!
            adw_preferences_row_set_title(cast(r), text)
            gtk_widget_add_css_class(r, "dim-label")
            return r
        }
        if let emptyRow { adw_preferences_group_add(cast(group), emptyRow) }
    }

    /// Shows one row per (title, subtitle); `decorate` adds what else a row has.
    func show(
        _ items: [(String, String)],
        decorate: (Int, UnsafeMutablePointer<GtkWidget>) -> Void = { _, _ in }
    ) {
        for r in rows { adw_preferences_group_remove(cast(group), r) }
        rows = items.enumerated().map { i, item in
            let r = adw_action_row_new()!
            adw_preferences_row_set_use_markup(cast(r), 0)
            adw_preferences_row_set_title(cast(r), item.0)
            adw_action_row_set_subtitle(cast(r), item.1)
            decorate(i, r)
            adw_preferences_group_add(cast(group), r)
            return r
        }
        if let emptyRow { gtk_widget_set_visible(emptyRow, items.isEmpty ? 1 : 0) }
    }
}
