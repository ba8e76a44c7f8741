// The client subcommands: each connects to the control socket, sends its
// requests, and prints tables (or JSON with --json). Errors are one line on
// stderr naming the cause and the fix; the exit status is 1.
import Consent
import ControlProtocol
import Foundation
import Glibc
import EarmuffClient
import LinuxSystem
import Wording

enum ClientCommands {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    static func controlPath(_ given: String?) -> String {
        given ?? ClientPaths.controlSocket(environment: environment, uid: getuid())
    }

    /// A connection to the control socket (`given`, else the default one), whose message when
    /// nothing answers says how this session starts the daemon.
    static func connect(_ given: String?, environment env: [String: String] = environment) throws(ControlClientError) -> ControlClient {
        try ControlClient(path: controlPath(given), startHint: SessionTakeover.startHint(environment: env))
    }

    static func fail(_ message: String) -> Int32 {
        Terminal.error("earmuff: \(message)")
        return 1
    }

    static func unexpected(_ request: String) -> Int32 {
        fail("the daemon sent an unexpected reply to '\(request)'; use the earmuff client of the daemon's release")
    }

    static func json<T: Encodable>(_ value: T) -> String {
        String(decoding: ControlCodec.encodeLine(value), as: UTF8.self)
    }

    // MARK: status, apps, grant/deny/reset

