/*
 * fs — open a file below a directory without ever leaving it.  The OS shim of
 * the server: Linux's openat2(RESOLVE_BENEATH) where it exists, a
 * component-by-component walk that refuses symlinks elsewhere.  And what
 * may be published at all: fs_public(), the same answer whoever runs the
 * server.
 */
#ifndef GATLING_FS_H
#define GATLING_FS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

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

/* Open a file an option names (path, relative to dirfd or AT_FDCWD),
   read-only, non-blocking (a FIFO named there never hangs the start) and
   close-on-exec, and fstat it into *st: its descriptor, or -1 with errno
   (EINVAL: not a regular file -- a directory reads as empty, a device may
   never end). */
int fs_open_regular(int dirfd, const char *path, struct stat *st);

/* Do st's mode bits let others read it: a regular file with S_IROTH, or a
   directory with S_IROTH and S_IXOTH (read and search)?  The rule for what
   rel names in fs_public(), for one directory entry: 1 or 0. */
int fs_mode_public(const struct stat *st);

/*
 * A site's small control file (.cache, .proxy: --check's readers): name in
 * dirfd (not through a symlink with nofollow), whole, into buf (max + 1
 * bytes).  Its length; -2 when it cannot be opened (none there); -1 when it
 * is not a regular file, longer than max, or unreadable.
 */
ssize_t fs_read_small(int dirfd, const char *name, char *buf, size_t max, int nofollow);

/* Where fs_public() starts: the document root and a directory below it. */
typedef struct fs_at {
    int rootfd;            /* the document root */
    const char *root_real; /* its canonical path ("/" in a chroot) */
    const char *dir;       /* a directory below it (a vhost's), relative; "" the root */
} fs_at_t;

/* fs_public() flags */
#define FS_ANY 1  /* only the way counts: the object may have any mode (stat()ed, not read) */
#define FS_LINK 2 /* the last component is not followed (readlink()ed): FS_ANY for the link */

/*
 * Would a process without any privilege reach and read rel (relative to
 * at->dir, no leading '/'; "" for at->dir itself)?  The path is walked as
 * the kernel walks it, symlinks and ".." included: every directory searched
 * on the way -- at->dir, those on rel, those the symlinks' targets pass --
 * must be searchable by others (S_IXOTH), and what rel names must be a
 * regular file they may read (S_IROTH) or a directory they may read and
 * search (S_IROTH | S_IXOTH).  The root and the directories above it are the
 * administrator's choice and not looked at; directories outside the root
 * that -L symlinks lead to are.  If fd >= 0, what rel names must be the file
 * open on fd (a path changed since it was opened is refused).  Costs an
 * fstatat() a component, a readlinkat() a symlink.  Returns 1 if public,
 * else 0 with errno: EACCES (a directory on the way, or the mode, refuses),
 * or why the walk did not get there (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG,
 * ESTALE: not fd's file).
 */
int fs_public(const fs_at_t *at, const char *rel, int fd, int flags);

#endif
