/* Root's steps on paths others can write: see privfs.h. */
#define _GNU_SOURCE
#include "privfs.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pfs_root_only(const struct stat *st)
{
    return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int pfs_become(pfs_ids_t *save, int uid, int gid)
{
    save->changed = 0;
    if (uid < 0 || geteuid() != 0)
        return 0;
    int n = getgroups((int)(sizeof save->groups / sizeof save->groups[0]), save->groups);
    if (n < 0)
        return -1;
    save->ngroups = n;
    gid_t g = (gid_t)gid;
    /* root's own groups must not come along (group root's files) */
    if (setgroups(1, &g) < 0 || setegid(g) < 0) {
        int e = errno;
        (void)!setgroups((size_t)n, save->groups);
        return errno = e, -1;
    }
    if (seteuid((uid_t)uid) < 0) {
        int e = errno;
        (void)!setegid(0);
        (void)!setgroups((size_t)n, save->groups);
        return errno = e, -1;
    }
    save->changed = 1;
    return 0;
}

void pfs_unbecome(pfs_ids_t *save)
{
    if (!save->changed)
        return;
    int e = errno;
    if (seteuid(0) < 0 || setegid(0) < 0 || setgroups((size_t)save->ngroups, save->groups) < 0) {
        perror("gatling: seteuid(0)");
        abort();
    }
    save->changed = 0;
    errno = e;
}

/* mkdirat(at, name, mode): as root in a directory of root's, as uid/gid
   elsewhere (as root when there is no uid: no one else was named). */
static int make(int at, const struct stat *st, const char *name, mode_t mode, int uid, int gid)
{
    pfs_ids_t ids;
    if (pfs_become(&ids, pfs_root_only(st) ? -1 : uid, gid) < 0)
        return -1;
    int r = mkdirat(at, name, mode);
    pfs_unbecome(&ids);
    return r < 0 && errno != EEXIST ? -1 : 0;
}

/* One step of a walk: the directory name in at (st: at's), made when
   missing and mk; into *child its stat.  Its descriptor, or -1. */
static int step(int at, const struct stat *st, const char *name, int follow, mode_t mk, int uid,
                int gid, struct stat *child)
{
    int flags = O_PATH | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
    int fd = openat(at, name, flags);
    if (fd < 0 && errno == ENOENT && mk) {
        if (make(at, st, name, mk, uid, gid) < 0)
            return -1;
        fd = openat(at, name, flags);
    }
    struct stat ln;
    if (fd < 0 && errno == ENOTDIR && !follow &&
        fstatat(at, name, &ln, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ln.st_mode))
        errno = ELOOP; /* O_DIRECTORY | O_NOFOLLOW says ENOTDIR of a link */
    if (fd < 0)
        return -1;
    if (fstat(fd, child) < 0) {
        int e = errno;
        close(fd);
        return errno = e, -1;
    }
    if (!S_ISDIR(child->st_mode)) {
        int e = S_ISLNK(child->st_mode) ? ELOOP : ENOTDIR;
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

int pfs_open_dir(const char *path, mode_t mkmode, int uid, int gid, int *trusted)
{
    char buf[PATH_MAX];
    if (!*path)
        return errno = ENOENT, -1;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return errno = ENAMETOOLONG, -1;
    struct stat st, child;
    int at = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (at < 0 || fstat(at, &st) < 0) {
        int e = errno;
        if (at >= 0)
            close(at);
        return errno = e, -1;
    }
    int trust = pfs_root_only(&st); /* "/", or the directory a relative path starts in */
    for (char *p = buf;;) {
        p += strspn(p, "/");
        if (!*p)
            break;
        char *e = p + strcspn(p, "/");
        int last = !e[strspn(e, "/")];
        if (*e)
            *e++ = 0;
        /* a link is followed only where no one but root could have put it */
        int fd = step(at, &st, p, trust, mkmode ? (last ? mkmode : 0755) : 0, uid, gid, &child);
        int err = errno;
        close(at);
        if (fd < 0)
            return errno = err, -1;
        trust = pfs_root_only(&child) && (trust || (st.st_mode & S_ISVTX));
        at = fd, st = child, p = e;
    }
    if (trusted)
        *trusted = trust;
    return at;
}

/* The checks of a log file just opened: 0, or -1 with errno and why. */
static int check_log(int fd, int trusted, int uid, char *why, size_t n)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(why, n, "fstat() failed: %s", strerror(errno));
        return -1;
    }
    if (S_ISCHR(st.st_mode) && trusted) /* /dev/null: root's, in a directory of root's */
        return 0;
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "not a regular file");
        return errno = EINVAL, -1;
    }
    if (st.st_nlink != 1) {
        snprintf(why, n, "it has %lu hard links (a log has one)", (unsigned long)st.st_nlink);
        return errno = EMLINK, -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid() && (uid < 0 || st.st_uid != (uid_t)uid)) {
        snprintf(why, n, "it belongs to uid %lu, neither root nor -u's user",
                 (unsigned long)st.st_uid);
        return errno = EPERM, -1;
    }
    return 0;
}

