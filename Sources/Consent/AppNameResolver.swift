// What a person types after `earmuff grant/deny/reset/log`, turned into the app
// key that the app's processes really get. One set of rules, in two steps, each
// run where its facts are:
//
// 1. The command line, with the user's own PATH and working directory
//    (`program`): people name programs by command (`arecord`) or path
//    (`/usr/bin/arecord`), and Debian's arecord is a link to aplay, so the
//    kernel reports /proc/PID/exe = /usr/bin/aplay and a decision for
//    `exe:/usr/bin/arecord` would never match. So `exe:PATH` follows symlinks
//    to the file the kernel will report; a path, or a command found on PATH,
//    becomes `exe:REALPATH`, or for a script with a known interpreter,
//    `script:PATH` (the interpreter gets the path it was started by, not the
//    link's target). Every rewrite comes with a note, so the person sees which
//    key was decided. Anything else is sent as typed.
// 2. The daemon, with the apps it knows (`match`): an app key is taken as it
//    is; a name is matched with what the kernel said (the executable, the
//    key's last path component), and what an app calls itself never picks it
//    alone.

/// The files step 1 looks at (the real file system on the command line; fakes in tests).
public protocol ProgramFiles {
    /// What is at `path`: nothing, something that is not an executable regular file, or one.
    func kind(of path: String) -> ProgramFileKind
    /// `path` with every symlink resolved, or nil when it does not exist.
    func realPath(_ path: String) -> String?
    /// The first `count` bytes of the file at `path` (fewer when it is shorter; none when unreadable).
    func head(of path: String, count: Int) -> [UInt8]
}

public enum ProgramFileKind: Sendable, Equatable {
    case missing
    case notExecutable
    case executable
}

public enum AppNameResolver {
    /// The key to send, and what was resolved and how (nil when the text was used as given).
    public struct Resolution: Equatable, Sendable {
        public var key: String
        public var note: String?

        public init(key: String, note: String?) {
            self.key = key
            self.note = note
        }
    }

    /// An app the daemon can match a name with.
    public struct Candidate: Equatable, Sendable {
        public var key: AppKey
        public var displayName: String?
        public var method: IdentificationMethod?
        public var executable: String?

        public init(key: AppKey, displayName: String?, method: IdentificationMethod?, executable: String?) {
            self.key = key
            self.displayName = displayName
            self.method = method
            self.executable = executable
        }
    }

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// Step 1: nothing at the path typed (or found).
        case noSuchFile(String)
        /// Step 1: the path is not an executable regular file.
        case notExecutable(String)
        /// Step 2: the text has a colon but is no app key.
        case notAnAppKey(String)
        /// Step 2: the name is the executable of several apps.
        case ambiguous(String, [Candidate])
        /// Step 2: the name is only what these apps call themselves.
        case onlyClaimed(String, [Candidate])
        /// Step 2: no known app has this name.
        case unknown(String)

        public var description: String {
            switch self {
            case .noSuchFile(let p):
                "no file at \(p); give a command on PATH, a path, or an app key such as exe:/usr/bin/parecord"
            case .notExecutable(let p):
                "\(p) is not an executable file; give the program's path, or an app key"
            case .notAnAppKey(let text):
                "\"\(text)\" is not an app key; write kind:value, e.g. exe:/usr/bin/parecord"
            case let .ambiguous(text, apps):
                "\"\(text)\" matches \(listed(apps)); give the app key"
            case let .onlyClaimed(text, apps):
                "\"\(text)\" is only what \(listed(apps)) calls itself, which any app can claim; give the app key"
            case .unknown(let text):
                "no known app is called \"\(text)\"; list them with 'earmuff apps' or give an app key such as exe:/usr/bin/\(text)"
            }
        }

