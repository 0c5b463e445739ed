/* Opening files below the document root: see fs.h. */
#define _GNU_SOURCE
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FS_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* The path of the file open on fd (Linux: /proc/self/fd); -1 elsewhere. */
static ssize_t fd_path(int fd, char *out, size_t outsz)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
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
