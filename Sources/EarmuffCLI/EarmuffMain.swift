// The `earmuff` command: parse (the pure `ClientCommandLine`, in CommandLine/),
// then dispatch. `serve` goes to the daemon; every other subcommand talks to
// it over the control socket (ClientCommands.swift). Exit status: 0 success,
// 1 runtime failure, 64 usage error; `run` passes its command's status through.
import Consent
import ControlProtocol
import Foundation
import Glibc

/// Entry point of the `earmuff` executable.
public enum EarmuffMain {
    /// Runs with the process's arguments and exits.
    public static func run() -> Never {
        exit(run(arguments: Array(CommandLine.arguments.dropFirst())))
    }

    /// Runs with `arguments` (without the program name); returns the exit status.
    public static func run(arguments: [String]) -> Int32 {
        if arguments.isEmpty {
            Terminal.error(ClientUsage.overview.trimmingSuffixNewlines())
            return 64
        }
        let command: ClientCommand
        switch ClientCommandLine.parse(arguments) {
        case .failure(let error):
            Terminal.error("earmuff: \(error.message)")
            if let sub = error.subcommand, let spec = CommandTable.spec(sub) {
                Terminal.error(ClientUsage.usageLines(spec).trimmingSuffixNewlines())
            }
            return 64
        case .success(let c):
            command = c
        }
        switch command {
        case .help(let topic):
            if topic == "serve" { return ServeCommand.run(arguments: ["--help"]) }
            if topic == "setup" { return SetupCommand.run(arguments: ["--help"]) }
            Terminal.out(ClientUsage.text(for: topic))
            return 0
        case .version:
            Terminal.out("earmuff \(earmuffVersion) (control protocol \(ControlProtocolVersion.current))\n")
            return 0
        case .serve(let arguments):
            return ServeCommand.run(arguments: arguments)
        case .setup(let arguments):
            return SetupCommand.run(arguments: arguments)
        case .status(let o):
            return ClientCommands.status(o)
        case .apps(let o):
            return ClientCommands.apps(o)
        case .setDecision(let app, let state, let kind, let o, let lifespan):
            guard let key = resolveApp(app) else { return 1 }
            return ClientCommands.decide(
                .setDecision(
                    app: key, state: state, reason: "user", kind: kind,
                    lifespan: lifespan), o)
        case .reset(let app, let kind, let o):
            guard let key = resolveApp(app) else { return 1 }
            return ClientCommands.decide(.reset(app: key, kind: kind), o)
        case .access(let enabled, let kind, let o):
            return ClientCommands.access(enabled: enabled, kind: kind, o)
        case .agent(let answer, let o, let lifespan):
            return ClientCommands.agent(answer: answer, lifespan: lifespan, o)
        case .run(let o):
            return ClientCommands.run(o)
        case .watch(let o):
            return ClientCommands.watch(o)
        case .log(let app, let since, let o):
            let key: String?
            if let app {
                guard let resolved = resolveApp(app) else { return 1 }
                key = resolved
            } else {
                key = nil
            }
            let now = Date().timeIntervalSince1970
            return ClientCommands.log(app: key, since: since.flatMap { SinceTime.parse($0, now: now) }, o)
        case .doctor(let o):
            return DoctorCommand.run(o)
        case .generateManual(let directory, let example):
            return GenerateCommands.manual(directory: directory, configExample: example)
        case .generateUnits(let directory):
            return GenerateCommands.units(directory: directory)
        case .generateCompletion(let shell):
            return GenerateCommands.completion(shell: shell)
        }
    }
}

/// The app key for what was typed (step 1 of Consent/AppNameResolver.swift), said on stderr when it was rewritten; nil after an error.
private func resolveApp(_ text: String) -> String? {
    let cwd = FileManager.default.currentDirectoryPath
    switch AppNameResolver.program(text, searchPath: ClientCommands.environment["PATH"], cwd: cwd, files: HostFiles()) {
    case nil:
        return text
    case .success(let r)?:
        if let note = r.note { Terminal.error("earmuff: \(note)") }
        return r.key
    case .failure(let f)?:
        Terminal.error("earmuff: \(f)")
        return nil
    }
}

extension String {
    func trimmingSuffixNewlines() -> String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }
}

/// Unbuffered writes to stdout and stderr (each call is one write, so lines never interleave).
enum Terminal {
    static func out(_ s: String) { write(1, s) }

    /// Writes `s` plus a newline to stderr, with control characters escaped line by line
    /// (messages from the daemon may quote names and paths that an app chose).
    static func error(_ s: String) {
        write(
            2,
            s.split(separator: "\n", omittingEmptySubsequences: false)
                .map { ClientFormat.printable(String($0)) }.joined(separator: "\n") + "\n")
    }

    private static func write(_ fd: Int32, _ s: String) {
        var bytes = Array(s.utf8)
        var off = 0
        while off < bytes.count {
            // non-nil: bytes is non-empty inside the loop
            let n = unsafe bytes.withUnsafeMutableBytes { unsafe Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n > 0 {
                off += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return
            }
        }
    }
}
