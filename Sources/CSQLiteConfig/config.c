#include <sqlite3.h>
#include "CSQLiteConfig.h"

int plait_sqlite_disable_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
