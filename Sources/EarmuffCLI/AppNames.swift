// What a person types after `earmuff grant/deny/reset`, turned into the app key
// that the app's processes will really get.
//
// People name programs by command (`arecord`) or path (`/usr/bin/arecord`),
// and Debian's arecord is a link to aplay: the kernel reports
// /proc/PID/exe = /usr/bin/aplay, so a decision for `exe:/usr/bin/arecord`
// would never match. So, on the client side (with the user's own PATH):
//   - `exe:PATH` follows symlinks to the file the kernel will report;
//   - a path, or a command found on PATH, becomes `exe:REALPATH`, or for a
//     script with a known interpreter, `script:PATH` (the interpreter gets the
//     path it was started by, not the link's target);
//   - anything else goes to the daemon, which matches the apps it has seen.
// Every rewrite is said on stderr, so the person sees which key was decided.
import Consent
import Foundation
import Glibc

enum AppNames {
    struct Resolution: Equatable {
        /// The key to send.
        var key: String
        /// What was resolved and how, for stderr; nil when the text was used as given.
        var note: String?
    }

    enum Failure: Error, Equatable {
        case noSuchFile(String)
        case notExecutable(String)

        var message: String {
            switch self {
            case .noSuchFile(let p): "no file at \(p); give a command on PATH, a path, or an app key such as exe:/usr/bin/parecord"
            case .notExecutable(let p): "\(p) is not an executable file; give the program's path, or an app key"
            }
        }
    }

    /// The key for `text`, or nil to let the daemon match it against the apps it knows.
    static func resolve(_ text: String, searchPath: String?, cwd: String) -> Result<Resolution, Failure>? {
        if let key = AppKey(parsing: text) {
            guard key.kind == "exe", key.value.hasPrefix("/"), let real = realPath(key.value), real != key.value else {
                return .success(Resolution(key: text, note: nil))
            }
            return .success(Resolution(key: "exe:" + real,
                                       note: "\(key.value) is a link to \(real), which its processes report; deciding for exe:\(real)"))
        }
        if text.contains("/") {
            guard let path = IdentityClassifier.absolute(text, cwd: cwd) else { return .failure(.noSuchFile(text)) }
            return program(at: path, named: text)
        }
        guard let found = lookUp(text, searchPath: searchPath) else { return nil }
        return program(at: found, named: text)
    }

    /// The key of the program at `path` (absolute), as the classifier would derive it.
    private static func program(at path: String, named text: String) -> Result<Resolution, Failure> {
        var st = stat()
        guard stat(path, &st) == 0 else { return .failure(.noSuchFile(path)) }
        guard st.st_mode & S_IFMT == S_IFREG, access(path, X_OK) == 0 else { return .failure(.notExecutable(path)) }
        let shown = text == path ? path : "\(text) is \(path)"
        if scriptInterpreter(path) != nil {
            return .success(Resolution(key: "script:" + path, note: "\(shown), a script; deciding for script:\(path)"))
        }
        let real = realPath(path) ?? path
        let via = real == path ? "" : ", a link to \(real)"
        return .success(Resolution(key: "exe:" + real, note: "\(shown)\(via); deciding for exe:\(real)"))
    }

    /// The interpreter a `#!` line names (through `/usr/bin/env`), when it is one the classifier knows.
    static func scriptInterpreter(_ path: String) -> IdentityClassifier.Interpreter? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 256)) ?? Data()
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
    static func lookUp(_ name: String, searchPath: String?) -> String? {
        for dir in (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where dir.hasPrefix("/") {
            let candidate = "\(dir)/\(name)"
            var st = stat()
            if stat(candidate, &st) == 0, st.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        return nil
    }

    /// `path` with every symlink resolved, or nil when it does not exist.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
