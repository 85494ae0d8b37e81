import Foundation
import PlaitCore

#if canImport(Glibc)
import Glibc
#endif

/// What `plait demo` read from one device's store: its summary, then its state digest (read in that
/// order, so the digest is of a state at least as new as the summary).
struct DemoReading: Equatable {
    var summary: Summary
    var digest: [UInt8]

    /// Changes held: the summary names them exactly.
    var changes: UInt64 { summary.count }
}

/// The live table of `plait demo`: one row per device (name, address, changes held, summary, digest,
/// state), redrawn in place on a terminal, or as plain lines, one per device whose state changed, when
/// standard output is a file or a pipe.
struct DemoTable {
    struct Row {
        var name: String
        var address: String
        var reading: DemoReading?
    }

    /// The widest summary column; narrower when the terminal is (see `abbreviate`).
    static let summaryWidth = 36

    /// Whether every device holds the same changes and the same state.
    static func inSync(_ rows: [Row]) -> Bool {
        guard let first = rows.first?.reading else { return false }
        return rows.allSatisfy { $0.reading == first }
    }

    /// The table's lines, a header and one line per device, each at most `width` characters if it can be
    /// done by abbreviating the summaries.
    static func lines(_ rows: [Row], width: Int = .max) -> [String] {
        let union = rows.compactMap(\.reading?.summary).reduce(Summary()) { $0.union($1) }
        let synced = inSync(rows)
        let nameWidth = max(6, rows.map(\.name.count).max() ?? 0)
        let addressWidth = max(7, rows.map(\.address.count).max() ?? 0)
        let states = rows.map { row -> String in
            guard let reading = row.reading else { return "starting" }
            let missing = union.count - reading.changes
            return synced ? "in sync" : missing > 0 ? "missing \(missing)" : "has all"
        }
        // At least "missing 12" wide, so the summary column does not jump as the states change.
        let stateWidth = max(10, states.map(\.count).max() ?? 0)
        // name, address, changes (7), digest (12), state, and five two-space gaps around the summary.
        let fixed = nameWidth + addressWidth + 7 + 12 + stateWidth + 10
        let summaryWidth = max(12, min(Self.summaryWidth, width - fixed))
        func line(_ cells: [String]) -> String {
            [
                cells[0].padding(toLength: nameWidth, withPad: " ", startingAt: 0),
                cells[1].padding(toLength: addressWidth, withPad: " ", startingAt: 0),
                String(repeating: " ", count: max(0, 7 - cells[2].count)) + cells[2],
                cells[3].padding(toLength: summaryWidth, withPad: " ", startingAt: 0),
                cells[4].padding(toLength: 12, withPad: " ", startingAt: 0),
                cells[5],
            ].joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        var out = [line(["device", "address", "changes", "summary", "digest", ""])]
        for (row, state) in zip(rows, states) {
            guard let reading = row.reading else {
                out.append(line([row.name, row.address, "-", "-", "-", state]))
                continue
            }
            out.append(
                line([
                    row.name, row.address, "\(reading.changes)", abbreviate(reading.summary, width: summaryWidth),
                    shortDigest(reading.digest), state,
                ]))
        }
        return out
    }

    /// The first 12 hexadecimal digits of a digest.
    static func shortDigest(_ digest: [UInt8]) -> String { String(digest.hexString.prefix(12)) }

    /// The summary as is if it fits in `width`; else each timeline by its first 4 characters
    /// (`K3F7:204,P4M4:198`), else by its first 2; else that, cut with an ellipsis.
    static func abbreviate(_ summary: Summary, width: Int = summaryWidth) -> String {
        if summary.isEmpty { return "(empty)" }
        let full = summary.description
        if full.count <= width { return full }
        var short = ""
        for prefix in [4, 2] {
            short = summary.timelines.map { "\($0.description.prefix(prefix)):\(summary[$0])" }.joined(separator: ",")
            if short.count <= width { return short }
        }
        return String(short.prefix(width - 1)) + "…"
    }
}

/// Writes `text` to `descriptor`, unbuffered. When the reader has gone (`plait demo | head`: EPIPE, SIGPIPE
/// being ignored for the agents' sake) the demo is interrupted as if by SIGPIPE, so it still stops everything
/// it started; Foundation's `FileHandle.write` would crash instead.
func demoWrite(_ text: String, to descriptor: Int32) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        if written <= 0 {
            if errno == EPIPE { recordDemoInterruption(SIGPIPE) }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}

/// Draws the table: in place with ANSI escapes on a terminal, as plain lines otherwise.
final class DemoDisplay {
    /// Whether standard output is a terminal (then the table is redrawn in place).
    let terminal: Bool
    /// Nothing is drawn (`--json`: standard output holds the figures only).
    let quiet: Bool
    private var drawnLines = 0
    private var lastPlain: ContinuousClock.Instant?
    private var printed: [String: DemoReading] = [:]
    private var printedInSync = false
    private var printedHeader = false

    init(quiet: Bool) {
        self.quiet = quiet
        terminal = isatty(STDOUT_FILENO) != 0
    }

    /// A line above the table (set-up steps, results).
    func say(_ line: String) {
        guard !quiet else { return }
        write(line + "\n")
    }

    /// Straight to the descriptor, unbuffered, so a pipe sees each line as it happens.
    private func write(_ text: String) {
        demoWrite(text, to: STDOUT_FILENO)
    }

    /// Shows the current rows and a status line (`elapsed`: seconds since the edits began, stamped on plain
    /// lines). On a terminal the previous drawing is overwritten; in
    /// plain mode, at most every half second, a line per device whose state changed since it was last
    /// printed, and one line when all devices are first seen in sync.
    func show(_ rows: [DemoTable.Row], status: String, elapsed: Double, force: Bool = false) {
        guard !quiet else { return }
        if terminal {
            let width = Self.columns()
            var text = drawnLines > 0 ? "\u{1B}[\(drawnLines)A" : ""
            let lines = DemoTable.lines(rows, width: width - 1) + [status]
            for line in lines {
                text += "\u{1B}[2K" + String(line.prefix(width - 1)) + "\n"
            }
            drawnLines = lines.count
            write(text)
            return
        }
        let now = ContinuousClock.now
        if !force, let lastPlain, now - lastPlain < .milliseconds(500) { return }
        lastPlain = now
        // Before the first edit arrives every device is trivially in sync: nothing to tell.
        guard rows.contains(where: { ($0.reading?.changes ?? 0) > 0 }) else { return }
        let synced = DemoTable.inSync(rows)
        if synced && printedInSync { return }
        let table = DemoTable.lines(rows)
        let stamp = String(format: "[%6.2f s] ", elapsed)
        if !printedHeader {
            printedHeader = true
            write(String(repeating: " ", count: stamp.count) + table[0] + "\n")
        }
        for (index, row) in rows.enumerated() {
            guard let reading = row.reading, printed[row.name] != reading else { continue }
            printed[row.name] = reading
            write(stamp + table[index + 1] + "\n")
        }
        if synced {
            printedInSync = true
            write(stamp + "all \(rows.count) devices in sync\n")
        } else {
            printedInSync = false
        }
    }

    /// Ends the live drawing: later output goes below it.
    func finish() {
        drawnLines = 0
    }

    /// The terminal's width (80 if unknown), so a line never wraps and breaks the redrawing.
    static func columns() -> Int {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 10 { return Int(size.ws_col) }
        return 80
    }
}
