import Foundation
import PlaitCore
import PlaitWire

import Testing

/// Hello field 15, the succession statement (PROTOCOL.md §21).
@Suite struct SuccessionWireTests {
    let statement = SuccessionStatement(
        statement: [0x0A, 1, 1, 0x12, 1, 2], signature: Array(repeating: 7, count: 64),
        newSignature: Array(repeating: 8, count: 64))

    func decode(_ hello: Plait_Wire_V1_Hello) throws -> PlaitWire.Message {
        try Message.decode(Frame(type: .hello, payload: try hello.serializedBytes()))
    }

    @Test func aHelloCarriesTheStatementAsField15() throws {
        var hello = Fixtures.hello
        hello.succession = statement
        let payload = Message.hello(hello).frame.payload
        let proto = try Plait_Wire_V1_Hello(serializedBytes: payload)
        #expect(proto.hasSuccession)
        #expect([UInt8](proto.succession.statement) == statement.statement)
        #expect([UInt8](proto.succession.signature) == statement.signature)
        #expect([UInt8](proto.succession.newSignature) == statement.newSignature)
        // Field 15 (tag 0x7A, length-delimited) comes last, holding fields 1, 2 and 3 in order.
        let inner: [UInt8] =
            [0x0A, 6] + statement.statement + [0x12, 64] + statement.signature + [0x1A, 64] + statement.newSignature
        #expect(inner.count == 140)
        #expect(Array(payload.suffix(inner.count + 3)) == [0x7A, 0x8C, 0x01] + inner, "140 as a varint is 8C 01")
        #expect(try Message.decode(Frame(type: .hello, payload: payload)) == .hello(hello))
        // Without the new key's signature (plait before it) the Hello decodes: the receiver refuses the statement
        // with a reason its sender is told (PROTOCOL.md §21), rather than dropping the connection unexplained.
        var older = hello
        older.succession?.newSignature = []
        #expect(try Message.decode(Message.hello(older).frame) == .hello(older))
        // Without a statement nothing of field 15 is written, so a Hello keeps its bytes.
        let plain = try Plait_Wire_V1_Hello(serializedBytes: PlaitWire.Message.hello(Fixtures.hello).frame.payload)
        #expect(!plain.hasSuccession)
    }

    @Test func aStatementOfTheWrongSizeMakesTheHelloInvalid() throws {
        let base = try Plait_Wire_V1_Hello(serializedBytes: Message.hello(Fixtures.hello).frame.payload)
        let cases: [(String, [UInt8], Int, Int)] = [
            ("a 63-byte signature", [1], 63, 64),
            ("a 65-byte signature", [1], 65, 64),
            ("an empty statement", [], 64, 64),
            ("an oversized statement", Array(repeating: 1, count: SuccessionStatement.maxStatementBytes + 1), 64, 64),
            ("a 63-byte new signature", [1], 64, 63),
            ("a 65-byte new signature", [1], 64, 65),
        ]
        for (label, bytes, signatureSize, newSignatureSize) in cases {
            var proto = base
            proto.succession = Plait_Wire_V1_SuccessionStatement.with {
                $0.statement = Data(bytes)
                $0.signature = Data(repeating: 9, count: signatureSize)
                $0.newSignature = Data(repeating: 9, count: newSignatureSize)
            }
            #expect(throws: WireError.self, "\(label)") { try decode(proto) }
        }
    }
}
