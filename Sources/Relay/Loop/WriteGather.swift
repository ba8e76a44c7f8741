// What one read lets through, gathered so that it leaves for the other socket
// with one sendmsg at the end of the read, after what that socket's ring holds:
// a read of several memblocks then costs one write, not one per memblock.
//
// Pieces of the loop's read buffer (memblock payloads, possibly silenced in
// place) are referenced, not copied: the buffer keeps them until the loop's
// next read, and the gather is always written out before that. Small pieces
// from elsewhere (descriptors, short packets, which the frame processor
// reuses its buffers for) are copied into a staging area. One gather per
// loop, used by one half at a time and empty between reads, so it adds no
// memory per session.
import Glibc

@safe
final class WriteGather {
    /// Pieces gathered at most (with the ring's two regions, well under IOV_MAX).
    static let maximumPieces = 62
    /// Bytes of small pieces staged at most.
    static let stagingBytes = 16 * 1024
    /// Pieces from outside the read buffer at least this large are written at once, not staged.
    static let stagingLimit = 1024

    /// The ring's two regions, then the pieces, then room for one piece written at once.
    private let vector: UnsafeMutablePointer<iovec>
    private let staging: UnsafeMutableRawBufferPointer
    private var staged = 0
    private let readBuffer: UnsafeRawBufferPointer
    /// Pieces gathered.
    private(set) var count = 0

    /// `readBuffer`: the loop's read buffer, whose pieces are referenced rather than copied.
    init(readBuffer: UnsafeMutableRawBufferPointer) {
        unsafe self.readBuffer = UnsafeRawBufferPointer(readBuffer)
        unsafe vector = .allocate(capacity: Self.maximumPieces + 3)
        unsafe staging = .allocate(byteCount: Self.stagingBytes, alignment: 16)
    }

    deinit {
        unsafe vector.deallocate()
        unsafe staging.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    /// Adds `bytes` after the pieces gathered so far; false when they must be written
    /// now, with `writing`, instead: the gather is full, or they are large and not in the
    /// read buffer.
    func add(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        guard count < Self.maximumPieces else { return false }
        if let start = unsafe readBuffer.baseAddress, unsafe base >= start, unsafe base + bytes.count <= start + readBuffer.count {
            unsafe piece(UnsafeMutableRawPointer(mutating: base), bytes.count)
            return true
        }
        guard bytes.count < Self.stagingLimit, unsafe bytes.count <= staging.count - staged else { return false }
        let at = unsafe staging.baseAddress! + staged // non-nil: allocated above
        unsafe at.copyMemory(from: base, byteCount: bytes.count)
        staged += bytes.count
        unsafe piece(at, bytes.count)
        return true
    }

    private func piece(_ base: UnsafeMutableRawPointer, _ length: Int) {
        // Adjacent in memory (a frame's bytes read whole): one piece.
        if count > 0, let last = unsafe vector[count + 1].iov_base, unsafe last + vector[count + 1].iov_len == base {
            unsafe vector[count + 1].iov_len += length
            return
        }
        unsafe vector[count + 2] = iovec(iov_base: base, iov_len: length)
        count += 1
    }

    /// Calls `send` with the ring's regions `a` and `b`, every piece, and `extra`, as one
    /// vector; returns what it returns.
    func withVector<R>(
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, then extra: UnsafeRawBufferPointer,
        _ send: (UnsafePointer<iovec>, Int) -> R
    ) -> R {
        unsafe vector[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count)
        unsafe vector[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
        unsafe vector[count + 2] = iovec(iov_base: UnsafeMutableRawPointer(mutating: extra.baseAddress), iov_len: extra.count)
        return unsafe send(vector, count + 3)
    }

    /// Bytes of all pieces.
    var byteCount: Int {
        var n = 0
        for i in 0..<count { unsafe n += vector[i + 2].iov_len }
        return n
    }

    /// Calls `body` with what is left of each piece after its first `skip` bytes, in
    /// order, then empties the gather.
    func drain(skipping skip: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        var skip = skip
        for i in 0..<count {
            let v = unsafe vector[i + 2]
            if unsafe skip >= v.iov_len {
                unsafe skip -= v.iov_len
                continue
            }
            unsafe body(UnsafeRawBufferPointer(start: v.iov_base! + skip, count: v.iov_len - skip)) // non-nil: pieces are non-empty
            skip = 0
        }
        count = 0
        staged = 0
    }
}
