// The relay's limits as shipped: the configuration's defaults, and what the relay
// uses when it is given none.

/// Defaults of the earmuff.conf keys the relay reads (documented there).
public enum RelayDefaults {
    /// `max-clients`: below PulseAudio's 64 slots, so that apps through Earmuff can never
    /// take every slot of the server.
    public static let maxClients = 56
    /// `max-clients-per-app`.
    public static let maxClientsPerApp = 32
    /// `reserved-clients`: the last slots of max-clients, for apps with fewer than 4 clients.
    public static let reservedClients = 8
    /// `handshake-timeout`, seconds.
    public static let handshakeTimeout = 5.0
    /// `max-packet-kib`.
    public static let maxPacketKiB = 1024
    /// `packet-buffer-mib`.
    public static let packetBufferMiB = 32
    /// `realtime-priority`: PulseAudio's own default.
    public static let realtimePriority = 5
    /// `nice-level`.
    public static let niceLevel = -11
}
