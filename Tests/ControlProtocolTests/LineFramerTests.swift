import ControlProtocol
import Testing

@Suite struct LineFramerTests {
    let input = Array("{\"type\":\"status\",\"id\":1}\n\n{\"type\":\"apps\"}\r\n{\"a\":\"é\"}\n".utf8)
    let expected = ["{\"type\":\"status\",\"id\":1}", "{\"type\":\"apps\"}", "{\"a\":\"é\"}"].map { Array($0.utf8) }

    @Test func allAtOnce() throws {
        var f = LineFramer()
        #expect(try f.feed(input) == expected)
        #expect(f.bufferedCount == 0)
    }

    @Test func oneByteAtATime() throws {
        var f = LineFramer()
        var lines: [[UInt8]] = []
        for b in input { lines += try f.feed([b]) }
        #expect(lines == expected)
    }

    @Test func everySplitPoint() throws {
        for cut in 0...input.count {
            var f = LineFramer()
            let lines = try f.feed(input[..<cut]) + f.feed(input[cut...])
            #expect(lines == expected, "split at \(cut)")
        }
    }

    @Test func halfWrittenLineWaits() throws {
        var f = LineFramer()
        #expect(try f.feed(Array("{\"type\":".utf8)).isEmpty)
        #expect(f.bufferedCount == 8)
        #expect(try f.readLine() == nil)
        #expect(try f.feed(Array("\"ok\"}\n".utf8)) == [Array("{\"type\":\"ok\"}".utf8)])
    }

    @Test func lineAtTheLimitPasses() throws {
        var f = LineFramer(limit: 16)
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 16)
        #expect(try f.feed(line + [10]) == [line])
    }

    @Test func oversizedLineThrowsBeforeItsNewline() {
        var f = LineFramer(limit: 16)
        #expect(throws: ControlProtocolError.lineTooLarge(limit: 16)) {
            _ = try f.feed([UInt8](repeating: UInt8(ascii: "x"), count: 17))
        }
    }

    @Test func oversizedLineInOneChunkWithNewlineThrows() throws {
        var f = LineFramer(limit: 16)
        var lines: [[UInt8]] = []
        #expect(throws: ControlProtocolError.lineTooLarge(limit: 16)) {
            lines = try f.feed(Array("short\n".utf8) + [UInt8](repeating: 120, count: 40) + [10])
        }
        #expect(lines.isEmpty)
    }

    @Test func defaultLimitIs64KiB() throws {
        var f = LineFramer()
        #expect(f.limit == 65536)
        let big = [UInt8](repeating: UInt8(ascii: "y"), count: 65536)
        #expect(try f.feed(big + [10]) == [big])
        #expect(throws: ControlProtocolError.lineTooLarge(limit: 65536)) { _ = try f.feed(big + [121]) }
    }

    @Test func manyLinesKeepBufferCompact() throws {
        var f = LineFramer(limit: 64)
        for i in 0..<10_000 {
            let lines = try f.feed(Array("line \(i)\nhal".utf8))
            #expect(lines == [Array("line \(i)".utf8)])
            #expect(try f.feed(Array("f\n".utf8)) == [Array("half".utf8)])
        }
        #expect(f.bufferedCount == 0)
    }
}
