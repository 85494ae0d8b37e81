#ifndef PLAIT_CMALLOC_H
#define PLAIT_CMALLOC_H

/// glibc's mallopt(M_MMAP_THRESHOLD, bytes): allocations of at least `bytes` get their own mapping, returned to
/// the system when freed. Setting it also turns off glibc's dynamic threshold, which otherwise rises to the
/// largest block freed so far (up to 32 MiB) and then serves every later large block from the heap, where its
/// pages stay after it is freed. Returns 1 on success, 0 on error. (The M_ constants are macros Swift does
/// not import.)
int plait_malloc_set_mmap_threshold(int bytes);

/// glibc's malloc_trim(0): gives the pages of every free heap chunk, in every arena, back to the system.
/// Returns 1 if any memory was released.
int plait_malloc_trim(void);

#endif
