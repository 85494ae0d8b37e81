import Testing

@testable import PlaitCore

@Suite("Text made safe for a terminal, and errors about changes that arrive")
struct TerminalTextTests {
    @Test func everyControlAndBidiCharacterIsEscaped() {
        let escapes: [(UInt32, String)] = [
            (0x00, "\\x00"), (0x07, "\\x07"), (0x09, "\\t"), (0x0A, "\\n"), (0x0D, "\\r"), (0x1B, "\\x1b"),
            (0x1F, "\\x1f"), (0x7F, "\\x7f"), (0x80, "\\u{80}"), (0x9B, "\\u{9b}"), (0x9F, "\\u{9f}"),
            (0x061C, "\\u{61c}"), (0x200E, "\\u{200e}"), (0x200F, "\\u{200f}"), (0x2028, "\\u{2028}"),
            (0x2029, "\\u{2029}"), (0x202A, "\\u{202a}"), (0x202E, "\\u{202e}"), (0x2066, "\\u{2066}"),
            (0x2069, "\\u{2069}"),
        ]
        for (value, shown) in escapes {
            let scalar = Unicode.Scalar(value)!
            #expect(String(Character(scalar)).terminalSafe == shown, "U+\(String(value, radix: 16))")
            #expect(scalar.actsOnTerminal)
        }
        // Every C0 and C1 control and DEL, whatever their escape: nothing of them is left raw.
        for value in Array(0...0x1F) + Array(0x7F...0x9F) {
            let text = "a" + String(Character(Unicode.Scalar(UInt32(value))!)) + "b"
            let raw = text.terminalSafe.unicodeScalars.filter(\.actsOnTerminal)
            #expect(raw.isEmpty, "\(value)")
        }
    }

    @Test func ordinaryTextIsLeftAlone() {
        for text in ["", "milk", "Übung 🧺", "C:\\Users\\x1b", "שלום", "a b", "👩‍👩‍👧", "e\u{301}"] {
            #expect(text.terminalSafe == text)
        }
    }

    @Test func anEscapeSequenceIsShownNotActedOn() {
        #expect("\u{1B}[31mred\u{1B}[0m".terminalSafe == "\\x1b[31mred\\x1b[0m")
        #expect("\u{1B}]0;title\u{07}".terminalSafe == "\\x1b]0;title\\x07")
        #expect("pay\u{202E}gpj.exe".terminalSafe == "pay\\u{202e}gpj.exe")
    }

    @Test func anExcerptIsShortEscapedAndSaysHowLongTheWholeIs() {
        #expect("short".terminalExcerpt() == "short")
        #expect(String(repeating: "x", count: 80).terminalExcerpt() == String(repeating: "x", count: 80))
        let long = String(repeating: "\u{1B}", count: 4 << 20)
        let excerpt = long.terminalExcerpt(limit: 10)
        #expect(excerpt == String(repeating: "\\x1b", count: 10) + "… (\(4 << 20) bytes in all)")
    }

    /// A change that arrives and does not decode names the peer's fault, not a damaged store of this device.
    @Test func aChangeThatDoesNotDecodeIsThePeersFault() throws {
        // A payload's reason is bare, for the refusal to name the peer's change around it.
        #expect {
            try ListsChange(kind: "item.create", payload: [0x0A, 0x10, 0x01])
        } throws: { error in
            guard case let CoreError.malformedPayload(_, reason) = error else { return false }
            return reason == "length beyond the end"
        }
        // Canonical bytes are decoded only as they arrive: a failure is the sender's.
        let truncated = Array(ListsChangeTests.sample().canonicalBytes.dropLast(3))
        #expect {
            try Change(canonical: truncated[...])
        } throws: { error in
            guard case let CoreError.badChange(ref, reason) = error else { return false }
            return ref == ListsChangeTests.sample().ref.description && reason == "length beyond the end"
                && !"\(error)".contains("stored snapshot")
        }
    }
}
