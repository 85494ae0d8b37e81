#include <malloc.h>
#include "CMalloc.h"

int plait_malloc_trim(void) {
    return malloc_trim(0);
}
