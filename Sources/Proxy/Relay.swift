// Public entry to the relay for `earmuff serve`.
import Consent
import Glibc
import PulseWire

/// An observer that lets everything through (no consent layer attached).
final class TransparentObserver: SessionObserver {
    func sessionOpened(_ session: SessionState) {}
    func sessionClosed(_ session: SessionState) {}
    func clientPropertiesChanged(_ session: SessionState) {}
    func recordStreamRequested(_ session: SessionState) -> String? { nil }
    func recordStreamStarted(_ session: SessionState, stream: RecordStream) { stream.setReal(true) }
    func recordStreamEnded(_ session: SessionState, stream: RecordStream) {}
    func refusal(for command: Command, payload: [UInt8], session: SessionState) -> String? { nil }
}

/// Identity from SO_PEERCRED and /proc/PID/exe only.
func basicIdentity(pid: Int32, uid: UInt32, gid: UInt32, launcherAppID: String?) -> ClientIdentity {
    if let app = launcherAppID {
        return ClientIdentity(pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "launcher", value: app), method: .launcher)
    }
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/\(pid)/exe", &buf, buf.count - 1)
    let exe = n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown-pid-\(pid)"
    return ClientIdentity(pid: pid, uid: uid, gid: gid, appKey: AppKey(kind: "exe", value: exe), method: .executable,
                          executable: n > 0 ? exe : nil)
}
