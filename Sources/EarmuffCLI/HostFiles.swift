// The file system as the command line sees it, for the app-name rules
// (Consent/AppNameResolver.swift): what a typed path or a command on PATH is.
import Consent
import Foundation
import Glibc

struct HostFiles: ProgramFiles {
    func kind(of path: String) -> ProgramFileKind {
        var st = stat()
        guard unsafe stat(path, &st) == 0 else { return .missing }
        return unsafe st.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0 ? .executable : .notExecutable
    }

    func realPath(_ path: String) -> String? {
        guard let resolved = unsafe realpath(path, nil) else { return nil }
        defer { unsafe free(resolved) }
        return unsafe String(cString: resolved)
    }

    func head(of path: String, count: Int) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        return ((try? handle.read(upToCount: count)) ?? Data()).map { $0 }
    }
}
