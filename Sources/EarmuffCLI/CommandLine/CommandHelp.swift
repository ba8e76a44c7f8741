// `--help` text, printed from CommandTable: the overview and each
// subcommand's usage, description and options, wrapped for a terminal.
import Foundation

/// The usage text of `earmuff` and each subcommand.
public enum ClientUsage {
    /// What the overview says before the subcommands (also the manual's description).
    public static let intro =
        "Earmuff relays PulseAudio clients to the real sound server and gives every capture stream silence unless its app is granted what it captures: the microphone, system audio (a sink's monitor) or another app's audio."

    /// What every client subcommand's exit status means (also the manual's EXIT STATUS).
    public static let exitStatus =
        "Exit status: 0 success, 1 runtime failure (daemon unreachable, unknown app), 64 usage error; 'earmuff run' exits with its command's status."

    /// The overview printed by `earmuff --help`.
    public static var overview: String {
        let width = CommandTable.visible.map(\.name.count).max() ?? 0
        var out = "usage: earmuff SUBCOMMAND [OPTIONS]\n\n" + TextWrap.wrap(intro, width: 79) + "\n\nsubcommands:\n"
        for s in CommandTable.visible {
            let name = "  " + s.name + String(repeating: " ", count: width - s.name.count) + "  "
            out += TextWrap.hanging(name, s.summary, width: 79)
        }
        out +=
            "\n"
            + TextWrap.wrap(
                "Client subcommands take --control PATH (default $XDG_RUNTIME_DIR/earmuff/control). Run 'earmuff SUBCOMMAND --help' for details. " + exitStatus,
                width: 79) + "\n"
        return out
    }

    /// The usage lines of one subcommand (`usage: earmuff grant APP ...`).
    public static func usageLines(_ s: SubcommandSpec) -> String {
        var out = ""
        for (i, line) in s.synopsis.enumerated() {
            let head = i == 0 ? "usage: " : "       "
            // An option group in brackets is never split across lines.
            var depth = 0
            let glued = String(
                line.map { c -> Character in
                    if c == "[" { depth += 1 } else if c == "]" { depth -= 1 }
                    return c == " " && depth > 0 ? "\u{1F}" : c
                })
            out += TextWrap.hanging(head + "earmuff " + s.name + (line.isEmpty ? "" : " "), glued, width: 79, indent: head.count + 8 + s.name.count + 1)
                .replacingOccurrences(of: "\u{1F}", with: " ")
        }
        return out
    }

    /// The help text of one subcommand (the overview for nil or an unknown name).
    public static func text(for subcommand: String?) -> String {
        guard let name = subcommand, let s = CommandTable.spec(name) else { return overview }
        var out = usageLines(s) + "\n"
        for paragraph in TextWrap.paragraphs(s.description) {
            out += (paragraph.preformatted ? paragraph.text : TextWrap.wrap(paragraph.text, width: 79)) + "\n\n"
        }
        if !s.options.isEmpty {
            out += "options:\n" + options(s.options)
        }
        return out
    }

    /// Option lines: the label in a column of 19, the help wrapped beside it.
    static func options(_ options: [OptionSpec]) -> String {
        options.map { o in
            let label = "  " + o.label
            return TextWrap.hanging(
                label.count < 19 ? label + String(repeating: " ", count: 19 - label.count) : label + "\n" + String(repeating: " ", count: 19),
                o.help, width: 79, indent: 19)
        }.joined()
    }
}

/// Word wrapping for help text.
public enum TextWrap {
    public struct Paragraph: Equatable, Sendable {
        public let text: String
        /// Lines start with two spaces: printed as written.
        public let preformatted: Bool
    }

    /// The blank-line separated paragraphs of `text`.
    public static func paragraphs(_ text: String) -> [Paragraph] {
        text.components(separatedBy: "\n\n").map { $0.trimmingNewlines() }.filter { !$0.isEmpty }.map { p in
            Paragraph(text: p, preformatted: p.hasPrefix("  "))
        }
    }

    /// `text` wrapped at `width` columns, every line starting with `prefix`.
    static func wrap(_ text: String, width: Int, prefix: String = "") -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty && prefix.count + line.count + 1 + word.count > width {
                lines.append(prefix + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(prefix + line) }
        return lines.joined(separator: "\n")
    }

    /// `head` followed by `text` wrapped, continuation lines indented by `indent` (default: head's width); ends in a newline.
    static func hanging(_ head: String, _ text: String, width: Int, indent: Int? = nil) -> String {
        let lastLine = head.split(separator: "\n", omittingEmptySubsequences: false).last.map(String.init) ?? head
        let pad = String(repeating: " ", count: indent ?? lastLine.count)
        let wrapped = wrap(text, width: width, prefix: pad)
        let body = String(wrapped.dropFirst(pad.count))
        return head + body + "\n"
    }
}

extension String {
    func trimmingNewlines() -> String {
        var s = Substring(self)
        while s.first == "\n" { s.removeFirst() }
        while s.last == "\n" { s.removeLast() }
        return String(s)
    }
}
