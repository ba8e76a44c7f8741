// What the desktop's Access dialog answered, in every shape the backends send.
//
// `org.freedesktop.impl.portal.Access.AccessDialog` replies `(u response,
// a{sv} results)`: 0 granted, 1 denied, 2 closed. The choices the person made
// come in `results`, and each backend writes them its own way:
//
//   xdg-desktop-portal-gtk 1.14 (Debian 12),  "choices": <a{sv}>, {"lifespan": <"1h">},
//   xdg-desktop-portal-gnome 46 and later     only with response 0
//   xdg-desktop-portal-gtk after 1.14          "choices": <a(ss)>, [("lifespan", "1h")],
//                                              only with response 0
//   xdg-desktop-portal-kde 6                   "choices": <a(ss)>, with 0 and with 1
//   xdg-desktop-portal-kde 5.27                no choices at all (a deny there is
//                                              lasting: asking could not offer them)
//   gnome-shell's own dialog (GNOME 43-45)     check boxes only, as top-level
//                                              entries {"id": <"true">}; radio
//                                              choices are not shown
//
// So a deny often says nothing about how long: `verdict` then asks for a
// follow-up question rather than guessing a lifespan the person did not pick.
import Consent
import ControlProtocol
import DBus
import Wording

/// An AccessDialog reply as read from the bus.
struct AccessDialogReply: Equatable, Sendable {
    var response: UInt32
    /// The option picked for each choice; nil when the reply carries no choices at all.
    var choices: [String: String]?

    /// What the reply means for a dialog whose lifespan choice is `choice`.
    enum Verdict: Equatable, Sendable {
        /// Answered, for the lifespan picked (nil: the dialog's default, always).
        case answered(Consent.PromptAnswer, RequestedLifespan?)
        /// Denied, and the backend did not say for how long.
        case deniedForUnknownTime
        /// Closed without an answer.
        case dismissed
        /// A reply no known backend sends; why.
        case unreadable(String)
    }

    func verdict(choice: String) -> Verdict {
        var lifespan: RequestedLifespan?
        if let picked = choices?[choice] {
            guard let l = RequestedLifespan(text: picked) else {
                return .unreadable("the \(choice) choice is \"\(picked)\", which is no lifespan Earmuff offered")
            }
            lifespan = l
        }
        switch response {
        case 0: return lifespan == .once ? .answered(.once, nil) : .answered(.allow, lifespan)
        case 1:
            guard choices != nil else { return .deniedForUnknownTime }
            return .answered(.deny, lifespan)
        case 2: return .dismissed
        default: return .unreadable("response \(response) (0, 1 and 2 are defined)")
        }
    }

    /// Reads `(u a{sv})`, taking the choices from `"choices"` as `a(ss)` or `a{sv}` of strings,
    /// or from top-level string entries named after `choiceIDs`. Throws, naming the
    /// signature, for a reply of any other shape.
    static func read(_ m: BusMessage, choiceIDs: Set<String>) throws(BusError) -> AccessDialogReply {
        var reply = AccessDialogReply(response: try m.readUInt32(), choices: nil)
        var topLevel: [String: String] = [:]
        guard let (t, contents) = try m.peek(), t == "a", contents == "{sv}" else {
            throw BusError(name: "earmuff.UnknownReply", message: "results are not a{sv}")
        }
        try m.enter("a", "{sv}")
        while try m.peek() != nil {
            try m.enter("e", "sv")
            let key = try m.readString()
            guard let (vt, signature) = try m.peek(), vt == "v" else {
                throw BusError(name: "earmuff.UnknownReply", message: "entry \(key) has no variant")
            }
            try m.enter("v", signature)
            switch (key, signature) {
            case ("choices", "a(ss)"):
                var picked: [String: String] = [:]
                try m.enter("a", "(ss)")
                while try m.peek() != nil {
                    try m.enter("r", "ss")
                    let id = try m.readString()
                    picked[id] = try m.readString()
                    try m.exit()
                }
                try m.exit()
                reply.choices = picked
            case ("choices", "a{sv}"):
                var picked: [String: String] = [:]
                try m.enter("a", "{sv}")
                while try m.peek() != nil {
                    try m.enter("e", "sv")
                    let id = try m.readString()
                    if let (_, s) = try m.peek(), s == "s" {
                        try m.enter("v", "s")
                        picked[id] = try m.readString()
                        try m.exit()
                    } else {
                        try m.skip("v")
                    }
                    try m.exit()
                }
                try m.exit()
                reply.choices = picked
            case ("choices", _):
                throw BusError(name: "earmuff.UnknownReply", message: "choices of signature \(signature)")
            case (_, "s") where choiceIDs.contains(key):
                topLevel[key] = try m.readString()
            default:
                try m.skip(signature)
            }
            try m.exit()
            try m.exit()
        }
        try m.exit()
        if reply.choices == nil, !topLevel.isEmpty { reply.choices = topLevel }
        return reply
    }
}
