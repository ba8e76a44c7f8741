// earmuff.conf(5) from the shipped configuration example: every key the
// config parser accepts is documented, and a key missing from the example
// stops the build of the page.
import Consent
import Foundation
import Testing
@testable import EarmuffCLI

@Suite struct ManualPageTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/earmuff.conf").path

    @Test func configurationPageDocumentsEveryKeyAndTheAppsFormat() throws {
        let text = try String(contentsOfFile: Self.example, encoding: .utf8)
        let page = try ManualPage.configuration(example: text)
        let doc = ConfigExample.parse(text)
        #expect(Set(doc.settings.flatMap(\.keys)) == Set(Configuration.keys))
        for key in Configuration.keys { #expect(page.contains("\\fB\(Roff.escape(key)) ="), "\(key)") }
        for key in AppDeclaration.keys { #expect(page.contains(Roff.escape(key)), "\(key)") }
        #expect(page.contains(".SH APPS.D"))
        // The lists in the comments stay lists.
        #expect(page.contains(".nf\nprompt      it records silence"))
        for line in page.split(separator: "\n") where !line.hasPrefix(".") && !line.hasPrefix("'\\\"") {
            #expect(!line.hasPrefix("'"), "\(line)")
        }
    }

    @Test func aKeyMissingFromTheExampleIsAnError() throws {
        let text = try String(contentsOfFile: Self.example, encoding: .utf8)
        let without = text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("; auto-reset-days") }.joined(separator: "\n")
        #expect(throws: ManualError.self) { try ManualPage.configuration(example: without) }
    }

    @Test func roffEscapes() {
        #expect(Roff.escape("--kind") == "\\-\\-kind")
        #expect(Roff.escape(".hidden") == "\\&.hidden")
        #expect(Roff.escape("'quoted") == "\\&'quoted")
        #expect(Roff.escape("a\\b") == "a\\eb")
        #expect(Roff.escape("A → B") == "A \\(-> B")
    }
}
