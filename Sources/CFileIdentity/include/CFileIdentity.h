#ifndef PLAIT_CFILEIDENTITY_H
#define PLAIT_CFILEIDENTITY_H

/// The type of the filesystem holding `path` (`statfs`'s `f_type`, a magic number such as 0xEF53 for ext2-4), or -1
/// when it cannot be read. The store uses it to know whether inode numbers there are a file's own for its life;
/// Swift's Glibc module does not export `statfs`.
long long plait_filesystem_type(const char *path);

/// The inode of the file at `path` and, where the filesystem keeps it, the time the inode was made (`statx`'s
/// `stx_btime`; `cp -a` cannot set it, so a file made again in a freed inode of the same number shows another).
/// Returns 1 with both, 0 with the inode alone, -1 when the file cannot be read.
int plait_file_identity(const char *path, unsigned long long *inode, long long *birthSeconds,
                        unsigned int *birthNanoseconds);

#endif
