// File-system preparation for the store: private directories and a private database file,
// made before SQLite opens it so that SQLite's -wal and -shm files inherit mode 0600.

import Glibc
import LinuxSystem

enum StoreFileSystem {
    /// Creates every missing parent directory of `path` with mode 0700.
    static func createParentDirectories(of path: String, storePath: String) throws {
        do {
            try PrivateDirectories.createParents(of: path)
        } catch {
            throw StoreError.fileSystem(operation: error.operation, errno: error.errno, path: storePath)
        }
    }

    /// Creates the database file if missing and makes it mode 0600.
    static func createPrivateFile(at path: String) throws {
        let fd = unsafe open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError.fileSystem(operation: "open", errno: .current, path: path)
        }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else {
            throw StoreError.fileSystem(operation: "chmod 0600", errno: .current, path: path)
        }
    }

    /// The user's home directory from the password database, for when `$HOME` is unset.
    static func passwordDatabaseHome() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        return unsafe buffer.withUnsafeMutableBufferPointer { unsafeBuffer -> String? in
            // entry's strings point into unsafeBuffer, so they are read inside this closure.
            // A non-empty array always has a base address.
            guard let base = unsafeBuffer.baseAddress else { return nil }
            var entry = unsafe passwd()
            var result: UnsafeMutablePointer<passwd>?
            let rc = unsafe getpwuid_r(getuid(), &entry, base, unsafeBuffer.count, &result)
            guard rc == 0, unsafe result != nil, let dir = unsafe entry.pw_dir else { return nil }
            return unsafe String(cString: dir)
        }
    }
}
