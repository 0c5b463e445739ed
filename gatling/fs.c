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

int fs_path_below(int dirfd, int fd, char *out, size_t outsz)
{
    char dir[PATH_MAX], file[PATH_MAX];
    ssize_t d = fd_path(dirfd, dir, sizeof dir), f = fd_path(fd, file, sizeof file);
    if (d < 0 || f < 0)
        return -1;
    if (d == 1) /* the directory is "/" (a chroot) */
        d = 0;
    if (f <= d || strncmp(file, dir, (size_t)d) || file[d] != '/' || (size_t)(f - d) >= outsz)
        return -1;
    memcpy(out, file + d, (size_t)(f - d) + 1);
    return 0;
}

/* Is the file open on fd really below root_real?  (Linux: /proc/self/fd) */
static int below_root(int fd, const char *root_real)
{
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof real - 1);
    if (n < 0)
        return 0;
    real[n] = 0;
    size_t r = strlen(root_real);
    if (r == 1) /* the root is "/" (chroot) */
        return 1;
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
