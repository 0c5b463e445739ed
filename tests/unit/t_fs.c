/*
 * fs_public: what a process without privileges could reach and read, walked
 * as the kernel walks a path -- closed directories on the path, on a
 * symlink's target, on the way a symlink's ".." takes; the root's own
 * ancestors not looked at; -L targets outside the root; loops; FS_ANY,
 * FS_LINK; the descriptor's file.  Mode bits only, so it runs as root too.
 * fs_path_below without /proc (a chroot, -c; here a tmpfs over /proc in a
 * mount namespace of its own): the symlinks followed by hand, relative,
 * absolute, chained, out of the directory, a loop.
 */
#define _GNU_SOURCE
#include "fs.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[PATH_MAX], root[PATH_MAX + 8];
static fs_at_t at;

static void mk(const char *rel, const char *link, mode_t mode)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    int rc;
    if (link) {
        rc = symlink(link, p);
    } else if (rel[strlen(rel) - 1] == '/') {
        rc = mkdir(p, mode);
    } else {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
        rc = fd < 0 ? -1 : close(fd);
    }
    if (rc < 0 || (!link && chmod(p, mode) < 0))
        perror(p);
}

/* fs_public from the directory dir below the root: 1, or -errno. */
static int pub(const char *dir, const char *rel, int flags)
{
    at.dir = dir;
    errno = 0;
    return fs_public(&at, rel, -1, flags) ? 1 : -errno;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void tree(void)
{
    char link[PATH_MAX * 2];
    mk("root/", NULL, 0755);
    mk("root/open/", NULL, 0755);
    mk("root/open/f.txt", NULL, 0644);
    mk("root/open/priv.txt", NULL, 0600);
    mk("root/open/dir/", NULL, 0755);
    mk("root/closed/", NULL, 0700);
    mk("root/closed/s.txt", NULL, 0644);
    mk("root/closed/sub/", NULL, 0755);
    mk("root/closed/sub/t.txt", NULL, 0644);
    mk("root/closed/back", "../open/f.txt", 0);
    mk("root/half/", NULL, 0711);
    mk("root/half/f.txt", NULL, 0644);
    mk("root/open/into", "../closed/s.txt", 0);
    mk("root/open/intodir", "../closed", 0);
    mk("root/open/sneak", "../closed/../open/f.txt", 0); /* real path: open/f.txt */
    mk("root/open/up", "../open/./dir/../f.txt", 0);
    mk("root/trick", "closed/sub", 0);
    mk("root/open/loop1", "loop2", 0);
    mk("root/open/loop2", "loop1", 0);
    snprintf(link, sizeof link, "%s/open/f.txt", root);
    mk("root/open/abs", link, 0);
    snprintf(link, sizeof link, "%s/closed/s.txt", root);
    mk("root/open/absclosed", link, 0);
    mk("root/open/aboveroot", "../../root/open/f.txt", 0);
    mk("root/open/aboveclosed", "../../root/closed/s.txt", 0);
    mk("outside/", NULL, 0755); /* -L: outside the root, looked at */
    mk("outside/o.txt", NULL, 0644);
    mk("outclosed/", NULL, 0700);
    mk("outclosed/o.txt", NULL, 0644);
    mk("root/open/out", "../../outside/o.txt", 0);
    mk("root/open/outc", "../../outclosed/o.txt", 0);
    mk("root/open/url", "http://example.org/x", 0);
    mk("root/closed/url", "http://example.org/x", 0);
}

/* fs_path_below(dirfd of dir, the file rel opens, rel) as text: the path or "-1". */
static void below(int out, const char *dir, const char *rel)
{
    char path[PATH_MAX], line[PATH_MAX + 64];
    int dfd = open(dir, O_RDONLY | O_DIRECTORY), fd = openat(dfd, rel, O_RDONLY);
    int rc = fs_path_below(dfd, fd, rel, path, sizeof path);
    int n = snprintf(line, sizeof line, "%s\n", rc == 0 ? path : "-1");
    if (write(out, line, (size_t)n) != n)
        _exit(3);
    if (fd >= 0)
        close(fd);
    close(dfd);
}

/* A chroot has no /proc: fs_path_below walks the symlinks by hand.  The
   child hides /proc (root only) and ends by exit, so gcov counts it. */
static void path_below_without_proc(void)
{
    if (geteuid() != 0) {
        ok(1, "# skip fs_path_below without /proc: not root");
        return;
    }
    char abs[PATH_MAX + 32], www[PATH_MAX + 16], fromroot[PATH_MAX + 16], want[PATH_MAX + 32];
    snprintf(abs, sizeof abs, "%s/jail/www/a.html", base);
    snprintf(www, sizeof www, "%s/jail/www", base);
    snprintf(fromroot, sizeof fromroot, "%s/jail/www/rel", base + 1);
    mk("jail/", NULL, 0755);
    mk("jail/www/", NULL, 0755);
    mk("jail/www/dir/", NULL, 0755);
    mk("jail/www/a.html", NULL, 0644);
    mk("jail/www/dir/b.html", NULL, 0644);
    mk("jail/outside.html", NULL, 0644);
    mk("jail/www/rel", "a.html", 0);
    mk("jail/www/abs", abs, 0);
    mk("jail/www/dir/up", "../a.html", 0);
    mk("jail/www/chain", "dir/up", 0);
    mk("jail/www/out", "../outside.html", 0);
    mk("jail/www/loop", "loop", 0);
    const struct {
        const char *dir, *rel, *want, *why;
    } t[] = {
        {www, "a.html", "/a.html", "a file"},
        {www, "dir/b.html", "/dir/b.html", "a file in a directory"},
        {www, "rel", "/a.html", "a relative symlink, by hand"},
        {www, "abs", "/a.html", "an absolute one"},
        {www, "chain", "/a.html", "a symlink to a symlink with \"..\""},
        {www, "out", "-1", "a symlink out of the directory"},
        {www, "loop", "-1", "a symlink loop: given up after 40 hops"},
        {www, "nodir/x", "-1", "a directory that is not there"},
        {"/", fromroot, want, "from \"/\" (a chroot's own root)"},
    };
    snprintf(want, sizeof want, "%s/jail/www/a.html", base);
    int p[2];
    if (pipe(p) < 0)
        return perror("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("none", "/proc", "tmpfs", 0, NULL) < 0 || !access("/proc/self/fd", F_OK))
            _exit(2);
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            below(p[1], t[i].dir, t[i].rel);
        umount("/proc"); /* /proc back for exit's LeakSanitizer (the -san build) */
        exit(0);
    }
    close(p[1]);
    char buf[8192];
    size_t got = 0;
    for (ssize_t r; (r = read(p[0], buf + got, sizeof buf - 1 - got)) > 0;)
        got += (size_t)r;
    buf[got] = 0;
    close(p[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    is_int(WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, 0, "the child without /proc ran");
    char *line = buf;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        is_str(line, t[i].want, "no /proc: %s (%s from %s)", t[i].why, t[i].rel, t[i].dir);
        line = nl ? nl + 1 : line + strlen(line);
    }
}

int main(void)
{
    char tmpl[] = "/tmp/t_fs.XXXXXX"; /* mode 700: an ancestor of the root, not looked at */
    if (!mkdtemp(tmpl) || !realpath(tmpl, base))
        return perror("mkdtemp"), 1;
    snprintf(root, sizeof root, "%s/root", base);
    tree();
    at = (fs_at_t){.rootfd = open(root, O_RDONLY | O_DIRECTORY), .root_real = root};

    is_int(pub("", "open/f.txt", 0), 1, "a 644 file in a 755 directory");
    is_int(pub("", "open/priv.txt", 0), -EACCES, "a 600 file");
    is_int(pub("", "closed/s.txt", 0), -EACCES, "a 644 file in a 700 directory");
    is_int(pub("", "closed/sub/t.txt", 0), -EACCES, "... and deeper below it");
    is_int(pub("", "closed/nope", 0), -EACCES, "missing below it: refused, not ENOENT");
    is_int(pub("", "open/nope", 0), -ENOENT, "missing in an open directory");
    is_int(pub("", "open/f.txt/x", 0), -ENOTDIR, "a file as a directory");
    is_int(pub("", "open/into", 0), -EACCES, "a symlink into the closed directory");
    is_int(pub("", "open/intodir/s.txt", 0), -EACCES, "through a symlink to it");
    is_int(pub("", "closed/back", 0), -EACCES, "a symlink inside it to an open file");
    is_int(pub("", "trick/t.txt", 0), -EACCES, "a link to an open directory below it");
    is_int(pub("", "open/sneak", 0), -EACCES, "a target through it and out by \"..\"");
    is_int(pub("", "open/up", 0), 1, "\".\" and \"..\" in an open target");
    is_int(pub("", "open/abs", 0), 1, "an absolute symlink below the root");
    is_int(pub("", "open/absclosed", 0), -EACCES, "... into the closed directory");
    is_int(pub("", "open/aboveroot", 0), 1,
           "out by \"..\" and in again: the 700 base is not looked at");
    is_int(pub("", "open/aboveclosed", 0), -EACCES, "... to a closed one");
    is_int(pub("", "open/out", 0), 1, "-L: outside the root, open");
    is_int(pub("", "open/outc", 0), -EACCES, "-L: outside the root, closed");
    is_int(pub("", "open/loop1", 0), -ELOOP, "a symlink loop");
    is_int(pub("", "half/f.txt", 0), 1, "a 711 directory on the way");
    is_int(pub("", "half/", 0), -EACCES, "... is not listed");
    is_int(pub("", "open/", 0), 1, "an open directory");
    is_int(pub("", "closed", 0), -EACCES, "the closed one");
    is_int(pub("", "", 0), 1, "the root: the administrator's choice");
    is_int(pub("open", "f.txt", 0), 1, "from an open vhost directory");
    is_int(pub("closed", "sub/t.txt", 0), -EACCES, "from a closed vhost directory");
    is_int(pub("closed", "", 0), -EACCES, "the closed vhost directory itself");
    is_int(pub("", "open/priv.txt", FS_ANY), 1, "FS_ANY: only the way counts");
    is_int(pub("", "closed/s.txt", FS_ANY), -EACCES, "FS_ANY: the way counts");
    is_int(pub("", "open/url", FS_LINK), 1, "FS_LINK: the link itself");
    is_int(pub("", "open/url", 0), -ENOENT, "followed, it leads nowhere");
    is_int(pub("", "closed/url", FS_LINK), -EACCES, "FS_LINK in the closed directory");

    int fd = open(root, O_RDONLY | O_DIRECTORY);
    int f = openat(fd, "open/f.txt", O_RDONLY);
    at.dir = "";
    is_int(fs_public(&at, "open/f.txt", f, 0), 1, "the file open on fd");
    is_int(fs_public(&at, "open/abs", f, 0), 1, "... through a symlink");
    errno = 0;
    is_int(fs_public(&at, "open/dir", f, 0), 0, "another file than fd's");
    is_int(errno, ESTALE, "... is ESTALE");
    close(f), close(fd), close(at.rootfd);

    char deep[PATH_MAX + 16];
    memset(deep, 'a', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    is_int(pub("", deep, 0), -ENAMETOOLONG, "a path longer than PATH_MAX");
    path_below_without_proc();

    chmod(base, 0700);
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
