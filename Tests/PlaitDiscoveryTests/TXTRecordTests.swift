import PlaitCore
import Testing

@testable import PlaitDiscovery

@Suite("TXT record")
struct TXTRecordTests {
    @Test func entriesAreTagProtoSumAndPairOnlyWhilePairing() {
        var txt = TXTRecord(tag: "XCUETIOSOTTFEAFS", proto: 1, sum: "ZKADYVIA")
        #expect(txt.entries.map { "\($0.key)=\($0.value)" } == ["tag=XCUETIOSOTTFEAFS", "proto=1", "sum=ZKADYVIA"])
        txt.pairing = true
        #expect(txt.entries.map { "\($0.key)=\($0.value)" }.last == "pair=1")
    }

    @Test func readsWhatItWrites() {
        let txt = TXTRecord(tag: "XCUETIOSOTTFEAFS", proto: 3, sum: "ZKADYVIA", pairing: true)
        let dictionary = Dictionary(uniqueKeysWithValues: txt.entries.map { ($0.key, $0.value) })
        #expect(TXTRecord(dictionary) == txt)
        #expect(TXTRecord(["tag": "A", "proto": "1"]) == TXTRecord(tag: "A", proto: 1, sum: ""))
        #expect(TXTRecord(["tag": "A", "proto": "x", "sum": "S"]) == nil)
        #expect(TXTRecord(["proto": "1", "sum": "S"]) == nil)
    }

    /// Vectors from Python: `base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:8]`.
    @Test func summaryHashIsEightBase32CharactersOfTheSummaryText() throws {
        #expect(TXTRecord.summaryHash(.empty) == "4OYMIQUY")
        let summary = try Summary(parsing: "0K3F7QZ2AB7XM:6,0P4M4R7TBQ2WS:3")
        #expect(TXTRecord.summaryHash(summary) == "F6SEIMRQ")
    }
}
