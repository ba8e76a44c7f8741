// roff(7) text for the manual pages: escaping and the man(7) macros the
// generators use. Pure string functions.
import ControlProtocol

enum Roff {
    /// `text` escaped for a roff text line: backslashes, minus signs, and a
    /// leading `.` or `'` (which would start a request).
    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "→": out += "\\(->"
            case "–", "—": out += "\\(em"
            case "`": out += "\\(ga"
            default: out.append(c)
            }
        }
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }

    /// A filled paragraph: one text line (roff fills it).
    static func paragraph(_ text: String) -> String {
        ".PP\n" + escape(text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")) + "\n"
    }

    /// Lines kept as written, indented.
    static func preformatted(_ text: String) -> String {
        ".PP\n.RS 2\n" + verbatim(text) + ".RE\n"
    }

    /// `.nf` lines with their common indentation removed (the rest of it kept).
    static func verbatim(_ text: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let indent = lines.filter { !$0.allSatisfy { $0 == " " } }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return ".nf\n" + lines.map { escape(String($0.dropFirst(min(indent, $0.count)))) }.joined(separator: "\n") + "\n.fi\n"
    }

    /// The paragraphs of a description (CommandTable's convention: blank-line separated, two-space indented ones as written).
    static func description(_ text: String) -> String {
        TextWrap.paragraphs(text).map { $0.preformatted ? preformatted($0.text) : paragraph($0.text) }.joined()
    }

    /// A tagged paragraph: `tag` in bold (with an italic value), then its text.
    static func item(_ tag: String, value: String? = nil, _ text: String) -> String {
        let v = value.map { " \\fI\(escape($0))\\fR" } ?? ""
        return ".TP\n\\fB\(escape(tag))\\fR\(v)\n" + escape(text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")) + "\n"
    }
}
