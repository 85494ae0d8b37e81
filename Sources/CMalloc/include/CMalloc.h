#ifndef PLAIT_CMALLOC_H
#define PLAIT_CMALLOC_H

/// glibc's malloc_trim(0): gives the pages of every free heap chunk, in every arena, back to the system.
/// Returns 1 if any memory was released. (Swift's Glibc module does not import it.)
int plait_malloc_trim(void);

#endif
