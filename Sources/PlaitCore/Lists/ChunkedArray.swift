/// An array kept in chunks of a fixed size, each an array of its own, so that a copy shares every chunk and a
/// change to the copy copies only the chunk it touches.
///
/// Why: replay keeps in-memory checkpoints, each a copy of the state. With one contiguous array of 100,000 item
/// records (12 MiB at 120 bytes each), the first change after a checkpoint copied all of it, retaining every text,
/// and the checkpoint then held the old 12 MiB while the live state grew a new one by doubling: the old buffer,
/// the new one and the checkpoint's were all alive at the end of a growing catch-up. In chunks a checkpoint costs
/// the chunks changed after it, and growing never copies what is already stored (a new chunk is added).
///
/// Reading is one shift and one mask more than an array's; `sharesChunk` lets two copies skip what they share.
@usableFromInline
struct ChunkedArray<Element> {
    /// Elements per chunk: `1 << shift`.
    @usableFromInline let shift: Int
    @usableFromInline var chunks: [[Element]] = []
    @usableFromInline private(set) var count = 0

    /// 1,024 elements a chunk: 128 KiB of item table entries (ID and record), plus the array's header. That is just
    /// above glibc's initial 128 KiB threshold for mapping an allocation on its own, which glibc raises once a larger
    /// mapped block is freed (a batch's arrays are). 512 a chunk, below it, measured the same (2026-11-24, `plait
    /// bench --catchup-only`, both workloads, 2 × 3 runs each: peaks and rates within the noise).
    @usableFromInline static var defaultShift: Int { 10 }

    @usableFromInline
    init(shift: Int = defaultShift) {
        precondition((1...20).contains(shift))
        self.shift = shift
    }

    @usableFromInline var mask: Int { (1 << shift) - 1 }

    /// Read in place (a `_read`, not a `get`): reading one field of an element — a table entry's ID — copies
    /// neither the element nor what it retains.
    @inlinable
    subscript(index: Int) -> Element {
        _read { yield chunks[index >> shift][index & mask] }
        _modify { yield &chunks[index >> shift][index & mask] }
    }

    @usableFromInline
    mutating func append(_ element: Element) {
        if count & mask == 0 {
            var chunk: [Element] = []
            chunk.reserveCapacity(1 << shift)
            chunk.append(element)
            chunks.append(chunk)
        } else {
            chunks[chunks.count - 1].append(element)
        }
        count += 1
    }

    @usableFromInline
    mutating func removeLast() {
        precondition(count > 0, "removeLast on an empty ChunkedArray")
        chunks[chunks.count - 1].removeLast()
        if chunks[chunks.count - 1].isEmpty { chunks.removeLast() }
        count -= 1
    }

    /// Room for `capacity` elements without the chunk list itself growing (the chunks are allocated as needed).
    @usableFromInline
    mutating func reserveCapacity(_ capacity: Int) {
        chunks.reserveCapacity((capacity + mask) >> shift)
    }

    /// Calls `body` with the element at `index` in place, without copying it out.
    @inlinable
    func withElement<R>(at index: Int, _ body: (borrowing Element) throws -> R) rethrows -> R {
        try chunks[index >> shift].withUnsafeBufferPointer { try body($0[index & mask]) }
    }

    /// Calls `body` with every element in place, in order.
    @inlinable
    func forEachElement(_ body: (Int, borrowing Element) throws -> Void) rethrows {
        for (number, chunk) in chunks.enumerated() {
            let base = number << shift
            try chunk.withUnsafeBufferPointer { elements in
                for offset in 0..<elements.count { try body(base + offset, elements[offset]) }
            }
        }
    }

    /// Whether chunk `number` of `self` and of `other` is one and the same storage (so equal element for element).
    @usableFromInline
    func sharesChunk(_ number: Int, with other: Self) -> Bool {
        guard number < chunks.count, number < other.chunks.count, chunks[number].count == other.chunks[number].count
        else { return false }
        return chunks[number].withUnsafeBufferPointer { mine in
            other.chunks[number].withUnsafeBufferPointer { theirs in mine.baseAddress == theirs.baseAddress }
        }
    }

    /// Bytes of the chunks' storage (by capacity) and of the chunk list.
    @usableFromInline
    var storageBytes: Int {
        chunks.reduce(chunks.capacity * MemoryLayout<[Element]>.stride) {
            $0 + $1.capacity * MemoryLayout<Element>.stride
        }
    }
}

extension ChunkedArray: Sendable where Element: Sendable {}
