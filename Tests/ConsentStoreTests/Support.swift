import Foundation
import Glibc
import Testing

/// Every store test runs in this one serialized suite: the crash test forks, and a forked
/// child must not inherit SQLite or runtime locks held by a sibling test's thread.
@Suite(.serialized) struct StoreTests {}

/// A fresh directory under the system temporary directory, removed when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "earmuff-store-XXXXXX").utf8CString)
        let made = unsafe template.withUnsafeMutableBufferPointer { buffer -> String? in
            // The array is non-empty, so it has a base address.
            unsafe mkdtemp(buffer.baseAddress!).map { unsafe String(cString: $0) }
        }
        guard let made else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        path = made
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The permission bits of `path` (`st_mode & 0o7777`), or nil when it does not exist.
func permissionBits(_ path: String) -> mode_t? {
    var info = stat()
    guard unsafe stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}
