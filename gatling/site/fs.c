/* Opening files below the document root: see fs.h. */
#define _GNU_SOURCE
#include "fs.h"
#include "http/hbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FS_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* The path of the file open on fd (Linux: /proc/self/fd); -1 elsewhere. */
static ssize_t fd_path(int fd, char *out, size_t outsz)
{
    char link[64]; /* not snprintf: a FastCGI request's script is opened twice */
    hbuf_t b = hb_init(link, sizeof link);
    hb_puts(&b, "/proc/self/fd/"), hb_num(&b, (uint64_t)fd);
    if (fd < 0 || !hb_str(&b)) /* (an fd's digits always fit) */
        return -1;
    ssize_t n = readlink(link, out, outsz - 1);
    if (n >= 0)
        out[n] = 0;
    return n;
}

/* full == dir + "/..." : copy the part after dir to out. */
static int strip_dir(const char *full, size_t f, const char *dir, size_t d, char *out, size_t outsz)
{
    if (d == 1) /* the directory is "/" (a chroot) */
        d = 0;
    if (f <= d || strncmp(full, dir, d) || full[d] != '/' || f - d >= outsz)
        return -1;
    memcpy(out, full + d, f - d + 1);
    return 0;
}

/*
 * Without /proc (inside a chroot): follow the symlinks of rel one at a time.
 * The directory part of each step is opened and named by getcwd() after a
 * fchdir() (the process is single-threaded; the working directory is put
 * back); the last component, if a symlink, is read and the walk goes on.
 */
static int resolve_by_hand(int dirfd, const char *rel, char *out, size_t outsz)
{
    char cur[PATH_MAX], link[PATH_MAX], dir[PATH_MAX], cwd[PATH_MAX], full[PATH_MAX * 2];
    int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
    if (here < 0)
        return -1;
    snprintf(cur, sizeof cur, "%s", rel);
    if (fchdir(dirfd) < 0 || !getcwd(dir, sizeof dir))
        goto out;
    size_t d = strlen(dir);
    for (int hops = 0; hops < 40; hops++) {
        char *slash = strrchr(cur, '/');
        const char *name = slash ? slash + 1 : cur;
        if (slash)
            *slash = 0;
        int dfd = openat(dirfd, slash ? cur : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fchdir(dfd) < 0 || !getcwd(cwd, sizeof cwd)) {
            if (dfd >= 0)
                close(dfd);
            break;
        }
        ssize_t n = readlinkat(dfd, name, link, sizeof link - 1);
        close(dfd);
        size_t f = (size_t)snprintf(full, sizeof full, "%s/%s", strcmp(cwd, "/") ? cwd : "", name);
        if (n < 0) { /* not a symlink: the walk ends here */
            rc = strip_dir(full, f, dir, d, out, outsz);
            break;
        }
        link[n] = 0;
        /* the next step, relative to dirfd: the link's target from where it is */
        char next[PATH_MAX * 2];
        if (link[0] == '/')
            snprintf(next, sizeof next, "%s", link);
        else
            snprintf(next, sizeof next, "%s/%s", strcmp(cwd, "/") ? cwd : "", link);
        char tail[PATH_MAX];
        if (strip_dir(next, strlen(next), dir, d, tail, sizeof tail) < 0)
            break; /* it leads out of dirfd */
        snprintf(cur, sizeof cur, "%s", tail + 1);
    }
out:
    if (fchdir(here) < 0)
        rc = -1;
    close(here);
    return rc;
}

int fs_path_below(int dirfd, int fd, const char *rel, char *out, size_t outsz)
{
    char dir[PATH_MAX], file[PATH_MAX];
    ssize_t d = fd_path(dirfd, dir, sizeof dir), f = fd_path(fd, file, sizeof file);
    if (d < 0 || f < 0)
        return resolve_by_hand(dirfd, rel, out, outsz);
    return strip_dir(file, (size_t)f, dir, (size_t)d, out, outsz);
}

/* Is the file open on fd really below root_real?  (Linux: /proc/self/fd) */
static int below_root(int fd, const char *root_real)
{
    if (!strcmp(root_real, "/")) /* a chroot: everything is below it */
        return 1;
    char real[PATH_MAX];
    if (fd_path(fd, real, sizeof real) < 0)
        return 0;
    size_t r = strlen(root_real);
    return !strncmp(real, root_real, r) && (real[r] == '/' || real[r] == 0);
}

#if defined(__linux__) && __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#include <sys/syscall.h>

