/*
 * privfs — how a process that is root touches files by name (issue 52): the
 * logs (-l, -q) at start and, under -W, the supervisor's reopen; ACME's
 * state directory.  One rule: nothing root does by name can be steered by a
 * less privileged user.
 *
 *   - A path is walked one name at a time through descriptors, every
 *     name opened O_NOFOLLOW.  A symbolic link is followed only where every
 *     directory that led to it is root's (root put it there: /var/run ->
 *     /run), by walking its target the same way, name by name: a link of
 *     root's into a directory others write stops at the first link in it
 *     (issue 63: the kernel, handed the whole target, followed them all).
 *     ".." goes back to the directory walked through, as trusted as it was.
 *   - A directory is "root's" when root owns it and no group or other may
 *     write it; a path is trusted when every directory on it is root's, or
 *     root's below a sticky directory (/tmp: no one else can rename it).
 *   - What is made or opened in a directory that is not trusted is made or
 *     opened as -u's user (setegid/seteuid around the call), or refused.
 *   - A file is opened O_NOFOLLOW | O_NONBLOCK (a FIFO never hangs) and
 *     checked with fstat: a regular file, one link (a hard link to a file
 *     of root's has two), owned by root or by -u's user.
 *
 *   - A file root reads (--config) or a secret (a key, a password file) is
 *     found by the same walk, its last link followed where trusted, then
 *     opened O_NOFOLLOW and checked with fstat by its kind (pfs_kind_t).
 *   - A directory is handed to -u's user (chowned) only when gatling made
 *     it, now or before: pfs_dir_t's made, acme_setup.c's own check.
 *
 * Why a walk of our own and not openat2(RESOLVE_NO_SYMLINKS): each step
 * decides (follow a link of root's, make a missing directory as root or as
 * the user, trust what is below), which one openat2 call cannot; every step
 * is an openat of one name with O_NOFOLLOW, so there is no kernel to fall
 * back from, and the same code runs on every kernel.
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
 * The kinds of path root touches, as the option table names them; what
 * pfs_open_file checks by kind (the others have their own calls):
 *   PFS_READ     a file root reads (--config): a regular file with one link,
 *                root's or the caller's (real or effective uid), no one else
 *                may write it.  Not root: a regular file, opened by name.
 *   PFS_SECRET   a key or a password (--acme-dns-key, --acme-eab's @FILE,
 *                --cluster's key= and password-file=): PFS_READ's rules,
 *                and no group or other bit (sshd's StrictModes), root or not.
 *   PFS_LOG      a log root appends to (-l, -q): pfs_open_log.
 *   PFS_DIR      a directory root reads (-C): pfs_walk_dir, nothing made.
 *   PFS_USER_DIR a directory -u's user writes (--acme-dir): pfs_walk_dir,
 *                made when missing, handed over only when gatling made it.
 */
typedef enum pfs_kind { PFS_READ, PFS_SECRET, PFS_LOG, PFS_DIR, PFS_USER_DIR } pfs_kind_t;

/*
 * Open path (read only, close-on-exec, O_NONBLOCK: a FIFO never hangs) as
 * kind says, PFS_READ or PFS_SECRET; *st gets its stat.  The descriptor, or
 * -1 with errno set and why (n bytes) saying what was refused in words
 * (ELOOP: a link where none is followed; EINVAL: not a regular file; EPERM:
 * its owner or mode; EMLINK: hard links).
 */
int pfs_open_file(const char *path, pfs_kind_t kind, struct stat *st, char *why, size_t n);
/*
 * pfs_open_file for the file name in directory dirfd (one a walk opened at
 * start, pfs_open_dir: a list read again while serving): as root, name is
 * opened O_NOFOLLOW (a link is refused, whatever it points at: no error
 * tells whether a file of root's exists) and checked by kind; as a user,
 * the kernel's checks.  The descriptor, or -1 with errno and why.
 */
int pfs_open_file_at(int dirfd, const char *name, pfs_kind_t kind, struct stat *st, char *why,
                     size_t n);

/*
 * What the start would do with path, as kind says, undone: 0, or -1 with
 * errno and why (n bytes) in words (--check, the option table).  A
 * PFS_USER_DIR may be missing (the start makes it); a PFS_LOG is opened
 * (made) as the start opens it.
 */
int pfs_check(const char *path, pfs_kind_t kind, int uid, int gid, char *why, size_t n);

/* Where a walk to a directory ended. */
typedef struct pfs_dir {
    int trusted; /* every directory on the way is root's alone (or below a sticky one) */
    int made;    /* the last directory was made by this walk */
} pfs_dir_t;

/*
 * Walk path to a directory (O_PATH | O_DIRECTORY descriptor, close-on-exec),
 * as the rules above say.  With mkmode, a missing directory is made (mode
 * mkmode for the last, 0755 on the way): as root in a directory of root's,
 * as uid/gid elsewhere.  *out (may be NULL) says where it ended.  The
 * descriptor, or -1 with errno set (ELOOP: a symbolic link where none is
 * followed, named then in why, n bytes, when why is not NULL; ENOTDIR:
 * something else than a directory).
 */
int pfs_walk_dir(const char *path, mode_t mkmode, int uid, int gid, pfs_dir_t *out, char *why,
                 size_t n);

/* pfs_walk_dir without its words: *trusted (may be NULL) as out->trusted. */
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

/* A uid for pfs_open_log that is none (as -1) because -u's user does not
   exist (--check goes on to the logs): its refusal says so. */
#define PFS_NO_USER (-2)

/*
 * A log's reopen (SIGUSR1, after logrotate moved it): pfs_open_log's file
 * put in place of the descriptor target, which stays close-on-exec (dup2
 * clears the flag: the log would leak into an upgrade).  0, or -1 with why
 * said as pfs_open_log says it; target is then untouched (the old file goes
 * on taking lines rather than lose them).
 */
int pfs_reopen_log(int target, const char *path, int at, int uid, int gid, char *why, size_t n);

#endif
