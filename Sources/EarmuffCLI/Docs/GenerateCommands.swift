// `earmuff generate-manual DIR`, `generate-units DIR` and `generate-completion SHELL`: the
// packaging build runs these with the binary it just built, so the installed
// pages and completions are those of the installed CLI.
import Foundation

enum GenerateCommands {
    /// Writes earmuff.1, earmuff-settings.1, earmuff-indicator.1 and earmuff.conf.5 into `directory`.
    static func manual(directory: String, configExample: String?) -> Int32 {
        let example = configExample ?? Self.sourceTreeExample()
        guard let text = try? String(contentsOfFile: example, encoding: .utf8) else {
            Terminal.error(
                "earmuff generate-manual: cannot read the configuration example \(example); give it with --config-example FILE (config/earmuff.conf in the source tree)"
            )
            return 1
        }
        do {
            return write(
                [
                    ("earmuff.1", ManualPage.earmuff()), ("earmuff-settings.1", ManualPage.settings()),
                    ("earmuff-indicator.1", ManualPage.indicator()),
                    ("earmuff.conf.5", try ManualPage.configuration(example: text)),
                ],
                into: directory, for: "generate-manual")
        } catch {
            Terminal.error("earmuff generate-manual: \(error)")
            return 1
        }
    }

    /// Writes the packaged earmuff.socket and earmuff.service into `directory`.
    static func units(directory: String) -> Int32 {
        write(
            [
                ("earmuff.socket", SetupPlan.socketUnit(nil)),
                ("earmuff.service", SetupPlan.serviceUnit(nil, binary: SetupPlan.packagedBinary)),
            ],
            into: directory, for: "generate-units")
    }

    /// Writes each (name, text) into `directory`, saying so; the exit status.
    static func write(_ files: [(String, String)], into directory: String, for subcommand: String) -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (name, text) in files {
                try text.write(toFile: "\(directory)/\(name)", atomically: true, encoding: .utf8)
                Terminal.out("wrote \(directory)/\(name)\n")
            }
            return 0
        } catch {
            Terminal.error("earmuff \(subcommand): \(error)")
            return 1
        }
    }

    static func completion(shell: String) -> Int32 {
        guard let script = Completions.script(for: shell) else {
            Terminal.error("earmuff generate-completion: no completion for '\(shell)'; give bash, zsh or fish")
            return 64
        }
        Terminal.out(script)
        return 0
    }

    /// config/earmuff.conf relative to the working directory (the packaging build runs in the source tree).
    static func sourceTreeExample() -> String {
        FileManager.default.currentDirectoryPath + "/config/earmuff.conf"
    }
}
