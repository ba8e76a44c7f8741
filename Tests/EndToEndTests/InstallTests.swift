// scripts/install: what it puts where (earmuff, and the settings window with its
// desktop entry and icon), that the installed binaries run from PATH, and that
// --uninstall takes exactly that away. The binary is the one
// under test (--binary), so no release build runs here.

import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct InstallTests {
        static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path

        func script(_ args: [String], home: String) throws -> ToolResult {
            var env = Tool.privateEnvironment(root: home)
            env["PATH"] = "/usr/bin:/bin"
            return try ChildProcess.spawn(
                executable: "\(Self.root)/scripts/install", arguments: args, environment: env,
                stdoutPath: "\(home)/install.out", stderrPath: "\(home)/install.err",
                maxLifetime: 120
            ).finish(timeout: 90)
        }

        @Test func installsWherePathFindsItAndUninstalls() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let prefix = "\(dir)/prefix"
            let binary = try EarmuffProcess.locateBinary()
            let r = try script(["--prefix", prefix, "--binary", binary], home: dir)
            #expect(r.succeeded, "\(r)")
            #expect(r.stderr.contains("\(prefix)/bin is not on your PATH"), "\(r)")
            let example = try String(contentsOfFile: "\(prefix)/share/doc/earmuff/earmuff.conf.example", encoding: .utf8)
            #expect(example == (try String(contentsOfFile: "\(Self.root)/config/earmuff.conf", encoding: .utf8)))

            // As the README prints it: `earmuff ...` found through PATH.
            var env = Tool.privateEnvironment(root: dir)
            env["PATH"] = "\(prefix)/bin:/usr/bin:/bin"
            let version = try ChildProcess.spawn(
                executable: "/bin/sh", arguments: ["-c", "earmuff --version && earmuff setup --help"],
                environment: env, stdoutPath: "\(dir)/v.out", stderrPath: "\(dir)/v.err",
                maxLifetime: 60
            ).finish(timeout: 30)
            #expect(version.succeeded, "\(version)")
            #expect(version.stdoutText.hasPrefix("earmuff "))
            #expect(version.stdoutText.contains("usage: earmuff setup"))

            // The settings window, from beside the binary, with its desktop entry and icon.
            let window = try ChildProcess.spawn(
                executable: "/bin/sh", arguments: ["-c", "earmuff-settings --help"],
                environment: env, stdoutPath: "\(dir)/s.out", stderrPath: "\(dir)/s.err",
                maxLifetime: 60
            ).finish(timeout: 30)
            #expect(window.succeeded && window.stdoutText.contains("usage: earmuff-settings"), "\(window)")
            let entry = try String(contentsOfFile: "\(prefix)/share/applications/org.earmuff.Settings.desktop", encoding: .utf8)
            #expect(entry.contains("\nExec=\(prefix)/bin/earmuff-settings\n"), "the desktop starts it by its path:\n\(entry)")
            #expect(entry.contains("\nIcon=org.earmuff.Settings\n"))
            #expect(FileManager.default.fileExists(atPath: "\(prefix)/share/icons/hicolor/scalable/apps/org.earmuff.Settings.svg"))
            // The indicator, started with the session by its autostart entry.
            #expect(FileManager.default.isExecutableFile(atPath: "\(prefix)/bin/earmuff-indicator"))
            let autostart = try String(contentsOfFile: "\(prefix)/etc/xdg/autostart/org.earmuff.Indicator.desktop", encoding: .utf8)
            #expect(autostart.contains("\nExec=\(prefix)/bin/earmuff-indicator\n"), "\(autostart)")

            let again = try script(["--prefix", prefix, "--binary", binary], home: dir)
            #expect(again.succeeded, "\(again)")
            let gone = try script(["--prefix", prefix, "--uninstall"], home: dir)
            #expect(gone.succeeded, "\(gone)")
            for f in [
                "bin/earmuff", "share/doc/earmuff/earmuff.conf.example", "share/doc/earmuff/README.md", "bin/earmuff-settings",
                "share/applications/org.earmuff.Settings.desktop", "share/icons/hicolor/scalable/apps/org.earmuff.Settings.svg",
                "bin/earmuff-indicator",
            ] {
                #expect(!FileManager.default.fileExists(atPath: "\(prefix)/\(f)"), "\(f) left")
            }
            #expect(!FileManager.default.fileExists(atPath: "\(prefix)/etc/xdg/autostart/org.earmuff.Indicator.desktop"))
        }

        @Test func stagesUnderDestdirForPackages() throws {
            let dir = try Helpers.scratch()
            defer { TempDir.remove(dir) }
            let r = try script(["--prefix", "/usr", "--destdir", "\(dir)/stage", "--binary", try EarmuffProcess.locateBinary()], home: dir)
            #expect(r.succeeded, "\(r)")
            #expect(FileManager.default.isExecutableFile(atPath: "\(dir)/stage/usr/bin/earmuff"))
            #expect(FileManager.default.fileExists(atPath: "\(dir)/stage/usr/share/doc/earmuff/earmuff.conf.example"))
            #expect(FileManager.default.isExecutableFile(atPath: "\(dir)/stage/usr/bin/earmuff-settings"))
            let entry = try String(contentsOfFile: "\(dir)/stage/usr/share/applications/org.earmuff.Settings.desktop", encoding: .utf8)
            #expect(entry.contains("\nExec=/usr/bin/earmuff-settings\n"), "the staging directory is in the entry:\n\(entry)")
            let autostart = try String(contentsOfFile: "\(dir)/stage/etc/xdg/autostart/org.earmuff.Indicator.desktop", encoding: .utf8)
            #expect(autostart.contains("\nExec=/usr/bin/earmuff-indicator\n"), "\(autostart)")
            let bad = try script(["--prefix", "relative"], home: dir)
            #expect(bad.status == 1 && bad.stderr.contains("--prefix must be an absolute path"), "\(bad)")
        }
    }
}
