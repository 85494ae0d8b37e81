#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include "CFileIdentity.h"

long long plait_filesystem_type(const char *path) {
    struct statfs status;
    if (statfs(path, &status) != 0) return -1;
    return (long long)status.f_type;
}

int plait_file_identity(const char *path, unsigned long long *inode, long long *birthSeconds,
                        unsigned int *birthNanoseconds) {
    struct statx status;
    if (statx(AT_FDCWD, path, 0, STATX_INO | STATX_BTIME, &status) != 0) return -1;
    *inode = status.stx_ino;
    if (!(status.stx_mask & STATX_BTIME)) return 0;
    *birthSeconds = status.stx_btime.tv_sec;
    *birthNanoseconds = status.stx_btime.tv_nsec;
    return 1;
}
