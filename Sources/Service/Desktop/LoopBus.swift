// A session-bus connection driven by an event loop, the way sd-event drives
// one: the loop watches the bus socket (`sd_bus_get_fd`) for what sd-bus wants
// now (`sd_bus_get_events`) and sets a timer for its next deadline
// (`sd_bus_get_timeout`); on either, `sd_bus_process` runs until it has
// nothing left, and both are asked for again. sd-bus reads and queues messages
// during blocking calls too, and queued messages make no socket readable: so
// whoever uses the bus on the loop outside `process` (a request posted from
// another thread, a timer) calls `drive()` when done, which processes them and
// re-arms (a queued message shows as a deadline already past).
import DBus
import Glibc
import LinuxSystem
import Runtime

final class LoopBus: LoopHandler {
    let bus: BusConnection
    private let loop: EventLoop
    private let fd: Int32
    private var token: UInt64 = 0
    private var events: UInt32 = 0
    /// The deadline a loop timer is set for, if any (a timer for another time does nothing).
    private var timerDeadline: Double?
    /// Runs after each round of processing, outside `sd_bus_process` (so it may use the bus).
    private let afterProcessing: () -> Void
    /// Runs once when the connection is lost, after the loop stopped watching it.
    private let onLost: (BusError) -> Void
    private var lost = false

    /// Registers `bus` on `loop` (call on the loop's thread).
    init(
        _ bus: BusConnection, loop: EventLoop, afterProcessing: @escaping () -> Void = {},
        onLost: @escaping (BusError) -> Void
    ) throws(SystemError) {
        loop.assertInLoop()
        self.bus = bus
        self.loop = loop
        self.afterProcessing = afterProcessing
        self.onLost = onLost
        fd = bus.fd
        events = Self.epollEvents(bus)
        token = try loop.register(fd, events: events, handler: self)
    }

    deinit { stopWatching() }

    func handleEvents(_ events: UInt32) { drive() }

    /// Processes everything sd-bus has (input, timeouts, queued messages), then re-arms.
    func drive() {
        loop.assertInLoop()
        guard !lost else { return }
        do {
            while try bus.process() {}
        } catch {
            lost = true
            stopWatching()
            onLost(error)
            return
        }
        afterProcessing()
        guard !lost else { return }
        rearm()
    }

    /// Watches for what sd-bus wants now and until when.
    private func rearm() {
        let wanted = Self.epollEvents(bus)
        if wanted != events {
            events = wanted
            loop.modify(fd, token: token, events: wanted)
        }
        guard let deadline = bus.deadline else { return }
        // One timer at a time: an earlier one fires first and re-arms for this.
        if let set = timerDeadline, set <= deadline { return }
        timerDeadline = deadline
        loop.schedule(at: deadline) { [weak self] in
            guard let self, timerDeadline == deadline else { return }
            timerDeadline = nil
            drive()
        }
    }

    private func stopWatching() {
        guard token != 0 else { return }
        loop.remove(fd, token: token)
        token = 0
    }

    /// sd-bus's poll bits as epoll bits (level-triggered; a hang-up is always reported).
    private static func epollEvents(_ bus: BusConnection) -> UInt32 {
        let wanted = bus.events
        var e: UInt32 = 0
        if wanted & Int16(POLLIN) != 0 { e |= PollEvents.input }
        if wanted & Int16(POLLOUT) != 0 { e |= PollEvents.output }
        return e
    }
}
