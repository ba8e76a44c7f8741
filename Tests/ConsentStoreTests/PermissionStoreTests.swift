import Consent
@testable import ConsentStore
import Dispatch
import Glibc
import Synchronization
import Testing

private let firefox = AppKey(kind: "flatpak", value: "org.mozilla.firefox")
private let pacat = AppKey(kind: "exe", value: "/usr/bin/pacat")

extension StoreTests {
    // MARK: Paths

    @Test func defaultPathPrefersXDGStateHome() {
        #expect(
            PermissionStore.defaultPath(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"])
                == "/s/earmuff/permissions.sqlite")
        #expect(
            PermissionStore.defaultPath(environment: ["HOME": "/home/u"])
                == "/home/u/.local/state/earmuff/permissions.sqlite")
        #expect(
            PermissionStore.defaultPath(environment: ["HOME": "/home/u/"])
                == "/home/u/.local/state/earmuff/permissions.sqlite")
        // Relative XDG values are ignored, as the base-directory spec says.
        #expect(
            PermissionStore.defaultPath(environment: ["XDG_STATE_HOME": "rel", "HOME": "/home/u"])
                == "/home/u/.local/state/earmuff/permissions.sqlite")
        #expect(PermissionStore.defaultPath(environment: [:]).hasSuffix("/.local/state/earmuff/permissions.sqlite"))
    }

    @Test func createsPrivateDirectoriesAndFiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/a/b/earmuff/permissions.sqlite"
        let store = try PermissionStore(path: path)
        try store.setDecision(Decision(appKey: pacat, state: .granted, reason: .user))
        #expect(permissionBits(dir.path + "/a") == 0o700)
        #expect(permissionBits(dir.path + "/a/b") == 0o700)
        #expect(permissionBits(dir.path + "/a/b/earmuff") == 0o700)
        #expect(permissionBits(path) == 0o600)
        // WAL mode: the -wal and -shm files exist while the store is open, and are private too.
        #expect(permissionBits(path + "-wal") == 0o600)
        #expect(permissionBits(path + "-shm") == 0o600)
        store.close()
    }

    @Test func tightensModeOfExistingFile() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/permissions.sqlite"
        let fd = unsafe open(path, O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0)
        #expect(fchmod(fd, 0o644) == 0)
        close(fd)
        let store = try PermissionStore(path: path)
        #expect(permissionBits(path) == 0o600)
        store.close()
    }

    @Test func parentThatIsAFileIsReported() throws {
        let dir = try TemporaryDirectory()
        let blocker = dir.path + "/file"
        let fd = unsafe open(blocker, O_CREAT | O_WRONLY, 0o600)
        close(fd)
        #expect(
            throws: StoreError.fileSystem(
                operation: "mkdir \(blocker)", errno: .notDirectory,
                path: blocker + "/x/permissions.sqlite")
        ) {
            _ = try PermissionStore(path: blocker + "/x/permissions.sqlite")
        }
    }

    // MARK: Schema

    @Test func schemaVersionIsSet() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        try PermissionStore(path: path).close()
        let db = try SQLiteDatabase(path: path, create: false)
        #expect(try db.query("PRAGMA user_version").first?.int64(0) == Int64(PermissionStore.schemaVersion))
        #expect(try db.query("PRAGMA journal_mode").first?.string(0) == "wal")
        let tables = try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .map { try $0.string(0) }
        #expect(tables == ["access", "apps", "decisions", "events", "timed_decisions", "usage"])
    }

    @Test func refusesNewerSchemaNamingTheFile() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        try PermissionStore(path: path).close()
        let db = try SQLiteDatabase(path: path, create: false)
        try db.run("PRAGMA user_version = 7")
        db.close()

        let error = #expect(throws: StoreError.self) { _ = try PermissionStore(path: path) }
        #expect(error == .unsupportedSchemaVersion(found: 7, supported: PermissionStore.schemaVersion, path: path))
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains(path))
        #expect(text.contains("schema version 7"))
    }

    /// A file written by schema 1 (decisions and a usage row) opens, keeps both, and logs the new fields.
    @Test func migratesAVersion1File() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let db = try SQLiteDatabase(path: path)
        try db.execute(
            script: """
                CREATE TABLE decisions (app_key TEXT NOT NULL, capability TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('undetermined', 'granted', 'denied')), reason TEXT NOT NULL,
                    purpose TEXT, decided_at REAL, last_used_at REAL, PRIMARY KEY (app_key, capability)) WITHOUT ROWID;
                CREATE TABLE apps (app_key TEXT PRIMARY KEY NOT NULL, display_name TEXT, executable TEXT, method TEXT NOT NULL,
                    first_seen_at REAL NOT NULL, last_seen_at REAL NOT NULL) WITHOUT ROWID;
                CREATE TABLE usage (id INTEGER PRIMARY KEY, app_key TEXT NOT NULL, source TEXT NOT NULL, started_at REAL NOT NULL,
                    ended_at REAL, bytes_real INTEGER NOT NULL DEFAULT 0, bytes_silenced INTEGER NOT NULL DEFAULT 0);
                CREATE INDEX usage_by_app ON usage (app_key, started_at);
                CREATE INDEX usage_by_start ON usage (started_at);
                CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, app_key TEXT, detail TEXT NOT NULL, at REAL NOT NULL);
                CREATE INDEX events_by_time ON events (at);
                INSERT INTO decisions VALUES ('exe:/usr/bin/pacat', 'microphone', 'granted', 'user', 'memos', 5, 6);
                INSERT INTO usage (app_key, source, started_at, ended_at, bytes_real) VALUES ('exe:/usr/bin/pacat', 'sine', 7, 8, 96000);
                PRAGMA user_version = 1;
                """)
        db.close()

        let store = try PermissionStore(path: path)
        #expect(try store.decision(for: pacat)?.state == .granted)
        // Decisions of older stores are lasting ones ("always"), and no timed one lies over them.
        #expect(try store.decision(for: pacat)?.lifespan == .always)
        #expect(try store.timedDecisions().isEmpty)
        #expect(
            try store.usage(for: pacat, limit: 5) == [
                UsageRecord(appKey: pacat, kind: "microphone", source: "sine", startedAt: 7, endedAt: 8, bytesReal: 96000)
            ])
        let id = try store.startUsage(
            UsageRecord(
                appKey: pacat, source: "sine", startedAt: 9, decision: "granted (user)",
                bytesPerSecond: 96000))
        try store.finishUsage(id: id, endedAt: 10, bytesReal: 96000, bytesSilenced: 48000, decision: "granted (user) → denied (user)")
        let logged = try store.usage(for: pacat, since: 8.5, limit: 5)
        #expect(logged.count == 1)
        #expect(logged.first?.decision == "granted (user) → denied (user)")
        #expect(logged.first?.realSeconds == 1 && logged.first?.silencedSeconds == 0.5)
    }

    @Test func refusesAFileThatIsNotADatabase() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let fd = unsafe open(path, O_CREAT | O_WRONLY, 0o600)
        let junk = Array(repeating: UInt8(ascii: "x"), count: 4096)
        unsafe #expect(write(fd, junk, junk.count) == junk.count)
        close(fd)
        let error = #expect(throws: StoreError.self) { _ = try PermissionStore(path: path) }
        #expect(error?.primarySQLiteCode == 26) // SQLITE_NOTADB
        #expect("\(error.map { "\($0)" } ?? "")".contains(path))
    }

    // MARK: Decisions

    @Test func decisionsRoundTripEveryField() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        var expected: [Decision] = []
        for (i, state) in PermissionState.allCases.enumerated() {
            for (j, reason) in DecisionReason.allCases.enumerated() {
                let key = AppKey(kind: "exe", value: "/bin/app:\(i)-\(j) ✓")
                let d = Decision(
                    appKey: key, state: state, reason: reason,
                    purpose: j % 2 == 0 ? "Calls — “quoted”\nline\u{0}nul" : nil,
                    decidedAt: j % 3 == 0 ? nil : 1_700_000_000.125 + Double(j),
                    lastUsedAt: j % 4 == 0 ? nil : 1_700_000_100.5 + Double(i))
                try store.setDecision(d)
                #expect(try store.decision(for: key) == d)
                expected.append(d)
            }
        }
        #expect(try store.allDecisions() == expected.sorted { $0.appKey < $1.appKey })
        #expect(try store.decision(for: AppKey(kind: "exe", value: "/nowhere")) == nil)
    }

    @Test func setDecisionKeepsLastUseAndPurposeWhenNil() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        try store.setDecision(
            Decision(
                appKey: firefox, state: .granted, reason: .user,
                purpose: "video calls", decidedAt: 10, lastUsedAt: 20))
        try store.setDecision(Decision(appKey: firefox, state: .denied, reason: .adminPolicy, decidedAt: 30))
        #expect(
            try store.decision(for: firefox)
                == Decision(
                    appKey: firefox, state: .denied, reason: .adminPolicy,
                    purpose: "video calls", decidedAt: 30, lastUsedAt: 20))
        try store.setDecision(
            Decision(
                appKey: firefox, state: .granted, reason: .user,
                purpose: "meetings", decidedAt: nil, lastUsedAt: 40))
        #expect(
            try store.decision(for: firefox)
                == Decision(
                    appKey: firefox, state: .granted, reason: .user,
                    purpose: "meetings", decidedAt: nil, lastUsedAt: 40))
        #expect(try store.allDecisions().count == 1)
    }

    @Test func resetReturnsToUndetermined() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        try store.setDecision(
            Decision(
                appKey: firefox, state: .granted, reason: .user,
                purpose: "calls", decidedAt: 1, lastUsedAt: 2))
        try store.resetDecision(firefox, capability: .microphone, at: 50)
        #expect(
            try store.decision(for: firefox)
                == Decision(
                    appKey: firefox, state: .undetermined, reason: .reset,
                    purpose: "calls", decidedAt: 50, lastUsedAt: 2))
        // A key never seen can be reset too.
        try store.resetDecision(pacat, at: 60)
        #expect(
            try store.decision(for: pacat)
                == Decision(
                    appKey: pacat, state: .undetermined, reason: .reset,
                    decidedAt: 60))
    }

    @Test func markUsedUpdatesOnlyLastUse() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        try store.setDecision(Decision(appKey: firefox, state: .denied, reason: .user, purpose: "p", decidedAt: 5))
        try store.markUsed(firefox, capability: .microphone, at: 99)
        #expect(
            try store.decision(for: firefox)
                == Decision(
                    appKey: firefox, state: .denied, reason: .user,
                    purpose: "p", decidedAt: 5, lastUsedAt: 99))
        try store.markUsed(pacat, at: 7)
        #expect(
            try store.decision(for: pacat)
                == Decision(
                    appKey: pacat, state: .undetermined, reason: .none,
                    lastUsedAt: 7))
    }

    @Test func keysThatWouldNotReadBackAreRefused() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        let bad = AppKey(kind: "ex:e", value: "x")
        #expect(throws: StoreError.invalidValue(column: "app_key", value: "ex:e:x", path: store.path)) {
            try store.setDecision(Decision(appKey: bad, state: .granted, reason: .user))
        }
        #expect(try store.allDecisions().isEmpty)
    }

    @Test func unknownStoredValuesAreReportedNotGuessed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let store = try PermissionStore(path: path)
        let db = try SQLiteDatabase(path: path, create: false)
        try db.run("INSERT INTO decisions (app_key, capability, state, reason) VALUES ('exe:/x', 'microphone', 'granted', 'martian')")
        #expect(throws: StoreError.invalidValue(column: "reason", value: "martian", path: path)) {
            _ = try store.decision(for: AppKey(kind: "exe", value: "/x"))
        }
    }

    // MARK: Apps

    @Test func appsUpsertKeepsFirstSeen() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        let first = AppRecord(
            appKey: firefox, displayName: "Firefox", executable: "/app/firefox",
            method: .flatpak, firstSeenAt: 100.25, lastSeenAt: 100.25)
        try store.recordApp(first)
        #expect(try store.app(firefox) == first)
        try store.recordApp(
            AppRecord(
                appKey: firefox, displayName: "Firefox Nightly", executable: "/app/ff",
                method: .systemdScope, firstSeenAt: 500, lastSeenAt: 500))
        #expect(
            try store.app(firefox)
                == AppRecord(
                    appKey: firefox, displayName: "Firefox Nightly",
                    executable: "/app/ff", method: .systemdScope,
                    firstSeenAt: 100.25, lastSeenAt: 500))
        // A visit that claims no name keeps the last known one.
        try store.recordApp(
            AppRecord(
                appKey: firefox, displayName: nil, executable: nil,
                method: .flatpak, firstSeenAt: 600, lastSeenAt: 600))
        #expect(
            try store.app(firefox)
                == AppRecord(
                    appKey: firefox, displayName: "Firefox Nightly",
                    executable: "/app/ff", method: .flatpak,
                    firstSeenAt: 100.25, lastSeenAt: 600))
        #expect(try store.app(pacat) == nil)
    }

    /// The command an app was last started as (a link to its executable) is its name after a restart.
    @Test func appsKeepTheCommandTheyWereLastStartedAs() throws {
        let dir = try TemporaryDirectory()
        let pwcat = AppKey(kind: "exe", value: "/usr/bin/pw-cat")
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        try store.recordApp(
            AppRecord(
                appKey: pwcat, displayName: nil, executable: pwcat.value, method: .executable,
                firstSeenAt: 1, lastSeenAt: 1, commandName: "pw-record"))
        try store.recordApp(
            AppRecord(
                appKey: pwcat, displayName: "pw-cat", executable: nil, method: .executable,
                firstSeenAt: 2, lastSeenAt: 2))
        store.close()
        #expect(try PermissionStore(path: dir.path + "/p.sqlite").app(pwcat)?.commandName == "pw-record")
    }

    @Test func appsRoundTripEveryMethod() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        var expected: [AppRecord] = []
        for (i, method) in IdentificationMethod.allCases.enumerated() {
            let r = AppRecord(
                appKey: AppKey(kind: "k\(i)", value: "v\(i)"),
                displayName: i % 2 == 0 ? "Name \(i) ✓" : nil,
                executable: i % 3 == 0 ? nil : "/usr/bin/x\(i)",
                method: method, firstSeenAt: Double(i) + 0.5, lastSeenAt: Double(i) + 1.75)
            try store.recordApp(r)
            expected.append(r)
        }
        #expect(try store.apps() == expected.sorted { $0.appKey < $1.appKey })
    }

    // MARK: Usage and events

    @Test func usageStartAndFinish() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        let a = try store.startUsage(UsageRecord(appKey: firefox, source: "alsa_input.usb-mic", startedAt: 10))
        let b = try store.startUsage(UsageRecord(appKey: pacat, source: "sine", startedAt: 20))
        let c = try store.startUsage(UsageRecord(appKey: firefox, source: "monitor", startedAt: 30))
        #expect(a < b && b < c)
        try store.finishUsage(id: a, endedAt: 15.5, bytesReal: UInt64.max, bytesSilenced: 1 << 40)
        try store.finishUsage(id: c, endedAt: 31, bytesReal: 0, bytesSilenced: 4096)

        #expect(
            try store.usage(for: firefox, limit: 10) == [
                UsageRecord(appKey: firefox, source: "monitor", startedAt: 30, endedAt: 31, bytesReal: 0, bytesSilenced: 4096),
                UsageRecord(
                    appKey: firefox, source: "alsa_input.usb-mic", startedAt: 10, endedAt: 15.5,
                    bytesReal: UInt64.max, bytesSilenced: 1 << 40),
            ])
        #expect(try store.usage(for: nil, limit: 2).map(\.startedAt) == [30, 20])
        #expect(try store.usage(for: pacat, limit: 10) == [UsageRecord(appKey: pacat, source: "sine", startedAt: 20)])
        #expect(try store.usage(for: nil, limit: 0).isEmpty)
        #expect(throws: StoreError.notFound(what: "usage record 999", path: store.path)) {
            try store.finishUsage(id: 999, endedAt: 1, bytesReal: 0, bytesSilenced: 0)
        }
    }

    @Test func eventsNewestFirstAndPruning() throws {
        let dir = try TemporaryDirectory()
        let store = try PermissionStore(path: dir.path + "/p.sqlite")
        let first = try store.logEvent(
            kind: "missing-purpose-disconnect", appKey: pacat,
            detail: "no application.capture.purpose", at: 1)
        let second = try store.logEvent(kind: "store-opened", appKey: nil, detail: "", at: 2)
        #expect(
            try store.events(limit: 10) == [
                StoreEvent(id: second, kind: "store-opened", appKey: nil, detail: "", at: 2),
                StoreEvent(
                    id: first, kind: "missing-purpose-disconnect", appKey: pacat,
                    detail: "no application.capture.purpose", at: 1),
            ])
        #expect(try store.events(limit: 1).map(\.id) == [second])

        let open = try store.startUsage(UsageRecord(appKey: pacat, source: "s", startedAt: 0))
        let done = try store.startUsage(UsageRecord(appKey: pacat, source: "s", startedAt: 0))
        try store.finishUsage(id: done, endedAt: 1, bytesReal: 1, bytesSilenced: 1)
        _ = open
        // Removes the finished usage record and the first event; the open session stays.
        #expect(try store.pruneLogs(before: 1.5) == 2)
        #expect(try store.events(limit: 10).map(\.id) == [second])
        #expect(try store.usage(for: nil, limit: 10) == [UsageRecord(appKey: pacat, source: "s", startedAt: 0)])
    }

    // MARK: Persistence and sharing

    @Test func reopenPersistsEverything() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let d = Decision(
            appKey: firefox, state: .granted, reason: .promptCommand, purpose: "calls",
            decidedAt: 3, lastUsedAt: 4)
        let r = AppRecord(
            appKey: firefox, displayName: "Firefox", executable: nil, method: .flatpak,
            firstSeenAt: 1, lastSeenAt: 2)
        do {
            let store = try PermissionStore(path: path)
            try store.setDecision(d)
            try store.recordApp(r)
            let id = try store.startUsage(UsageRecord(appKey: firefox, source: "mic", startedAt: 5))
            try store.finishUsage(id: id, endedAt: 6, bytesReal: 7, bytesSilenced: 8)
            try store.logEvent(kind: "k", appKey: firefox, detail: "d", at: 9)
            store.close()
            #expect(throws: StoreError.closed(path: path)) { _ = try store.allDecisions() }
        }
        let store = try PermissionStore(path: path)
        #expect(try store.allDecisions() == [d])
        #expect(try store.apps() == [r])
        #expect(
            try store.usage(for: firefox, limit: 5) == [
                UsageRecord(appKey: firefox, source: "mic", startedAt: 5, endedAt: 6, bytesReal: 7, bytesSilenced: 8)
            ])
        #expect(try store.events(limit: 5).map(\.kind) == ["k"])
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func secondConnectionSeesCommittedData() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let a = try PermissionStore(path: path)
        let b = try PermissionStore(path: path)
        try a.setDecision(Decision(appKey: firefox, state: .granted, reason: .user))
        #expect(try b.decision(for: firefox)?.state == .granted)
        try b.setDecision(Decision(appKey: firefox, state: .denied, reason: .user))
        #expect(try a.decision(for: firefox)?.state == .denied)

        // Two writers on two connections at once: the busy timeout makes each wait, none fails.
        let stores = [a, b]
        let perWriter = 150
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 2) { writer in
            for i in 0..<perWriter {
                do {
                    try stores[writer].setDecision(
                        Decision(
                            appKey: AppKey(kind: "exe", value: "/w\(writer)/\(i)"),
                            state: .granted, reason: .user, decidedAt: Double(i)))
                } catch {
                    failures.add("\(error)")
                }
            }
        }
        #expect(failures.all.isEmpty)
        #expect(try a.allDecisions().count == 1 + 2 * perWriter)
        #expect(try b.allDecisions().count == 1 + 2 * perWriter)
    }

    // MARK: The wrapper

    @Test func wrapperErrorsCarryCodeMessageAndSQL() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        try PermissionStore(path: path).close()
        let db = try SQLiteDatabase(path: path, create: false)

        let syntax = "SELEC 1"
        let error = #expect(throws: StoreError.self) { try db.run(syntax) }
        guard case .sqlite(let code, let message, let sql, let errorPath)? = error else {
            Issue.record("expected an SQLite error, got \(String(describing: error))")
            return
        }
        #expect(code == 1) // SQLITE_ERROR
        #expect(message.contains("syntax error"))
        #expect(sql == syntax)
        #expect(errorPath == path)

        let check = #expect(throws: StoreError.self) {
            try db.run(
                "INSERT INTO decisions (app_key, capability, state, reason) VALUES (?, ?, ?, ?)",
                [.text("exe:/x"), .text("microphone"), .text("maybe"), .text("user")])
        }
        guard case .sqlite(let checkCode, let checkMessage, _, _)? = check else {
            Issue.record("expected an SQLite error, got \(String(describing: check))")
            return
        }
        #expect(checkCode == 275) // SQLITE_CONSTRAINT_CHECK, an extended code
        #expect(check?.primarySQLiteCode == 19) // SQLITE_CONSTRAINT
        #expect(checkMessage.contains("CHECK constraint failed"))

        #expect(throws: StoreError.self) { try db.run("SELECT ?", []) }
        #expect(
            try db.query("SELECT ?, ?, ?, ?", [.null, .integer(-5), .real(0.25), .text("a\u{0}b")]).first?.values
                == [.null, .integer(-5), .real(0.25), .text("a\u{0}b")])
    }

    @Test func transactionCommitsOrRollsBack() throws {
        let dir = try TemporaryDirectory()
        let db = try SQLiteDatabase(path: dir.path + "/t.sqlite")
        try db.execute(script: "CREATE TABLE t (x INTEGER NOT NULL);")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
        // A failing statement inside also rolls back what came before it.
        #expect(throws: StoreError.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (2)")
                try db.run("INSERT INTO t VALUES (NULL)")
            }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
        let sum = try db.transaction {
            try db.run("INSERT INTO t VALUES (3)")
            try db.run("INSERT INTO t VALUES (4)")
            return try db.query("SELECT sum(x) FROM t").first?.int64(0)
        }
        #expect(sum == 7)
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 2)
        #expect(try db.query("PRAGMA synchronous").first?.int64(0) == 2) // FULL
        #expect(try db.query("PRAGMA foreign_keys").first?.int64(0) == 1)
    }
}

