import ControlProtocol
import EarmuffCLI
import Testing

/// `earmuff run --sandbox` and its options.
@Suite struct SandboxCommandLineTests {
    private func parse(_ s: String...) -> Result<ClientCommand, UsageError> { ClientCommandLine.parse(s) }

    private func message(_ r: Result<ClientCommand, UsageError>) -> String? {
        if case .failure(let e) = r { return e.subcommand == "run" ? e.message : "wrong subcommand: \(e.message)" }
        return nil
    }

    @Test func sandboxOptions() {
        #expect(
            parse("run", "--sandbox", "--", "parecord", "x.wav")
                == .success(.run(RunOptions(sandbox: SandboxOptions(), command: ["parecord", "x.wav"]))))
        #expect(
            parse(
                "run", "--sandbox", "--app-id", "org.example.Notes", "--purpose", "notes", "--share-home",
                "--net", "--dbus", "--dry-run", "--control=/c", "notes")
                == .success(
                    .run(
                        RunOptions(
                            appID: "org.example.Notes", purpose: "notes", controlPath: "/c",
                            sandbox: SandboxOptions(home: .shared, network: true, sessionBus: true, dryRun: true),
                            command: ["notes"]))))
        #expect(
            parse("run", "--home=/srv/notes", "--sandbox", "--", "notes", "--net")
                == .success(.run(RunOptions(sandbox: SandboxOptions(home: .directory("/srv/notes")), command: ["notes", "--net"]))))
    }

    @Test func mistakesNameTheFix() {
        #expect(message(parse("run", "--net", "--", "x"))?.contains("add --sandbox") == true)
        #expect(message(parse("run", "--dry-run", "--", "x"))?.contains("add --sandbox") == true)
        #expect(message(parse("run", "--sandbox", "--home", "rel", "--", "x"))?.contains("absolute") == true)
        #expect(message(parse("run", "--sandbox", "--home", "/a", "--share-home", "--", "x"))?.contains("give one of") == true)
        #expect(message(parse("run", "--sandbox", "--listen", "/s", "--", "x"))?.contains("--listen does not apply") == true)
        #expect(message(parse("run", "--sandbox", "--home"))?.contains("needs a value") == true)
        #expect(message(parse("run", "--sandbox"))?.contains("needs a command") == true)
    }
}
