/*
 * FTP listings: LIST (ls -l lines, what every client parses), NLST (names)
 * and MLSD/MLST (RFC 3659 facts).  What is listed is what HTTP's listings
 * show (handlers/listing.h): no dotfiles, regular files and directories
 * only, world-readable (a directory also world-searchable), symlinks as
 * their targets if no closed directory is on their way (fs_public): what
 * RETR and CWD would take.  Reads the directory on the loop, as the HTTP
 * listing does.
 */
#define _GNU_SOURCE
#include "ftp_list.h"
#include "http/hbuf.h"
#include "site/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FTP_SIX_MONTHS (182 * 86400) /* ls shows the year, not the time, beyond */

/* A name with a line end or a control byte would break the reply's lines. */
static int printable(const char *name)
{
    for (; *name; name++)
        if ((unsigned char)*name < 0x20 || *name == 0x7f)
            return 0;
    return 1;
}

/*
 * Is the entry e of dirfd, the directory path, listed (its target's stat in
 * *st)?  As HTTP's listing: not a dotfile, world-readable, and a symlink
 * (or what may be one) only if no closed directory is on its way.
 */
static int visible(int dirfd, const fs_at_t *at, const char *path, const struct dirent *e,
                   struct stat *st)
{
    if (e->d_name[0] == '.' || !printable(e->d_name) || fstatat(dirfd, e->d_name, st, 0) < 0 ||
        !fs_mode_public(st))
        return 0;
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
        return 1;
    char rel[FTP_PATH_MAX + 256];
    int n = snprintf(rel, sizeof rel, "%s/%s", path + 1, e->d_name);
    return n > 0 && (size_t)n < sizeof rel && fs_public(at, rel[0] == '/' ? rel + 1 : rel, -1, 0);
}

static void perms(char *p, mode_t m)
{
    static const char rwx[] = "rwxrwxrwx";
    p[0] = S_ISDIR(m) ? 'd' : '-';
    for (int i = 0; i < 9; i++)
        p[1 + i] = m & (1u << (8 - i)) ? rwx[i] : '-';
    p[10] = 0;
}

long ftp_list_line(char *out, size_t cap, ftp_verb_t how, const struct stat *st, const char *name,
                   int64_t now)
{
    static const char mon[][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    time_t t = st->st_mtime;
    int n;
    gmtime_r(&t, &tm);
    if (how == FTP_NLST) {
        n = snprintf(out, cap, "%s\r\n", name);
    } else if (how == FTP_LIST) {
        char p[11], when[32];
        perms(p, st->st_mode);
        if (t > now - FTP_SIX_MONTHS && t < now + 86400)
            snprintf(when, sizeof when, "%s %2d %02d:%02d", mon[tm.tm_mon], tm.tm_mday, tm.tm_hour,
                     tm.tm_min);
        else
            snprintf(when, sizeof when, "%s %2d  %4d", mon[tm.tm_mon], tm.tm_mday,
                     tm.tm_year + 1900);
        n = snprintf(out, cap, "%s 1 ftp ftp %12lld %s %s\r\n", p, (long long)st->st_size, when,
                     name);
    } else { /* MLSD, MLST: type, size of files, modify, perm (read; enter and list) */
        char size[40] = "";
        if (!S_ISDIR(st->st_mode))
            snprintf(size, sizeof size, "size=%lld;", (long long)st->st_size);
        n = snprintf(out, cap, "type=%s;%smodify=%04d%02d%02d%02d%02d%02d;perm=%s; %s\r\n",
                     S_ISDIR(st->st_mode) ? "dir" : "file", size, tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     S_ISDIR(st->st_mode) ? "el" : "r", name);
    }
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

typedef struct lbuf {
    char *p;
    size_t len, cap;
} lbuf_t;

/* Room for n more bytes: doubling, so a listing costs O(bytes). */
static int lb_room(lbuf_t *b, size_t n)
{
    char *q = hb_grow(b->p, &b->cap, b->len + n, 1, 4096);
    if (!q)
        return -1;
    b->p = q;
    return 0;
}

int ftp_list_dir(int dirfd, const fs_at_t *at, const char *path, ftp_verb_t how, int64_t now,
                 char **out, size_t *len)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    lbuf_t b = {0};
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!visible(dirfd, at, path, e, &st))
            continue;
        size_t need = strlen(e->d_name) + 128;
        if (lb_room(&b, need) < 0) {
            free(b.p);
            closedir(d);
            errno = ENOMEM;
            return -1;
        }
        long n = ftp_list_line(b.p + b.len, need, how, &st, e->d_name, now);
        if (n > 0)
            b.len += (size_t)n;
    }
    closedir(d);
    *out = b.p;
    *len = b.len;
    return 0;
}
