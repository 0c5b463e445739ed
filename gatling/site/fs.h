/*
 * fs — open a file below a directory without ever leaving it.  The OS shim of
 * the server: Linux's openat2(RESOLVE_BENEATH) where it exists, a
 * component-by-component walk that refuses symlinks elsewhere.
 */
#ifndef GATLING_FS_H
#define GATLING_FS_H

#include <stddef.h>

/*
 * Open rel (relative, no leading '/'; "" or "." for dir itself) below the
 * directory dirfd, read-only, non-blocking, close-on-exec.  Symlinks are
 * followed only while they stay below root_real (the canonical path of the
 * document root, for symlinks given as absolute paths; NULL: follow symlinks
 * anywhere, gatling -L).  Returns the fd, or
 * -1 with errno: ENOENT/ENOTDIR (missing), EXDEV (would leave the root),
 * EACCES, ELOOP, ENAMETOOLONG, EMFILE/ENFILE.
 */
int fs_open_beneath(int dirfd, const char *rel, const char *root_real);

/*
 * The path of the file open on fd, which was opened as rel below the
 * directory open on dirfd, relative to that directory, as "/a/b": the path
 * symlinks actually led to.  Written to out[0..outsz).  Uses /proc/self/fd,
 * or without it (a chroot) follows rel's symlinks by hand.  Returns 0, or -1
 * if the file is not below dirfd or the path cannot be told.
 */
int fs_path_below(int dirfd, int fd, const char *rel, char *out, size_t outsz);

#endif
