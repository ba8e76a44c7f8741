// The generated manual pages and completion scripts, as the package installs
// them: man renders each page without a warning, and each shell loads its
// script and completes `earmuff gr<Tab>` to `grant` (bash through its
// completion function, fish with `complete -C`, zsh interactively on a pty).
// With EARMUFF_TEST_INSTALLED=1 (scripts/package-check, after installing the
// package) they check the installed pages and scripts instead, found where
// man and each shell look for them.
import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct ManualAndCompletionTests {
        static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path

        func sh(_ script: String, in dir: String, _ name: String, shell: String = "/bin/sh", timeout: Double = 60) throws -> ToolResult {
            var env = Tool.privateEnvironment(root: dir)
            env["MANWIDTH"] = "80"
            return try ChildProcess.spawn(
                executable: shell, arguments: ["-c", script], environment: env,
                stdoutPath: "\(dir)/\(name).out", stderrPath: "\(dir)/\(name).err",
                maxLifetime: Int(timeout) + 30
            ).finish(timeout: timeout)
        }

        /// Whether to check the installed package's files rather than freshly generated ones.
        static let installed = ProcessInfo.processInfo.environment["EARMUFF_TEST_INSTALLED"] == "1"

        func generate(_ dir: String) throws {
            if Self.installed { return }
            let binary = try EarmuffProcess.locateBinary()
            let r = try sh(
                "cd '\(Self.root)' && '\(binary)' generate-manual '\(dir)/man' && for s in bash zsh fish; do '\(binary)' generate-completion $s > '\(dir)/'$s || exit 1; done",
                in: dir, "generate")
            #expect(r.succeeded, "\(r)")
        }

        func page(_ dir: String, _ name: String) -> String {
            Self.installed ? "/usr/share/man/man\(name.split(separator: ".").last ?? "1")/\(name).gz" : "\(dir)/man/\(name)"
        }

        @Test func manRendersEachPageWithoutWarnings() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            try generate(dir)
            for page in ["earmuff.1", "earmuff-settings.1", "earmuff-indicator.1", "earmuff.conf.5"] {
                let r = try sh("man --warnings -l '\(self.page(dir, page))'", in: dir, page)
                #expect(r.succeeded, "\(r)")
                #expect(r.stderr.isEmpty, "\(page): \(r.stderr)")
                #expect(r.stdoutText.contains("earmuff"), "\(page)")
                if page == "earmuff-settings.1" {
                    #expect(r.stdoutText.contains("--control PATH") && r.stdoutText.contains("desktop entry"), "\(r.stdoutText)")
                }
                if page == "earmuff-indicator.1" {
                    #expect(r.stdoutText.contains("--control PATH") && r.stdoutText.contains("StatusNotifierItem"), "\(r.stdoutText)")
                }
            }
        }

        @Test func bashCompletesSubcommandsOptionsAndValues() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            try generate(dir)
            let script = """
                [ -r /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
                \(Self.installed ? "_completion_loader earmuff; complete -p earmuff >/dev/null || exit 3" : ". '\(dir)/bash' || exit 3")
                t() { COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<<"$COMP_LINE"
                      [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]}-1))
                      COMPREPLY=(); _earmuff; echo "$1=${COMPREPLY[*]}"; }
                t 'earmuff gr'
                t 'earmuff grant x --kind s'
                t 'earmuff grant --fo'
                t 'earmuff setup --server '
                t 'earmuff generate-completion f'
                t 'earmuff gen'
                """
            let r = try sh(script, in: dir, "bash", shell: "/bin/bash")
            #expect(r.succeeded, "\(r)")
            let lines = r.stdoutText.split(separator: "\n").map(String.init)
            #expect(lines.contains("earmuff gr=grant"), "\(r)")
            #expect(lines.contains("earmuff grant x --kind s=system-audio"), "\(r)")
            #expect(lines.contains("earmuff grant --fo=--for"), "\(r)")
            #expect(lines.contains("earmuff setup --server =pipewire pulseaudio"), "\(r)")
            #expect(lines.contains("earmuff generate-completion f=fish"), "\(r)")
            #expect(lines.contains("earmuff gen="), "packaging subcommands are not offered: \(r)")
        }

        @Test func fishCompletesSubcommandsOptionsAndValues() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            try generate(dir)
            // Not --no-config: fish sets its completion path (vendor_completions.d) in its own config; HOME is private.
            let load = Self.installed ? "" : "source '\(dir)/fish'; and "
            let r = try sh(
                "fish -c \"\(load)complete -C 'earmuff gr'; and echo SPLIT; and complete -C 'earmuff deny x --kind '\"",
                in: dir, "fish")
            #expect(r.succeeded, "\(r)")
            let parts = r.stdoutText.components(separatedBy: "SPLIT\n")
            #expect(parts.count == 2, "\(r)")
            let first = parts[0].split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" }
            #expect(first == ["grant"], "\(r)")
            let kinds = Set((parts.last ?? "").split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" })
            #expect(kinds == ["microphone", "system-audio", "app-audio"], "\(r)")
        }

        /// With the daemon up, app keys come from `earmuff apps --json`.
        @Test func bashAndFishCompleteAppKeysTheDaemonKnows() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            try generate(dir)
            let earmuff = try EarmuffProcess(upstream: "unix:\(dir)/no-server/native")
            defer { earmuff.stop() }
            try earmuff.control("deny", "exe:/usr/bin/earmuff-completion-probe")
            var env = earmuff.environment
            let binaryDirectory = (try EarmuffProcess.locateBinary() as NSString).deletingLastPathComponent
            env["PATH"] = "\(binaryDirectory):/usr/bin:/bin"
            func run(_ shell: String, _ script: String, _ name: String) throws -> ToolResult {
                try ChildProcess.spawn(
                    executable: shell, arguments: ["-c", script], environment: env,
                    stdoutPath: "\(dir)/\(name).out", stderrPath: "\(dir)/\(name).err",
                    maxLifetime: 90
                ).finish(timeout: 60)
            }
            let bash = try run(
                "/bin/bash",
                """
                . /usr/share/bash-completion/bash_completion
                \(Self.installed ? "_completion_loader earmuff" : ". '\(dir)/bash'")
                COMP_LINE='earmuff reset exe:/usr/bin/earmuff-comp'; COMP_POINT=${#COMP_LINE}
                COMP_WORDS=(earmuff reset exe : /usr/bin/earmuff-comp); COMP_CWORD=4
                _earmuff; printf '%s\\n' "${COMPREPLY[@]}"
                """, "bash-keys")
            // bash splits words at ':'; bash-completion leaves only the part after it to insert.
            #expect(bash.succeeded && bash.stdoutText == "/usr/bin/earmuff-completion-probe\n", "\(bash)")
            let load = Self.installed ? "" : "source '\(dir)/fish'; and "
            let fish = try run("/usr/bin/fish", "\(load)complete -C 'earmuff grant exe:/usr/bin/earmuff-comp'", "fish-keys")
            #expect(fish.succeeded && fish.stdoutText.hasPrefix("exe:/usr/bin/earmuff-completion-probe"), "\(fish)")
        }

        @Test func zshCompletesGrOnAnInteractiveLine() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            try generate(dir)
            try FileManager.default.createDirectory(atPath: "\(dir)/zfunc", withIntermediateDirectories: true)
            if !Self.installed { // installed: in /usr/share/zsh/vendor-completions, on zsh's own fpath
                try FileManager.default.copyItem(atPath: "\(dir)/zsh", toPath: "\(dir)/zfunc/_earmuff")
            }
            // zpty -r with a pattern waits for that output: first the shell's answer to a sum
            // (so compinit has run), then the completed word on the edited line.
            let driver = """
                zmodload zsh/zpty || exit 3
                zpty z 'env -i HOME=\(dir)/home TERM=dumb zsh -f -i'
                zpty -w z 'fpath=(\(dir)/zfunc $fpath); autoload -Uz compinit; compinit -u -D; print READY$((40+2))'
                zpty -r z out '*READY42*' || exit 4
                zpty -w -n z $'earmuff gr\\t'
                zpty -r z out '*ant*' || exit 5
                print -r -- "${out//[^a-z ]/}"
                zpty -d z
                """
            try driver.write(toFile: "\(dir)/driver.zsh", atomically: true, encoding: .utf8)
            let r = try sh("zsh -f '\(dir)/driver.zsh'", in: dir, "zsh", timeout: 30)
            #expect(r.succeeded, "\(r)")
            #expect(r.stdoutText.contains("earmuff grant"), "\(r)")
        }
    }
}
