// Lexing shared by earmuff.conf and apps.d files: lines, `key = value`,
// quotes and trailing comments, and the "did you mean" suggestion for an
// unknown key.

enum ConfigLexer {
    enum Line {
        case blank
        case section(String)
        case setting(key: String, value: String)
    }

    /// Lines with 1-based numbers (LF or CRLF endings).
    static func lines(_ text: String) -> [(Int, String)] {
        text.split(omittingEmptySubsequences: false, whereSeparator: { $0.isNewline })
            .enumerated().map { ($0.offset + 1, String($0.element)) }
    }

    static func classify(_ raw: String, file: String, number: Int) throws(ConfigError) -> Line {
        let line = stripComment(raw).trimmingWhitespace()
        if line.isEmpty { return .blank }
        if line.hasPrefix("[") {
            guard line.hasSuffix("]"), line.count > 2 else {
                throw ConfigError(file: file, line: number, message: "section header \(line) is not closed; write [kind:value]")
            }
            return .section(String(line.dropFirst().dropLast()).trimmingWhitespace())
        }
        guard let eq = line.firstIndex(of: "=") else {
            throw ConfigError(file: file, line: number, message: "expected \"key = value\", got \"\(line)\"")
        }
        let key = String(line[..<eq]).trimmingWhitespace()
        guard !key.isEmpty else {
            throw ConfigError(file: file, line: number, message: "no key before \"=\"; write \"key = value\"")
        }
        return .setting(key: key, value: String(line[line.index(after: eq)...]).trimmingWhitespace())
    }

    /// Cuts a whole-line comment, or a `;`/`#` that follows whitespace outside quotes.
    static func stripComment(_ line: String) -> String {
        var quote: Character?
        var previous: Character = " "
        var escaped = false
        for i in line.indices {
            let c = line[i]
            defer { previous = c }
            if escaped { escaped = false; continue }
            if c == "\\" && quote == "\"" { escaped = true; continue }
            if let q = quote {
                if c == q { quote = nil }
                continue
            }
            // A quote opens only at the start of a word, so "user's" stays plain text.
            if (c == "\"" || c == "'") && (previous == " " || previous == "\t" || previous == "=") {
                quote = c
                continue
            }
            if (c == ";" || c == "#") && (previous == " " || previous == "\t") {
                return String(line[..<i])
            }
        }
        return line
    }

    /// Removes one pair of surrounding double quotes, undoing `\"` and `\\`.
    static func unquote(_ value: String) -> String {
        guard value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") else { return value }
        var out = ""
        var escaped = false
        for c in value.dropFirst().dropLast() {
            if escaped { out.append(c); escaped = false; continue }
            if c == "\\" { escaped = true; continue }
            out.append(c)
        }
        return out
    }
}

/// `unknown key "x"; did you mean "y"? (keys: …)`.
func unknownKeyMessage(_ key: String, known: [String]) -> String {
    "unknown key \"\(key)\"\(suggestion(key, among: known)) (keys: \(known.joined(separator: ", ")))"
}

/// `; did you mean "y"?` for the closest of `candidates`, or "" when none is close.
func suggestion(_ word: String, among candidates: [String]) -> String {
    let lowered = word.lowercased()
    var best: (String, Int)?
    for c in candidates {
        let d = editDistance(lowered, c)
        if d <= max(2, c.count / 3), d < (best?.1 ?? Int.max) { best = (c, d) }
    }
    return best.map { "; did you mean \"\($0.0)\"?" } ?? ""
}

/// Levenshtein distance over characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    var row = Array(0...b.count)
    for i in 1...a.count {
        var diagonal = row[0]
        row[0] = i
        for j in stride(from: 1, through: b.count, by: 1) {
            let above = row[j]
            row[j] = min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1))
            diagonal = above
        }
    }
    return row[b.count]
}
