#include <malloc.h>
#include "CMalloc.h"

int plait_malloc_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int plait_malloc_trim(void) {
    return malloc_trim(0);
}
