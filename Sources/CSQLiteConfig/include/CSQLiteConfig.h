#ifndef PLAIT_CSQLITECONFIG_H
#define PLAIT_CSQLITECONFIG_H

/// Turns off SQLite's memory statistics for the process (SQLITE_CONFIG_MEMSTATUS = 0). With them on, every
/// allocation SQLite makes takes one process-wide mutex, which every connection of every thread contends for.
/// Must run before SQLite initializes (before the first connection opens); returns SQLITE_OK, or SQLITE_MISUSE
/// when it is too late (nothing changes then). sqlite3_config is variadic, so Swift cannot call it directly.
int plait_sqlite_disable_memstatus(void);

#endif
