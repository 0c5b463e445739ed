/* privfs: the walk (links followed only where root alone writes, their
   targets walked the same way, made directories), the log's checks (no
   link, no FIFO, one link, 0640; /dev/stdout and /dev/stderr; a log in a
   directory others write opened as -u's user, and refused when it belongs
   to someone else), the checks of a file root reads and of a
   secret. */
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

static void test_log_more(void)
{
    char why[256];
    struct stat a, b;
    static const char *const std[] = {"/dev/stdout", "/dev/stderr"};
    for (int i = 0; i < 2; i++) {
        int dirfd = 7, fd = pfs_open_log(std[i], -1, -1, -1, &dirfd, why, sizeof why);
        ok(fd > 2 && fstat(fd, &a) == 0 && fstat(i + 1, &b) == 0 && a.st_ino == b.st_ino &&
               a.st_dev == b.st_dev && dirfd == -1 && !*why,
           "%s: a copy of descriptor %d, no directory", std[i], i + 1);
        if (fd >= 0)
            close(fd);
    }
    ok(log_fails(at("t/."), EISDIR, "names a directory") &&
           log_fails(at("t/.."), EISDIR, "names a directory"),
       "a log named . or ..: refused");
    ok(log_fails(at("nowhere/x.log"), ENOENT, "its directory"),
       "a directory that is not there: named");
    int fd = pfs_open_log("/dev/null", -1, -1, -1, NULL, why, sizeof why);
    ok(fd >= 0, "/dev/null: a device of root's in a directory of root's: %s", why);
    if (fd >= 0)
        close(fd);
    if (geteuid() != 0) {
        ok(1, "# skip the logs root opens as -u's user: not root");
        return;
    }
    mkdir(at("w"), 0777);
    chmod(at("w"), 0777); /* others write it: root opens nothing there itself */
    int wfd = open(at("w"), O_RDONLY | O_DIRECTORY);
    errno = 0;
    ok(pfs_open_log("k.log", wfd, -1, -1, NULL, why, sizeof why) < 0 && errno == EPERM &&
           strstr(why, "others than root"),
       "a reopen through a kept directory others write, no -u: refused");
    fd = pfs_open_log(at("w/u.log"), -1, 65534, 65534, NULL, why, sizeof why);
    ok(fd >= 0 && fstat(fd, &a) == 0 && a.st_uid == 65534,
       "-u's user opens (and makes) it there: %s", why);
    if (fd >= 0)
        close(fd);
    fd = pfs_open_log("u.log", wfd, 65534, 65534, NULL, why, sizeof why);
    ok(fd >= 0, "... and reopens it through the kept directory: %s", why);
    if (fd >= 0)
        close(fd);
    int o = open(at("w/other.log"), O_WRONLY | O_CREAT, 0666);
    (void)!fchown(o, 12345, 12345);
    fchmod(o, 0666);
    close(o);
    errno = 0;
    ok(pfs_open_log(at("w/other.log"), -1, 65534, 65534, NULL, why, sizeof why) < 0 &&
           errno == EPERM && strstr(why, "belongs to uid 12345"),
       "a log of a third user's: refused (%s)", why);
    close(wfd);
}

static int walk_fails(const char *path, mode_t mk, int err, const char *why_has)
{
    char why[512];
    int fd = pfs_walk_dir(path, mk, -1, -1, NULL, why, sizeof why);
    if (fd >= 0)
        close(fd);
    return fd < 0 && errno == err && strstr(why, why_has);
}

/* Issue 63: root's link into a directory others write is followed only up
   to the first link in there (the kernel, handed the whole target,
   followed nobody's link on to a directory of root's alone). */
static void test_chain(void)
{
    int root = geteuid() == 0, fd;
    pfs_dir_t d;
    mkdir(at("u"), 0777); /* the user's */
    chmod(at("u"), 0777);
    mkdir(at("victim"), 0700);
    mkdir(at("r"), 0755);
    (void)!symlink(at("victim"), at("u/st"));
    (void)!symlink("../u/st", at("r/rel"));
    (void)!symlink(at("u/st"), at("r/abs"));
    ok(walk_fails(at("r/rel"), 0, ELOOP, root ? "u/st is a symbolic link" : "r/rel is a sym"),
       "root's relative link, then the user's: ELOOP, naming the user's");
    ok(walk_fails(at("r/abs/x"), 0700, ELOOP, "symbolic link"), "... absolute, with mkmode");
    ok(access(at("victim/x"), F_OK) < 0, "nothing made in the victim");
    (void)!symlink("../victim", at("r/good"));
    (void)!symlink("../r/../victim/", at("r/dots"));
    fd = pfs_walk_dir(at("r/good"), 0, -1, -1, &d, NULL, 0);
    ok(root ? fd >= 0 && d.trusted : fd < 0, "a chain of root's alone: followed, trusted (root)");
    if (fd >= 0)
        close(fd);
    fd = pfs_walk_dir(at("r/dots/../victim"), 0, -1, -1, &d, NULL, 0);
    ok(root ? fd >= 0 && d.trusted : fd < 0, "'..' in a target and after it (root)");
    if (fd >= 0)
        close(fd);
    (void)!symlink("loop2", at("r/loop1"));
    (void)!symlink("loop1", at("r/loop2"));
    ok(pfs_walk_dir(at("r/loop1"), 0, -1, -1, NULL, NULL, 0) < 0 && errno == ELOOP,
       "a loop of links: ELOOP");
    fd = pfs_walk_dir(at("r/new"), 0700, -1, -1, &d, NULL, 0);
    ok(fd >= 0 && d.made, "made now: said");
    if (fd >= 0)
        close(fd);
    fd = pfs_walk_dir(at("r/new"), 0700, -1, -1, &d, NULL, 0);
    ok(fd >= 0 && !d.made, "there already: not made");
    if (fd >= 0)
        close(fd);
}

