/*
 * privfs — how a process that is root touches files by name (issue 52): the
 * logs (-l, -q) at start and, under -W, the supervisor's reopen; ACME's
 * state directory.  One rule: nothing root does by name can be steered by a
 * less privileged user.
 *
 *   - A path is walked one directory at a time through descriptors.  A
 *     symbolic link is followed only where it sits in a directory no one
 *     but root can write (root put it there: /var/run -> /run); after the
 *     first directory someone else can write, every step is O_NOFOLLOW.
 *   - A directory is "root's" when root owns it and no group or other may
 *     write it; a path is trusted when every directory on it is root's, or
 *     root's below a sticky directory (/tmp: no one else can rename it).
 *   - What is made or opened in a directory that is not trusted is made or
 *     opened as -u's user (setegid/seteuid around the call), or refused.
 *   - A file is opened O_NOFOLLOW | O_NONBLOCK (a FIFO never hangs) and
 *     checked with fstat: a regular file, one link (a hard link to a file
 *     of root's has two), owned by root or by -u's user.
 *
 * Why a walk of our own and not openat2(RESOLVE_NO_SYMLINKS): each step
 * decides (follow a link of root's, make a missing directory as root or as
 * the user, trust what is below), which one openat2 call cannot; every step
 * is an openat of one name with O_NOFOLLOW where it matters, so there is no
 * kernel to fall back from.
 *
 * Knows nothing of the options: callers pass -u's ids (-1: none).
 */
#ifndef GATLING_PRIVFS_H
#define GATLING_PRIVFS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* 1 if only root can write in the directory st describes. */
int pfs_root_only(const struct stat *st);

/* The ids pfs_become changed, for pfs_unbecome. */
typedef struct pfs_ids {
    int changed;          /* 0: nothing to undo */
    int ngroups;          /* root's supplementary groups, put back after */
    gid_t groups[64];
} pfs_ids_t;

/*
 * Become uid/gid (effective ids, and gid as the only group) while root;
 * pfs_unbecome(save) goes back.  0, or -1 with errno set (ids unchanged).
 * With uid < 0 or when not root, nothing happens.  pfs_unbecome aborts if
 * root cannot be had back (the saved id is root's: it cannot fail).
 */
int pfs_become(pfs_ids_t *save, int uid, int gid);
void pfs_unbecome(pfs_ids_t *save);

/*
 * Walk path to a directory (O_PATH | O_DIRECTORY descriptor, close-on-exec),
 * as the rules above say.  With mkmode, a missing directory is made (mode
 * mkmode for the last, 0755 on the way): as root in a directory of root's,
 * as uid/gid elsewhere.  *trusted (may be NULL) is set as above.  The
 * descriptor, or -1 with errno set (ELOOP: a symbolic link where none is
 * followed; ENOTDIR: something else than a directory).
 */
int pfs_open_dir(const char *path, mode_t mkmode, int uid, int gid, int *trusted);

/*
 * Open a log file for appending (O_APPEND, created 0640): path's directory
 * walked as pfs_open_dir does, or, with at >= 0, the file name (path's last
 * part) in the directory at (kept from start: a reopen after a chroot).  In
 * a trusted directory root opens it; elsewhere uid/gid do, and without a
 * uid root refuses.  The file is checked as above.  With dirfd non-NULL the
 * directory's descriptor is handed back there (the caller closes it).
 * /dev/stdout and /dev/stderr are a copy of descriptor 1 or 2 (no walk, no
 * directory: *dirfd is -1), as a log collector reading gatling's output wants.
 * The file's descriptor, or -1 with errno set and why (n bytes) saying what
 * was refused in words.
 */
int pfs_open_log(const char *path, int at, int uid, int gid, int *dirfd, char *why, size_t n);

/*
 * A log's reopen (SIGUSR1, after logrotate moved it): pfs_open_log's file
 * put in place of the descriptor target, which stays close-on-exec (dup2
 * clears the flag: the log would leak into an upgrade).  0, or -1 with why
 * said as pfs_open_log says it; target is then untouched (the old file goes
 * on taking lines rather than lose them).
 */
int pfs_reopen_log(int target, const char *path, int at, int uid, int gid, char *why, size_t n);

#endif