int fs_open_beneath(int dirfd, const char *rel, const char *root_real)
{
    struct open_how how = {.flags = FS_FLAGS, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    if (!*rel)
        rel = ".";
    int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    if (fd >= 0 || (errno != EXDEV && errno != ENOSYS))
        return fd;
    /* EXDEV: ".." or an absolute symlink on the way.  The path itself has
       no "..", so it was a symlink: follow it and check where it landed. */
    fd = openat(dirfd, rel, FS_FLAGS);
    if (fd < 0)
        return -1;
    if (root_real && !below_root(fd, root_real)) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

#else

int fs_open_beneath(int dirfd, const char *rel, const char *root_real)
{
    (void)below_root;
    if (!root_real) /* -L: anything goes */
        return openat(dirfd, *rel ? rel : ".", FS_FLAGS);
    /* walk the components with O_NOFOLLOW: no symlink is ever followed */
    char part[NAME_MAX + 1];
    int cur = dup(dirfd);
    if (cur < 0)
        return -1;
    if (!*rel)
        rel = ".";
    for (;;) {
        size_t n = strcspn(rel, "/");
        if (n > NAME_MAX) {
            close(cur);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(part, rel, n);
        part[n] = 0;
        int last = rel[n] == 0;
        int fd = openat(cur, part, FS_FLAGS | O_NOFOLLOW | (last ? 0 : O_DIRECTORY));
        int e = errno;
        close(cur);
        if (fd < 0) {
            errno = e == ELOOP ? EXDEV : e;
            return -1;
        }
        if (last)
            return fd;
        cur = fd;
        rel += n + 1;
    }
}
#endif

/* ---- fs_public: the walk of a process without privileges ---------------- */

#define FS_HOPS 40 /* symlinks one walk may follow: the kernel's MAXSYMLINKS */

/*
 * Where the walk stands, cur: below the root, relative to it ("" the root
 * itself, "a/b"), or, out, an absolute path outside it ("" for "/", "/x/y")
 * once a -L symlink led there.  cur never holds a symlink: each one met is
 * replaced by its target.  todo is what is left of the path to walk.
 */
typedef struct walk {
    const fs_at_t *at;
    size_t rootlen;
    int out;
    size_t curlen;
    char cur[PATH_MAX];
    char todo[PATH_MAX];
} walk_t;

static int cur_base(const walk_t *w)
{
    return w->out ? AT_FDCWD : w->at->rootfd;
}

static const char *cur_path(const walk_t *w)
{
    return w->out ? (w->curlen ? w->cur : "/") : (w->curlen ? w->cur : ".");
}

/* Out of the root and into it again: an absolute path below root_real is
   walked from rootfd, relative. */
static void settle(walk_t *w)
{
    const char *root = w->at->root_real;
    size_t r = w->rootlen;
    if (!w->out)
        return;
    if (r == 1) { /* the root is "/" (a chroot): every absolute path is below it */
        r = 0;
    } else if (w->curlen < r || memcmp(w->cur, root, r) || (w->cur[r] && w->cur[r] != '/')) {
        return;
    }
    size_t skip = r + (w->cur[r] == '/');
    memmove(w->cur, w->cur + skip, w->curlen - skip + 1);
    w->curlen -= skip;
    w->out = 0;
}

/* Is cur a directory whose mode is the walk's business: below the root, or
   outside it but not one the root is in? */
static int counts(const walk_t *w)
{
    if (!w->out)
        return w->curlen > 0;
    const char *root = w->at->root_real;
    return !(w->curlen < w->rootlen && !memcmp(root, w->cur, w->curlen) &&
             root[w->curlen] == '/');
}

/* cur + "/" + name[0..n); -1 if it does not fit. */
static int push(walk_t *w, const char *name, size_t n)
{
    size_t sep = w->out || w->curlen;
    if (w->curlen + sep + n >= sizeof w->cur)
        return -1;
    if (sep)
        w->cur[w->curlen++] = '/';
    memcpy(w->cur + w->curlen, name, n);
    w->curlen += n;
    w->cur[w->curlen] = 0;
    return 0;
}

/* cur's last component off ("..": the root's parent is outside it). */
static void pop(walk_t *w)
{
    if (!w->out && !w->curlen) {
        if (w->rootlen == 1) /* "/..": "/" */
            return;
        w->out = 1; /* root_real is shorter than PATH_MAX: realpath() made it */
        w->curlen = w->rootlen;
        memcpy(w->cur, w->at->root_real, w->curlen + 1);
    }
    while (w->curlen && w->cur[w->curlen - 1] != '/')
        w->curlen--;
    if (w->curlen) /* and the '/' before it ("/x" out: "", which is "/") */
        w->curlen--;
    w->cur[w->curlen] = 0;
}

/*
 * cur ends in a symlink: put its target before the rest of the path
 * (todo[rest..]) and step back to the directory holding it; an absolute
 * target starts from "/".  -1 if it cannot be read or does not fit.
 */
static int enter_link(walk_t *w, size_t rest)
{
    char link[PATH_MAX];
    ssize_t n = readlinkat(cur_base(w), cur_path(w), link, sizeof link);
    size_t left = strlen(w->todo + rest);
    if (n < 0)
        return -1;
    if (n == 0 || (size_t)n + 1 + left >= sizeof w->todo)
        return errno = ENAMETOOLONG, -1;
    memmove(w->todo + n + 1, w->todo + rest, left + 1);
    memcpy(w->todo, link, (size_t)n);
    w->todo[n] = '/';
    pop(w);
    if (link[0] == '/') {
        w->out = 1, w->curlen = 0, w->cur[0] = 0;
        settle(w);
    }
    return 0;
}

/* May a process without privileges search cur (st: cur's, if *known)?
   0, or -1 with errno ENOTDIR or EACCES. */
static int searchable(const walk_t *w, struct stat *st, int *known)
{
    if (!counts(w))
        return 0;
    if (!*known && fstatat(cur_base(w), cur_path(w), st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    *known = 1;
    if (!S_ISDIR(st->st_mode))
        return errno = ENOTDIR, -1;
    if (!(st->st_mode & S_IXOTH))
        return errno = EACCES, -1;
    return 0;
}

/* Walk w->todo: 0 with cur the object it names (*st its stat if *known),
   or -1 with errno. */
static int walk(walk_t *w, int flags, struct stat *st, int *known)
{
    size_t pos = 0;
    for (int hops = 0;;) {
        while (w->todo[pos] == '/')
            pos++;
        if (!w->todo[pos])
            return 0;
        const char *name = w->todo + pos;
        size_t n = strcspn(name, "/"), rest = pos + n;
        if (searchable(w, st, known) < 0)
            return -1;
        pos = rest;
        if (n == 1 && name[0] == '.')
            continue;
        if (n == 2 && name[0] == '.' && name[1] == '.') {
            pop(w);
            *known = 0;
            continue;
        }
        while (w->todo[pos] == '/')
            pos++;
        int last = !w->todo[pos];
        if (push(w, name, n) < 0)
            return errno = ENAMETOOLONG, -1;
        settle(w); /* back below the root */
        if (fstatat(cur_base(w), cur_path(w), st, AT_SYMLINK_NOFOLLOW) < 0)
            return -1;
        *known = 1;
        if (S_ISLNK(st->st_mode) && !(last && (flags & FS_LINK))) {
            if (++hops > FS_HOPS)
                return errno = ELOOP, -1;
            if (enter_link(w, rest) < 0)
                return -1;
            pos = 0, *known = 0;
        }
    }
}

/* Contract in fs.h. */
int fs_open_regular(int dirfd, const char *path, struct stat *st)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), e;
    if (fd < 0)
        return -1;
    if (fstat(fd, st) < 0)
        e = errno;
    else if (!S_ISREG(st->st_mode))
        e = EINVAL;
    else
        return fd;
    close(fd);
    errno = e;
    return -1;
}

/* Contract in fs.h. */
int fs_mode_public(const struct stat *st)
{
    if (S_ISDIR(st->st_mode))
        return (st->st_mode & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH);
    return S_ISREG(st->st_mode) && (st->st_mode & S_IROTH);
}

/* Contract in fs.h. */
int fs_public(const fs_at_t *at, const char *rel, int fd, int flags)
{
    walk_t w; /* not zeroed: its two PATH_MAX buffers were 8 KiB of memset a call */
    w.at = at, w.rootlen = strlen(at->root_real), w.out = 0, w.curlen = 0, w.cur[0] = 0;
    struct stat st, of;
    int known = 0;
    size_t d = strlen(at->dir), r = strlen(rel);
    if (d + 1 + r >= sizeof w.todo)
        return errno = ENAMETOOLONG, 0;
    memcpy(w.todo, at->dir, d);
    w.todo[d] = '/';
    memcpy(w.todo + d + 1, rel, r + 1);
    if (walk(&w, flags, &st, &known) < 0)
        return 0;
    if (!known && fstatat(cur_base(&w), cur_path(&w), &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (fd >= 0 && (fstat(fd, &of) < 0 || of.st_dev != st.st_dev || of.st_ino != st.st_ino))
        return errno = ESTALE, 0;
    if (counts(&w) && !(flags & (FS_ANY | FS_LINK)) && !fs_mode_public(&st))
        return errno = EACCES, 0;
    return 1;
}

ssize_t fs_read_small(int dirfd, const char *name, char *buf, size_t max, int nofollow)
{
    struct stat st;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0)
        return -2;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max
                    ? read(fd, buf, max)
                    : -1;
    close(fd);
    return n;
}
