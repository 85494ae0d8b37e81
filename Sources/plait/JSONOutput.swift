import Foundation
import PlaitOutput

/// Prints a typed output as JSON on standard output, written as it is encoded through a buffered writer (see
/// `JSONWriter`: keys in sorted order, and characters a terminal would act on written as `\uXXXX`).
func printJSON<T: Encodable>(_ value: T) throws {
    try writeJSON { writer in try JSONStreamEncoder.encode(value, into: writer) }
}

/// Streams JSON to standard output: `body` writes into a writer whose buffer goes out whenever it fills.
func writeJSON(_ body: (JSONWriter) throws -> Void) throws {
    // Text printed before (bench logs) goes out first.
    fflush(nil)
    let writer = JSONWriter(descriptor: STDOUT_FILENO)
    try body(writer)
    try writer.flush()
}

/// Prints the benchmark's figures (numbers and text by name) as `Figures`.
func printFigures(_ figures: [String: Any]) throws { try printJSON(Figures(figures)) }

extension Figures {
    /// The benchmark's figures, gathered as numbers and text by name (see Bench.swift).
    init(_ figures: [String: Any]) {
        self.init()
        for (key, value) in figures { self[key] = Self.value(value) }
    }

    /// A number, text, list or nested figures (a range over runs) as a typed value.
    static func value(_ value: Any) -> Value {
        switch value {
        case let value as Int: return .integer(value)
        case let value as UInt64: return value <= UInt64(Int.max) ? .integer(Int(value)) : .decimal(Double(value))
        case let value as Double: return value.isFinite ? .decimal(value) : .text("\(value)")
        case let value as [Any]: return .list(value.map(Self.value))
        case let value as [String: Any]: return .object(Figures(value))
        default: return .text("\(value)")
        }
    }
}
