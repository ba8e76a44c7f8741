// ConsentStore: the SQLite persistence of decisions, known apps, the usage log and events.
//
// The consent engine decides; the daemon carries its decisions here, off the audio path,
// and reads them back at start-up and for `earmuff apps`. Everything stored was established
// by the daemon (app keys come from kernel/sandbox identity, never from what a client
// claims), but the file itself is only trusted as far as its schema: a value that does not
// parse into the model is reported as `StoreError.invalidValue`, never guessed at.
//
// Layout: one file (default `$XDG_STATE_HOME/earmuff/permissions.sqlite`, mode 0600, in
// directories of mode 0700), schema versioned by `PRAGMA user_version`. Several processes
// may open it at once (WAL, busy timeout); each COMMIT is durable before it returns (see
// SQLiteDatabase.swift). App keys are stored as their `kind:value` text.

import Consent
import LinuxSystem

/// A logged event of the store's events table (e.g. a missing-purpose disconnect).
public struct StoreEvent: Sendable, Equatable {
    /// The row id, increasing with every event.
    public var id: Int64
    /// What happened, e.g. `missing-purpose-disconnect`.
    public var kind: String
    /// The app it concerns, if any.
    public var appKey: AppKey?
    /// Free text: the reason, the client, the stream.
    public var detail: String
    /// Seconds since 1970.
    public var at: Double

    /// An event as stored; `id` is assigned by `PermissionStore.logEvent`.
    public init(id: Int64, kind: String, appKey: AppKey?, detail: String, at: Double) {
        self.id = id
        self.kind = kind
        self.appKey = appKey
        self.detail = detail
        self.at = at
    }
}

/// The permission store: decisions per app and capability, known apps, usage and events.
///
/// Threading: every call runs under an internal mutex on the one connection, so the store may
/// be shared between threads (it is checked `Sendable`); calls block while SQLite works
/// (including up to the busy timeout while another process writes), so keep them off the audio
/// path, e.g. on one serial store queue.
public final class PermissionStore: Sendable {
    /// The schema version this build writes and understands.
    public static let schemaVersion = 5

    /// The database file.
    public let path: String
    private let connection: Locked<SQLiteDatabase?>

    /// Opens the store at `path`, creating missing parent directories (0700) and the file
    /// (0600), and migrating an older schema; refuses a schema newer than `schemaVersion`.
    public init(path: String) throws {
        self.path = path
        try StoreFileSystem.createParentDirectories(of: path, storePath: path)
        try StoreFileSystem.createPrivateFile(at: path)
        let db = try SQLiteDatabase(path: path)
        try Self.migrate(db)
        connection = Locked(db)
    }

