// The recordings a desktop's microphone indicator does not count: GNOME Shell (and
// other mixers) skip a source-output whose `application.id` is a volume control's,
// because volume controls record every source to draw its level. An app that claims
// such an id would hide a real recording from the person; the Pulse door passes the
// claim upstream only for the volume control itself, known by its app key (the
// executable the kernel reports, with nothing loaded into it from outside).

public enum VolumeControls {
    /// The property the claim is made in.
    public static let claimKey = "application.id"
    /// What the claim is renamed to when the app is not that volume control: as long as
    /// `claimKey`, so the packet keeps its length, and saying whose claim it was.
    public static let disownedKey = "earmuff.app.id"

    /// Each volume control's id, and the app keys of the programs that are it.
    public static let owners: [String: Set<String>] = [
        "org.PulseAudio.pavucontrol": ["exe:/usr/bin/pavucontrol"],
        // libgvc, GNOME's mixer library: GNOME Shell, Settings, and the desktops built on them.
        "org.gnome.VolumeControl": [
            "exe:/usr/bin/gnome-shell", "exe:/usr/bin/gnome-control-center",
            "exe:/usr/libexec/gnome-flashback", "exe:/usr/bin/gnome-flashback",
            "exe:/usr/bin/cinnamon", "exe:/usr/bin/budgie-panel", "exe:/usr/bin/budgie-daemon",
        ],
        "org.kde.kmixd": ["exe:/usr/bin/kmix", "exe:/usr/bin/kmixd"],
    ]

    /// Whether the app `appKey` may tell the server it is the volume control `id` (an id that
    /// is no volume control's may be claimed by anyone).
    public static func mayClaim(_ id: String, appKey: AppKey) -> Bool {
        owners[id]?.contains(appKey.description) ?? true
    }
}
