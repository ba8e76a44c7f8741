// A small SQLite wrapper: the only file of the store that touches SQLite's C API and its
// pointers. It keeps one connection, a cache of prepared statements keyed by their SQL,
// and turns every failure into `StoreError.sqlite` with the extended result code, SQLite's
// message and the statement. Values cross the boundary as `SQLiteValue`s, copied out of
// SQLite before a statement is reset, so no pointer outlives a call.
//
// Durability: the connection runs in WAL mode with `synchronous=FULL`. In WAL mode a
// COMMIT appends the transaction to the -wal file before it returns; with NORMAL the
// append is only written to the OS page cache, which already survives a kill -9 of the
// process (the kernel still owns the pages), but not a power loss or kernel crash. FULL
// also fsyncs the WAL at every commit, so a decision the user made is on disk before the
// caller is told it is saved. Writes here happen at human pace (decisions, stream starts),
// never per audio frame, so the fsync costs nothing that matters.

import CSQLite

/// One value bound to, or read from, a statement.
enum SQLiteValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    /// `.text`, or `.null` for nil.
    static func text(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    /// `.real`, or `.null` for nil.
    static func real(_ value: Double?) -> SQLiteValue { value.map { .real($0) } ?? .null }
}

/// One result row, copied out of SQLite.
struct SQLiteRow: Sendable {
    let values: [SQLiteValue]
    /// The database path, for error messages.
    let path: String

    func isNull(_ column: Int) -> Bool { values[column] == .null }

    func int64(_ column: Int) throws -> Int64 {
        switch values[column] {
        case .integer(let v): return v
        case .real(let v) where v.rounded() == v && abs(v) < 9.2e18: return Int64(v)
        default: throw mismatch(column, "an integer")
        }
    }

    func double(_ column: Int) throws -> Double {
        switch values[column] {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: throw mismatch(column, "a number")
        }
    }

    func optionalDouble(_ column: Int) throws -> Double? {
        isNull(column) ? nil : try double(column)
    }

    func string(_ column: Int) throws -> String {
        guard case .text(let v) = values[column] else { throw mismatch(column, "text") }
        return v
    }

    func optionalString(_ column: Int) throws -> String? {
        isNull(column) ? nil : try string(column)
    }

    private func mismatch(_ column: Int, _ expected: String) -> StoreError {
        .invalidValue(
            column: "column \(column) (expected \(expected))",
            value: String(describing: values[column]), path: path)
    }
}

/// How much SQLite waits for the disk at each commit; see the file comment.
enum SQLiteSynchronous: String {
    case normal = "NORMAL"
    case full = "FULL"
}

/// One SQLite connection. Not thread-safe: the owner serializes every call
/// (`PermissionStore` holds it inside a mutex).
@safe
final class SQLiteDatabase {
    /// The file this connection has open.
    let path: String
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = unsafe [:]

    /// Opens (creating it if `create`) the database at `path` in WAL mode, with foreign keys on
    /// and a busy timeout, so a second connection waits for a writer instead of failing.
    init(
        path: String, create: Bool = true, busyTimeoutMilliseconds: Int32 = 5_000,
        synchronous: SQLiteSynchronous = .full
    ) throws {
        self.path = path
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if create { flags |= SQLITE_OPEN_CREATE }
        var opened: OpaquePointer?
        let rc = unsafe sqlite3_open_v2(path, &opened, flags, nil)
        guard rc == SQLITE_OK, let opened = unsafe opened else {
            let message =
                unsafe opened.map { unsafe String(cString: sqlite3_errmsg($0)) }
                ?? String(cString: sqlite3_errstr(rc))
            unsafe sqlite3_close_v2(opened)
            throw StoreError.sqlite(code: rc, message: message, sql: nil, path: path)
        }
        unsafe handle = opened
        do {
            unsafe sqlite3_extended_result_codes(opened, 1)
            try unsafe check(sqlite3_busy_timeout(opened, busyTimeoutMilliseconds), sql: "busy_timeout")
            let mode = try query("PRAGMA journal_mode=WAL").first.map { try $0.string(0) } ?? ""
            guard mode.lowercased() == "wal" else {
                throw StoreError.sqlite(
                    code: SQLITE_ERROR,
                    message: "cannot use WAL journal mode (got \"\(mode)\"); "
                        + "put the store on a local file system",
                    sql: "PRAGMA journal_mode=WAL", path: path)
            }
            try run("PRAGMA synchronous=\(synchronous.rawValue)")
            try run("PRAGMA foreign_keys=ON")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Finalizes every cached statement and closes the connection; later calls throw `.closed`.
    func close() {
        unsafe statements.values.forEach { unsafe sqlite3_finalize($0) }
        unsafe statements.removeAll()
        if let handle = unsafe handle { unsafe sqlite3_close_v2(handle) }
        unsafe handle = nil
    }

    /// Whether `close()` has been called.
    var isClosed: Bool { unsafe handle == nil }

    /// Runs one statement to completion and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> [SQLiteRow] {
        let statement = try unsafe prepared(sql)
        defer {
            unsafe sqlite3_reset(statement)
            unsafe sqlite3_clear_bindings(statement)
        }
        try unsafe bind(bindings, to: statement, sql: sql)
        var rows: [SQLiteRow] = []
        while true {
            let rc = unsafe sqlite3_step(statement)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw error(rc, sql: sql) }
            unsafe rows.append(row(of: statement))
        }
    }

