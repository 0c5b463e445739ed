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
   elsewhere (as root when there is no uid: no one else was named).  1 made,
   0 there already, -1 with errno. */
static int make(int at, const struct stat *st, const char *name, mode_t mode, int uid, int gid)
{
    pfs_ids_t ids;
    if (pfs_become(&ids, pfs_root_only(st) ? -1 : uid, gid) < 0)
        return -1;
    int r = mkdirat(at, name, mode);
    pfs_unbecome(&ids);
    return r < 0 ? (errno == EEXIST ? 0 : -1) : 1;
}

/* The walk's state: the directory reached, whether everything that led
   there is root's alone, and the path still to walk. */
#define WALK_LINKS 40 /* the kernel's MAXSYMLINKS */
#define WALK_DEPTH 1024

typedef struct walk {
    int at;                      /* O_PATH descriptor of the directory reached */
    struct stat st;              /* ... its stat */
    int trust, depth, links;     /* depth: how many directories up[] holds */
    unsigned char up[WALK_DEPTH]; /* the trust of each directory above, for ".." */
    char path[PATH_MAX];         /* what is left to walk */
    char *why;                   /* words for a refusal (may be NULL) */
    size_t n;
} walk_t;

/* at: "/" (absolute), or "." for a relative path; trust from its stat. */
static int walk_from(walk_t *w, int slash)
{
    int fd = open(slash ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &w->st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return errno = e, -1;
    }
    if (w->at >= 0)
        close(w->at);
    w->at = fd, w->depth = 0;
    w->trust = pfs_root_only(&w->st); /* "/", or where a relative path starts */
    return 0;
}

/* The directory w->at's path as /proc shows it (for a refusal's words). */
static const char *here(const walk_t *w, char *buf, size_t n)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->at);
    ssize_t k = readlink(proc, buf, n - 1);
    buf[k > 0 ? k : 0] = 0;
    return k > 0 ? buf : "its directory";
}

/* The link fd (named name, in w->at) read and put before what is left. */
static int walk_link(walk_t *w, int fd, const char *name)
{
    char target[PATH_MAX], dir[PATH_MAX];
    if (!w->trust) {
        if (w->why)
            snprintf(w->why, w->n, "%s/%s is a symbolic link in a directory others than root "
                     "may write (or below one): not followed", here(w, dir, sizeof dir), name);
        return errno = ELOOP, -1;
    }
    if (++w->links > WALK_LINKS)
        return errno = ELOOP, -1;
    ssize_t k = readlinkat(fd, "", target, sizeof target);
    size_t rest = strlen(w->path);
    if (k <= 0)
        return k == 0 ? (errno = ENOENT, -1) : -1;
    if ((size_t)k + 1 + rest >= sizeof w->path)
        return errno = ENAMETOOLONG, -1;
    memmove(w->path + k + 1, w->path, rest + 1);
    memcpy(w->path, target, (size_t)k);
    w->path[k] = '/';
    return target[0] == '/' ? walk_from(w, 1) : 0; /* relative: from the link's directory */
}

/* Into the directory fd (stat child): trusted when root's alone, below a
   trusted directory or a sticky one (no one else can rename it there). */
static int walk_down(walk_t *w, int fd, const struct stat *child)
{
    if (w->depth == WALK_DEPTH) {
        close(fd);
        return errno = ENAMETOOLONG, -1;
    }
    w->up[w->depth++] = (unsigned char)w->trust;
    w->trust = pfs_root_only(child) && (w->trust || (w->st.st_mode & S_ISVTX));
    close(w->at);
    w->at = fd, w->st = *child;
    return 0;
}

/* "..": the directory above, as trusted as it was on the way down (every
   directory walked is a real child of the one before). */
static int walk_up(walk_t *w)
{
    struct stat st;
    int fd = openat(w->at, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return errno = e, -1;
    }
    close(w->at);
    w->at = fd, w->st = st;
    w->trust = w->depth ? w->up[--w->depth] : pfs_root_only(&st);
    return 0;
}

/* The next name off the front of w->path into name; *last: nothing after
   it.  1, 0 when nothing is left, -1 with errno. */
static int next_name(walk_t *w, char *name, int *last)
{
    char *p = w->path + strspn(w->path, "/");
    size_t len = strcspn(p, "/");
    if (!len)
        return 0;
    if (len > NAME_MAX)
        return errno = ENAMETOOLONG, -1;
    memcpy(name, p, len);
    name[len] = 0;
    char *rest = p + len + strspn(p + len, "/");
    *last = !*rest;
    memmove(w->path, rest, strlen(rest) + 1);
    return 1;
}

