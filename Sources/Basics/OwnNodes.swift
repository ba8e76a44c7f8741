// The nodes Earmuff keeps in the sound server (the PipeWire gate's silent source and
// valves): their names, no one's source, so no app is shown them, by either door; and how
// they are made, which the gate and `earmuff setup` (PipeWire's own configuration) share.

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

    /// The `pipewire.access` that Earmuff's module-access configuration (`access.force`) gives
    /// every client it holds for Earmuff; WirePlumber's access rules leave it alone.
    public static let holdAccess = "earmuff"

    /// The silent source's arguments to the `adapter` factory: what the gate makes it with, and
    /// what `earmuff setup` writes into PipeWire's `context.objects`, so that the server itself
    /// owns it from its start and it outlives every Earmuff.
    public static let silentSourceArguments = nullSourceArguments(name: silence, description: "Earmuff (silenced)", channels: ["MONO"])

    /// A node that records as a source and plays nothing: a null sink whose output is what is
    /// linked into its input, exact zeros when nothing is.
    public static func nullSourceArguments(name: String, description: String, channels: [String]) -> [(String, String)] {
        [
            ("factory.name", "support.null-audio-sink"),
            ("node.name", name),
            ("node.description", description),
            ("media.class", "Audio/Source/Virtual"),
            ("audio.position", "[ \(channels.joined(separator: " ")) ]"),
            // It stays when Earmuff goes, holding what is routed to it; the next one adopts it.
            ("object.linger", "true"),
            // Never the session's default source.
            ("priority.session", "0"),
            ("priority.driver", "0"),
        ]
    }
}