    /// Runs one statement that returns no rows of interest.
    func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws {
        try query(sql, bindings)
    }

    /// Runs several `;`-separated statements without bindings (schema scripts); not cached.
    func execute(script sql: String) throws {
        let db = try unsafe open()
        var message: UnsafeMutablePointer<CChar>?
        let rc = unsafe sqlite3_exec(db, sql, nil, nil, &message)
        defer { unsafe sqlite3_free(message) }
        guard rc == SQLITE_OK else {
            let text = unsafe message.map { unsafe String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            throw unsafe StoreError.sqlite(code: sqlite3_extended_errcode(db), message: text, sql: sql, path: path)
        }
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT` (the write lock is taken up front, so the
    /// busy timeout applies there and never midway); rolls back when `body` or COMMIT throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        let db = try unsafe open()
        unsafe precondition(sqlite3_get_autocommit(db) != 0, "SQLiteDatabase.transaction does not nest")
        try run("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try run("COMMIT")
            return result
        } catch {
            if unsafe sqlite3_get_autocommit(db) == 0 { try? run("ROLLBACK") }
            throw error
        }
    }

    /// The row id of the last successful INSERT on this connection.
    var lastInsertRowID: Int64 {
        unsafe handle.map { unsafe sqlite3_last_insert_rowid($0) } ?? 0
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
    var changes: Int {
        unsafe handle.map { unsafe Int(sqlite3_changes($0)) } ?? 0
    }

    // MARK: - Unsafe internals

    private func open() throws -> OpaquePointer {
        guard let handle = unsafe handle else { throw StoreError.closed(path: path) }
        return unsafe handle
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let cached = unsafe statements[sql] { return unsafe cached }
        let db = try unsafe open()
        var statement: OpaquePointer?
        let rc = unsafe sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement = unsafe statement else {
            unsafe sqlite3_finalize(statement)
            throw error(rc, sql: sql)
        }
        unsafe statements[sql] = statement
        return unsafe statement
    }

    private func bind(_ values: [SQLiteValue], to statement: OpaquePointer, sql: String) throws {
        let expected = unsafe Int(sqlite3_bind_parameter_count(statement))
        guard expected == values.count else {
            throw StoreError.sqlite(
                code: SQLITE_RANGE,
                message: "statement takes \(expected) parameters, got \(values.count)",
                sql: sql, path: path)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = unsafe sqlite3_bind_null(statement, index)
            case .integer(let v):
                rc = unsafe sqlite3_bind_int64(statement, index, v)
            case .real(let v):
                rc = unsafe sqlite3_bind_double(statement, index, v)
            case .text(let v):
                // The explicit byte length keeps embedded NULs; SQLITE_TRANSIENT makes SQLite copy
                // the bytes, since the C string only lives for this call.
                rc = unsafe sqlite3_bind_text64(
                    statement, index, v, sqlite3_uint64(v.utf8.count),
                    unsafeSQLiteTransient, UInt8(SQLITE_UTF8))
            }
            try check(rc, sql: sql)
        }
    }

    private func row(of statement: OpaquePointer) -> SQLiteRow {
        let count = unsafe sqlite3_column_count(statement)
        var values: [SQLiteValue] = []
        values.reserveCapacity(Int(count))
        for column in 0..<count {
            switch unsafe sqlite3_column_type(statement, column) {
            case SQLITE_NULL:
                values.append(.null)
            case SQLITE_INTEGER:
                unsafe values.append(.integer(sqlite3_column_int64(statement, column)))
            case SQLITE_FLOAT:
                unsafe values.append(.real(sqlite3_column_double(statement, column)))
            default:
                // Text (and blobs, read as UTF-8): fetch the bytes first, then their length,
                // the order SQLite documents; the buffer is valid until the next step/reset.
                let bytes = unsafe sqlite3_column_text(statement, column)
                let length = unsafe Int(sqlite3_column_bytes(statement, column))
                let text =
                    unsafe bytes.map {
                        unsafe String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                    } ?? ""
                values.append(.text(text))
            }
        }
        return SQLiteRow(values: values, path: path)
    }

    private func check(_ rc: Int32, sql: String) throws {
        guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
    }

    private func error(_ rc: Int32, sql: String?) -> StoreError {
        guard let handle = unsafe handle else { return .closed(path: path) }
        let code = unsafe sqlite3_extended_errcode(handle)
        return unsafe .sqlite(
            code: code != SQLITE_OK ? code : rc,
            message: String(cString: sqlite3_errmsg(handle)), sql: sql, path: path)
    }
}

/// SQLite's `SQLITE_TRANSIENT` destructor, a macro Swift cannot import: the pointer value -1.
/// Safe because SQLite compares the value against -1 and never calls it as a function.
private let unsafeSQLiteTransient = unsafe unsafeBitCast(-1, to: sqlite3_destructor_type.self)