/* What a walk makes (mode 0: nothing) and as whom; made: the last was made. */
typedef struct walk_mk {
    mode_t mode;
    int uid, gid, made;
} walk_mk_t;

/* name in w->at, O_PATH and not followed, made first (a directory) when
   missing and mk says so; its stat in *st.  The descriptor, or -1. */
static int walk_open(walk_t *w, const char *name, int last, walk_mk_t *mk, struct stat *st)
{
    int fd = openat(w->at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && mk && mk->mode) {
        int m = make(w->at, &w->st, name, last ? mk->mode : 0755, mk->uid, mk->gid);
        if (m < 0)
            return -1;
        mk->made = last && m > 0;
        fd = openat(w->at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd >= 0 && fstat(fd, st) < 0) {
        int e = errno;
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

/*
 * Walk w->path one name at a time, a link followed only where w->trust
 * (its target walked the same way).  file NULL: every name a directory,
 * made as mk says; w->at is the last.  Else the last name is put in file
 * (NAME_MAX + 1 bytes) and w->at is its directory; a link there is
 * followed (follow_last) or left to the caller's O_NOFOLLOW.  0, or -1.
 */
static int walk(walk_t *w, walk_mk_t *mk, char *file, int follow_last)
{
    char name[NAME_MAX + 1];
    int last = 0, r;
    struct stat cs;
    while ((r = next_name(w, name, &last)) > 0) {
        int dots = !strcmp(name, ".") ? 1 : !strcmp(name, "..") ? 2 : 0;
        if (dots && last && file)
            return errno = EISDIR, -1;
        if (dots) {
            if (dots == 2 && walk_up(w) < 0)
                return -1;
            continue;
        }
        int fd = walk_open(w, name, last, file ? NULL : mk, &cs);
        if (last && file && (fd < 0 ? errno == ENOENT : !S_ISLNK(cs.st_mode) || !follow_last)) {
            if (fd >= 0)
                close(fd);
            memcpy(file, name, strlen(name) + 1);
            return 0;
        }
        if (fd < 0)
            return -1;
        if (S_ISLNK(cs.st_mode)) {
            r = walk_link(w, fd, name);
            close(fd);
        } else if (!S_ISDIR(cs.st_mode)) {
            close(fd);
            r = (errno = ENOTDIR, -1);
        } else {
            r = walk_down(w, fd, &cs);
        }
        if (r < 0)
            return -1;
    }
    return r < 0 ? -1 : file ? (errno = EISDIR, -1) : 0;
}

/* w set up for path (why: n bytes for a refusal's words, or NULL). */
static int walk_init(walk_t *w, const char *path, char *why, size_t n)
{
    w->at = -1, w->links = 0, w->why = why, w->n = n;
    if (why && n)
        *why = 0;
    if (!*path)
        return errno = ENOENT, -1;
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path)
        return errno = ENAMETOOLONG, -1;
    return walk_from(w, path[0] == '/');
}

int pfs_walk_dir(const char *path, mode_t mkmode, int uid, int gid, pfs_dir_t *out, char *why,
                 size_t n)
{
    walk_t w;
    walk_mk_t mk = {.mode = mkmode, .uid = uid, .gid = gid};
    if (walk_init(&w, path, why, n) < 0 || walk(&w, &mk, NULL, 1) < 0) {
        int e = errno;
        if (w.at >= 0)
            close(w.at);
        return errno = e, -1;
    }
    if (out)
        out->trusted = w.trust, out->made = mk.made;
    return w.at;
}

int pfs_open_dir(const char *path, mode_t mkmode, int uid, int gid, int *trusted)
{
    pfs_dir_t d;
    int fd = pfs_walk_dir(path, mkmode, uid, gid, &d, NULL, 0);
    if (fd >= 0 && trusted)
        *trusted = d.trusted;
    return fd;
}

/* A file of kind opened (st: its stat) checked: 0, or -1 with errno and why. */
static int check_file(const struct stat *st, pfs_kind_t kind, char *why, size_t n)
{
    int root = geteuid() == 0;
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, n, "not a regular file");
        return errno = EINVAL, -1;
    }
    if ((root || kind == PFS_SECRET) && st->st_uid != 0 && st->st_uid != geteuid() &&
        st->st_uid != getuid()) {
        snprintf(why, n, "it belongs to uid %lu, neither root nor the user gatling runs as",
                 (unsigned long)st->st_uid);
        return errno = EPERM, -1;
    }
    mode_t bad = kind == PFS_SECRET ? 077 : root ? (S_IWGRP | S_IWOTH) : 0;
    if (st->st_mode & bad) {
        snprintf(why, n, "%s may %s it (mode %04o): chmod %s it", kind == PFS_SECRET ?
                 "group or others" : "others than its owner", kind == PFS_SECRET ? "read or write"
                 : "write", (unsigned)(st->st_mode & 07777), kind == PFS_SECRET ? "600" : "go-w");
        return errno = EPERM, -1;
    }
    if (root && st->st_nlink != 1) {
        snprintf(why, n, "it has %lu hard links (a file root reads has one)",
                 (unsigned long)st->st_nlink);
        return errno = EMLINK, -1;
    }
    return 0;
}

