// swift-tools-version:6.0
// Earmuff: a consent-enforcing capture proxy for the PulseAudio native protocol.
import PackageDescription

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
    ],
    targets: [
        // C glue
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .target(name: "CLinux", path: "Sources/CLinux"),
        // The syscalls, in Swift: Errno, the owning descriptor, sockets, epoll, the lock.
        .target(name: "LinuxSystem", dependencies: ["CLinux"]),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd"),
        .systemLibrary(name: "CPulseSimple", path: "Sources/CPulseSimple"),
        .systemLibrary(name: "CAdwaita", path: "Sources/CAdwaita", pkgConfig: "libadwaita-1",
                       providers: [.apt(["libadwaita-1-dev", "libgtk-4-dev"])]),
        .target(name: "CSettingsShim", dependencies: ["CAdwaita"]),

        // Pure core
        .target(name: "PulseWire"),
        .target(name: "Ring"),
        .target(name: "Consent", dependencies: ["PulseWire"]),
        .target(name: "ConsentStore", dependencies: ["CSQLite", "Consent", "LinuxSystem"]),
        .target(name: "ControlProtocol", dependencies: ["Consent"]),
        // Words shared by the daemon and the command line: prompts, times, durations
        .target(name: "Wording", dependencies: ["Consent", "ControlProtocol"]),
        .target(name: "DBus", dependencies: ["CSystemd", "LinuxSystem"]),

        // I/O edge
        .target(name: "Proxy", dependencies: ["PulseWire", "Ring", "Consent", "ConsentStore", "ControlProtocol", "Wording", "CLinux", "LinuxSystem", "DBus"]),
        .target(name: "EarmuffClient", dependencies: ["ControlProtocol", "CLinux", "LinuxSystem"]),
        .target(name: "EarmuffCLI", dependencies: ["Proxy", "EarmuffClient", "ControlProtocol", "Wording", "Consent", "LinuxSystem"]),
        .executableTarget(name: "earmuff", dependencies: ["EarmuffCLI"]),

        // The settings window: what it shows (pure), and the GTK app around it
        .target(name: "SettingsModel", dependencies: ["Consent", "ControlProtocol"]),
        .executableTarget(name: "earmuff-settings", dependencies: ["SettingsModel", "EarmuffClient", "ControlProtocol",
                                                                   "CAdwaita", "CSettingsShim"]),

        // The app library and its example (records with libpulse-simple, as an app would)
        .target(name: "EarmuffKit", dependencies: ["PulseWire", "CLinux", "LinuxSystem"]),
        .executableTarget(name: "earmuff-request-permission", dependencies: ["EarmuffKit", "CPulseSimple"],
                          path: "examples/RequestPermission"),

        // Benchmarks (run in release: swift run -c release earmuff-bench)
        .executableTarget(name: "earmuff-bench", dependencies: ["TestSupport", "PulseWire", "CLinux"]),

        // Tests
        .target(name: "TestSupport", dependencies: ["PulseWire", "CLinux"]),
        .testTarget(name: "PulseWireTests", dependencies: ["PulseWire"]),
        .testTarget(name: "RingTests", dependencies: ["Ring"]),
        .testTarget(name: "LinuxSystemTests", dependencies: ["LinuxSystem"]),
        .testTarget(name: "ConsentTests", dependencies: ["Consent", "PulseWire"]),
        .testTarget(name: "ConsentStoreTests", dependencies: ["ConsentStore", "Consent"]),
        .target(name: "ControlSamples", dependencies: ["ControlProtocol"], path: "Tests/ControlSamples"),
        .testTarget(name: "ControlProtocolTests", dependencies: ["ControlProtocol", "ControlSamples", "Consent"]),
        .testTarget(name: "ProxyTests", dependencies: ["Proxy", "EarmuffClient", "ControlProtocol", "PulseWire", "Ring", "CLinux", "LinuxSystem", "TestSupport"]),
        .testTarget(name: "EarmuffKitTests", dependencies: ["EarmuffKit", "PulseWire", "TestSupport"]),
        .testTarget(name: "SettingsModelTests", dependencies: ["SettingsModel", "Consent", "ControlProtocol"]),
        .testTarget(name: "EarmuffCLITests", dependencies: ["EarmuffCLI", "ControlProtocol", "ControlSamples", "Wording", "Consent", "ConsentStore"]),
        .testTarget(name: "EndToEndTests", dependencies: ["TestSupport", "PulseWire", "EarmuffKit", "earmuff", "earmuff-request-permission",
                                                             "earmuff-settings", "SettingsModel"]),
    ]
)
