// What an AccessDialog reply means, for each shape the portal backends send
// (read off the bus by AccessDialogReply.read; see its header for the table).

@testable import Service
import Testing

@Suite struct AccessDialogReplyTests {
    typealias Reply = AccessDialogReply

    /// Allow with each Remember option, as every backend that reports choices sends it.
    @Test func allowTakesTheRememberChoice() {
        #expect(Reply(response: 0, choices: ["lifespan": "always"]).verdict(choice: "lifespan") == .answered(.allow, .always))
        #expect(Reply(response: 0, choices: ["lifespan": "session"]).verdict(choice: "lifespan") == .answered(.allow, .session))
        #expect(
            Reply(response: 0, choices: ["lifespan": "1h"]).verdict(choice: "lifespan")
                == .answered(.allow, .timed(seconds: 3600)))
        #expect(Reply(response: 0, choices: ["lifespan": "once"]).verdict(choice: "lifespan") == .answered(.once, nil))
    }

    /// No choices with an allow (xdg-desktop-portal-kde 5.27; gnome-shell, which shows no radio
    /// choices): the dialog's default, always.
    @Test func allowWithoutChoicesIsTheDefault() {
        #expect(Reply(response: 0, choices: nil).verdict(choice: "lifespan") == .answered(.allow, nil))
        #expect(Reply(response: 0, choices: ["other": "true"]).verdict(choice: "lifespan") == .answered(.allow, nil))
    }

    /// A deny with choices (xdg-desktop-portal-kde 6) says how long; one without (GTK, GNOME)
    /// does not, and the caller asks.
    @Test func denyLastsWhatItSaysOrAsks() {
        #expect(
            Reply(response: 1, choices: ["lifespan": "1h"]).verdict(choice: "lifespan")
                == .answered(.deny, .timed(seconds: 3600)))
        #expect(Reply(response: 1, choices: ["lifespan": "once"]).verdict(choice: "lifespan") == .answered(.deny, .once))
        #expect(Reply(response: 1, choices: nil).verdict(choice: "lifespan") == .deniedForUnknownTime)
        #expect(Reply(response: 1, choices: [:]).verdict(choice: "lifespan") == .answered(.deny, nil))
    }

    @Test func closedOrUnknownAnswers() {
        #expect(Reply(response: 2, choices: nil).verdict(choice: "lifespan") == .dismissed)
        guard case .unreadable = Reply(response: 7, choices: nil).verdict(choice: "lifespan") else {
            Issue.record("response 7 was understood")
            return
        }
        guard case .unreadable = Reply(response: 0, choices: ["lifespan": "forever"]).verdict(choice: "lifespan") else {
            Issue.record("an option Earmuff never offered was understood")
            return
        }
    }
}

/// Which program a system D-Bus service file names for a bus name.
@Suite struct DesktopServiceFileTests {
    @Test func theExecOfTheFileThatOwnsTheName() {
        let gtk = """
            [D-BUS Service]
            Name=org.freedesktop.impl.portal.desktop.gtk
            Exec=/usr/libexec/xdg-desktop-portal-gtk --verbose
            SystemdService=xdg-desktop-portal-gtk.service
            """
        #expect(
            DesktopServices.executable(serviceFile: gtk, name: "org.freedesktop.impl.portal.desktop.gtk")
                == "/usr/libexec/xdg-desktop-portal-gtk")
        #expect(DesktopServices.executable(serviceFile: gtk, name: "org.freedesktop.impl.portal.desktop.gnome") == nil)
        #expect(DesktopServices.executable(serviceFile: "[D-BUS Service]\nExec=/usr/bin/x\n", name: "a.b") == nil)
    }
}
