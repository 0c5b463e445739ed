/* privfs: the walk (links followed only where root alone writes, made
   directories), the log's checks (no link, no FIFO, one link, 0640). */
#include "privfs.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];

static const char *at(const char *rel)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", base, rel);
    return p[k];
}

static int log_fails(const char *path, int err, const char *why_has)
{
    char why[256];
    int fd = pfs_open_log(path, -1, -1, -1, NULL, why, sizeof why);
    if (fd >= 0)
        close(fd);
    return fd < 0 && errno == err && strstr(why, why_has);
}

static void test_walk(void)
{
    int trusted = -1, root = geteuid() == 0;
    int fd = pfs_open_dir(at("a/b/c"), 0750, -1, -1, &trusted);
    struct stat st;
    ok(fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0750,
       "missing directories made, the last with its mode");
    is_int(trusted, root, "trusted when root's alone, under a sticky /tmp");
    close(fd);
    ok(pfs_open_dir(at("none/x"), 0, -1, -1, NULL) < 0 && errno == ENOENT, "no mkmode: ENOENT");
    chmod(at("a"), 0777); /* someone else may write a/ now */
    (void)!symlink(at("a/b"), at("a/link"));
    fd = pfs_open_dir(at("a/link/c"), 0, -1, -1, &trusted);
    ok(fd < 0 && errno == ELOOP, "a link past a directory others write: ELOOP");
    (void)!symlink(at("a/b"), at("top"));
    fd = pfs_open_dir(at("top/c"), 0, -1, -1, &trusted);
    ok(root ? fd >= 0 : fd < 0, "a link in a directory of root's alone: followed (root only)");
    if (fd >= 0)
        close(fd);
    fd = pfs_open_dir(at("a/b/c//./"), 0, -1, -1, &trusted);
    ok(fd >= 0 && !trusted, "below a directory others write: not trusted");
    if (fd >= 0)
        close(fd);
}

static void test_log(void)
{
    char why[256];
    int dirfd = -1, fd = pfs_open_dir(at("t"), 0700, -1, -1, NULL);
    close(fd);
    fd = pfs_open_log(at("t/x.log"), -1, -1, -1, &dirfd, why, sizeof why);
    struct stat st;
    ok(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0640, "made 0640: %s", why);
    ok(fd >= 0 && write(fd, "a\n", 2) == 2 && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0,
       "written, blocking again");
    close(fd);
    fd = pfs_open_log("x.log", dirfd, -1, -1, NULL, why, sizeof why);
    ok(fd >= 0, "reopened through the directory kept: %s", why);
    if (fd >= 0)
        close(fd);
    close(dirfd);
    (void)!symlink(at("t/x.log"), at("t/l.log"));
    ok(log_fails(at("t/l.log"), ELOOP, "symbolic link"), "a link: refused");
    mkfifo(at("t/f.log"), 0600);
    ok(log_fails(at("t/f.log"), ENXIO, ""), "a FIFO: refused, not waited on");
    (void)!link(at("t/x.log"), at("t/h.log"));
    ok(log_fails(at("t/h.log"), EMLINK, "hard links"), "two links: refused");
    ok(log_fails(at("t/"), EISDIR, "directory"), "a name ending in /: refused");
    if (geteuid() == 0)
        ok(log_fails(at("a/b/c/y.log"), EPERM, "others than root"),
           "root, no -u, a directory others write: refused");
    else
        ok((fd = pfs_open_log(at("a/b/c/y.log"), -1, -1, -1, NULL, why, sizeof why)) >= 0 &&
               close(fd) == 0,
           "not root: opened as who runs");
}

int main(void)
{
    snprintf(base, sizeof base, "%s", "/tmp/t_privfs.XXXXXX");
    if (!mkdtemp(base))
        return perror("mkdtemp"), 1;
    test_walk();
    test_log();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    (void)!system(cmd);
    return tap_done();
}
