// swift-tools-version:6.2
// Earmuff: a consent-enforcing capture proxy for the PulseAudio native protocol.
import PackageDescription

// Strict memory safety (SE-0458), for the targets below that touch raw memory or C pointers:
// each unsafe use is marked `unsafe` where it happens, and an unmarked one does not build.
let strictSafety: [SwiftSetting] = [.strictMemorySafety(), .treatWarning("StrictMemorySafety", as: .error)]

let package = Package(
    name: "earmuff",
    products: [
        .executable(name: "earmuff", targets: ["earmuff"]),
        .executable(name: "earmuff-bench", targets: ["earmuff-bench"]),
        // For apps: ask Earmuff for recording permission (docs/permission-api.md).
        .library(name: "EarmuffKit", targets: ["EarmuffKit"]),
        .executable(name: "earmuff-request-permission", targets: ["earmuff-request-permission"]),
        // The settings window (GTK 4 + libadwaita); the daemon never links GTK.
        .executable(name: "earmuff-settings", targets: ["earmuff-settings"]),
        // The status indicator in the desktop's tray (StatusNotifierItem over sd-bus; no GTK).
        .executable(name: "earmuff-indicator", targets: ["earmuff-indicator"]),
    ],
    targets: [
        // C glue
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .target(name: "CLinux", path: "Sources/CLinux"),
        // The syscalls, in Swift: Errno, the owning descriptor, sockets, epoll, the lock.
        .target(name: "LinuxSystem", dependencies: ["CLinux"], swiftSettings: strictSafety),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd"),
        .systemLibrary(name: "CPulseSimple", path: "Sources/CPulseSimple"),
        .systemLibrary(
            name: "CAdwaita", path: "Sources/CAdwaita", pkgConfig: "libadwaita-1",
            providers: [.apt(["libadwaita-1-dev", "libgtk-4-dev"])]),
        .target(name: "CSettingsShim", dependencies: ["CAdwaita"]),
        .systemLibrary(
            name: "CPipeWire", path: "Sources/CPipeWire", pkgConfig: "libpipewire-0.3",
            providers: [.apt(["libpipewire-0.3-dev"])]),
        .target(name: "CPipeWireShim", dependencies: ["CPipeWire"]),

        // Pure core
        .target(name: "PulseWire", swiftSettings: strictSafety),
        .target(name: "Ring", swiftSettings: strictSafety),
        // Who a client is and what a stream captures: the words the relay and the consent service share.
        .target(name: "Basics"),
        .target(name: "Consent", dependencies: ["Basics", "PulseWire"]),
        .target(name: "ConsentStore", dependencies: ["CSQLite", "Consent", "LinuxSystem"], swiftSettings: strictSafety),
        .target(name: "ControlProtocol", dependencies: ["Consent"]),
        // Words shared by the daemon and the command line: prompts, times, durations
        .target(name: "Wording", dependencies: ["Consent", "ControlProtocol"]),
        .target(name: "DBus", dependencies: ["CSystemd", "LinuxSystem"], swiftSettings: strictSafety),
        // The threads every part of the daemon runs on: the event loop, workers, the logger,
        // the clocks and the system error type. No audio tuning (that is the relay's).
        .target(name: "Runtime", dependencies: ["Basics", "LinuxSystem"], swiftSettings: strictSafety),
        // What the Pulse relay and the PipeWire door share of clients and streams, and tell the
        // consent service through: SessionState, RecordStream, SessionObserver.
        .target(name: "StreamState", dependencies: ["Basics", "PulseWire", "LinuxSystem"]),

        // The audio path: event loops, sessions, filters, sockets. Moves bytes; asks the
        // service through SessionObserver. Never links SQLite or sd-bus (scripts/check-relay-links).
        // Its release builds skip the runtime exclusivity checks (a third of the relay's own
        // instructions per request, docs/PERFORMANCE.md); debug and test builds keep them.
        .target(
            name: "Relay", dependencies: ["Basics", "PulseWire", "Ring", "LinuxSystem", "Runtime", "StreamState"],
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))] + strictSafety),
        // The consent service above it: decisions, prompts, the desktop, the control socket.
        // The native PipeWire door: a manager connection that routes non-granted capture to silence.
        .target(name: "PipeWireGate", dependencies: ["CPipeWireShim", "Basics", "LinuxSystem"], swiftSettings: strictSafety),
        .target(
            name: "Service",
            dependencies: [
                "Relay", "Runtime", "StreamState", "Basics", "PulseWire", "Consent", "ConsentStore", "ControlProtocol", "Wording", "LinuxSystem", "DBus",
                "PipeWireGate",
            ],
            swiftSettings: strictSafety),
        .target(name: "EarmuffClient", dependencies: ["ControlProtocol", "LinuxSystem"], swiftSettings: strictSafety),
        .target(
            name: "EarmuffCLI",
            dependencies: [
                "Service", "Relay", "EarmuffClient", "ControlProtocol", "Wording", "Consent", "Basics",
                "ConsentStore", "LinuxSystem", "SettingsModel",
            ],
            swiftSettings: strictSafety),
        .executableTarget(name: "earmuff", dependencies: ["EarmuffCLI"]),
        // The relay alone, every stream real: the link check's subject and the relay's own cost.
        .executableTarget(name: "earmuff-relay", dependencies: ["Relay", "Runtime", "StreamState", "Basics", "PulseWire"], swiftSettings: strictSafety),

        // The settings window: what it shows (pure), and the GTK app around it
        .target(name: "SettingsModel", dependencies: ["Consent", "ControlProtocol", "Wording"]),
        // The control thread the window and the indicator share: a subscribed connection, kept up.
        .target(name: "SettingsLink", dependencies: ["SettingsModel", "EarmuffClient", "ControlProtocol", "LinuxSystem"], swiftSettings: strictSafety),
        .executableTarget(
            name: "earmuff-settings",
            dependencies: [
                "SettingsModel", "SettingsLink", "ControlProtocol",
                "LinuxSystem", "CAdwaita", "CSettingsShim",
            ],
            swiftSettings: strictSafety),
        .executableTarget(name: "earmuff-indicator", dependencies: ["SettingsModel", "SettingsLink", "DBus", "LinuxSystem"], swiftSettings: strictSafety),

        // The app library and its example (records with libpulse-simple, as an app would)
        .target(name: "EarmuffKit", dependencies: ["PulseWire", "LinuxSystem"], swiftSettings: strictSafety),
        .executableTarget(
            name: "earmuff-request-permission", dependencies: ["EarmuffKit", "CPulseSimple"],
            path: "examples/RequestPermission", swiftSettings: strictSafety),

        // Benchmarks (run in release: swift run -c release earmuff-bench)
        .executableTarget(name: "earmuff-bench", dependencies: ["TestSupport", "PulseWire", "CLinux", "LinuxSystem"], swiftSettings: strictSafety),

        // Tests
        .target(name: "TestSupport", dependencies: ["PulseWire", "CLinux", "LinuxSystem"], swiftSettings: strictSafety),
        .testTarget(name: "PulseWireTests", dependencies: ["PulseWire"], swiftSettings: strictSafety),
        .testTarget(name: "RingTests", dependencies: ["Ring"], swiftSettings: strictSafety),
        .testTarget(name: "LinuxSystemTests", dependencies: ["LinuxSystem"], swiftSettings: strictSafety),
        .testTarget(name: "ConsentTests", dependencies: ["Consent", "PulseWire"]),
        .testTarget(name: "PipeWireGateTests", dependencies: ["PipeWireGate", "Basics"], swiftSettings: strictSafety),
        .testTarget(name: "ConsentStoreTests", dependencies: ["ConsentStore", "Consent"], swiftSettings: strictSafety),
        .target(name: "ControlSamples", dependencies: ["ControlProtocol"], path: "Tests/ControlSamples"),
        .testTarget(name: "ControlProtocolTests", dependencies: ["ControlProtocol", "ControlSamples", "Consent"]),
        .testTarget(
            name: "RelayTests", dependencies: ["Relay", "Runtime", "StreamState", "Basics", "PulseWire", "Ring", "LinuxSystem", "TestSupport"],
            swiftSettings: strictSafety),
        .testTarget(
            name: "ServiceTests",
            dependencies: [
                "Service", "Relay", "Runtime", "StreamState", "PipeWireGate", "EarmuffClient", "ControlProtocol", "Consent",
                "ConsentStore", "PulseWire", "Ring", "LinuxSystem", "TestSupport",
            ],
            swiftSettings: strictSafety),
        .testTarget(name: "EarmuffKitTests", dependencies: ["EarmuffKit", "PulseWire", "TestSupport"]),
        .testTarget(name: "SettingsModelTests", dependencies: ["SettingsModel", "Consent", "ControlProtocol"]),
        .testTarget(name: "EarmuffCLITests", dependencies: ["EarmuffCLI", "ControlProtocol", "ControlSamples", "Wording", "Consent", "ConsentStore"]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport", "PulseWire", "EarmuffKit", "earmuff", "earmuff-relay", "earmuff-request-permission",
                "earmuff-settings", "earmuff-indicator", "SettingsModel",
            ],
            swiftSettings: strictSafety),
    ]
)
