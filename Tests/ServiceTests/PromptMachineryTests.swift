// The prompt machinery without a daemon: the timer loop, the one-at-a-time
// prompt command, desktop entry lookup and the channel order of prompt-via.

import Consent
import Foundation
import Glibc
@testable import Service
import Testing
import TestSupport

@Suite struct DeadlineTimerTests {
    /// Deadlines fire in time order, on time, and a cancelled or replaced one never fires.
    @Test func firesInOrderAndHonoursCancel() async throws {
        let timers = try DeadlineTimers()
        timers.start()
        defer { timers.stopAndJoin() }
        let fired = Locked<[(UInt64, Double)]>([])
        let start = DeadlineTimers.now()
        for (key, after) in [(1, 0.3), (2, 0.1), (3, 0.2), (4, 0.15), (5, 0.25)] as [(UInt64, Double)] {
            timers.schedule(key: key, after: after) { fired.withLock { $0.append((key, DeadlineTimers.now() - start)) } }
        }
        timers.cancel(key: 4)
        timers.schedule(key: 5, after: 0.05) { fired.withLock { $0.append((55, DeadlineTimers.now() - start)) } }
        let done = await Wait.until(timeout: 30) { fired.withLock { $0.count } == 4 }
        #expect(done)
        let got = fired.withLock { $0 }
        #expect(got.map(\.0) == [55, 2, 3, 1], "\(got)")
        for (key, at) in got {
            let due: Double = [55: 0.05, 2: 0.1, 3: 0.2, 1: 0.3][key] ?? 0
            #expect(at >= due, "timer \(key) fired early: \(at) s < \(due) s")
        }
    }

    /// A thousand timers scheduled at once all fire, each no earlier than its time.
    @Test func manyTimers() async throws {
        let timers = try DeadlineTimers()
        timers.start()
        defer { timers.stopAndJoin() }
        let early = Locked(0)
        let count = Locked(0)
        let start = DeadlineTimers.now()
        for i in 0..<1000 {
            let due = Double(i % 50) / 100
            timers.schedule(key: UInt64(i), after: due) {
                if DeadlineTimers.now() - start < due { early.withLock { $0 += 1 } }
                count.withLock { $0 += 1 }
            }
        }
        #expect(await Wait.until(timeout: 30) { count.withLock { $0 } == 1000 })
        #expect(early.withLock { $0 } == 0)
    }
}

@Suite struct PromptCommandRunnerTests {
    /// Commands run one at a time, in order; cancelling kills the running one (its
    /// process group, including what it started) and drops queued ones.
    @Test func oneAtATimeAndCancelKills() async throws {
        let dir = try TempDir.make(prefix: "earmuff-runner")
        defer { TempDir.remove(dir) }
        let timers = try DeadlineTimers()
        timers.start()
        defer { timers.stopAndJoin() }
        let exits = Locked<[(UInt64, Int32, Bool)]>([])
        let runner = try PromptCommandRunner(
            command: "echo \"start $EARMUFF_N\" >> \(dir)/log; sleep 60 & wait", timers: timers
        ) { prompt, status, cancelled, _ in exits.withLock { $0.append((prompt, status, cancelled)) } }
        runner.start()
        defer { runner.stopAndJoin() }
        for n in 1...3 { runner.enqueue(.init(prompt: UInt64(n), environment: ["EARMUFF_N": "\(n)"])) }
        func log() -> String { (try? String(contentsOfFile: "\(dir)/log", encoding: .utf8)) ?? "" }
        #expect(await Wait.until(timeout: 30) { log() == "start 1\n" })
        #expect(runner.runningCount == 1)
        runner.cancel(prompt: 2) // queued: never runs
        runner.cancel(prompt: 1) // running: killed
        #expect(await Wait.until(timeout: 30) { log() == "start 1\nstart 3\n" }, "\(log())")
        #expect(exits.withLock { $0.map(\.0) } == [1])
        #expect(exits.withLock { $0.first?.2 } == true)
        runner.cancel(prompt: 3)
        #expect(await Wait.until(timeout: 30) { exits.withLock { $0.count } == 2 })
        #expect(runner.runningCount == 0)
        #expect(!log().contains("start 2"))
    }

    /// A command that exits reports its status, not cancelled, and the first line it printed.
    @Test func exitStatusAndFirstLineAreReported() async throws {
        let timers = try DeadlineTimers()
        timers.start()
        defer { timers.stopAndJoin() }
        let exits = Locked<[(UInt64, Int32, Bool, String)]>([])
        let runner = try PromptCommandRunner(command: "printf ' 2h \\nmore\\n'; exit 7", timers: timers) { p, s, c, o in
            exits.withLock { $0.append((p, s, c, o)) }
        }
        runner.start()
        defer { runner.stopAndJoin() }
        runner.enqueue(.init(prompt: 9, environment: [:]))
        #expect(await Wait.until(timeout: 30) { exits.withLock { $0.count } == 1 })
        let e = exits.withLock { $0.first }
        #expect(e?.0 == 9 && e?.1 == 7 && e?.2 == false && e?.3 == "2h", "\(String(describing: e))")
    }