/// Errors collected from several threads.
final class Failures: Sendable {
    private let items = Mutex<[String]>([])
    func add(_ s: String) { items.withLock { $0.append(s) } }
    var all: [String] { items.withLock { $0 } }
}

extension StoreTests {
    // MARK: Lifespans

    /// What a daemon finds after a restart: the lasting decisions and the timed ones (an engine
    /// then drops the lapsed); "once" and "session" decisions are never written.
    @Test func aReopenedStoreHasAlwaysAndTimedDecisionsOnly() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.sqlite"
        let recorder = AppKey(kind: "exe", value: "/usr/bin/arecord")
        do {
            let store = try PermissionStore(path: path)
            try store.setDecision(Decision(appKey: pacat, state: .granted, reason: .user, decidedAt: 1))
            try store.setDecision(Decision(appKey: pacat, state: .denied, reason: .user, decidedAt: 2, lifespan: .until(500)))
            try store.setDecision(Decision(appKey: firefox, state: .granted, reason: .user, decidedAt: 3, lifespan: .until(50)))
            try store.setDecision(Decision(appKey: recorder, state: .granted, reason: .user, decidedAt: 3, lifespan: .until(70)))
            try store.removeTimedDecision(recorder)
            for span in [Lifespan.session, .once] {
                #expect(throws: StoreError.self) {
                    try store.setDecision(Decision(appKey: recorder, state: .granted, reason: .user, lifespan: span))
                }
            }
            #expect(throws: StoreError.self) {
                try store.setDecision(Decision(appKey: recorder, state: .undetermined, reason: .user, lifespan: .until(9)))
            }
            store.close()
        }
        let store = try PermissionStore(path: path)
        #expect(try store.allDecisions() == [Decision(appKey: pacat, state: .granted, reason: .user, decidedAt: 1)])
        #expect(
            try store.timedDecisions()
                == [
                    Decision(appKey: pacat, state: .denied, reason: .user, decidedAt: 2, lifespan: .until(500)),
                    Decision(appKey: firefox, state: .granted, reason: .user, decidedAt: 3, lifespan: .until(50)),
                ].sorted { $0.appKey < $1.appKey })

        var engine = ConsentEngine(policy: ConsentPolicy(), decisions: try store.allDecisions() + store.timedDecisions())
        let started = engine.expire(now: 100)
        #expect(started.contains(.removeTimedDecision(firefox, .microphone)))
        #expect(engine.effectiveDecision(for: firefox).state == .undetermined)
        #expect(
            engine.effectiveDecision(for: pacat)
                == EffectiveDecision(
                    state: .denied, reason: .user,
                    lifespan: .until(500), afterwards: .granted))
    }
}
