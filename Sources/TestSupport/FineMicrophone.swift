import Foundation

extension PulseServer {
    /// Name of the source `startFineMicrophone` adds.
    public static let fineSourceName = "fine-mic"

    /// Makes the default source a microphone whose tone comes in 5 ms blocks, for tests that
    /// place a change in a recording to the millisecond: `module-sine-source` hands out
    /// blocks of up to 2 s. PulseAudio's `module-pipe-source` reads a FIFO that a small
    /// writer fills at the pace of the clock (the 440 Hz tone at `toneAmplitude`, s16le,
    /// dropping what the source does not take, so it never runs behind the clock).
    /// pipewire-pulse's microphone already comes in quanta of the graph: nothing is added.
    /// Returns the source's name.
    @discardableResult
    public func startFineMicrophone() throws -> String {
        guard kind == .pulseaudio else { return Self.sourceName }
        let fifo = "\(directory)/fine-mic.fifo" // made by the module
        let load = try pactl(
            "load-module", "module-pipe-source", "source_name=\(Self.fineSourceName)", "file=\(fifo)",
            "format=s16le", "rate=\(Self.toneRate)", "channels=1")
        guard load.succeeded else { throw TestSupportError("pactl load-module module-pipe-source failed: \(load); log:\n\(log())") }
        let writer = try ChildProcess.spawn(
            executable: "/usr/bin/python3",
            arguments: [
                "-c", Self.pacedTone, fifo, String(Self.toneRate),
                String(Self.toneFrequency), String(Self.toneAmplitude),
            ],
            environment: Tool.privateEnvironment(root: directory),
            stdoutPath: "\(directory)/fine-mic.log", stderrPath: "\(directory)/fine-mic.log", maxLifetime: 1800)
        helpers.withLock { $0.append(writer) }
        let set = try pactl("set-default-source", Self.fineSourceName)
        guard set.succeeded else { throw TestSupportError("pactl set-default-source failed: \(set)") }
        return Self.fineSourceName
    }

    /// The writer: `python3 -c pacedTone FIFO RATE FREQUENCY AMPLITUDE`. One second of the
    /// tone holds whole periods (440 Hz at 48 kHz), so it is written round and round.
    static let pacedTone = """
        import math, os, struct, sys, time
        path, rate, freq, amp = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
        second = b''.join(struct.pack('<h', int(round(amp * 32767 * math.sin(2 * math.pi * freq * i / rate))))
                          for i in range(rate))
        block = rate // 200
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        start, sent = time.monotonic(), 0
        while True:
            due = int((time.monotonic() - start) * rate) + block
            while sent < due:
                at = sent % rate * 2
                try:
                    os.write(fd, second[at:at + block * 2])
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    sys.exit(0)
                sent += block
            time.sleep(block / rate)
        """
}