static int file_fails(const char *path, pfs_kind_t kind, int err, const char *why_has)
{
    char why[512];
    struct stat st;
    int fd = pfs_open_file(path, kind, &st, why, sizeof why);
    if (fd >= 0)
        close(fd);
    return fd < 0 && errno == err && strstr(why, why_has);
}

static int file_opens(const char *path, pfs_kind_t kind)
{
    char why[512];
    struct stat st;
    int fd = pfs_open_file(path, kind, &st, why, sizeof why);
    if (fd < 0)
        printf("# %s: %s\n", path, why);
    return fd >= 0 && close(fd) == 0;
}

static void test_files(void)
{
    int root = geteuid() == 0;
    FILE *f = fopen(at("victim/key"), "w");
    if (f)
        fclose(f);
    chmod(at("victim/key"), 0600);
    ok(file_opens(at("victim/key"), PFS_SECRET), "a secret 0600: read");
    chmod(at("victim/key"), 0640);
    ok(file_fails(at("victim/key"), PFS_SECRET, EPERM, "chmod 600"), "0640: refused");
    ok(file_opens(at("victim/key"), PFS_READ), "... but not as a file root reads");
    chmod(at("victim/key"), 0620);
    ok(root ? file_fails(at("victim/key"), PFS_READ, EPERM, "go-w") :
              file_opens(at("victim/key"), PFS_READ),
       "group-writable, read as root: refused (root only)");
    chmod(at("victim/key"), 0600);
    (void)!symlink(at("victim/key"), at("u/key"));
    ok(root ? file_fails(at("u/key"), PFS_SECRET, ELOOP, "symbolic link")
            : file_opens(at("u/key"), PFS_SECRET),
       "the user's link to a secret: refused (root; a user's own: the kernel's rules)");
    (void)!symlink("../victim/key", at("r/key"));
    ok(file_opens(at("r/key"), PFS_SECRET), "root's link to it: followed");
    mkfifo(at("r/fifo"), 0600);
    ok(file_fails(at("r/fifo"), PFS_READ, EINVAL, "not a regular file"),
       "a FIFO: refused, not waited on");
    (void)!link(at("victim/key"), at("r/hard"));
    ok(root ? file_fails(at("r/hard"), PFS_SECRET, EMLINK, "hard links")
            : file_opens(at("r/hard"), PFS_SECRET),
       "two links: refused (root only)");
    ok(file_fails(at("r"), PFS_READ, EINVAL, "not a regular"), "a directory: refused");
    ok(file_fails(at("r/"), PFS_READ, EINVAL, "not a regular"), "a name ending in /");
}

/* pfs_check: the same rules by kind, as --check and the option table ask. */
static void test_check(void)
{
    char why[512];
    int root = geteuid() == 0;
    unlink(at("r/hard"));
    ok(pfs_check(at("victim/key"), PFS_SECRET, -1, -1, why, sizeof why) == 0, "a secret: good");
    ok(pfs_check(at("u/key"), PFS_READ, -1, -1, why, sizeof why) == (root ? -1 : 0),
       "the user's link, as a file root reads: refused (root only)");
    ok(pfs_check(at("r/absent"), PFS_USER_DIR, -1, -1, why, sizeof why) == 0,
       "a missing directory the start makes: good");
    ok(pfs_check(at("r/absent"), PFS_DIR, -1, -1, why, sizeof why) < 0 && strstr(why, "No such"),
       "a missing directory root reads: said");
    ok(pfs_check(at("r/abs"), PFS_DIR, -1, -1, why, sizeof why) < 0 &&
           strstr(why, "symbolic link"), "the chain, as -C: refused, said");
    ok(pfs_check(at("r/c.log"), PFS_LOG, -1, -1, why, sizeof why) == 0, "a log: good");
}

int main(void)
{
    snprintf(base, sizeof base, "%s", "/tmp/t_privfs.XXXXXX");
    if (!mkdtemp(base))
        return perror("mkdtemp"), 1;
    test_walk();
    test_log();
    test_log_more();
    test_chain();
    test_files();
    test_check();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    (void)!system(cmd);
    return tap_done();
}
