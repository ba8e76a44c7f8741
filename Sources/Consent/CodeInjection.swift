// Code a process runs that is not its own program's.
//
// An exe or script identity says "this is /usr/bin/pacat" or "this is
// ~/bin/memo.py". Both stop being true when the environment or the
// interpreter's options make the process load other code first:
// `LD_PRELOAD=evil.so /usr/bin/pacat`, `PYTHONPATH=DIR python3 memo.py`
// with a sitecustomize.py in DIR, `node --require evil.js app.js`,
// `perl -IDIR -MEvil app.pl`. Such a process must not get the clean key that
// the user granted to the program itself, so the classifier appends what was
// found to the key (`exe:/usr/bin/pacat?LD_PRELOAD=/tmp/evil.so`): a key of
// its own, which the user sees and can decide on separately.
//
// The environment is /proc/PID/environ, the block the process was started
// with. A process can overwrite that memory afterwards, so this closes the
// cheap path, not a determined same-uid attacker (see the README's threat model).

/// Finds the variables and options that make a process run code from outside its program; pure.
public enum CodeInjection {
    /// Variables that load code into every dynamically linked program, or into
    /// the toolkits and media frameworks that audio apps are built on.
    public static let everyProgram: [String] = [
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
        "GTK_MODULES", "GTK3_MODULES", "GTK_PATH", "GIO_EXTRA_MODULES", "QT_PLUGIN_PATH",
        "GST_PLUGIN_PATH", "GST_PLUGIN_PATH_1_0", "GST_PLUGIN_SYSTEM_PATH", "GST_PLUGIN_SYSTEM_PATH_1_0",
        "LADSPA_PATH", "LV2_PATH",
    ]

    /// What makes the dynamic linker load code into a program before its own (`LD_PRELOAD`,
    /// `LD_AUDIT`), as `NAME=value`, or `environment-unreadable` when the environment could
    /// not be read whole; nil when nothing does. For a process trusted by its executable (the
    /// sound system's, the desktop's portal backend), whose toolkit variables are the session's
    /// own (`GTK_MODULES` for accessibility), not the app's.
    public static func preload(environment: [String: String], environmentComplete: Bool) -> String? {
        if !environmentComplete { return "environment-unreadable" }
        return ["LD_PRELOAD", "LD_AUDIT"].first { !(environment[$0] ?? "").isEmpty }.map { "\($0)=\(environment[$0] ?? "")" }
    }

    /// Library directories the system's own wrappers put on LD_LIBRARY_PATH: `pw-jack` runs a
    /// JACK program on PipeWire's libjack (`/usr/${LIB}/pipewire-0.3/jack`, `${LIB}` left to the
    /// dynamic linker). They are the distribution's, writable by root alone, so a program
    /// started through the wrapper is still the program the user granted.
    static func isSystemLibraryDirectory(_ entry: Substring) -> Bool {
        let jack = "/pipewire-0.3/jack"
        guard entry.hasSuffix(jack) else { return false }
        let lib = entry.dropLast(jack.count)
        if lib == "/usr/${LIB}" || lib == "/usr/lib" || lib == "/usr/lib64" { return true }
        // /usr/lib/<multiarch triplet>, e.g. x86_64-linux-gnu
        guard lib.hasPrefix("/usr/lib/") else { return false }
        let triplet = lib.dropFirst("/usr/lib/".count)
        return !triplet.isEmpty && triplet.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
    }

    /// Variables that make an interpreter run other code before (or instead of parts of) its script.
    public static func variables(for interpreter: IdentityClassifier.Interpreter) -> [String] {
        switch interpreter {
        case .python: ["PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONPLATLIBDIR"]
        case .node: ["NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE"]
        case .perl: ["PERL5LIB", "PERL5OPT", "PERLLIB", "PERL5DB"]
        case .ruby: ["RUBYOPT", "RUBYLIB"]
        case .java: ["JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH"]
        case .shell: ["BASH_ENV", "ENV"]
        case .lua: ["LUA_INIT", "LUA_PATH", "LUA_CPATH"]
        case .php: ["PHPRC", "PHP_INI_SCAN_DIR"]
        }
    }

    /// True for a variable name the inspector must keep from /proc/PID/environ.
    public static func isRelevant(_ name: Substring) -> Bool {
        if everyProgram.contains(where: { $0 == name }) { return true }
        for kind in IdentityClassifier.Interpreter.allCases where relevant(name, for: kind) { return true }
        return false
    }

    private static func relevant(_ name: Substring, for kind: IdentityClassifier.Interpreter) -> Bool {
        // Lua also reads LUA_INIT_5_4, LUA_PATH_5_4 and the like.
        variables(for: kind).contains { name == $0 || (kind == .lua && name.hasPrefix($0 + "_")) }
    }

    /// What makes `exe` (started with `cmdline` and `environment`) run outside code,
    /// as `NAME=value` and option words, in a stable order; empty when nothing does.
    /// `environmentComplete` is false when /proc/PID/environ could not be read whole,
    /// which counts as a finding: what was not read may hide anything.
    public static func findings(
        exe: String, cmdline: [String], cwd: String?,
        environment: [String: String], environmentComplete: Bool
    ) -> [String] {
        var found: [String] = []
        if !environmentComplete { found.append("environment-unreadable") }
        let kind = IdentityClassifier.interpreter(forExecutable: exe)
        let invocation = IdentityClassifier.invocation(exe: exe, cmdline: cmdline, cwd: cwd)
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where !value.isEmpty {
            let applies: Bool
            if name == "LD_LIBRARY_PATH" {
                applies = !value.split(separator: ":", omittingEmptySubsequences: true).allSatisfy(isSystemLibraryDirectory)
            } else if everyProgram.contains(name) {
                applies = true
            } else if let kind, relevant(Substring(name), for: kind) {
                // `python -E` and `-I` ignore PYTHON* variables.
                applies = !(kind == .python && invocation.ignoresEnvironment)
            } else {
                applies = false
            }
            if applies { found.append("\(name)=\(value)") }
        }
        found += invocation.loadsCode
        return found
    }
}