    /// `$XDG_STATE_HOME/earmuff/permissions.sqlite`, else `$HOME/.local/state/earmuff/permissions.sqlite`.
    public static func defaultPath(environment: [String: String]) -> String {
        // The XDG base-directory spec says relative paths in XDG_* variables are to be ignored.
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/earmuff/permissions.sqlite"
        }
        let home =
            environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? StoreFileSystem.passwordDatabaseHome() ?? "/"
        return (home.hasSuffix("/") ? String(home.dropLast()) : home) + "/.local/state/earmuff/permissions.sqlite"
    }

    /// Closes the connection; every later call throws `StoreError.closed`.
    public func close() {
        connection.withLock { db in
            db?.close()
            db = nil
        }
    }

    /// What `PRAGMA quick_check` says of the existing store at `path` (`"ok"` for a sound
    /// file), opened without creating or migrating anything.
    public static func quickCheck(path: String) throws -> String {
        let db = try SQLiteDatabase(path: path, create: false)
        defer { db.close() }
        return try db.query("PRAGMA quick_check").map { try $0.string(0) }.joined(separator: "\n")
    }

    /// The result of `PRAGMA integrity_check`: `"ok"` for a sound file, else SQLite's findings.
    public func integrityCheck() throws -> String {
        try withDatabase { db in
            try db.query("PRAGMA integrity_check").map { try $0.string(0) }.joined(separator: "\n")
        }
    }

    // MARK: - Access (the master switch)

    /// The capture kinds whose access is switched off (every stream of them silent).
    public func accessOff() throws -> Set<Capability> {
        try withDatabase { db in
            Set(
                try db.query("SELECT capability FROM access WHERE enabled = 0").compactMap {
                    Capability(rawValue: try $0.string(0))
                })
        }
    }

    /// Switches access to `capability` on or off, as of `at`.
    public func setAccess(_ capability: Capability, enabled: Bool, at: Double) throws {
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO access (capability, enabled, changed_at) VALUES (?, ?, ?)
                ON CONFLICT (capability) DO UPDATE SET enabled = excluded.enabled, changed_at = excluded.changed_at
                """, [.text(capability.rawValue), .integer(enabled ? 1 : 0), .real(at)])
        }
    }

    // MARK: - Decisions

    /// The stored decision for `key` and `capability`, or nil when none was ever stored.
    public func decision(for key: AppKey, capability: Capability = .microphone) throws -> Decision? {
        try withDatabase { db in
            try db.query(
                """
                SELECT app_key, capability, state, reason, purpose, decided_at, last_used_at
                FROM decisions WHERE app_key = ? AND capability = ?
                """, [.text(key.description), .text(capability.rawValue)]
            )
            .first.map(decision(from:))
        }
    }

    /// Every stored decision, ordered by app key and capability.
    public func allDecisions() throws -> [Decision] {
        try withDatabase { db in
            try db.query(
                """
                SELECT app_key, capability, state, reason, purpose, decided_at, last_used_at
                FROM decisions ORDER BY app_key, capability
                """
            ).map(decision(from:))
        }
    }

    /// Stores `d` (one statement, hence one transaction): a lasting (`always`) decision replaces
    /// the app's lasting one; a timed one (`until`) replaces the timed one over it. A nil
    /// `lastUsedAt` or `purpose` keeps the stored value: `earmuff grant` knows neither, and must
    /// not erase them. "once" and "session" decisions are never stored (`invalidValue`).
    public func setDecision(_ d: Decision) throws {
        try checkKey(d.appKey)
        switch d.lifespan {
        case .always: break
        case let .until(expiry): return try setTimedDecision(d, expiresAt: expiry)
        case .once, .session: throw StoreError.invalidValue(column: "lifespan", value: d.lifespan.name, path: path)
        }
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO decisions (app_key, capability, state, reason, purpose, decided_at, last_used_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_key, capability) DO UPDATE SET
                    state = excluded.state,
                    reason = excluded.reason,
                    purpose = coalesce(excluded.purpose, decisions.purpose),
                    decided_at = excluded.decided_at,
                    last_used_at = coalesce(excluded.last_used_at, decisions.last_used_at)
                """,
                [
                    .text(d.appKey.description), .text(d.capability.rawValue), .text(d.state.rawValue),
                    .text(d.reason.rawValue), .text(d.purpose), .real(d.decidedAt), .real(d.lastUsedAt),
                ])
        }
    }

    /// Timed decisions, expired or not, ordered by app key and capability.
    public func timedDecisions() throws -> [Decision] {
        try withDatabase { db in
            try db.query(
                """
                SELECT app_key, capability, state, reason, purpose, decided_at, expires_at
                FROM timed_decisions ORDER BY app_key, capability
                """
            ).map { row in
                Decision(
                    appKey: try appKey(row, 0),
                    capability: try parse(Capability.self, row, 1, name: "capability"),
                    state: try parse(PermissionState.self, row, 2, name: "state"),
                    reason: try parse(DecisionReason.self, row, 3, name: "reason"),
                    purpose: try row.optionalString(4), decidedAt: try row.double(5),
                    lifespan: .until(try row.double(6)))
            }
        }
    }

    /// Deletes the timed decision of `key` and `capability`, if there is one.
    public func removeTimedDecision(_ key: AppKey, capability: Capability = .microphone) throws {
        try withDatabase { db in
            try db.run(
                "DELETE FROM timed_decisions WHERE app_key = ? AND capability = ?",
                [.text(key.description), .text(capability.rawValue)])
        }
    }

    private func setTimedDecision(_ d: Decision, expiresAt: Double) throws {
        guard d.state != .undetermined else {
            throw StoreError.invalidValue(column: "state", value: "undetermined until \(expiresAt)", path: path)
        }
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO timed_decisions (app_key, capability, state, reason, purpose, decided_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_key, capability) DO UPDATE SET
                    state = excluded.state, reason = excluded.reason, purpose = excluded.purpose,
                    decided_at = excluded.decided_at, expires_at = excluded.expires_at
                """,
                [
                    .text(d.appKey.description), .text(d.capability.rawValue), .text(d.state.rawValue),
                    .text(d.reason.rawValue), .text(d.purpose), .real(d.decidedAt ?? expiresAt), .real(expiresAt),
                ])
        }
    }

    /// Puts `key` back to undetermined with reason `reset` at `at` (prompts again next time);
    /// keeps its purpose and last use. Works for keys never stored, too.
    public func resetDecision(_ key: AppKey, capability: Capability = .microphone, at: Double) throws {
        try checkKey(key)
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO decisions (app_key, capability, state, reason, decided_at)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (app_key, capability) DO UPDATE SET
                    state = excluded.state, reason = excluded.reason, decided_at = excluded.decided_at
                """,
                [
                    .text(key.description), .text(capability.rawValue),
                    .text(PermissionState.undetermined.rawValue), .text(DecisionReason.reset.rawValue),
                    .real(at),
                ])
        }
    }

    /// Records that `key` captured at `at`; an app without a decision gets an undetermined one
    /// (reason `none`), so `earmuff apps` can show when it last tried.
    public func markUsed(_ key: AppKey, capability: Capability = .microphone, at: Double) throws {
        try checkKey(key)
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO decisions (app_key, capability, state, reason, last_used_at)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (app_key, capability) DO UPDATE SET last_used_at = excluded.last_used_at
                """,
                [
                    .text(key.description), .text(capability.rawValue),
                    .text(PermissionState.undetermined.rawValue), .text(DecisionReason.none.rawValue),
                    .real(at),
                ])
        }
    }

    // MARK: - Apps

    /// Inserts or updates `r`: the first `firstSeenAt` is kept; last seen, method and the
    /// non-nil display name, executable and command name are updated.
    public func recordApp(_ r: AppRecord) throws {
        try checkKey(r.appKey)
        try withDatabase { db in
            try db.run(
                """
                INSERT INTO apps (app_key, display_name, executable, method, first_seen_at, last_seen_at, command_name)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_key) DO UPDATE SET
                    display_name = coalesce(excluded.display_name, apps.display_name),
                    executable = coalesce(excluded.executable, apps.executable),
                    command_name = coalesce(excluded.command_name, apps.command_name),
                    method = excluded.method,
                    last_seen_at = excluded.last_seen_at
                """,
                [
                    .text(r.appKey.description), .text(r.displayName), .text(r.executable),
                    .text(r.method.rawValue), .real(r.firstSeenAt), .real(r.lastSeenAt), .text(r.commandName),
                ])
        }
    }

    /// Every known app, ordered by app key.
    public func apps() throws -> [AppRecord] {
        try withDatabase { db in
            try db.query(
                """
                SELECT app_key, display_name, executable, method, first_seen_at, last_seen_at, command_name
                FROM apps ORDER BY app_key
                """
            ).map(appRecord(from:))
        }
    }

    /// The app stored under `key`, if any.
    public func app(_ key: AppKey) throws -> AppRecord? {
        try withDatabase { db in
            try db.query(
                """
                SELECT app_key, display_name, executable, method, first_seen_at, last_seen_at, command_name
                FROM apps WHERE app_key = ?
                """, [.text(key.description)]
            ).first.map(appRecord(from:))
        }
    }

    // MARK: - Usage log

    /// Logs the start of a capture session and returns its id for `finishUsage`.
    public func startUsage(_ u: UsageRecord) throws -> Int64 {
        try checkKey(u.appKey)
        return try withDatabase { db in
            try db.run(
                """
                INSERT INTO usage (app_key, kind, source, started_at, ended_at, bytes_real, bytes_silenced,
                                   decision, bytes_per_second)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(u.appKey.description), .text(u.kind), .text(u.source), .real(u.startedAt), .real(u.endedAt),
                    .integer(Int64(bitPattern: u.bytesReal)), .integer(Int64(bitPattern: u.bytesSilenced)),
                    .text(u.decision), .integer(Int64(u.bytesPerSecond)),
                ])
            return db.lastInsertRowID
        }
    }

    /// Closes the capture session `id` with its end time and byte counts; a non-nil
    /// `decision` replaces the one stored at the start.
    public func finishUsage(
        id: Int64, endedAt: Double, bytesReal: UInt64, bytesSilenced: UInt64,
        decision: String? = nil
    ) throws {
        try withDatabase { db in
            try db.run(
                """
                UPDATE usage SET ended_at = ?, bytes_real = ?, bytes_silenced = ?, decision = coalesce(?, decision)
                WHERE id = ?
                """,
                [
                    .real(endedAt), .integer(Int64(bitPattern: bytesReal)),
                    .integer(Int64(bitPattern: bytesSilenced)), .text(decision), .integer(id),
                ])
            guard db.changes == 1 else { throw StoreError.notFound(what: "usage record \(id)", path: path) }
        }
    }

    /// The newest `limit` capture sessions, of `key` or of every app when nil, started at
    /// `since` or later when given; newest first.
    public func usage(for key: AppKey?, since: Double? = nil, limit: Int) throws -> [UsageRecord] {
        try withDatabase { db in
            let rows = try db.query(
                """
                SELECT app_key, kind, source, started_at, ended_at, bytes_real, bytes_silenced, decision, bytes_per_second
                FROM usage WHERE (?1 IS NULL OR app_key = ?1) AND (?2 IS NULL OR started_at >= ?2)
                ORDER BY started_at DESC, id DESC LIMIT ?3
                """, [.text(key?.description), .real(since), .integer(Int64(max(0, limit)))])
            return try rows.map { row in
                UsageRecord(
                    appKey: try appKey(row, 0), kind: try row.string(1), source: try row.string(2),
                    startedAt: try row.double(3), endedAt: try row.optionalDouble(4),
                    bytesReal: UInt64(bitPattern: try row.int64(5)),
                    bytesSilenced: UInt64(bitPattern: try row.int64(6)),
                    decision: try row.optionalString(7),
                    bytesPerSecond: UInt32(clamping: try row.int64(8)))
            }
        }
    }

    // MARK: - Events

    /// Logs an event (e.g. kind `missing-purpose-disconnect`, with the reason as detail).
    @discardableResult
    public func logEvent(kind: String, appKey: AppKey?, detail: String, at: Double) throws -> Int64 {
        if let appKey { try checkKey(appKey) }
        return try withDatabase { db in
            try db.run(
                "INSERT INTO events (kind, app_key, detail, at) VALUES (?, ?, ?, ?)",
                [.text(kind), .text(appKey?.description), .text(detail), .real(at)])
            return db.lastInsertRowID
        }
    }

    /// The newest `limit` events, newest first.
    public func events(limit: Int) throws -> [StoreEvent] {
        try withDatabase { db in
            try db.query(
                "SELECT id, kind, app_key, detail, at FROM events ORDER BY at DESC, id DESC LIMIT ?",
                [.integer(Int64(max(0, limit)))]
            ).map { row in
                StoreEvent(
                    id: try row.int64(0), kind: try row.string(1),
                    appKey: row.isNull(2) ? nil : try appKey(row, 2),
                    detail: try row.string(3), at: try row.double(4))
            }
        }
    }

    /// Deletes finished usage records that ended before `at` and events before `at`;
    /// returns how many rows went. Decisions and apps are never pruned.
    @discardableResult
    public func pruneLogs(before at: Double) throws -> Int {
        try withDatabase { db in
            try db.transaction {
                try db.run("DELETE FROM usage WHERE ended_at IS NOT NULL AND ended_at < ?", [.real(at)])
                let usage = db.changes
                try db.run("DELETE FROM events WHERE at < ?", [.real(at)])
                return usage + db.changes
            }
        }
    }

    // MARK: - Schema

    /// Schema scripts; entry `n` takes `user_version` from `n` to `n + 1`.
    private static let migrations: [String] = [
        """
        CREATE TABLE decisions (
            app_key      TEXT NOT NULL,
            capability   TEXT NOT NULL,
            state        TEXT NOT NULL CHECK (state IN ('undetermined', 'granted', 'denied')),
            reason       TEXT NOT NULL,
            purpose      TEXT,
            decided_at   REAL,
            last_used_at REAL,
            PRIMARY KEY (app_key, capability)
        ) WITHOUT ROWID;
        CREATE TABLE apps (
            app_key       TEXT PRIMARY KEY NOT NULL,
            display_name  TEXT,
            executable    TEXT,
            method        TEXT NOT NULL,
            first_seen_at REAL NOT NULL,
            last_seen_at  REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE usage (
            id             INTEGER PRIMARY KEY,
            app_key        TEXT NOT NULL,
            source         TEXT NOT NULL,
            started_at     REAL NOT NULL,
            ended_at       REAL,
            bytes_real     INTEGER NOT NULL DEFAULT 0,
            bytes_silenced INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX usage_by_app ON usage (app_key, started_at);
        CREATE INDEX usage_by_start ON usage (started_at);
        CREATE TABLE events (
            id      INTEGER PRIMARY KEY,
            kind    TEXT NOT NULL,
            app_key TEXT,
            detail  TEXT NOT NULL,
            at      REAL NOT NULL
        );
        CREATE INDEX events_by_time ON events (at);
        """,
        // 2: the usage log says what was captured, the decision in force, and how many
        // bytes make a second (so `earmuff log` shows seconds).
        """
        ALTER TABLE usage ADD COLUMN kind TEXT NOT NULL DEFAULT 'microphone';
        ALTER TABLE usage ADD COLUMN decision TEXT;
        ALTER TABLE usage ADD COLUMN bytes_per_second INTEGER NOT NULL DEFAULT 0;
        """,
        // 3: lifespans. `decisions` keeps the lasting ("always") decision per app and
        // capability, so every row of an older store stays "always". A decision for a
        // duration lies over it until `expires_at`; "once" and "session" decisions live
        // in the daemon's memory only.
        """
        CREATE TABLE timed_decisions (
            app_key    TEXT NOT NULL,
            capability TEXT NOT NULL,
            state      TEXT NOT NULL CHECK (state IN ('granted', 'denied')),
            reason     TEXT NOT NULL,
            purpose    TEXT,
            decided_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (app_key, capability)
        ) WITHOUT ROWID;
        """,
        // 4: the master switch per capture kind ("microphone access: off"). A kind with no
        // row is on; decisions are kept while it is off.
        """
        CREATE TABLE access (
            capability TEXT PRIMARY KEY NOT NULL,
            enabled    INTEGER NOT NULL CHECK (enabled IN (0, 1)),
            changed_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        // 5: the command an app was last started as, when a link to its executable (pw-record
        // for pw-cat): the name it is shown by, kept across restarts.
        """
        ALTER TABLE apps ADD COLUMN command_name TEXT;
        """,
    ]

    private static func userVersion(_ db: SQLiteDatabase) throws -> Int {
        Int(try db.query("PRAGMA user_version").first?.int64(0) ?? 0)
    }

    /// Brings the file to `schemaVersion`. The version is read again under the write lock, so
    /// two processes opening a new file at once migrate it exactly once.
    private static func migrate(_ db: SQLiteDatabase) throws {
        let supported = migrations.count
        func refuseNewer(_ found: Int) throws {
            if found > supported {
                throw StoreError.unsupportedSchemaVersion(found: found, supported: supported, path: db.path)
            }
        }
        let found = try userVersion(db)
        try refuseNewer(found)
        guard found < supported else { return }
        try db.transaction {
            let current = try userVersion(db)
            try refuseNewer(current)
            for version in current..<supported {
                try db.execute(script: migrations[version])
            }
            try db.run("PRAGMA user_version = \(supported)")
        }
    }

    // MARK: - Helpers

    /// Runs `body` on the connection under the mutex. `body` is `@Sendable` so that handing it
    /// the connection does not tie the connection to the caller's isolation region.
    private func withDatabase<T: Sendable>(_ body: @Sendable (SQLiteDatabase) throws -> T) throws -> T {
        try connection.withLock { db throws -> T in
            guard let db else { throw StoreError.closed(path: path) }
            return try body(db)
        }
    }

    /// Refuses keys that would not read back (`AppKey(parsing:)` must give the same key).
    private func checkKey(_ key: AppKey) throws {
        guard AppKey(parsing: key.description) == key else {
            throw StoreError.invalidValue(column: "app_key", value: key.description, path: path)
        }
    }

    private func appKey(_ row: SQLiteRow, _ column: Int) throws -> AppKey {
        let text = try row.string(column)
        guard let key = AppKey(parsing: text) else {
            throw StoreError.invalidValue(column: "app_key", value: text, path: path)
        }
        return key
    }

    private func parse<E: RawRepresentable<String>>(
        _ type: E.Type, _ row: SQLiteRow, _ column: Int,
        name: String
    ) throws -> E {
        let text = try row.string(column)
        guard let value = E(rawValue: text) else {
            throw StoreError.invalidValue(column: name, value: text, path: path)
        }
        return value
    }

    private func decision(from row: SQLiteRow) throws -> Decision {
        Decision(
            appKey: try appKey(row, 0),
            capability: try parse(Capability.self, row, 1, name: "capability"),
            state: try parse(PermissionState.self, row, 2, name: "state"),
            reason: try parse(DecisionReason.self, row, 3, name: "reason"),
            purpose: try row.optionalString(4),
            decidedAt: try row.optionalDouble(5),
            lastUsedAt: try row.optionalDouble(6))
    }

    private func appRecord(from row: SQLiteRow) throws -> AppRecord {
        AppRecord(
            appKey: try appKey(row, 0), displayName: try row.optionalString(1),
            executable: try row.optionalString(2),
            method: try parse(IdentificationMethod.self, row, 3, name: "method"),
            firstSeenAt: try row.double(4), lastSeenAt: try row.double(5), commandName: try row.optionalString(6))
    }
}
