/*
 * fs_public: what a process without privileges could reach and read, walked
 * as the kernel walks a path -- closed directories on the path, on a
 * symlink's target, on the way a symlink's ".." takes; the root's own
 * ancestors not looked at; -L targets outside the root; loops; FS_ANY,
 * FS_LINK; the descriptor's file.  Mode bits only, so it runs as root too.
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
#include <sys/stat.h>
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

    chmod(base, 0700);
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
