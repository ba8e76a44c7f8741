// The names of the nodes Earmuff keeps in the sound server (the PipeWire gate's silent
// source and valves): no one's source, so no app is shown them, by either door.

public enum OwnNodes {
    /// The silent source's node name.
    public static let silence = "earmuff.silence"
    /// A valve's node name is this followed by its number.
    public static let valvePrefix = "earmuff.valve."

    /// Whether `name` is one of those nodes' names.
    public static func isOwn(_ name: String?) -> Bool {
        guard let name else { return false }
        return name == silence || name.hasPrefix(valvePrefix)
    }
}
