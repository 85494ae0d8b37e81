import PlaitCore
import Testing

/// A hostile paired peer (2026-11-25) sent a consistent fork record whose base was at or above the number of the
/// change it names (base 4 for change 3, then 2^63 - 1): naming gave that change the number `seq - base`, which
/// overflowed and stopped the agent on every connection. A record names the first change of its branch, which its
/// author numbered base + 1; a record that does not fit the change it names is no record of it.
@Suite("Fork records whose base does not fit their change")
struct ForkRecordBaseTests {
    /// A chain of `count` changes of `root`, as naming sees them.
    static func chain(_ count: UInt64) -> [ForkBranch.Node] {
        var previous = Change.zeroHash
        return (1...count).map { seq in
            let hash = SHA256.hash(Array("change \(seq)".utf8))
            defer { previous = hash }
            return ForkBranch.Node(seq: seq, hash: hash, previousHash: previous)
        }
    }

    @Test(arguments: [3 as UInt64, 4, 40, Change.maxSeq])
    func aRecordWhoseBaseIsNotItsChangesNumberMinusOneNamesNothing(base: UInt64) {
        let root = TimelineID(0x0123_4567_89AB_CDEF)
        let nodes = Self.chain(6)
        let named = nodes[2]  // change 3
        let rival = [UInt8](repeating: 0, count: 31) + [1]
        let record = ForkBranch.Record(
            branch: ForkBranch.id(parent: root, firstHash: named.hash), root: root, parent: root, base: base,
            firstHash: named.hash, rivalHash: rival)
        #expect(record.isConsistent, "a record that passes every check made where it is decoded")
        let plain = ForkBranch.name(root: root, nodes)
        let withRecord = ForkBranch.name(root: root, nodes, known: [record])
        #expect(withRecord.names == plain.names, "base \(base)")
        #expect(withRecord.branches.isEmpty)
        #expect(plain.names[named.hash] == ForkBranch.Name(timeline: root, seq: 3))
    }

    /// The same record with the base that fits (change 3 continues change 2) is honoured: change 3 and what follows
    /// start its branch, since the record says they lost to the rival.
    @Test func theRecordWithTheBaseThatFitsIsHonoured() {
        let root = TimelineID(0x0123_4567_89AB_CDEF)
        let nodes = Self.chain(6)
        let named = nodes[2]
        let rival = [UInt8](repeating: 0, count: 31) + [1]
        let record = ForkBranch.Record(
            branch: ForkBranch.id(parent: root, firstHash: named.hash), root: root, parent: root, base: 2,
            firstHash: named.hash, rivalHash: rival)
        let naming = ForkBranch.name(root: root, nodes, known: [record])
        #expect(naming.names[named.hash] == ForkBranch.Name(timeline: record.branch, seq: 1))
        #expect(naming.names[nodes[5].hash] == ForkBranch.Name(timeline: record.branch, seq: 4))
    }
}
