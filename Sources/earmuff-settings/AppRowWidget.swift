// One app's row on a kind page: its name, icon and what it does now, the three
// choices one click away, and (expanded) how it is identified and the choices
// that last for a while. Updated in place, so focus stays where it is.
import CAdwaita
import Glibc
import SettingsModel

@MainActor
@safe
final class AppRowWidget {
    let row: UnsafeMutablePointer<GtkWidget>
    private(set) var view: AppRowView
    private var buttons: [Choice: UnsafeMutablePointer<GtkWidget>] = unsafe [:]
    /// The three choices, side by side, or one above the other in a narrow window.
    private let choices: UnsafeMutablePointer<GtkWidget>
    /// Set while the window changes the buttons itself, and for good once the row is
    /// taken away (its buttons untoggle as they go): no click to carry out then.
    private var updating = false

    init(_ view: AppRowView, narrow: Bool, perform: @escaping (SettingsIntent) -> Void) {
        self.view = view
        unsafe row = adw_expander_row_new()
        let expander: UnsafeMutablePointer<AdwExpanderRow> = unsafe cast(row)
        unsafe adw_preferences_row_set_use_markup(cast(row), 0)
        unsafe adw_preferences_row_set_title(cast(row), view.title)
        unsafe adw_expander_row_add_prefix(expander, Self.icon(view.icon, fallback: view.fallbackIcon))

        let box = unsafe gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0).style("linked")
        unsafe choices = box
        unsafe gtk_widget_set_valign(box, GTK_ALIGN_CENTER)
        var group: UnsafeMutablePointer<GtkToggleButton>?
        for choice in Choice.allCases {
            let b = unsafe gtk_toggle_button_new_with_label(choice.label)!
            unsafe accessibleLabel(b, "\(choice.label) \(view.title)")
            unsafe gtk_widget_set_tooltip_text(b, Self.tooltip(choice, view.kind))
            if let group = unsafe group { unsafe gtk_toggle_button_set_group(cast(b), group) } else { unsafe group = cast(b) }
            unsafe gtk_box_append(cast(box), b)
            unsafe buttons[choice] = b
            let key = view.key, kind = view.kind
            unsafe onNotify(b, "active") { [weak self] in
                guard let self, !self.updating, unsafe gtk_toggle_button_get_active(cast(b)) != 0 else { return }
                perform(.choose(key: key, kind: kind, choice))
            }
        }
        unsafe adw_expander_row_add_action(expander, box)

        for (label, value) in view.details {
            let d = unsafe adw_action_row_new()!
            unsafe adw_preferences_row_set_use_markup(cast(d), 0)
            unsafe adw_preferences_row_set_title(cast(d), label)
            unsafe adw_action_row_set_subtitle(cast(d), value)
            unsafe adw_expander_row_add_row(expander, d)
        }
        for choice in [Choice.allow, .deny] {
            let r = unsafe adw_action_row_new()!
            unsafe adw_preferences_row_set_title(cast(r), "\(choice.label) for a while")
            for lifespan in [ChoiceLifespan.hour, .session] {
                let b = unsafe gtk_button_new_with_label(lifespan.label)!
                unsafe gtk_widget_set_valign(b, GTK_ALIGN_CENTER)
                unsafe accessibleLabel(b, "\(choice.label) \(view.title) \(lifespan.label.lowercased())")
                let key = view.key, kind = view.kind
                unsafe on(b, "clicked") { perform(.choose(key: key, kind: kind, choice, lifespan)) }
                unsafe adw_action_row_add_suffix(cast(r), b)
            }
            unsafe adw_expander_row_add_row(expander, r)
        }
        update(view)
        setNarrow(narrow)
    }

    /// In a narrow window the choices stand one above the other, so the app's name keeps
    /// the room to be read.
    func setNarrow(_ narrow: Bool) {
        unsafe gtk_orientable_set_orientation(cast(choices), narrow ? GTK_ORIENTATION_VERTICAL : GTK_ORIENTATION_HORIZONTAL)
    }

    /// The app's icon: a file, or a name the icon theme has, else the fallback name.
    static func icon(_ icon: String, fallback: String) -> UnsafeMutablePointer<GtkWidget> {
        let image: UnsafeMutablePointer<GtkWidget>
        if icon.hasPrefix("/") {
            unsafe image = access(icon, R_OK) == 0 ? gtk_image_new_from_file(icon) : gtk_image_new_from_icon_name(fallback)
        } else {
            let theme = unsafe gtk_icon_theme_get_for_display(gdk_display_get_default())
            unsafe image = gtk_image_new_from_icon_name(gtk_icon_theme_has_icon(theme, icon) != 0 ? icon : fallback)
        }
        unsafe gtk_image_set_icon_size(cast(image), GTK_ICON_SIZE_LARGE)
        return unsafe image
    }

    static func tooltip(_ choice: Choice, _ kind: SettingsKind) -> String {
        switch choice {
        case .allow: "It records \(kind.shortPhrase)"
        case .deny: "It records silence"
        case .ask: "Ask the next time it records"
        }
    }

    /// Whether `new` can be shown by `update` (only what changes while the app runs differs).
    func canShow(_ new: AppRowView) -> Bool {
        var a = new
        let b = view
        (a.choice, a.live, a.subtitle, a.lifespanNote) = (b.choice, b.live, b.subtitle, b.lifespanNote)
        return a == b
    }

    /// The row is about to be removed.
    func detach() { updating = true }

    func update(_ new: AppRowView) {
        view = new
        var lines: [String] = []
        if let live = new.live { lines.append("● \(live.label)") }
        if let note = new.lifespanNote { lines.append(note) }
        if !new.subtitle.isEmpty { lines.append(new.subtitle) }
        unsafe adw_expander_row_set_subtitle(cast(row), lines.joined(separator: "\n"))
        let was = updating
        updating = true
        unsafe buttons.forEach { choice, b in unsafe gtk_toggle_button_set_active(cast(b), choice == new.choice ? 1 : 0) }
        updating = was
    }
}
