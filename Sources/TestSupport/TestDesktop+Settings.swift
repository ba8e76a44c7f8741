import Foundation
import Glibc

extension TestDesktop {
    /// Starts the built `earmuff-settings` (next to the `earmuff` under test) on this desktop,
    /// talking to the daemon at `controlPath`. Its output goes to `earmuff-settings.out` in the
    /// bus's directory (`settingsLog`).
    public func startSettings(controlPath: String, environment extra: [String: String] = [:]) throws -> ChildProcess {
        try startBuilt("earmuff-settings", controlPath: controlPath, environment: extra)
    }

    /// Starts the built `earmuff-indicator` on this desktop (its tray, `startTray`), talking to
    /// the daemon at `controlPath`; its output is `indicatorLog`.
    public func startIndicator(controlPath: String, environment extra: [String: String] = [:]) throws -> ChildProcess {
        try startBuilt("earmuff-indicator", controlPath: controlPath, environment: extra)
    }

    private func startBuilt(_ product: String, controlPath: String, environment extra: [String: String]) throws -> ChildProcess {
        let binary = URL(fileURLWithPath: try EarmuffProcess.locateBinary()).deletingLastPathComponent()
            .appendingPathComponent(product).path
        guard unsafe access(binary, X_OK) == 0 else {
            throw TestSupportError("\(binary) is not built; run swift build --build-tests")
        }
        let env = Tool.privateEnvironment(root: bus.directory).merging(environment) { $1 }.merging(extra) { $1 }
        return try ChildProcess.spawn(
            executable: binary, arguments: ["--control", controlPath], environment: env,
            stdoutPath: "\(bus.directory)/\(product).out",
            stderrPath: "\(bus.directory)/\(product).out", maxLifetime: 1800)
    }

    /// What earmuff-settings printed (GTK's warnings, a crash).
    public var settingsLog: String {
        (try? String(contentsOfFile: "\(bus.directory)/earmuff-settings.out", encoding: .utf8)) ?? ""
    }

    /// What earmuff-indicator printed.
    public var indicatorLog: String {
        (try? String(contentsOfFile: "\(bus.directory)/earmuff-indicator.out", encoding: .utf8)) ?? ""
    }

    /// `person.py settings ARGS` (see Tests/Fixtures/desktop/person.py).
    @discardableResult
    public func settings(_ arguments: String..., timeout: Double = 90) throws -> String {
        let args = ["settings"] + arguments
        return try person(args, timeout: timeout)
    }
}