    @Test func aPromptCommandNamesItsLifespan() {
        #expect(PromptAnswers.commandLifespan("", now: 10) == nil)
        #expect(PromptAnswers.commandLifespan("session", now: 10) == .session)
        #expect(PromptAnswers.commandLifespan("once", now: 10) == .once)
        #expect(PromptAnswers.commandLifespan("always", now: 10) == .always)
        #expect(PromptAnswers.commandLifespan("2h", now: 10) == .until(7210))
        #expect(PromptAnswers.commandLifespan("Allow", now: 10) == nil)
    }
}

@Suite struct DesktopEntryTests {
    @Test func execProgramSkipsEnvAndArguments() {
        #expect(DesktopEntries.execProgram("firefox-esr %u") == "firefox-esr")
        #expect(DesktopEntries.execProgram("env GDK_BACKEND=x11 /opt/zoom/ZoomLauncher %U") == "/opt/zoom/ZoomLauncher")
        #expect(DesktopEntries.execProgram("\"/usr/bin/obs\" --startreplaybuffer") == "/usr/bin/obs")
    }

    @Test func parseReadsTheMainGroupOnly() {
        let text = """
            [Desktop Entry]
            Type=Application
            Name=Recorder
            Name[de]=Rekorder
            Icon=audio-recorder
            Exec=/usr/bin/recorder --new
            TryExec=recorder

            [Desktop Action New]
            Name=Something else
            Exec=/usr/bin/other
            """
        let p = DesktopEntries.parse(text)
        #expect(p?.entry == DesktopEntries.Entry(name: "Recorder", icon: "audio-recorder"))
        #expect(p?.programs == ["/usr/bin/recorder", "recorder"])
        #expect(DesktopEntries.parse("[Desktop Entry]\nType=Link\nName=x\n") == nil)
        #expect(DesktopEntries.parse("[Desktop Entry]\nType=Application\nName=x\nHidden=true\n") == nil)
    }

    /// A host app is named by the entry whose Exec is its executable; a Flatpak by its id's entry.
    @Test func lookupByExecutableAndByID() async throws {
        let dir = try TempDir.make(prefix: "earmuff-entries")
        defer { TempDir.remove(dir) }
        try TempDir.makeDirectory("\(dir)/share/applications")
        try TempDir.makeDirectory("\(dir)/bin")
        let exe = "\(dir)/bin/voice-notes"
        try "#!/bin/sh\n".write(toFile: exe, atomically: true, encoding: .utf8)
        unsafe chmod(exe, 0o755)
        try "[Desktop Entry]\nType=Application\nName=Voice Notes\nIcon=notes\nExec=voice-notes %f\n"
            .write(toFile: "\(dir)/share/applications/notes.desktop", atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nType=Application\nName=Firefox\nIcon=org.mozilla.firefox\nExec=/usr/bin/flatpak run org.mozilla.firefox\n"
            .write(toFile: "\(dir)/share/applications/org.mozilla.firefox.desktop", atomically: true, encoding: .utf8)
        let entries = try DesktopEntries(environment: [
            "HOME": dir, "XDG_DATA_HOME": "\(dir)/share",
            "XDG_DATA_DIRS": "\(dir)/none", "PATH": "\(dir)/bin",
        ])
        let key = AppKey(kind: "exe", value: exe)
        #expect(entries.entry(for: key, executable: exe) == nil, "there is no index before the first refresh")
        #expect(await Wait.until(timeout: 30) { entries.entry(for: key, executable: exe) != nil })
        #expect(
            entries.entry(for: AppKey(kind: "exe", value: exe), executable: exe)
                == DesktopEntries.Entry(name: "Voice Notes", icon: "notes"))
        #expect(
            entries.entry(for: AppKey(kind: "flatpak", value: "org.mozilla.firefox"), executable: "/app/lib/firefox/firefox")?.name
                == "Firefox")
        #expect(entries.entry(for: AppKey(kind: "exe", value: "/usr/bin/true"), executable: "/usr/bin/true") == nil)
    }
}

@Suite struct PromptViaOrderTests {
    @Test func desktopChannelsStopAtTheCommand() {
        #expect(PromptDelivery.desktopChannels(PromptChannel.auto, commandConfigured: true) == [.portal, .notification])
        #expect(PromptDelivery.desktopChannels([.notification, .command, .portal], commandConfigured: true) == [.notification])
        #expect(PromptDelivery.desktopChannels([.command, .portal], commandConfigured: false) == [.portal])
        #expect(PromptDelivery.desktopChannels([.command, .portal], commandConfigured: true) == [])
        #expect(PromptDelivery.desktopChannels([.agent], commandConfigured: false) == [])
    }
}
