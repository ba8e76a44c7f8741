// Step 1 of the app-name rules (Consent/AppNameResolver.swift) on the real file
// system, as `earmuff grant NAME` runs it: links followed to what the kernel will
// report, scripts named by their path, commands found on PATH.
import Consent
import Foundation
import Testing
@testable import EarmuffCLI

@Suite struct AppNamesTests {
    /// A directory with an executable `tool`, a link `alias` to it, a script, and a plain file.
    private final class Tree {
        let dir: String
        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("earmuff-names-\(UUID().uuidString)").path
            let fm = FileManager.default
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try Data([0x7F, 0x45, 0x4C, 0x46]).write(to: URL(fileURLWithPath: dir + "/tool"))
            try Data("#!/usr/bin/env -S python3 -u\nprint(1)\n".utf8).write(to: URL(fileURLWithPath: dir + "/script.py"))
            try Data("notes".utf8).write(to: URL(fileURLWithPath: dir + "/notes.txt"))
            for f in ["tool", "script.py"] { try fm.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir + "/" + f) }
            try fm.createSymbolicLink(atPath: dir + "/alias", withDestinationPath: "tool")
        }
        deinit { try? FileManager.default.removeItem(atPath: dir) }
    }

    private func resolve(_ text: String, _ t: Tree, path: String? = nil) -> Result<AppNameResolver.Resolution, AppNameResolver.Failure>? {
        AppNameResolver.program(text, searchPath: path ?? t.dir, cwd: t.dir, files: HostFiles())
    }

    @Test func aLinkIsDecidedForTheFileTheKernelReports() throws {
        let t = try Tree()
        let real = try #require(HostFiles().realPath(t.dir + "/tool"))
        #expect(try resolve("alias", t)?.get() == .init(key: "exe:" + real, note: "alias is \(t.dir)/alias, a link to \(real); deciding for exe:\(real)"))
        #expect(try resolve("exe:\(t.dir)/alias", t)?.get().key == "exe:" + real)
        #expect(try resolve("./tool", t)?.get().key == "exe:" + real)
        // An app key that needs no rewriting goes as typed, without a note.
        #expect(try resolve("exe:" + real, t)?.get() == .init(key: "exe:" + real, note: nil))
        #expect(try resolve("flatpak:org.example.Notes", t)?.get() == .init(key: "flatpak:org.example.Notes", note: nil))
    }

    @Test func aScriptIsDecidedByItsPath() throws {
        let t = try Tree()
        let r = try #require(try resolve("script.py", t)?.get())
        #expect(r.key == "script:\(t.dir)/script.py")
        #expect(r.note?.contains("a script") == true)
        #expect(AppNameResolver.scriptInterpreter(t.dir + "/tool", files: HostFiles()) == nil)
    }

    @Test func aNameNotOnPathGoesToTheDaemonAndBadPathsAreRefused() throws {
        let t = try Tree()
        #expect(resolve("Firefox", t) == nil)
        #expect(resolve("tool", t, path: "/nonexistent:relative") == nil)
        #expect(resolve("./missing", t) == .failure(.noSuchFile("\(t.dir)/missing")))
        #expect(resolve("./notes.txt", t) == .failure(.notExecutable("\(t.dir)/notes.txt")))
        #expect(
            AppNameResolver.Failure.noSuchFile("/x").description
                == "no file at /x; give a command on PATH, a path, or an app key such as exe:/usr/bin/parecord")
        #expect(AppNameResolver.lookUp("notes.txt", searchPath: t.dir, files: HostFiles()) == nil)
        #expect(AppNameResolver.lookUp("tool", searchPath: "/nonexistent:" + t.dir, files: HostFiles()) == t.dir + "/tool")
    }
}