        private func listed(_ apps: [Candidate]) -> String {
            apps.map { "\($0.key) (identified by \($0.method?.rawValue ?? "?")\($0.displayName.map { ", calls itself \($0)" } ?? ""))" }
                .sorted().joined(separator: ", ")
        }
    }

    // MARK: the name people see

    /// Key kinds whose value is an ID the app's sandbox or launcher gave it (not chosen by the app).
    static let ownIDKinds: Set<String> = ["flatpak", "snap", "launcher"]

    /// The one name every view gives an app: prompts, `earmuff status`, `earmuff apps` and the
    /// settings window all call this, with what they know of the app:
    /// 1. the name of its desktop entry (`systemName`);
    /// 2. for an app with an ID of its own (Flatpak, snap, `earmuff run --app-id`), that ID; for a
    ///    script, the script's file name (its executable is the interpreter, alike for every script);
    /// 3. the command it was started as, when that is a link to its executable (`commandName`:
    ///    pw-record, a link to pw-cat; parecord, a link to pacat), the name the person typed;
    /// 4. its executable's file name;
    /// 5. the last part of its app key.
    /// What an app calls itself (application.name) is never its name, as any app can claim any;
    /// views show it apart, as what it "calls itself".
    public static func shownName(appKey: String, systemName: String?, commandName: String?, executable: String?) -> String {
        if let n = nonEmpty(systemName) { return n }
        let key = AppKey(parsing: appKey)
        if let key, ownIDKinds.contains(key.kind), !key.value.isEmpty { return key.value }
        if let key, key.kind == "script", let name = nonEmpty(lastComponent(withoutFindings(key.value))) { return name }
        if let n = nonEmpty(commandName) { return n }
        if let n = nonEmpty(executable.map(lastComponent)) { return n }
        let value = key.map { ["exe", "script"].contains($0.kind) ? withoutFindings($0.value) : $0.value } ?? appKey
        return nonEmpty(lastComponent(value)) ?? appKey
    }

    private static func nonEmpty(_ s: String?) -> String? { s.flatMap { $0.isEmpty ? nil : $0 } }

    private static func lastComponent(_ path: String) -> String { path.split(separator: "/").last.map(String.init) ?? path }

    /// An exe or script key's path without the `?NAME=VALUE&…` the classifier appends when code is
    /// loaded from outside the program (`IdentityClassifier`).
    private static func withoutFindings(_ value: String) -> String {
        value.firstIndex(of: "?").map { String(value[..<$0]) } ?? value
    }

    // MARK: step 1, on the command line

    /// The key for `text`, or nil to send it as typed (the daemon matches it with the apps it knows).
    public static func program(
        _ text: String, searchPath: String?, cwd: String,
        files: some ProgramFiles
    ) -> Result<Resolution, Failure>? {
        if let key = AppKey(parsing: text) {
            guard key.kind == "exe", key.value.hasPrefix("/"), let real = files.realPath(key.value), real != key.value else {
                return .success(Resolution(key: text, note: nil))
            }
            return .success(
                Resolution(
                    key: "exe:" + real,
                    note: "\(key.value) is a link to \(real), which its processes report; deciding for exe:\(real)"))
        }
        if text.contains("/") {
            guard let path = IdentityClassifier.absolute(text, cwd: cwd) else { return .failure(.noSuchFile(text)) }
            return program(at: path, named: text, files: files)
        }
        guard let found = lookUp(text, searchPath: searchPath, files: files) else { return nil }
        return program(at: found, named: text, files: files)
    }

    /// The key of the program at `path` (absolute), as the classifier would derive it.
    private static func program(at path: String, named text: String, files: some ProgramFiles) -> Result<Resolution, Failure> {
        switch files.kind(of: path) {
        case .missing: return .failure(.noSuchFile(path))
        case .notExecutable: return .failure(.notExecutable(path))
        case .executable: break
        }
        let shown = text == path ? path : "\(text) is \(path)"
        if scriptInterpreter(path, files: files) != nil {
            return .success(Resolution(key: "script:" + path, note: "\(shown), a script; deciding for script:\(path)"))
        }
        let real = files.realPath(path) ?? path
        let via = real == path ? "" : ", a link to \(real)"
        return .success(Resolution(key: "exe:" + real, note: "\(shown)\(via); deciding for exe:\(real)"))
    }

    /// The interpreter a `#!` line names (through `/usr/bin/env`), when it is one the classifier knows.
    public static func scriptInterpreter(_ path: String, files: some ProgramFiles) -> IdentityClassifier.Interpreter? {
        let head = files.head(of: path, count: 256)
        guard head.starts(with: Array("#!".utf8)) else { return nil }
        let line = String(decoding: head.dropFirst(2).prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        if words.first.map({ $0.hasSuffix("/env") }) == true {
            words.removeFirst()
            words.removeAll { $0.hasPrefix("-") }
        }
        return words.first.flatMap { IdentityClassifier.interpreter(forExecutable: $0) }
    }

    /// The first executable regular file called `name` in `searchPath` (colon-separated).
    public static func lookUp(_ name: String, searchPath: String?, files: some ProgramFiles) -> String? {
        for dir in (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where dir.hasPrefix("/") {
            let candidate = "\(dir)/\(name)"
            if files.kind(of: candidate) == .executable { return candidate }
        }
        return nil
    }

    // MARK: step 2, in the daemon

    /// The app `text` names among `apps`: an app key as it is, else the one app whose executable
    /// (or key) is called so. `apps` may name a key twice (a stored record and a live client): the
    /// first is listed.
    public static func match(_ text: String, among apps: [Candidate]) -> Result<AppKey, Failure> {
        if text.contains(":") {
            guard let key = AppKey(parsing: text) else { return .failure(.notAnAppKey(text)) }
            return .success(key)
        }
        func baseName(_ path: String) -> String { path.split(separator: "/").last.map(String.init) ?? path }
        let kernelKeys = Set(
            apps.filter { a in
                a.executable.map { $0 == text || baseName($0) == text } == true || baseName(a.key.value) == text
            }.map(\.key))
        func onePerKey(_ apps: [Candidate]) -> [Candidate] {
            var seen = Set<AppKey>()
            return apps.filter { seen.insert($0.key).inserted }
        }
        let byKernel = onePerKey(apps.filter { kernelKeys.contains($0.key) })
        if byKernel.count == 1 { return .success(byKernel[0].key) }
        if byKernel.count > 1 { return .failure(.ambiguous(text, byKernel)) }
        let byClaim = onePerKey(apps.filter { $0.displayName == text })
        if !byClaim.isEmpty { return .failure(.onlyClaimed(text, byClaim)) }
        return .failure(.unknown(text))
    }
}
