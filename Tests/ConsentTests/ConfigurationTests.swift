import Testing
import Foundation
@testable import Consent

private let admin = "/etc/earmuff/earmuff.conf"

private func parseError(_ text: String, file: String = admin) -> ConfigError? {
    do {
        _ = try Configuration.parse(text: text, file: file)
        return nil
    } catch {
        return error
    }
}

private func declarationError(_ text: String, file: String = "/etc/earmuff/apps.d/rec.conf") -> ConfigError? {
    do {
        _ = try AppDeclaration.parse(text: text, file: file)
        return nil
    } catch {
        return error
    }
}

@Suite struct ConfigurationParsing {
    @Test func defaults() {
        let c = Configuration()
        #expect(c.upstream == "")
        #expect(c.listen == "$XDG_RUNTIME_DIR/earmuff/native")
        #expect(c.control == "$XDG_RUNTIME_DIR/earmuff/control")
        #expect(c.store == "$XDG_STATE_HOME/earmuff/permissions.sqlite")
        #expect(c.missingPurpose == .prompt)
        #expect(c.promptVia == [.portal, .notification, .command, .agent])
        #expect(c.promptTimeout == 30)
        #expect(c.promptCommand == "")
        #expect(c.trustedApps.isEmpty)
        #expect(c.logLevel == .info)
    }

