// The command table against the parsers, the manual page and the completion
// scripts: an option the parsers take is in the table (they refuse any other),
// every option in the table is taken by its parser, and every subcommand and
// option of the table is in earmuff(1) and in each shell's completion.
import ControlProtocol
import Foundation
import Testing
@testable import EarmuffCLI

/// Arguments that reach `option` of `sub` (a value when it takes one; an app for grant/deny/reset).
private func arguments(_ sub: SubcommandSpec, _ option: String, _ spec: OptionSpec) -> [String] {
    var args = [option]
    if spec.value != nil { args.append("1") }
    switch sub.name {
    case "grant", "deny", "reset": args.append("exe:/usr/bin/pacat")
    case "run": args += ["--", "true"]
    case "generate-manual", "generate-units": args.append("/tmp/pages")
    case "generate-completion": args.append("bash")
    default: break
    }
    return args
}

/// The parser's verdict on `earmuff SUB ARGS`: nil when taken, else the usage error's message.
private func verdict(_ sub: String, _ args: [String]) -> String? {
    switch sub {
    case "serve":
        do { _ = try ServeCommand.parse(args); return nil } catch { return error.message }
    case "setup":
        do { _ = try SetupCommand.parse(args); return nil } catch { return error.message }
    default:
        if case .failure(let e) = ClientCommandLine.parse([sub] + args) { return e.message }
        return nil
    }
}

@Suite struct CommandTableTests {
    @Test func everyOptionInTheTableIsTakenByItsParser() {
        for sub in CommandTable.subcommands {
            for spec in sub.options {
                for name in spec.names {
                    let args = arguments(sub, name, spec)
                    if let message = verdict(sub.name, args) {
                        #expect(!message.contains("unknown"), "earmuff \(sub.name) \(args): \(message)")
                    }
                }
            }
        }
    }

    @Test func optionsOutsideTheTableAreRefused() {
        // Options some subcommand takes, tried on every subcommand that the table does not give them to.
        let all = Set(CommandTable.subcommands.flatMap(\.optionNames))
        for sub in CommandTable.subcommands where !["help", "version"].contains(sub.name) {
            for name in all.subtracting(sub.optionNames).sorted() {
                let spec = OptionSpec([name], value: "X", "")
                let message = verdict(sub.name, arguments(sub, name, spec))
                #expect(message?.contains("unknown") == true, "earmuff \(sub.name) took \(name), which the table does not list")
            }
        }
    }

    @Test func everySubcommandOfTheTableIsParsed() {
        for sub in CommandTable.subcommands where !["help", "version", "serve", "setup"].contains(sub.name) {
            #expect(ClientCommandLine.parse([sub.name, "--help"]) == .success(.help(topic: sub.name)), "\(sub.name)")
        }
        #expect(ClientCommandLine.parse(["version"]) == .success(.version))
        #expect(ClientCommandLine.parse(["help", "doctor"]) == .success(.help(topic: "doctor")))
        #expect(ClientCommandLine.parse(["doctor", "--json"]) == .success(.doctor(ClientOptions(json: true))))
        #expect(ClientCommandLine.parse(["generate-completion", "zsh"]) == .success(.generateCompletion(shell: "zsh")))
        if case .failure(let e) = ClientCommandLine.parse(["generate-completion", "tcsh"]) {
            #expect(e.message.contains("bash, zsh, fish"))
        } else {
            Issue.record("tcsh is not a shell earmuff completes for")
        }
        #expect(ClientCommandLine.parse(["generate-manual", "out"]) == .success(.generateManual(directory: "out", configExample: nil)))
    }

    @Test func helpListsEveryOptionOfTheTable() {
        for sub in CommandTable.subcommands {
            let text = ClientUsage.text(for: sub.name)
            #expect(text.hasPrefix("usage: earmuff \(sub.name)"), "\(sub.name)")
            for spec in sub.options { #expect(text.contains("  " + spec.label), "\(sub.name) \(spec.label)") }
            #expect(text.split(separator: "\n").allSatisfy { $0.count <= 79 || !$0.contains(" ") }, "\(sub.name) lines fit 79 columns")
        }
        for sub in CommandTable.visible { #expect(ClientUsage.overview.contains("  \(sub.name) "), "\(sub.name)") }
        #expect(!ClientUsage.overview.contains("generate-manual"))
    }

    @Test func manualPageHasEverySubcommandAndOption() {
        let page = ManualPage.earmuff()
        for sub in CommandTable.subcommands {
            #expect(page.contains(".SS \"\(Roff.escape(sub.name))\"\n"), "earmuff(1) lacks \(sub.name)")
            for name in sub.optionNames {
                #expect(page.contains("\\fB" + Roff.escape(name)), "earmuff(1) lacks \(sub.name) \(name)")
            }
        }
        for name in CommandTable.globalOptions.flatMap(\.names) { #expect(page.contains(Roff.escape(name))) }
        #expect(page.contains(".SH EXIT STATUS") && page.contains(".SH FILES") && page.contains(".SH ENVIRONMENT") && page.contains(".SH EXAMPLES"))
        // No text line that roff would take for a request.
        for line in page.split(separator: "\n") where !line.hasPrefix(".") && !line.hasPrefix("'\\\"") {
            #expect(!line.hasPrefix("'"), "\(line)")
        }
    }

    @Test func everyCompletionHasEverySubcommandOptionAndValue() throws {
        for shell in ClientCommandLine.shells {
            let script = try #require(Completions.script(for: shell))
            for sub in CommandTable.subcommands {
                #expect(script.contains(sub.name), "\(shell) lacks \(sub.name)")
                for spec in sub.options {
                    for name in spec.names {
                        // fish spells options as -l NAME / -s N.
                        let spelled = shell == "fish" ? (name.hasPrefix("--") ? "-l \(name.dropFirst(2))" : "-s \(name.dropFirst())") : name
                        #expect(script.contains(spelled), "\(shell) lacks \(sub.name) \(name)")
                    }
                    if case .words(let words) = spec.completion {
                        for w in words { #expect(script.contains(w), "\(shell) lacks \(sub.name) \(spec.names[0]) \(w)") }
                    }
                }
            }
            #expect(script.contains("earmuff apps --json"), "\(shell) completes app keys from the daemon")
        }
    }
}
