import CMalloc

/// How this process's freed memory goes back to the system (glibc's malloc).
///
/// glibc keeps freed memory for reuse: a block freed inside a heap stays resident until the heap's top is free,
/// and its threshold for giving a large block a mapping of its own rises to the largest block freed so far. A
/// catch-up of 100,000 changes grows the state's arrays by doubling and decodes its batches on two threads, so
/// its resident memory kept about 30 MiB that nothing used any more (peak 122 – 127 MiB where the state and the
/// code are about 60).
public enum ProcessMemory {
    /// Blocks of at least this size get a mapping of their own, unmapped when freed.
    public static let mmapThreshold: Int32 = 1 << 20

    /// Fixes the mapping threshold at `mmapThreshold` (which also turns off glibc's rising threshold). Call once,
    /// early; the `plait` executable does.
    public static func configure() {
        _ = plait_malloc_set_mmap_threshold(mmapThreshold)
    }

    /// Returns the pages of every free chunk, in every thread's arena, to the system (a few milliseconds after a
    /// pull; called when a pull's batches are freed).
    public static func returnFreed() {
        _ = plait_malloc_trim()
    }
}