    @Test func everyKey() throws {
        let text = """
            # Earmuff
            ; comment
            upstream = unix:/run/user/1000/pulse/native
              listen=/tmp/em/native
            control = ~/em/control   ; trailing comment
            store = $XDG_STATE_HOME/x.sqlite # another
            missing-purpose = prompt
            prompt-timeout = 2.5
            prompt-command = zenity --question --text "Allow $EARMUFF_APP_NAME; really?" && exit 0 || exit 1
            trusted-apps = exe:/usr/bin/pavucontrol   flatpak:org.pulseaudio.pavucontrol
            log-level = debug

            """
        let o = try Configuration.parse(text: text, file: admin)
        #expect(o.upstream == "unix:/run/user/1000/pulse/native")
        #expect(o.listen == "/tmp/em/native")
        #expect(o.control == "~/em/control")
        #expect(o.store == "$XDG_STATE_HOME/x.sqlite")
        #expect(o.missingPurpose == .prompt)
        #expect(o.promptTimeout == 2.5)
        #expect(o.promptCommand == #"zenity --question --text "Allow $EARMUFF_APP_NAME; really?" && exit 0 || exit 1"#)
        #expect(
            o.trustedApps == [
                AppKey(kind: "exe", value: "/usr/bin/pavucontrol"),
                AppKey(kind: "flatpak", value: "org.pulseaudio.pavucontrol"),
            ])
        #expect(o.logLevel == .debug)
    }

    @Test func emptyUpstreamMeansDiscovery() throws {
        let o = try Configuration.parse(text: "upstream =\n", file: admin)
        #expect(o.upstream == "")
        #expect(try Configuration.parse(text: "", file: admin) == Configuration.Overrides())
    }

    @Test func crlfLines() throws {
        let o = try Configuration.parse(text: "log-level = warn\r\nprompt-timeout = 5\r\n", file: admin)
        #expect(o.logLevel == .warn)
        #expect(o.promptTimeout == 5)
    }

    @Test func laterFilesOverrideEarlier() throws {
        let c = try Configuration.load([
            (path: admin, text: "missing-purpose = deny\nprompt-timeout = 10\nlog-level = warn\n"),
            (path: "/home/ann/.config/earmuff/earmuff.conf", text: "prompt-timeout = 60\n"),
        ])
        #expect(c.missingPurpose == .deny)
        #expect(c.promptTimeout == 60)
        #expect(c.logLevel == .warn)
        #expect(c.listen == Configuration().listen)
    }

    @Test func unknownKeySuggests() {
        let e = parseError("log-level = info\n\nprompt-timout = 5\n")
        #expect(
            e?.description.hasPrefix(#"/etc/earmuff/earmuff.conf:3: unknown key "prompt-timout"; did you mean "prompt-timeout"? (keys: upstream, listen,"#)
                == true)
        let far = parseError("colour = blue\n")
        #expect(
            far?.description
                == #"/etc/earmuff/earmuff.conf:1: unknown key "colour" (keys: upstream, listen, control, store, missing-purpose, prompt-via, prompt-timeout, max-pending-prompts, max-pending-prompts-per-uid, prompt-command, use-notices, trusted-apps, log-level, max-clients, max-clients-per-app, reserved-clients, handshake-timeout, auto-reset-days, max-packet-kib, packet-buffer-mib, realtime-priority, nice-level)"#
        )
        #expect(parseError("Missing_Purpose = deny\n")?.message.contains(#"did you mean "missing-purpose"?"#) == true)
    }

    @Test func limitsParseAndRefuseBadValues() throws {
        let o = try Configuration.parse(
            text: "reserved-clients = 0\nhandshake-timeout = 2.5\nmax-packet-kib = 64\n"
                + "packet-buffer-mib = 8\nmax-pending-prompts = 4\nmax-pending-prompts-per-uid = 2\n",
            file: admin)
        let c = Configuration().merging(o)
        #expect(c.reservedClients == 0 && c.handshakeTimeout == 2.5 && c.maxPacketKiB == 64 && c.packetBufferMiB == 8)
        #expect(c.maxPendingPrompts == 4 && c.maxPendingPromptsPerUID == 2)
        for bad in [
            "handshake-timeout = 0", "handshake-timeout = soon", "max-packet-kib = 63", "max-packet-kib = 16385",
            "packet-buffer-mib = 0", "reserved-clients = -1", "max-pending-prompts = 0",
            "max-pending-prompts-per-uid = 1025",
        ] {
            let e = parseError(bad + "\n")
            #expect(e?.line == 1 && e?.message.hasPrefix(String(bad.prefix { $0 != " " }) + " must be") == true, "\(bad): \(String(describing: e))")
        }
    }

    @Test func promptViaIsAnOrderedList() throws {
        #expect(try Configuration.parse(text: "prompt-via = auto\n", file: admin).promptVia == PromptChannel.auto)
        #expect(
            try Configuration.parse(text: "prompt-via = notification, agent\n", file: admin).promptVia
                == [.notification, .agent])
        #expect(try Configuration.parse(text: "prompt-via = command portal\n", file: admin).promptVia == [.command, .portal])
        #expect(
            parseError("\nprompt-via = portal dialog\n")?.description
                == #"/etc/earmuff/earmuff.conf:2: prompt-via: unknown channel "dialog"; write auto, or a list of portal, notification, command, agent, e.g. prompt-via = notification agent"#
        )
        #expect(parseError("prompt-via = agent agent\n")?.message.contains("twice") == true)
        #expect(parseError("prompt-via =\n")?.message.hasPrefix("prompt-via needs a value") == true)
    }

    @Test func badValuesNameTheFix() {
        #expect(
            parseError("\n\nmissing-purpose = maybe\n")?.description
                == #"/etc/earmuff/earmuff.conf:3: missing-purpose must be disconnect, deny or prompt, not "maybe""#)
        #expect(parseError("log-level = loud\n")?.message == #"log-level must be error, warn, info or debug, not "loud""#)
        for bad in ["0", "-1", "soon", "nan", "inf", "100000"] {
            let e = parseError("prompt-timeout = \(bad)\n")
            #expect(e?.line == 1)
            #expect(e?.message.hasPrefix("prompt-timeout must be a number of seconds") == true)
        }
        #expect(parseError("listen = earmuff/native\n")?.message.contains("must be an absolute path") == true)
        #expect(parseError("store =\n")?.message.contains("needs a path") == true)
        #expect(parseError("trusted-apps = exe:/usr/bin/x pavucontrol\n")?.message.contains(#"not "pavucontrol""#) == true)
        #expect(
            parseError("realtime-priority = 100\n")?.message
                == #"realtime-priority must be a whole number from 0 (never real-time) to 99, not "100""#)
        #expect(parseError("nice-level = 5\n")?.message == #"nice-level must be a whole number from -20 to 0 (unchanged), not "5""#)
    }

    @Test func syntaxErrors() {
        #expect(parseError("log-level info\n")?.description == #"/etc/earmuff/earmuff.conf:1: expected "key = value", got "log-level info""#)
        #expect(parseError("= x\n")?.message.contains("no key") == true)
        #expect(parseError("[exe:/usr/bin/x]\n")?.message.contains("apps.d") == true)
        #expect(parseError("ok = 1", file: "/home/ann/.config/earmuff/earmuff.conf")?.file == "/home/ann/.config/earmuff/earmuff.conf")
    }

    @Test func commentsAndQuotes() {
        #expect(ConfigLexer.stripComment("a = b ; c") == "a = b ")
        #expect(ConfigLexer.stripComment("a = b;c") == "a = b;c")
        #expect(ConfigLexer.stripComment("a = track #3") == "a = track ")
        #expect(ConfigLexer.stripComment("a = track#3") == "a = track#3")
        #expect(ConfigLexer.stripComment(#"a = "x ; y" ; z"#) == #"a = "x ; y" "#)
        #expect(ConfigLexer.stripComment("a = sh -c 'x ; y' # z") == "a = sh -c 'x ; y' ")
        #expect(ConfigLexer.stripComment("a = the user's voice ; why") == "a = the user's voice ")
        #expect(ConfigLexer.stripComment(#"a = "say \"hi ; there\"" ; c"#) == #"a = "say \"hi ; there\"" "#)
        #expect(ConfigLexer.unquote(#""a \"b\" \\ c""#) == #"a "b" \ c"#)
        #expect(ConfigLexer.unquote(#"plain "inner""#) == #"plain "inner""#)
    }

    @Test func expansion() throws {
        let env = ["HOME": "/home/ann", "XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(try Configuration.expand("$XDG_RUNTIME_DIR/earmuff/native", environment: env) == "/run/user/1000/earmuff/native")
        #expect(try Configuration.expand("${XDG_RUNTIME_DIR}/x", environment: env) == "/run/user/1000/x")
        #expect(try Configuration.expand("$XDG_STATE_HOME/earmuff/p.sqlite", environment: env) == "/home/ann/.local/state/earmuff/p.sqlite")
        #expect(try Configuration.expand("~/em", environment: env) == "/home/ann/em")
        #expect(try Configuration.userFile(environment: env) == "/home/ann/.config/earmuff/earmuff.conf")
        #expect(try Configuration.userFile(environment: ["XDG_CONFIG_HOME": "/cfg"]) == "/cfg/earmuff/earmuff.conf")
        #expect(try Configuration.userAppsDirectory(environment: env) == "/home/ann/.config/earmuff/apps.d")
        #expect(throws: ConfigError.self) { try Configuration.expand("$XDG_RUNTIME_DIR/x", environment: ["HOME": "/h"]) }
        #expect(throws: ConfigError.self) { try Configuration.expand("~/x", environment: [:]) }
        #expect(throws: ConfigError.self) { try Configuration.expand("${OOPS/x", environment: env) }
        #expect(throws: ConfigError.self) { try Configuration.expand("/a/$/b", environment: env) }
        do {
            _ = try Configuration.expand("$XDG_RUNTIME_DIR/x", environment: [:])
            Issue.record("expected an error")
        } catch {
            #expect(error.description.hasPrefix("XDG_RUNTIME_DIR is not set"))
        }
    }

    @Test func upstreamChoice() {
        var c = Configuration()
        let own = "/run/user/1000/earmuff/native"
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000", "PULSE_SERVER": "unix:/run/user/1000/earmuff/native"]
        #expect(c.upstreamServer(commandLine: nil, environment: env, ownSocket: own) == "/run/user/1000/pulse/native")
        #expect(c.upstreamServer(commandLine: "unix:/x", environment: env, ownSocket: own) == "unix:/x")
        #expect(c.upstreamServer(commandLine: nil, environment: ["PULSE_SERVER": "unix:/other"], ownSocket: own) == "unix:/other")
        #expect(c.upstreamServer(commandLine: nil, environment: [:], ownSocket: own) == nil)
        c.upstream = "unix:/cfg"
        #expect(c.upstreamServer(commandLine: nil, environment: env, ownSocket: own) == "unix:/cfg")
    }

    @Test func trusted() {
        var c = Configuration()
        c.trustedApps = [AppKey(kind: "exe", value: "/usr/bin/pavucontrol")]
        #expect(c.isTrusted(AppKey(kind: "exe", value: "/usr/bin/pavucontrol")))
        #expect(!c.isTrusted(AppKey(kind: "exe", value: "/usr/bin/pactl")))
    }
}

