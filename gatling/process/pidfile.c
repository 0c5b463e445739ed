/* --pid-file: see pidfile.h. */
#include "pidfile.h"
#include "site/privfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A missing directory of path's made (/run/gatling off systemd, whose
   RuntimeDirectory= makes it): by pfs_walk_dir's rules, as root in root's. */
static void make_dir(const char *path, int uid, int gid)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= sizeof dir)
        return;
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = pfs_open_dir(dir, 0755, uid, gid, NULL);
    if (fd >= 0)
        close(fd);
}

int pidfile_open(const config_t *cfg, proc_t *p, char *why, size_t n)
{
    struct stat st, dst;
    if (!cfg->pid_file)
        return 0;
    make_dir(cfg->pid_file, p->uid, p->gid);
    p->pid_fd = pfs_open_log(cfg->pid_file, -1, p->uid, p->gid, &p->pid_dir, why, n);
    if (p->pid_fd < 0)
        return -1;
    /* root's empty file in a directory of root's alone: root made it.  -u's
       user gets it, so that an upgrade's new process (as that user) can
       write its pid there, and no one else can replace it */
    if (geteuid() == 0 && p->uid > 0 && fstat(p->pid_fd, &st) == 0 && st.st_uid == 0 &&
        st.st_size == 0 && p->pid_dir >= 0 && fstat(p->pid_dir, &dst) == 0 &&
        pfs_root_only(&dst))
        (void)!fchown(p->pid_fd, (uid_t)p->uid, (gid_t)p->gid);
    return 0;
}

void pidfile_write(const proc_t *p)
{
    char text[32];
    if (p->pid_fd < 0)
        return;
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    /* O_APPEND: after the truncation the pid is the file's only line */
    if (ftruncate(p->pid_fd, 0) < 0 || write(p->pid_fd, text, (size_t)len) != len)
        fprintf(stderr, "gatling: --pid-file: cannot write the pid: %s\n", strerror(errno));
}

/* The pid the file name in dirfd holds (it is open write-only: read it
   anew, no link followed), or 0. */
static long held(int dirfd, const char *name)
{
    char text[32];
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t got = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got <= 0)
        return 0;
    text[got] = 0;
    return strtol(text, NULL, 10);
}

void pidfile_end(const config_t *cfg, proc_t *p)
{
    if (p->pid_fd < 0)
        return;
    const char *slash = strrchr(cfg->pid_file, '/');
    const char *name = slash ? slash + 1 : cfg->pid_file;
    if (p->pid_dir >= 0 && held(p->pid_dir, name) == (long)getpid()) {
        if (unlinkat(p->pid_dir, name, 0) < 0)
            (void)!ftruncate(p->pid_fd, 0); /* the file stays, naming no process */
    }
    close(p->pid_fd);
    if (p->pid_dir >= 0)
        close(p->pid_dir);
    p->pid_fd = p->pid_dir = -1;
}

pid_t pidfile_read(const char *path)
{
    char text[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t got = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (got < 0) {
        fprintf(stderr, "gatling: --reload %s: %s\n", path, strerror(e));
        return -1;
    }
    text[got] = 0;
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || (*end && *end != '\n') || v < 2 || v > INT_MAX) {
        fprintf(stderr, "gatling: --reload %s: holds no process id (the server is not "
                "running, or has not written it yet)\n", path);
        return -1;
    }
    return (pid_t)v;
}
