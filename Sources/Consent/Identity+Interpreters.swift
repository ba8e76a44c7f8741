// Scripts as apps: which interpreter an executable is, and which script it
// runs (from its command line and working directory), so that `python3
// notes.py` is identified as the script rather than as Python.

extension IdentityClassifier {
    /// The interpreter family of an executable, by basename (`python3.12` → python).
    public enum Interpreter: String, Sendable, CaseIterable {
        case python, node, perl, ruby, java, shell, lua, php
    }

    /// Which interpreter `exe` is, or nil for an ordinary program.
    public static func interpreter(forExecutable exe: String) -> Interpreter? {
        let base = exe.split(separator: "/").last.map(String.init) ?? exe
        func versioned(_ stem: String) -> Bool {
            guard base.hasPrefix(stem) else { return false }
            return base.dropFirst(stem.count).allSatisfy { $0.isNumber || $0 == "." }
        }
        if versioned("python") || versioned("pypy") { return .python }
        if base == "node" || base == "nodejs" { return .node }
        if versioned("perl") { return .perl }
        if versioned("ruby") { return .ruby }
        if base == "java" { return .java }
        if ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"].contains(base) { return .shell }
        if versioned("lua") || base == "luajit" { return .lua }
        if versioned("php") { return .php }
        return nil
    }

    /// For an interpreter, what it runs: an absolute script path, `module:NAME`
    /// (python -m, java -m), or `class:NAME` (java main class). Nil when it runs
    /// inline code (`-c`, `-e`), reads stdin, or `exe` is not an interpreter.
    public static func scriptTarget(exe: String, cmdline: [String], cwd: String?) -> String? {
        invocation(exe: exe, cmdline: cmdline, cwd: cwd).target
    }

    /// What an interpreter's command line says before its program: the program
    /// (as `scriptTarget`), the options that load other code first (`node -r X`,
    /// `perl -MX`, `ruby -r X`, `java -javaagent:X`…), and whether it ignores
    /// its language's environment variables (`python -E`/`-I`).
    public struct Invocation: Sendable, Equatable {
        public var target: String?
        public var loadsCode: [String] = []
        public var ignoresEnvironment = false
    }

    /// Parses an interpreter's command line up to its program; an empty `Invocation` for other programs.
    public static func invocation(exe: String, cmdline: [String], cwd: String?) -> Invocation {
        var result = Invocation()
        guard let kind = interpreter(forExecutable: exe), cmdline.count >= 2 else { return result }
        let grammar = OptionGrammar.for(kind)
        func done(_ target: String?) -> Invocation {
            result.target = target
            return result
        }
        var i = 1
        while i < cmdline.count {
            let arg = cmdline[i]
            i += 1
            if arg == "--" {
                guard i < cmdline.count else { return done(nil) }
                return done(scriptPath(cmdline[i], cwd: cwd))
            }
            if arg == "-" { return done(nil) } // program from stdin
            if arg.hasPrefix("--") {
                let eq = arg.firstIndex(of: "=")
                let name = eq.map { String(arg[..<$0]) } ?? arg
                let inline = eq.map { String(arg[arg.index(after: $0)...]) }
                if grammar.longInlineCode.contains(name) { return done(nil) }
                if let target = grammar.longTarget[name] {
                    let value = inline ?? (i < cmdline.count ? cmdline[i] : nil)
                    guard let value else { return done(nil) }
                    return done(target.apply(value, cwd: cwd))
                }
                let takesArgument = grammar.longWithArgument.contains(name) && inline == nil
                if grammar.longLoadsCode.contains(name) {
                    result.loadsCode.append(takesArgument && i < cmdline.count ? "\(name) \(cmdline[i])" : arg)
                }
                if takesArgument { i += 1 }
                continue
            }
            if arg.hasPrefix("-") || (kind == .shell && arg.hasPrefix("+")) {
                if kind == .java {
                    // Java options are whole words: -jar, -cp, -Dx=y, -m.
                    if arg == "-jar" { return done(i < cmdline.count ? scriptPath(cmdline[i], cwd: cwd) : nil) }
                    if arg == "-m" { return done(i < cmdline.count ? "module:" + cmdline[i] : nil) }
                    if grammar.javaLoadsCodePrefixes.contains(where: { arg.hasPrefix($0) }) { result.loadsCode.append(arg) }
                    if grammar.javaWithArgument.contains(arg) { i += 1 }
                    continue
                }
                // A cluster of one-letter switches; the first that takes an argument
                // consumes the rest of the word, or the next word.
                var letters = Substring(arg.dropFirst())
                while let c = letters.first {
                    letters = letters.dropFirst()
                    let attached = letters.isEmpty ? nil : String(letters)
                    if grammar.inlineCode.contains(c) { return done(nil) }
                    if let target = grammar.shortTarget[c] {
                        let value = attached ?? (i < cmdline.count ? cmdline[i] : nil)
                        guard let value else { return done(nil) }
                        return done(target.apply(value, cwd: cwd))
                    }
                    if grammar.ignoreEnvironment.contains(c) { result.ignoresEnvironment = true }
                    if grammar.loadsCode.contains(c) {
                        let value = attached ?? (grammar.withArgument.contains(c) && i < cmdline.count ? cmdline[i] : "")
                        result.loadsCode.append("-\(c)\(value)")
                    }
                    if grammar.withArgument.contains(c) {
                        if attached == nil { i += 1 }
                        break
                    }
                    if grammar.attachedOnly.contains(c) { break }
                    if grammar.attachedNumber.contains(c) {
                        // perl/ruby -l[octal], -0[octal] or -0x[hex]: digits only, then more switches.
                        if c == "0", letters.first == "x" {
                            letters = letters.dropFirst().drop(while: { $0.isHexDigit })
                        } else {
                            letters = letters.drop(while: { ("0"..."7").contains($0) })
                        }
                    }
                    if grammar.stdinSwitch.contains(c) { return done(nil) }
                }
                continue
            }
            if kind == .java {
                return done(arg.hasSuffix(".java") ? scriptPath(arg, cwd: cwd) : "class:" + arg)
            }
            return done(scriptPath(arg, cwd: cwd))
        }
        return done(nil)
    }