    static func status(_ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            guard case .status(let s) = try client.request(.status) else { return unexpected("status") }
            Terminal.out(o.json ? json(s) : ClientFormat.status(s) + "\n" + SessionTakeover.describe(s) + "\n")
            return 0
        } catch {
            if let hint = SessionTakeover.idleHint() { Terminal.error(hint) }
            return fail(error.message)
        }
    }

    static func apps(_ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            guard case .apps(let apps) = try client.request(.apps) else { return unexpected("apps") }
            Terminal.out(o.json ? json(apps) : ClientFormat.apps(apps.sorted { $0.key < $1.key }))
            return 0
        } catch {
            return fail(error.message)
        }
    }

    static func decide(_ request: ControlRequest, _ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            switch try client.request(request) {
            case .app(let app):
                Terminal.out(o.json ? json(app) : ClientFormat.decision(app))
                return 0
            case .ok:
                if o.json { Terminal.out("{\"type\":\"ok\"}\n") }
                return 0
            default:
                return unexpected(request.typeName)
            }
        } catch {
            return fail(error.message)
        }
    }

    /// `earmuff access on|off`: prints the switch as the daemon now has it.
    static func access(enabled: Bool, kind: Capability, _ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            guard case .status(let s) = try client.request(.setAccess(kind: kind, enabled: enabled)),
                let now = s.access?.first(where: { $0.kind == kind })
            else { return unexpected("set-access") }
            Terminal.out(o.json ? json(now) : ClientFormat.accessLine(now) + "\n")
            return 0
        } catch {
            return fail(error.message)
        }
    }

    // MARK: log

    static func log(app: String?, since: Double?, _ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            guard case .usage(let sessions) = try client.request(.log(app: app, since: since, limit: nil)) else {
                return unexpected("log")
            }
            Terminal.out(o.json ? json(sessions) : ClientFormat.usage(sessions))
            return 0
        } catch {
            return fail(error.message)
        }
    }

    // MARK: watch

    static func watch(_ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            _ = try client.request(.subscribe)
            if !o.json { Terminal.out("watching \(client.path) (daemon pid \(client.greeting.pid)); interrupt to stop\n") }
            while true {
                guard let m = try client.receive(timeoutMs: -1) else { continue }
                guard case .event(let e) = m else { continue }
                Terminal.out(o.json ? json(m) : ClientFormat.event(e, at: Date().timeIntervalSince1970))
            }
        } catch {
            return fail(error.message)
        }
    }

    // MARK: agent

    /// What `agent --json` prints after answering.
    struct AnswerRecord: Encodable {
        var type = "answered"
        var prompt: UInt64
        var answer: PromptAnswer
        var lifespan: String?
        var accepted: Bool
        var message: String?
    }

    /// An answer and how long it lasts (nil: the answer's own meaning).
    typealias Answer = (answer: PromptAnswer, lifespan: RequestedLifespan?)

    static func agent(answer fixed: PromptAnswer?, lifespan: RequestedLifespan?, _ o: ClientOptions) -> Int32 {
        do {
            let client = try connect(o.controlPath)
            var agent = Agent(client: client, fixed: fixed.map { ($0, lifespan) }, json: o.json)
            return try agent.run()
        } catch {
            return fail(error.message)
        }
    }

    /// The agent's state: prompts seen, the one shown, answers awaiting their reply.
    struct Agent {
        let client: ControlClient
        let fixed: Answer?
        let json: Bool
        var waiting: [PromptInfo] = []
        var current: PromptInfo?
        var seen: Set<UInt64> = []
        var resolved: Set<UInt64> = []
        var inFlight: [Int: (prompt: UInt64, answer: Answer)] = [:]
        var input: [UInt8] = []
        var stdinOpen = true

        /// What the terminal offers after a prompt.
        static let choices = "allow (a), allow once (o), allow this session (s), deny (d); a or d with a duration (a 2h, d 30m) lasts that long"

        init(client: ControlClient, fixed: Answer?, json: Bool) {
            self.client = client
            self.fixed = fixed
            self.json = json
        }

        mutating func run() throws(ControlClientError) -> Int32 {
            // Subscribe first, so a prompt resolved elsewhere is seen as resolved.
            _ = try client.request(.subscribe)
            _ = try client.request(.becomeAgent)
            if !json {
                let how = fixed.map { "answering every prompt with '\(Self.text($0))'" } ?? "answer with a (allow), o (once), s (this session) or d (deny)"
                Terminal.out("agent for \(client.path) (daemon pid \(client.greeting.pid)): \(how); interrupt to stop\n")
            }
            while true {
                while let m = try client.receive(timeoutMs: 0) { try handle(m) }
                if fixed == nil && current == nil && !waiting.isEmpty {
                    current = waiting.removeFirst()
                    show(current!) // non-nil: just assigned
                }
                if fixed == nil && !stdinOpen, let unanswered = current {
                    Terminal.error("earmuff: standard input closed with prompt \(unanswered.id) unanswered; it stays pending for another agent")
                    return 0
                }
                var fds = [pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)]
                if fixed == nil && stdinOpen { fds.append(pollfd(fd: 0, events: Int16(POLLIN), revents: 0)) }
                let r = unsafe poll(&fds, nfds_t(fds.count), -1)
                if r < 0 && errno != EINTR {
                    Terminal.error("earmuff: poll failed (\(Errno.current))")
                    return 1
                }
                if fds.count > 1 && fds[1].revents != 0 { try readInput() }
            }
        }

        mutating func handle(_ m: ServerMessage) throws(ControlClientError) {
            switch m {
            case .prompt(let p):
                guard seen.insert(p.id).inserted, !resolved.contains(p.id) else { return }
                if let fixed {
                    Terminal.out(json ? ClientCommands.json(m) : ClientFormat.prompt(p))
                    try answer(p.id, fixed)
                } else {
                    waiting.append(p)
                }
            case .event(.promptResolved(let r)):
                guard seen.contains(r.prompt), resolved.insert(r.prompt).inserted else { return }
                waiting.removeAll { $0.id == r.prompt }
                if json {
                    Terminal.out(ClientCommands.json(m))
                } else {
                    let by = r.by.map { " by \($0)" } ?? ""
                    Terminal.out(
                        "\(current?.id == r.prompt ? "\n" : "")"
                            + ClientFormat.printable("prompt \(r.prompt) (\(r.appKey)) resolved: \(r.outcome.rawValue)\(by)") + "\n")
                }
                if current?.id == r.prompt { current = nil }
            case .event:
                break
            case .response(let id, let response):
                guard let id, let (prompt, answer) = inFlight.removeValue(forKey: id) else { return }
                var record = AnswerRecord(
                    prompt: prompt, answer: answer.answer, lifespan: answer.lifespan?.name,
                    accepted: !response.isError)
                if case .error(let e) = response { record.message = e.message }
                if json {
                    Terminal.out(ClientCommands.json(record))
                } else if let message = record.message {
                    Terminal.out(ClientFormat.printable("prompt \(prompt): not answered: \(message)") + "\n")
                } else {
                    Terminal.out("prompt \(prompt): answered \(Self.text(answer))\n")
                }
            }
        }

        mutating func answer(_ prompt: UInt64, _ a: Answer) throws(ControlClientError) {
            let id = client.nextRequestID()
            inFlight[id] = (prompt, a)
            try client.send(.request(.answerPrompt(prompt: prompt, answer: a.answer, lifespan: a.lifespan), id: id))
        }

        /// "allow", "deny for 2h", "allow this session".
        static func text(_ a: Answer) -> String {
            switch a.lifespan {
            case nil, .always?: a.answer.rawValue
            case .once?: a.answer == .deny ? "deny once" : "once"
            case .session?: "\(a.answer.rawValue) this session"
            case let .timed(seconds)?: "\(a.answer.rawValue) for \(ClientFormat.duration(seconds))"
            }
        }

        func show(_ p: PromptInfo) {
            if json {
                Terminal.out(ClientCommands.json(ServerMessage.prompt(p)))
            } else {
                Terminal.out("\n" + ClientFormat.prompt(p) + Self.choices + "? ")
            }
        }

        mutating func readInput() throws(ControlClientError) {
            var buf = [UInt8](repeating: 0, count: 4096)
            let n = unsafe buf.withUnsafeMutableBytes { unsafe Glibc.read(0, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { return }
            if n <= 0 {
                stdinOpen = false
                return
            }
            input += buf[0..<n]
            while let nl = input.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: input[..<nl], as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased()
                input.removeSubrange(...nl)
                guard let p = current else { continue }
                guard let a = Self.parseAnswer(line) else {
                    if !line.isEmpty || !json { Terminal.out("please type a (allow), o (once), s (this session), d (deny), or a or d and a duration (a 2h): ") }
                    continue
                }
                current = nil
                try answer(p.id, a)
            }
        }

        /// `a`, `o`, `s`, `d`, their words, or `a`/`d` followed by a duration (`a 2h`, `deny 30m`).
        static func parseAnswer(_ s: String) -> Answer? {
            let words = s.split(separator: " ").map(String.init)
            guard let first = words.first else { return nil }
            let answer: Answer
            switch first {
            case "a", "allow", "y", "yes": answer = (.allow, nil)
            case "o", "once": answer = (.once, nil)
            case "s", "session": answer = (.allow, .session)
            case "d", "deny", "n", "no": answer = (.deny, nil)
            default: return nil
            }
            switch words.count {
            case 1: return answer
            case 2 where answer.lifespan == nil && answer.answer != .once:
                if words[1] == "once" { return (answer.answer, .once) }
                if words[1] == "session" { return (answer.answer, .session) }
                return DurationText.parse(words[1]).map { (answer.answer, .timed(seconds: $0)) }
            default: return nil
            }
        }
    }

    // MARK: run

    static func run(_ o: RunOptions) -> Int32 {
        if let sandbox = o.sandbox { return SandboxRun.run(o, sandbox: sandbox) }
        var server: String
        if let appID = o.appID {
            do {
                let client = try connect(o.controlPath)
                guard case .launcher(let l) = try client.request(.registerLauncher(appID: appID, purpose: o.purpose)) else {
                    return unexpected("register-launcher")
                }
                server = l.socketPath
                client.close()
            } catch {
                return fail(error.message)
            }
        } else {
            // After `earmuff setup`, Earmuff is the session's socket (held by systemd).
            server =
                o.listenPath ?? SessionTakeover.sessionSocket(environment: environment)
                ?? ClientPaths.clientSocket(environment: environment, uid: getuid())
            var st = stat()
            if unsafe stat(server, &st) != 0 {
                let e = Errno.current
                return fail("cannot reach the daemon's client socket at \(server) (\(e)); \(SessionTakeover.startHint(environment: environment))")
            }
            if st.st_mode & S_IFMT != S_IFSOCK {
                return fail("\(server) is not a socket; point --listen at the socket 'earmuff serve' listens on")
            }
        }
        unsafe setenv("PULSE_SERVER", "unix:" + server, 1)
        if let purpose = o.purpose {
            unsafe setenv("PULSE_PROP", PulseProp.appending(PulseProp.purposeKey, purpose, to: environment["PULSE_PROP"]), 1)
        }
        var argv: [UnsafeMutablePointer<CChar>?] = unsafe o.command.map { unsafe strdup($0) }
        unsafe argv.append(nil)
        unsafe execvp(o.command[0], &argv)
        let e = errno
        Terminal.error("earmuff: cannot run '\(o.command[0])' (\(Errno(rawValue: e))); check the command name and PATH")
        return e == ENOENT ? 127 : 126
    }
}