@Suite struct DeclarationParsing {
    @Test func sections() throws {
        let text = """
            ; voice memos
            [exe:/usr/bin/arecord]
            purpose = Records voice memos
            decision = granted      ; optional admin policy

            [flatpak:org.example.Spy]
            decision = denied

            [launcher:org.example.Notes]
            purpose = "Dictation; saved as notes"
            """
        let d = try AppDeclaration.parse(text: text, file: "/etc/earmuff/apps.d/a.conf")
        #expect(d.count == 3)
        #expect(d[AppKey(kind: "exe", value: "/usr/bin/arecord")] == AppDeclaration(purpose: "Records voice memos", decision: .granted))
        #expect(d[AppKey(kind: "flatpak", value: "org.example.Spy")] == AppDeclaration(purpose: nil, decision: .denied))
        #expect(d[AppKey(kind: "launcher", value: "org.example.Notes")]?.purpose == "Dictation; saved as notes")
    }

    @Test func userFilesOverrideFieldByField() throws {
        let all = try AppDeclaration.load([
            (path: "/etc/earmuff/apps.d/a.conf", text: "[exe:/usr/bin/arecord]\npurpose = admin\ndecision = denied\n"),
            (path: "/home/ann/.config/earmuff/apps.d/b.conf", text: "[exe:/usr/bin/arecord]\npurpose = mine\n"),
        ])
        #expect(all[AppKey(kind: "exe", value: "/usr/bin/arecord")] == AppDeclaration(purpose: "mine", decision: .denied))
    }