    /// What an option that names the program turns into.
    enum Target {
        case path, module
        func apply(_ value: String, cwd: String?) -> String? {
            switch self {
            case .path: IdentityClassifier.scriptPath(value, cwd: cwd)
            case .module: value.isEmpty ? nil : "module:" + value
            }
        }
    }

    /// Enough of each interpreter's option syntax to find the program it runs.
    struct OptionGrammar {
        var inlineCode: Set<Character> = [] // -c CODE / -e CODE: no script
        var withArgument: Set<Character> = [] // switches that take a value
        var attachedOnly: Set<Character> = [] // value only in the same word (perl -Mfoo)
        var attachedNumber: Set<Character> = [] // optional number in the same word (perl -l, -0)
        var stdinSwitch: Set<Character> = [] // -s: program from stdin
        var shortTarget: [Character: Target] = [:] // -m MODULE, -f FILE
        var longInlineCode: Set<String> = []
        var longWithArgument: Set<String> = []
        var longTarget: [String: Target] = [:]
        var javaWithArgument: Set<String> = []
        var loadsCode: Set<Character> = [] // switches that run other code first (node -r, perl -M)
        var longLoadsCode: Set<String> = []
        var javaLoadsCodePrefixes: [String] = []
        var ignoreEnvironment: Set<Character> = [] // python -E / -I: PYTHON* variables are ignored

        static func `for`(_ kind: Interpreter) -> OptionGrammar {
            var g = OptionGrammar()
            switch kind {
            case .python:
                g.inlineCode = ["c"]
                g.withArgument = ["W", "X", "Q"]
                g.shortTarget = ["m": .module]
                g.longWithArgument = ["--check-hash-based-pycs"]
                g.ignoreEnvironment = ["E", "I"]
            case .node:
                g.inlineCode = ["e", "p"]
                g.withArgument = ["r", "C"]
                g.longInlineCode = ["--eval", "--print"]
                g.longWithArgument = [
                    "--require", "--import", "--loader", "--experimental-loader",
                    "--input-type", "--conditions", "--env-file", "--title",
                ]
                g.loadsCode = ["r"]
                g.longLoadsCode = ["--require", "--import", "--loader", "--experimental-loader", "--env-file"]
            case .perl:
                g.inlineCode = ["e", "E"]
                g.withArgument = ["I"]
                g.attachedOnly = ["M", "m", "x", "i", "C", "d", "D"]
                g.attachedNumber = ["0", "l"]
                g.loadsCode = ["I", "M", "m", "d"]
            case .ruby:
                g.inlineCode = ["e"]
                g.withArgument = ["I", "r", "C", "E"]
                g.loadsCode = ["I", "r"]
                g.attachedOnly = ["x", "F", "i", "K", "T", "W"]
                g.attachedNumber = ["0", "l"]
            case .java:
                g.javaWithArgument = [
                    "-cp", "-classpath", "--class-path", "-p", "--module-path",
                    "--upgrade-module-path", "--add-modules", "--add-opens",
                    "--add-exports", "--add-reads", "--patch-module",
                    "--enable-native-access", "--limit-modules",
                ]
                g.longTarget = ["--module": .module]
                g.longWithArgument = Set(g.javaWithArgument.filter { $0.hasPrefix("--") })
                g.javaLoadsCodePrefixes = ["-javaagent:", "-agentlib:", "-agentpath:", "-Xbootclasspath", "--patch-module"]
            case .shell:
                g.inlineCode = ["c"]
                g.withArgument = ["o", "O"]
                g.stdinSwitch = ["s"]
                g.longInlineCode = ["--command"]
                g.longWithArgument = ["--rcfile", "--init-file", "--init-command"]
            case .lua:
                g.withArgument = ["e", "l"]
                g.loadsCode = ["e", "l"] // run before the script
            case .php:
                g.inlineCode = ["r", "B", "R", "E"]
                g.withArgument = ["c", "d", "z", "t"]
                g.loadsCode = ["c", "d", "z"] // php.ini, auto_prepend_file=, zend extensions
                g.shortTarget = ["f": .path]
            }
            return g
        }
    }

    /// A script argument made absolute; nil for `/dev/fd/N`, `/dev/stdin`, `/proc/self/fd/N`
    /// and the like (process substitution, pipes), which name no lasting program.
    static func scriptPath(_ arg: String, cwd: String?) -> String? {
        guard let path = absolute(arg, cwd: cwd), !path.hasPrefix("/dev/"), !path.hasPrefix("/proc/") else { return nil }
        return path
    }

    /// Makes `path` absolute against `cwd` and removes `.`, `..` and doubled slashes.
    public static func absolute(_ path: String, cwd: String?) -> String? {
        guard !path.isEmpty else { return nil }
        let joined: String
        if path.hasPrefix("/") {
            joined = path
        } else {
            guard let cwd, cwd.hasPrefix("/") else { return nil }
            joined = cwd + "/" + path
        }
        var parts: [Substring] = []
        for part in joined.split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// Drops the ` (deleted)` the kernel appends when the binary was replaced
    /// (a package upgrade), so the app keeps its key.
    public static func cleanExecutablePath(_ path: String) -> String {
        let suffix = " (deleted)"
        return path.hasSuffix(suffix) ? String(path.dropLast(suffix.count)) : path
    }
}
