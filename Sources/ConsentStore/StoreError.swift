import LinuxSystem

/// The one error type of the store: every failure names its cause and the file it concerns.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// SQLite refused: `code` is the extended result code (`code & 0xff` is the primary one),
    /// `message` is `sqlite3_errmsg`, `sql` is the statement that failed (nil when opening).
    case sqlite(code: Int32, message: String, sql: String?, path: String)
    /// The file was written by a newer Earmuff whose schema this build does not know.
    case unsupportedSchemaVersion(found: Int, supported: Int, path: String)
    /// A file-system call failed while preparing the store's file or directories.
    case fileSystem(operation: String, errno: Errno, path: String)
    /// A stored or supplied value does not fit the model (unknown state, unparsable app key).
    case invalidValue(column: String, value: String, path: String)
    /// A row the caller referred to does not exist (e.g. an unknown usage id).
    case notFound(what: String, path: String)
    /// The store was used after `close()`.
    case closed(path: String)

    /// The primary SQLite result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT`, ...), when SQLite failed.
    public var primarySQLiteCode: Int32? {
        if case .sqlite(let code, _, _, _) = self { return code & 0xff }
        return nil
    }

    /// One line naming the cause and the file.
    public var description: String {
        switch self {
        case .sqlite(let code, let message, let sql, let path):
            let statement = sql.map { " in `\($0)`" } ?? ""
            return "permission store \(path): SQLite error \(code): \(message)\(statement)"
        case .unsupportedSchemaVersion(let found, let supported, let path):
            return "permission store \(path) has schema version \(found), but this earmuff supports "
                + "only up to version \(supported); upgrade earmuff or point --store at another file"
        case .fileSystem(let operation, let errno, let path):
            return "permission store \(path): \(operation) failed: \(errno) (errno \(errno.rawValue))"
        case .invalidValue(let column, let value, let path):
            return "permission store \(path): invalid value \"\(value)\" for \(column)"
        case .notFound(let what, let path):
            return "permission store \(path): no such \(what)"
        case .closed(let path):
            return "permission store \(path) is closed"
        }
    }
}
