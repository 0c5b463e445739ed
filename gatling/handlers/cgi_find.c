/*
 * Which requests are CGI's, and which file: the -w patterns or -z's
 * executables, the longest prefix of the path naming a script everyone may
 * read, below its virtual host's directory.  cgi.c starts what it finds.
 */
#define _GNU_SOURCE
#include "cgi_find.h"
#include "cgi_int.h"
#include "cgienv.h"
#include "site/fs.h"
#include "site/site.h"

#include <errno.h>
#include <regex.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int matches(const cgi_loop_t *L, const char *path, size_t len)
{
    char p[EX_PATH_CAP];
    if (len >= sizeof p)
        return 0;
    memcpy(p, path, len);
    p[len] = 0;
    for (int i = 0; i < L->nre; i++)
        if (regexec(&L->re[i], p, 0, NULL, 0) == 0)
            return 1;
    return 0;
}

/* Is the file open on fd, at path[0..len), a CGI program to run? */
static int is_script(const cgi_loop_t *L, const config_t *cfg, int fd, const char *path,
                     size_t len)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH))
        return 0;
    if (matches(L, path, len))
        return 1;
    char magic[4];
    return cfg->cgi_exec && (st.st_mode & S_IXOTH) && pread(fd, magic, 4, 0) >= 2 &&
           (!memcmp(magic, "#!", 2) || !memcmp(magic, "\177ELF", 4));
}

/* The longest prefix of the path naming a file (shorter while a file is
   in the way, ENOTDIR): a script, and one everyone may read (fs_public: a
   script behind a closed directory is not run, and static.c says 403)?
   1 with f->fd open, or 0. */
static int walk(const cgi_loop_t *L, const site_t *s, cgi_find_t *f)
{
    fs_at_t at = site_at(s, vhost_dir(f->which, f->t.vhost));
    const char *path = f->t.p.path;
    size_t len = f->t.p.len;
    char rel[EX_PATH_CAP];
    if (len < 2 || path[len - 1] == '/' || len > sizeof rel)
        return 0;
    while (len > 1) {
        memcpy(rel, path + 1, len - 1);
        rel[len - 1] = 0;
        int fd = fs_open_beneath(f->vfd, rel, site_root_check(s));
        if (fd < 0 && errno == ENOTDIR) {
            while (len > 1 && path[len - 1] != '/')
                len--;
            len--; /* and the '/' */
            continue;
        }
        if (fd < 0)
            return 0;
        if (!is_script(L, s->cfg, fd, path, len) || !fs_public(&at, rel, fd, 0)) {
            close(fd);
            return 0;
        }
        f->fd = fd, f->slen = len;
        return 1;
    }
    return 0;
}

/* Is ex's request for a CGI program?  1 with f->fd open and f->vfd the host's
   directory (handlers/host.h: never closed), or 0. */
int cgi_locate(exchange_t *ex, const cgi_loop_t *L, cgi_find_t *f)
{
    site_t *s = ex->site;
    const config_t *cfg = s->cfg;
    path_t *p = &f->t.p;
    f->vfd = f->fd = -1;
    if (ex_path(ex, p))
        return 0; /* static.c answers the error */
    /* -w without -z: could a prefix of the path be a script?  (No I/O.) */
    if (memmem(p->path, p->len, "/.", 2) ||
        (!cfg->cgi_exec && !cgienv_script(L->re, L->nre, p->path, p->len, CGIENV_ANY)))
        return 0;
    if (target_vhost(s, ex, f->t.vhost) < 0 || (f->vfd = target_dir(ex, &f->which)) < 0)
        return 0;
    if (walk(L, s, f))
        return 1;
    f->vfd = -1; /* (the host's: never closed here) */
    return 0;
}

void cgi_found_close(cgi_find_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->vfd = -1; /* the host's (target_dir): not closed */
}
