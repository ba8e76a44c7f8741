// The few GObject idioms the window needs, in Swift: pointer casts between GTK's
// types (macros in C), and signal handlers that are Swift closures.
import CAdwaita
import CSettingsShim

/// A GTK pointer as another GTK type (what GTK_WINDOW(w) and the like do in C).
func cast<T, U>(_ p: UnsafeMutablePointer<U>) -> UnsafeMutablePointer<T> {
    unsafe UnsafeMutablePointer<T>(OpaquePointer(p))
}

/// The same, for the GTK types whose struct is private (imported as opaque pointers).
func cast<U>(_ p: UnsafeMutablePointer<U>) -> OpaquePointer {
    OpaquePointer(p)
}

/// A closure kept alive for as long as the widget whose signal calls it.
final class Handler {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Calls the handler of `data`: signals are emitted on the main thread, in the GTK loop.
private let trampoline: @convention(c) (gpointer?, gpointer?) -> Void = { _, data in
    guard let data = unsafe data else { return }
    let handler = UInt(bitPattern: data)
    MainActor.assumeIsolated {
        unsafe Unmanaged<Handler>.fromOpaque(UnsafeRawPointer(bitPattern: handler)!).takeUnretainedValue().run()
    }
}

/// Frees a handler when its signal connection goes (the widget is finalized).
private let release: @convention(c) (gpointer?, UnsafeMutablePointer<GClosure>?) -> Void = { data, _ in
    guard let data = unsafe data else { return }
    unsafe Unmanaged<Handler>.fromOpaque(data).release()
}

/// Connects `run` to `signal` of `instance` (a signal with no arguments but the instance).
func on<T>(_ instance: UnsafeMutablePointer<T>, _ signal: String, _ run: @escaping () -> Void) {
    let data = unsafe Unmanaged.passRetained(Handler(run)).toOpaque()
    unsafe earmuff_connect(UnsafeMutableRawPointer(instance), signal, trampoline, data, release)
}

/// Connects `run` to changes of `property` of `instance`.
func onNotify<T>(_ instance: UnsafeMutablePointer<T>, _ property: String, _ run: @escaping () -> Void) {
    let data = unsafe Unmanaged.passRetained(Handler(run)).toOpaque()
    unsafe earmuff_connect_notify(UnsafeMutableRawPointer(instance), property, trampoline, data, release)
}

/// Connects `run` to the release of a click `gesture` recognizes.
func onRelease(_ gesture: OpaquePointer, _ run: @escaping () -> Void) {
    let data = unsafe Unmanaged.passRetained(Handler(run)).toOpaque()
    unsafe earmuff_connect_released(gesture, trampoline, data, release)
}

/// Runs `run` every `ms` milliseconds on the GTK loop while it returns true.
func every(ms: UInt32, _ run: @escaping () -> Bool) {
    final class Repeat { let run: () -> Bool; init(_ r: @escaping () -> Bool) { run = r } }
    let data = unsafe Unmanaged.passRetained(Repeat(run)).toOpaque()
    unsafe g_timeout_add(
        ms,
        { data in
            let bits = UInt(bitPattern: data)
            return MainActor.assumeIsolated {
                let r = unsafe Unmanaged<Repeat>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
                if unsafe r.takeUnretainedValue().run() { return 1 }
                unsafe r.release()
                return 0
            }
        }, unsafe data)
}

/// Runs `run` once on the GTK loop, after the signal being handled has finished (so that
/// what it changes in the window does not change a widget in the middle of its own signal).
func later(_ run: @escaping () -> Void) {
    every(ms: 0) {
        run()
        return false
    }
}

extension UnsafeMutablePointer where Pointee == GtkWidget {
    /// Adds a CSS class (GTK's style classes: "dim-label", "success", "linked"...).
    func style(_ names: String...) -> Self {
        for n in names { unsafe gtk_widget_add_css_class(self, n) }
        return unsafe self
    }
}

/// The name assistive technologies read for `widget`.
func accessibleLabel(_ widget: UnsafeMutablePointer<GtkWidget>, _ label: String) {
    unsafe earmuff_accessible_label(widget, label)
}
