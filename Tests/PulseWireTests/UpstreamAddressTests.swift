import PulseWire
import Testing

@Suite struct UpstreamAddressTests {
    @Test func unixForms() throws {
        #expect(try UpstreamAddress.parse("unix:/run/user/1000/pulse/native") == .unix("/run/user/1000/pulse/native"))
        #expect(try UpstreamAddress.parse("/tmp/native") == .unix("/tmp/native"))
        #expect(try UpstreamAddress.parse("{0123abcd}unix:/tmp/x") == .unix("/tmp/x"))
    }

    @Test func listTakesTheFirstUnixEntry() throws {
        #expect(try UpstreamAddress.parse("tcp:localhost:4713 unix:/tmp/a unix:/tmp/b") == .unix("/tmp/a"))
    }

    @Test func refusesWhatItCannotUse() {
        #expect(throws: UpstreamError.self) { try UpstreamAddress.parse("tcp:localhost:4713") }
        #expect(throws: UpstreamError.self) { try UpstreamAddress.parse("unix:relative/path") }
        #expect(throws: UpstreamError.self) { try UpstreamAddress.parse("   ") }
    }
}
