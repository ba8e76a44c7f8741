// What EarmuffKit takes from the app's environment, the way libpulse takes it: where
// the server is (`PULSE_SERVER`, else `$XDG_RUNTIME_DIR/pulse/native`), and the client
// properties an app declares without code (`PULSE_PROP`, `PULSE_PROP_<key>`), among
// them the purpose Earmuff shows, `application.capture.purpose`. Pure.

/// Where the sound server (Earmuff, in front of it) listens, and what the app declares.
public enum ClientEnvironment {
    /// The Unix socket paths to try, in order: each `unix:PATH` or absolute `PATH` of
    /// `PULSE_SERVER` (entries for other machines or TCP are skipped: Earmuff listens on
    /// Unix sockets only), else `$XDG_RUNTIME_DIR/pulse/native`.
    public static func serverPaths(_ environment: [String: String]) -> [String] {
        if let list = environment["PULSE_SERVER"], !list.allSatisfy({ $0 == " " || $0 == "\t" }) {
            return list.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { entry -> String? in
                var e = Substring(entry)
                if e.hasPrefix("{") {
                    // `{machine-id}address`: meant for the machine named; libpulse skips it elsewhere.
                    guard let close = e.firstIndex(of: "}") else { return nil }
                    e = e[e.index(after: close)...]
                }
                if e.hasPrefix("unix:") { e = e.dropFirst(5) }
                return e.hasPrefix("/") ? String(e) : nil
            }
        }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return [] }
        return [runtime + "/pulse/native"]
    }

    /// The client properties of `PULSE_PROP` (`key=value key2='a b'`) and `PULSE_PROP_<key>=value`
    /// (which win), as libpulse reads them for every client.
    public static func declaredProperties(_ environment: [String: String]) -> [String: String] {
        var out = environment["PULSE_PROP"].map(parsePropertyList) ?? [:]
        for (name, value) in environment where name.hasPrefix("PULSE_PROP_") && name.count > 11 {
            out[String(name.dropFirst(11))] = value
        }
        return out
    }

    /// `key=value` pairs separated by blanks; values may be quoted with ' or ", and \ escapes
    /// the next character (libpulse's `pa_proplist_from_string`). A pair without `=` is skipped.
    static func parsePropertyList(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        var chars = Array(text)[...]
        func skipBlanks() { while let c = chars.first, c == " " || c == "\t" || c == "\n" { chars.removeFirst() } }
        while true {
            skipBlanks()
            guard !chars.isEmpty else { return out }
            var key = ""
            while let c = chars.first, c != "=", c != " ", c != "\t", c != "\n" {
                key.append(c)
                chars.removeFirst()
            }
            guard chars.first == "=" else { continue }
            chars.removeFirst()
            var value = ""
            var quote: Character?
            if let c = chars.first, c == "'" || c == "\"" {
                quote = c
                chars.removeFirst()
            }
            while let c = chars.first {
                if let q = quote, c == q {
                    chars.removeFirst()
                    break
                }
                if quote == nil, c == " " || c == "\t" || c == "\n" { break }
                chars.removeFirst()
                if c == "\\", let next = chars.first {
                    value.append(next)
                    chars.removeFirst()
                } else {
                    value.append(c)
                }
            }
            if !key.isEmpty { out[key] = value }
        }
    }
}