    @Test func emptySectionIsKept() throws {
        let d = try AppDeclaration.parse(text: "[snap:audacity]\n", file: "x.conf")
        #expect(d[AppKey(kind: "snap", value: "audacity")] == AppDeclaration())
    }

    @Test func errors() {
        #expect(
            declarationError("purpose = x\n")?.description
                == #"/etc/earmuff/apps.d/rec.conf:1: "purpose =" comes before any [app-key] section; start with a line like [exe:/usr/bin/arecord]"#)
        #expect(declarationError("[arecord]\n")?.message.hasPrefix("[arecord] is not an app key") == true)
        #expect(
            declarationError("[exec:/usr/bin/arecord]\n")?.message
                == #"unknown app kind "exec" in [exec:/usr/bin/arecord]; did you mean "exe"? (kinds: flatpak, snap, systemd, launcher, script, exe)"#)
        #expect(declarationError("[exe:arecord]\n")?.message.contains("absolute path") == true)
        #expect(declarationError("[exe:/usr/bin/arecord\n")?.message.contains("not closed") == true)
        let e = declarationError("[exe:/usr/bin/arecord]\n\ndecision = maybe\n")
        #expect(e?.line == 3)
        #expect(e?.message == #"decision must be granted or denied, not "maybe" (remove the line to let the user decide)"#)
        #expect(declarationError("[exe:/a]\ndecision = undetermined\n") != nil)
        #expect(
            declarationError("[exe:/a]\npurpos = x\n")?.message
                == #"unknown key "purpos"; did you mean "purpose"? (keys: purpose, decision, system-audio-decision, app-audio-decision)"#)
        #expect(declarationError("[exe:/a]\npurpose =\n")?.message.contains("purpose is empty") == true)
    }
}

@Suite struct Suggestions {
    @Test func distance() {
        #expect(editDistance("", "abc") == 3)
        #expect(editDistance("kitten", "sitting") == 3)
        #expect(editDistance("same", "same") == 0)
        #expect(suggestion("upstrem", among: Configuration.keys) == #"; did you mean "upstream"?"#)
        #expect(suggestion("zzzzzz", among: Configuration.keys) == "")
    }
}

@Suite struct ShippedConfiguration {
    /// config/earmuff.conf in the repository.
    private func shipped() throws -> String {
        let here = #filePath
        let root = here.split(separator: "/").dropLast(3).joined(separator: "/")
        return try String(contentsOfFile: "/" + root + "/config/earmuff.conf", encoding: .utf8)
    }

    @Test func parsesAsIsToNothing() throws {
        #expect(try Configuration.parse(text: shipped(), file: "config/earmuff.conf") == Configuration.Overrides())
    }

    @Test func documentedDefaultsAreTheDefaults() throws {
        // Uncomment every "; key = value" line: the result must equal the built-in defaults,
        // and every key must be documented.
        let lines = try shipped().split(separator: "\n", omittingEmptySubsequences: false)
        let settings = lines.filter { $0.hasPrefix("; ") && $0.contains("=") }.map { $0.dropFirst(2) }
        #expect(settings.count == Configuration.keys.count)
        let c = try Configuration.load([(path: "uncommented", text: settings.joined(separator: "\n"))])
        #expect(c == Configuration())
    }
}
