/// An item's text as the state keeps it: up to 15 UTF-8 bytes inline (a small Swift string, no heap block), a
/// longer one in a heap block of its own that holds its length and bytes only.
///
/// A Swift string's own storage for a 17-byte text takes 78 bytes of heap (a 32-byte header, spare capacity,
/// the allocator's rounding); the block here takes 48. For 100,000 items with texts of 16 – 24 bytes that is
/// about 3 MiB of a catch-up's peak memory (issue 9: ≤ 64 MiB).
///
/// Equal when the bytes are equal: two texts that differ in bytes are different data (a Swift string compares
/// canonically equivalent texts equal), and it is the bytes that are stored, encoded and digested.
public struct ItemText: Hashable, Sendable, CustomStringConvertible {
    // Unchecked: a block is never changed after it is made (ManagedBuffer itself is not Sendable).
    @usableFromInline enum Storage: @unchecked Sendable {
        case inline(String)
        case heap(ItemTextStorage)
    }

    @usableFromInline let storage: Storage

    public init(_ text: String) {
        var text = text
        storage = text.withUTF8 { bytes in
            // A string of 15 bytes or fewer is rebuilt small (inline), even when it came with storage of its own.
            bytes.count <= 15 ? .inline(String(decoding: bytes, as: UTF8.self)) : .heap(ItemTextStorage.make(bytes))
        }
    }

    /// The text as a string (a long one is copied out of its block).
    public var string: String {
        switch storage {
        case let .inline(text): return text
        case let .heap(block): return block.withBytes { String(decoding: $0, as: UTF8.self) }
        }
    }

    public var description: String { string }

    /// The text's UTF-8 bytes in place.
    @inlinable
    public func withUTF8<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        switch storage {
        case var .inline(text): return try text.withUTF8(body)
        case let .heap(block): return try block.withBytes(body)
        }
    }

    public static func == (lhs: ItemText, rhs: ItemText) -> Bool {
        lhs.withUTF8 { left in rhs.withUTF8 { right in left.elementsEqual(right) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// The heap block of a long `ItemText`: its byte count, then its bytes. Never changed after it is made.
public final class ItemTextStorage: ManagedBuffer<Int, UInt8> {
    static func make(_ bytes: UnsafeBufferPointer<UInt8>) -> ItemTextStorage {
        let block = unsafeDowncast(
            ItemTextStorage.create(minimumCapacity: bytes.count) { _ in bytes.count }, to: ItemTextStorage.self)
        block.withUnsafeMutablePointerToElements { elements in
            if let base = bytes.baseAddress { elements.initialize(from: base, count: bytes.count) }
        }
        return block
    }

    @inlinable
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointers { count, elements in
            try body(UnsafeBufferPointer(start: elements, count: count.pointee))
        }
    }
}
