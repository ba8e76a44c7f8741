// The rest of a large memblock whose samples pass unchanged need not enter the
// process: splice(2) moves it from one socket into a pipe and from the pipe into
// the other socket, and the kernel hands the pages on instead of copying them
// twice (into the relay and out again). One pipe per loop serves all its
// sessions: it is empty again before the loop turns to anything else, since
// whatever the destination does not take is read back and waits in the ring
// like any other bytes.
import Glibc
import LinuxSystem
import Runtime

/// A loop's pipe for passing payloads through (used only on the loop's thread).
final class SplicePipe {
    /// Payloads shorter than this are read and written as usual: splicing costs two system
    /// calls more per frame, which below this size outweigh the two copies it saves.
    static let minimumPayload = 16 * 1024
    /// What the pipe is asked to hold: a PulseAudio memblock (64 KiB at most) in one move.
    static let requestedSize = 256 * 1024

    private let pipe: Pipe
    /// The bytes one move takes at most (no more than the loop's read buffer holds, so
    /// what a destination refuses can always be read back at once).
    let capacity: Int

    /// nil when the system gives no pipe (the loop then reads and writes every byte).
    init?(readBufferSize: Int) {
        do throws(Errno) {
            pipe = try Pipe(size: Self.requestedSize)
        } catch {
            Log.warn("no pipe for splicing payloads (\(error)): audio is copied through the relay")
            return nil
        }
        capacity = min(pipe.capacity, readBufferSize)
    }

    /// Moves up to `count` bytes from socket `source` into the pipe (which is empty).
    /// Returns the bytes moved, 0 at end of file; `.wouldBlock` when none are there.
    func fill(from source: Int32, upTo count: Int) throws(Errno) -> Int {
        try FileDescriptor.splice(from: source, to: pipe.writeEnd.rawValue, count: min(count, capacity))
    }

    /// Moves up to `count` of the bytes in the pipe to socket `destination`, as far as it
    /// takes them without waiting; returns how many it took (`.wouldBlock` when none).
    func drain(to destination: Int32, upTo count: Int) throws(Errno) -> Int {
        try FileDescriptor.splice(from: pipe.readEnd.rawValue, to: destination, count: count)
    }

    /// Reads the `count` bytes the pipe still holds into `buffer` (at least `count` long),
    /// leaving it empty; returns how many it read (fewer only if the pipe broke).
    func takeBack(_ count: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var got = 0
        while got < count {
            let n = unsafe Glibc.read(pipe.readEnd.rawValue, buffer.baseAddress! + got, count - got)
            if n > 0 {
                got += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return got
    }
}
