/* acme_store — see acme_store.h. */
#include "acme_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_PATH_MAX 512

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The rename made durable: an fsync of the directory that holds name (a
   crash after it keeps the new file, the account key above all). */
static void sync_dir(int dirfd, const char *name, const char *slash)
{
    char dir[STORE_PATH_MAX];
    if (!slash) {
        fsync(dirfd);
        return;
    }
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - name), name);
    int fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int acme_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
    char tmp[STORE_PATH_MAX];
    const char *slash = strrchr(name, '/');
    int n = slash ? snprintf(tmp, sizeof tmp, "%.*s/.%s.tmp", (int)(slash - name), name, slash + 1)
                  : snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    int r = fchmod(fd, mode) == 0 && write_all(fd, data, len) == 0 && fsync(fd) == 0 ? 0 : -1;
    int e = errno;
    if (close(fd) < 0 && r == 0) {
        r = -1;
        e = errno;
    }
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0) {
        r = -1;
        e = errno;
    }
    if (r < 0)
        unlinkat(dirfd, tmp, 0);
    else
        sync_dir(dirfd, name, slash);
    errno = e;
    return r;
}

char *acme_read_file(int dirfd, const char *name, size_t max, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            char *b = cap < max ? realloc(buf, (cap *= 2) + 1) : NULL;
            if (!b) {
                free(buf);
                buf = NULL;
                errno = cap < max ? ENOMEM : EFBIG;
                break;
            }
            buf = b;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            buf = NULL;
        } else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    close(fd);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

void acme_empty_dir(int at, const char *path, unsigned keep_mode)
{
    int fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct stat st;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            !(keep_mode && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISREG(st.st_mode) && (st.st_mode & 07777) == keep_mode))
            unlinkat(fd, e->d_name, 0);
    closedir(d);
}

/* Remove .acme/VERSION and what is in it (files only). */
static void remove_version(int acme_fd, const char *version)
{
    acme_empty_dir(acme_fd, version, 0);
    unlinkat(acme_fd, version, AT_REMOVEDIR);
}

/* Keep name's versions keep1 and keep2 (".acme/"-relative), drop the rest. */
static void prune(int acme_fd, const char *name, const char *keep1, const char *keep2)
{
    int fd = dup(acme_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    size_t nl = strlen(name);
    char drop[16][STORE_PATH_MAX];
    int ndrop = 0;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d)) && ndrop < 16) {
        const char *v = e->d_name;
        /* NAME.SERIAL: a serial is hex, so "a.example" never matches "example"'s */
        if (strncmp(v, name, nl) || v[nl] != '.' || !v[nl + 1] ||
            strspn(v + nl + 1, "0123456789abcdef") != strlen(v + nl + 1))
            continue;
        if (strcmp(v, keep1) && (!keep2 || strcmp(v, keep2)) && strlen(v) < STORE_PATH_MAX)
            strcpy(drop[ndrop++], v);
    }
    closedir(d);
    for (int i = 0; i < ndrop; i++)
        remove_version(acme_fd, drop[i]);
}

/* Write the version's two files and fsync them and the directories. */
static int write_version(int acme_fd, const char *version, const char *chain, size_t chain_len,
                         const char *key, size_t key_len)
{
    if (mkdirat(acme_fd, version, 0755) < 0 && errno != EEXIST)
        return -1;
    int vfd = openat(acme_fd, version, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (vfd < 0)
        return -1;
    int r = acme_write_atomic(vfd, "privkey.pem", key, key_len, 0600) == 0 &&
                    acme_write_atomic(vfd, "fullchain.pem", chain, chain_len, 0644) == 0 &&
                    fsync(vfd) == 0
                ? 0
                : -1;
    int e = errno;
    close(vfd);
    if (r == 0 && fsync(acme_fd) < 0)
        return -1;
    errno = e;
    return r;
}

int acme_install(int tls_fd, const char *name, const char *serial, const char *chain,
                 size_t chain_len, const char *key, size_t key_len)
{
    char version[STORE_PATH_MAX], target[STORE_PATH_MAX], tmp[STORE_PATH_MAX];
    char old[STORE_PATH_MAX] = "";
    if ((size_t)snprintf(version, sizeof version, "%s.%s", name, serial) >= sizeof version ||
        (size_t)snprintf(target, sizeof target, ".acme/%s", version) >= sizeof target ||
        (size_t)snprintf(tmp, sizeof tmp, ".%s.tmp", name) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdirat(tls_fd, ".acme", 0755) < 0 && errno != EEXIST)
        return -1;
    int acme_fd = openat(tls_fd, ".acme", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (acme_fd < 0)
        return -1;
    if (write_version(acme_fd, version, chain, chain_len, key, key_len) < 0) {
        int e = errno; /* a full disk: nothing of the new version stays */
        if (readlinkat(tls_fd, name, old, sizeof old) < 0 || !strstr(old, version))
            remove_version(acme_fd, version);
        errno = e;
        goto fail;
    }
    ssize_t ol = readlinkat(tls_fd, name, old, sizeof old - 1);
    old[ol > 0 ? ol : 0] = 0;
    unlinkat(tls_fd, tmp, 0);
    if (symlinkat(target, tls_fd, tmp) < 0)
        goto fail;
    if (renameat(tls_fd, tmp, tls_fd, name) < 0) {
        int e = errno;
        unlinkat(tls_fd, tmp, 0);
        errno = e;
        goto fail;
    }
    fsync(tls_fd);
    const char *prev = strncmp(old, ".acme/", 6) == 0 ? old + 6 : NULL;
    prune(acme_fd, name, version, prev);
    close(acme_fd);
    return 0;
fail:;
    int e = errno;
    close(acme_fd);
    errno = e;
    return -1;
}

int acme_replaceable(int tls_fd, const char *name)
{
    char target[512], own[300];
    struct stat st;
    if (fstatat(tls_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT;
    if (!S_ISLNK(st.st_mode))
        return 0;
    ssize_t len = readlinkat(tls_fd, name, target, sizeof target - 1);
    int k = snprintf(own, sizeof own, ".acme/%s.", name);
    if (len < 0 || k < 0 || (size_t)k >= sizeof own)
        return 0;
    target[len] = 0;
    return strncmp(target, own, (size_t)k) == 0 && !strchr(target + k, '/');
}

int acme_make_dir(int at, const char *path, mode_t mode)
{
    if (mkdirat(at, path, mode) < 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