/* fd just opened (or -1 with errno) for a file of kind: checked (check_file),
   else closed and -1 with errno and why (what errno says, if nothing else). */
static int opened(int fd, pfs_kind_t kind, struct stat *st, char *why, size_t n)
{
    int e;
    if (fd < 0) {
        e = errno;
        if (!*why)
            snprintf(why, n, "%s", strerror(e));
        return errno = e, -1;
    }
    if (fstat(fd, st) < 0 || check_file(st, kind, why, n) < 0) {
        e = errno;
        if (!*why)
            snprintf(why, n, "fstat() failed: %s", strerror(e));
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

int pfs_open_file(const char *path, pfs_kind_t kind, struct stat *st, char *why, size_t n)
{
    int fd = -1, e;
    if (n)
        *why = 0;
    if (geteuid() != 0) { /* the kernel's own checks guard a user's process */
        fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    } else {
        walk_t w;
        char name[NAME_MAX + 1];
        if (walk_init(&w, path, why, n) == 0 && walk(&w, NULL, name, 1) == 0)
            fd = openat(w.at, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        e = errno;
        if (w.at >= 0)
            close(w.at);
        if (fd < 0 && e == ELOOP && !*why)
            snprintf(why, n, "a symbolic link in a directory others than root may write (or "
                     "below one): not followed");
        errno = e;
    }
    return opened(fd, kind, st, why, n);
}

int pfs_open_file_at(int dirfd, const char *name, pfs_kind_t kind, struct stat *st, char *why,
                     size_t n)
{
    int root = geteuid() == 0;
    if (n)
        *why = 0;
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (root ? O_NOFOLLOW : 0));
    if (fd < 0 && errno == ELOOP && root)
        snprintf(why, n, "a symbolic link: not followed (root reads such a file only by its "
                 "own name)");
    return opened(fd, kind, st, why, n);
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
    struct stat st;
    if (fd < 0 && e == EACCES && as_uid >= 0 && !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
        /* made by root before (--check, a start without -u): say whose */
        snprintf(why, n, "%s: it belongs to uid %lu gid %lu, mode %04o, and -u's user (uid %d) "
                 "may not write it: chown it to that user, or remove it", strerror(e),
                 (unsigned long)st.st_uid, (unsigned long)st.st_gid,
                 (unsigned)(st.st_mode & 07777), as_uid);
        return errno = e, -1;
    }
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
        char words[PATH_MAX + 160];
        pfs_dir_t d;
        if ((dfd = pfs_walk_dir(dir, 0, uid, gid, &d, words, sizeof words)) < 0) {
            int e = errno;
            snprintf(why, n, "its directory %s: %s", dir, *words ? words : strerror(e));
            return errno = e, -1;
        }
        trusted = d.trusted;
    } else {
        trusted = fstat(at, &st) == 0 && pfs_root_only(&st);
    }
    int fd = -1, root = geteuid() == 0;
    if (root && !trusted && uid < 0) {
        snprintf(why, n, "its directory can be written by others than root: %s",
                 uid == PFS_NO_USER ? "-u's user, who would open it, does not exist"
                                    : "give -u USER to have it opened as that user, or keep "
                                      "it where only root can write");
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

int pfs_check(const char *path, pfs_kind_t kind, int uid, int gid, char *why, size_t n)
{
    struct stat st;
    int fd;
    if (kind == PFS_READ || kind == PFS_SECRET)
        fd = pfs_open_file(path, kind, &st, why, n);
    else if (kind == PFS_LOG)
        fd = pfs_open_log(path, -1, uid, gid, NULL, why, n);
    else if ((fd = pfs_walk_dir(path, 0, uid, gid, NULL, why, n)) < 0 && !*why)
        snprintf(why, n, "%s", strerror(errno));
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    return kind == PFS_USER_DIR && errno == ENOENT ? 0 : -1; /* made at start */
}
