import Foundation
import Glibc
import Synchronization

/// When each part of some recordings reached their files: a thread looks at their sizes
/// every millisecond and keeps each growth with its wall-clock time (seconds since 1970),
/// so a test can say when a given sample arrived, to within a millisecond or two.
public final class ArrivalTimes: Sendable {
    /// Per recording: (time, size) at each growth.
    private let seen: Mutex<[[(at: Double, bytes: Int)]]>
    private let running = Atomic<Bool>(true)

    public init(_ recordings: [Recording]) {
        seen = Mutex(recordings.map { [(Date().timeIntervalSince1970, $0.byteCount())] })
        let thread = Thread { [self] in
            while running.load(ordering: .relaxed) {
                let sizes = recordings.map { $0.byteCount() }
                let now = Date().timeIntervalSince1970
                seen.withLock { s in
                    for (i, size) in sizes.enumerated() where size > s[i].last!.bytes { s[i].append((now, size)) }
                }
                usleep(1000)
            }
        }
        thread.start()
    }

    /// When byte `offset` of recording `index` was first seen in its file; nil if not yet.
    public func arrival(of offset: Int, in index: Int) -> Double? {
        seen.withLock { s in s[index].first { $0.bytes > offset }?.at }
    }

    /// Stops looking (the thread ends within a millisecond).
    public func stop() {
        running.store(false, ordering: .relaxed)
    }
}
