import CMalloc

/// How this process's freed memory goes back to the system (glibc's malloc).
///
/// glibc keeps freed memory for reuse: a block freed inside a heap stays resident until the heap's top is free,
/// and each thread allocates from an arena of its own. A catch-up of 100,000 new items decodes its batches on two
/// threads while the state's index grows by doubling; when the pull ended, about 30 MiB of its resident memory
/// was free blocks, and the save after it peaked on top of them (122 – 127 MiB).
///
/// Tried and not kept: a fixed mmap threshold of 1 MiB (`mallopt`), which gives every large block its own mapping,
/// returned when freed. The first time, it took the catch-up's peak to 96 MiB, but each large allocation then
/// faulted its pages in afresh: a full replay of 1,000,000 changes went from 0.61 to 0.82 s and a late change
/// from 5.4 to 14.7 ms (replay's checkpoints copied the state's arrays). Tried again once the item records were
/// kept in chunks (`ChunkedArray`): replay and late changes no longer moved, the peaks fell 96 → 91 MiB (growing)
/// and 76 → 71 MiB (edits), but both catch-up rates fell 5 – 7 % (each batch's large blocks mapped and unmapped
/// afresh; 2 × 3 runs each, alternating), and a fresh process's late change rose 101 → 108 – 114 ms. Fixed only
/// once a pull is done, before its save: 96 → 94 MiB at no cost in rate — too little for a process-wide side
/// effect of a store method.
public enum ProcessMemory {
    /// Returns the pages of every free chunk, in every thread's arena, to the system: a few milliseconds after a
    /// pull, whose decoded batches are freed by then (`Replica.saveDerivedState`).
    public static func returnFreed() {
        _ = plait_malloc_trim()
    }
}
