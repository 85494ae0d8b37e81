/// Text from the data made safe to print to a terminal.
///
/// Titles, item texts and device names may come from any paired peer, so they may hold escape sequences
/// that recolour, retitle or clear a terminal, carriage returns that overwrite a line, or bidi overrides
/// that make one text read as another. Human output shows those characters as visible escapes instead
/// (`\x1b`, `\n`, `\u{202e}`); JSON output carries the exact text. A backslash itself is left as it is:
/// the escapes are for reading, and JSON is the exact form.
extension String {
    /// This text with every character a terminal would act on shown as a visible escape: C0 controls
    /// (`\n`, `\r`, `\t`, else `\xHH`), DEL (`\x7f`), C1 controls and the characters that change the
    /// direction or the lines of text (bidi embeddings, overrides, isolates and marks; line and paragraph
    /// separators) as `\u{HHHH}`.
    public var terminalSafe: String {
        // Nearly all text is safe: keep it without copying.
        guard unicodeScalars.contains(where: \.actsOnTerminal) else { return self }
        var shown = ""
        shown.reserveCapacity(utf8.count + 16)
        for scalar in unicodeScalars {
            if scalar.actsOnTerminal {
                shown += TerminalText.escape(scalar)
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// At most `limit` characters of this text, terminal-safe, saying how long the whole is when it was
    /// cut: an error quotes a bad input line this way, so a huge line costs neither time nor screen.
    public func terminalExcerpt(limit: Int = 80) -> String {
        var scalars = unicodeScalars.makeIterator()
        var kept = String.UnicodeScalarView()
        while kept.count < limit, let scalar = scalars.next() { kept.append(scalar) }
        guard scalars.next() != nil else { return String(kept).terminalSafe }
        return String(kept).terminalSafe + "… (\(utf8.count) bytes in all)"
    }
}

extension Unicode.Scalar {
    /// Whether a terminal would act on this character instead of showing it (see `terminalSafe`).
    public var actsOnTerminal: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x061C, 0x200E, 0x200F: return true  // Arabic letter mark, left-to-right and right-to-left marks
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x202A...0x202E, 0x2066...0x2069: return true  // bidi embeddings, overrides and isolates
        default: return false
        }
    }
}

/// How `terminalSafe` shows a character a terminal would act on.
enum TerminalText {
    static func escape(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            let hex = String(scalar.value, radix: 16)
            if scalar.value <= 0x7F { return "\\x" + (hex.count < 2 ? "0" + hex : hex) }
            return "\\u{\(hex)}"
        }
    }
}