/* Open name in dfd for appending as as_uid/gid (root when as_uid < 0). */
static int open_file(int dfd, const char *name, int trusted, int as_uid, int uid, int gid,
                     char *why, size_t n)
{
    pfs_ids_t ids;
    if (pfs_become(&ids, as_uid, gid) < 0) {
        snprintf(why, n, "cannot become -u's user: %s", strerror(errno));
        return -1;
    }
    int fd = openat(dfd, name,
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                    0640);
    int e = errno;
    pfs_unbecome(&ids);
    if (fd < 0) {
        snprintf(why, n, "%s%s", e == ELOOP ? "a symbolic link (not followed): " : "",
                 strerror(e));
        return errno = e, -1;
    }
    if (check_log(fd, trusted, uid, why, n) < 0 || fcntl(fd, F_SETFL, O_APPEND) < 0) {
        e = errno;
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

/* /dev/stdout and /dev/stderr: the descriptor root was given (a pipe to a
   log collector, a terminal), 1 or 2; -1 for any other path.  Not the link
   /dev holds into /proc/self/fd, which the walk would not follow. */
static int std_stream(const char *path)
{
    return !strcmp(path, "/dev/stdout") ? 1 : !strcmp(path, "/dev/stderr") ? 2 : -1;
}

int pfs_open_log(const char *path, int at, int uid, int gid, int *dirfd, char *why, size_t n)
{
    int std = std_stream(path);
    if (std >= 0) {
        if (dirfd)
            *dirfd = -1;
        int fd = fcntl(std, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            snprintf(why, n, "dup of descriptor %d: %s", std, strerror(errno));
        else
            *why = 0;
        return fd;
    }
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    int trusted = 0, dfd = at;
    struct stat st;
    *why = 0;
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
        snprintf(why, n, "names a directory");
        return errno = EISDIR, -1;
    }
    if (at < 0) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
                 slash ? path : ".");
        if ((dfd = pfs_open_dir(dir, 0, uid, gid, &trusted)) < 0) {
            snprintf(why, n, "its directory %s: %s", dir, strerror(errno));
            return -1;
        }
    } else {
        trusted = fstat(at, &st) == 0 && pfs_root_only(&st);
    }
    int fd = -1, root = geteuid() == 0;
    if (root && !trusted && uid < 0) {
        snprintf(why, n, "its directory can be written by others than root: give -u USER to "
                         "have it opened as that user, or keep it where only root can write");
        errno = EPERM;
    } else {
        fd = open_file(dfd, name, trusted, root && !trusted ? uid : -1, uid, gid, why, n);
    }
    int e = errno;
    if (at < 0 && fd >= 0 && dirfd)
        *dirfd = dfd;
    else if (at < 0)
        close(dfd);
    errno = e;
    return fd;
}

int pfs_reopen_log(int target, const char *path, int at, int uid, int gid, char *why, size_t n)
{
    int fd = pfs_open_log(path, at, uid, gid, NULL, why, n);
    if (fd < 0)
        return -1;
    if (dup2(fd, target) >= 0)
        fcntl(target, F_SETFD, FD_CLOEXEC);
    close(fd);
    return 0;
}
