/* A static site's _redirects, _headers and error pages: see sitefiles.h. */
#define _GNU_SOURCE /* memrchr */
#include "sitefiles.h"
#include "router.h"
#include "sitefiles_parse.h"
#include "metrics.h"
#include "status.h"
#include "handlers/host.h"
#include "handlers/hstate.h"
#include "handlers/htaccess.h"
#include "http/hbuf.h"
#include "http/path.h"
#include "site/fs.h"
#include "site/mime.h"
#include "site/peerlimits.h"
#include "site/siphash.h"
#include "site/site.h"
#include "site/vhost.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <textcode.h>
#include <unistd.h>

/* The statuses a site may have a page for: STATUS.html at its top. */
static const int pages[] = {400, 401, 403, 404, 405, 410, 429, 500, 502, 503, 504};
#define NPAGES (sizeof pages / sizeof *pages)
enum { F_REDIRECTS, F_HEADERS, F_PAGE0, NFILES = F_PAGE0 + NPAGES };

#define SF_DIRS_MAX 1024  /* site directories with their tables */
#define SF_BAD_SAID 20    /* bad lines of one file told, then their count */
#define SF_REQ_FIELDS 40  /* _headers' fields for one answer, at most */
#define SF_REQ_BUF 4096   /* ... their names and values (a head has room: H1_HEAD_CAP) */
#define SF_REQ_NAMES 1024 /* ... their names (HTTP/2's and 3's SB_HEAD_NAMES has room) */

/* What a file was when read (there 0: it was not). */
typedef struct stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint8_t there;
} stamp_t;

typedef struct sf_dir {
    char dir[VHOST_NAME_MAX + 8]; /* vhost_dir's answer: the key */
    int64_t second;
    stamp_t st[NFILES];
    sf_redirects_t *red; /* NULL: none */
    sf_headers_t *hdr;
    char *page[NPAGES];
    size_t pagelen[NPAGES];
    struct sf_dir *next;
} sf_dir_t;

typedef struct sf_state {
    uint8_t key[16];
    unsigned ndirs;
    int full_said;
    sf_dir_t *dirs[256];
} sf_state_t;

/* What the router found for one request: the _headers fields (in order, a
   detach as a name with a NULL value), copied out of the table. */
typedef struct sf_req {
    unsigned n;
    size_t used;
    ex_field_t op[SF_REQ_FIELDS];
    ex_field_t merged[EX_FIELDS_MAX]; /* the head's fields, made by sitefiles_head */
    char buf[SF_REQ_BUF];
} sf_req_t;

static const char *const file_names[2] = {"_redirects", "_headers"};

/* ---- reading a directory's files ---- */

/* A bad line's report: to the error log (at run) or stderr (--check). */
typedef struct bad_ctx {
    site_t *s; /* NULL: stderr */
    const char *dir, *file;
    int said, more;
} bad_ctx_t;

static void bad_line(void *arg, int line, const char *why)
{
    bad_ctx_t *c = arg;
    if (c->said >= SF_BAD_SAID) {
        c->more++;
        return;
    }
    c->said++;
    char msg[PATH_MAX + 600];
    snprintf(msg, sizeof msg, "%s%s%s:%d: %s (the line is skipped, the others apply)", c->dir,
             *c->dir ? "/" : "", c->file, line, why);
    if (c->s)
        elog_text(&c->s->elog, gio_wallclock(c->s->loop), "site files", msg);
    else
        fprintf(stderr, "gatling: %s\n", msg);
}

static void bad_done(bad_ctx_t *c)
{
    if (!c->more)
        return;
    char msg[PATH_MAX + 200];
    snprintf(msg, sizeof msg, "%s%s%s: %d more bad lines not told", c->dir, *c->dir ? "/" : "",
             c->file, c->more);
    if (c->s)
        elog_text(&c->s->elog, gio_wallclock(c->s->loop), "site files", msg);
    else
        fprintf(stderr, "gatling: %s\n", msg);
}

/* Where a _redirects' reading stopped (sf_redirects_parse): said always,
   not among the bad lines told. */
static void unread_said(bad_ctx_t *c, const sf_redirects_t *r)
{
    if (!r->stop_line)
        return;
    char msg[PATH_MAX + 300];
    snprintf(msg, sizeof msg, "%s%s%s:%d: this line and the rest (%zu bytes) not read: the "
             "rule limits are full, or %d lines were refused", c->dir, *c->dir ? "/" : "",
             c->file, r->stop_line, r->unread, SF_REFUSED_MAX);
    c->said++;
    if (c->s)
        elog_text(&c->s->elog, gio_wallclock(c->s->loop), "site files", msg);
    else
        fprintf(stderr, "gatling: %s\n", msg);
}

/* The file name in dirfd, up to max bytes, into a malloc'd buffer (*n):
   NULL when it is not there, not a regular file or too long (errno). */
static char *slurp(int dirfd, const char *name, size_t max, size_t *n, const char *root,
                   int public_only)
{
    struct stat st;
    int fd = fs_open_beneath(dirfd, name, root);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max &&
        (!public_only || fs_mode_public(&st)) && (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)st.st_size && r > 0)
            if ((r = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
                got += (size_t)r;
        *n = got;
    } else if (!errno) {
        errno = EFBIG;
    }
    close(fd);
    return buf;
}

/* The site's root as its admin knows it (-c's name after a chroot). */
static const char *root_name(const site_t *s)
{
    return s->root_real && strcmp(s->root_real, "/") ? s->root_real
           : s->cfg->root                             ? s->cfg->root
                                                      : "";
}

/* File i of d (changed) read again from its directory dfd. */
static void load(site_t *s, sf_dir_t *d, int dfd, unsigned i)
{
    size_t n = 0;
    size_t max = i == F_REDIRECTS ? SF_REDIRECTS_FILE_MAX
                 : i == F_HEADERS ? SF_HEADERS_FILE_MAX
                                  : SF_PAGE_MAX;
    char name[16] = "";
    if (i >= F_PAGE0)
        snprintf(name, sizeof name, "%d.html", pages[i - F_PAGE0]);
    errno = 0;
    char *text = slurp(dfd, i < F_PAGE0 ? file_names[i] : name, max, &n,
                       site_root_check(s), i >= F_PAGE0);
    char where[PATH_MAX + VHOST_NAME_MAX + 8];
    snprintf(where, sizeof where, "%s%s%s", root_name(s), *d->dir ? "/" : "", d->dir);
    bad_ctx_t c = {s, where, i < F_PAGE0 ? file_names[i] : name, 0, 0};
    if (!text && errno == EFBIG)
        bad_line(&c, 0, "too large or not a file: not applied");
    if (i >= F_PAGE0) {
        free(d->page[i - F_PAGE0]);
        d->page[i - F_PAGE0] = text;
        d->pagelen[i - F_PAGE0] = n;
        return;
    }
    if (i == F_REDIRECTS && d->red)
        sf_redirects_free(d->red), free(d->red), d->red = NULL;
    if (i == F_HEADERS && d->hdr)
        sf_headers_free(d->hdr), free(d->hdr), d->hdr = NULL;
    if (text && i == F_REDIRECTS && (d->red = malloc(sizeof *d->red)) &&
        sf_redirects_parse(d->red, text, n, bad_line, &c) < 0)
        free(d->red), d->red = NULL;
    if (text && i == F_REDIRECTS && d->red)
        unread_said(&c, d->red);
    if (text && i == F_HEADERS && (d->hdr = malloc(sizeof *d->hdr)) &&
        sf_headers_parse(d->hdr, text, n, bad_line, &c) < 0)
        free(d->hdr), d->hdr = NULL;
    bad_done(&c);
    free(text);
}

/* d's files in its directory dfd looked at (their stamps), those changed
   read again. */
static void refresh(site_t *s, sf_dir_t *d, int dfd)
{
    for (unsigned i = 0; i < NFILES; i++) {
        struct stat st;
        char name[16] = "";
        if (i >= F_PAGE0)
            snprintf(name, sizeof name, "%d.html", pages[i - F_PAGE0]);
        stamp_t now = {0};
        if (fstatat(dfd, i < F_PAGE0 ? file_names[i] : name, &st, 0) == 0)
            now = (stamp_t){st.st_dev, st.st_ino, st.st_size, st.st_mtim, 1};
        stamp_t *was = &d->st[i];
        if (now.there == was->there && now.dev == was->dev && now.ino == was->ino &&
            now.size == was->size && now.mtime.tv_sec == was->mtime.tv_sec &&
            now.mtime.tv_nsec == was->mtime.tv_nsec)
            continue;
        *was = now;
        load(s, d, dfd, i);
    }
}

static void dir_free(sf_dir_t *d)
{
    if (d->red)
        sf_redirects_free(d->red), free(d->red);
    if (d->hdr)
        sf_headers_free(d->hdr), free(d->hdr);
    for (unsigned i = 0; i < NPAGES; i++)
        free(d->page[i]);
    free(d);
}

/* The directory dir (key), open on fd (the caller's: not closed): its
   entry, refreshed if its second is past; NULL when there is no room. */
static sf_dir_t *dir_entry(site_t *s, sf_state_t *st, const char *dir, int fd, int64_t now)
{
    unsigned h = (unsigned)siphash24(st->key, dir, strlen(dir)) % 256;
    sf_dir_t *d = st->dirs[h];
    while (d && strcmp(d->dir, dir))
        d = d->next;
    if (!d) {
        if (st->ndirs >= SF_DIRS_MAX || strlen(dir) >= sizeof d->dir ||
            !(d = calloc(1, sizeof *d))) {
            if (!st->full_said++)
                elog_text(&s->elog, gio_wallclock(s->loop), "site files",
                          "over 1,024 site directories: the others' site files are not read");
            return NULL;
        }
        memcpy(d->dir, dir, strlen(dir) + 1); /* (its length checked above) */
        d->next = st->dirs[h];
        st->dirs[h] = d;
        st->ndirs++;
        d->second = now - 1;
    }
    if (d->second != now) {
        d->second = now;
        refresh(s, d, fd);
    }
    return d;
}

/* ex's site directory's entry: its host's (handlers/host.h: the route's,
   found once), made again by the host's freshness rule, its files looked at
   once a second. */
static sf_dir_t *dir_of(exchange_t *ex)
{
    site_t *s = ex->site;
    sf_state_t *st = hstate(s, HSTATE_SITEFILES);
    host_t *h = st ? host_of(ex) : NULL;
    if (!h || h->dirfd < 0)
        return NULL;
    if (!host_slot_fresh(h, HOST_SLOT_SITEFILES))
        host_slot_set(h, HOST_SLOT_SITEFILES,
                      dir_entry(s, st, vhost_dir(h->which, h->name), h->dirfd,
                                gio_wallclock(s->loop)));
    return h->slot[HOST_SLOT_SITEFILES];
}

/* ex's site directory, open (its host's: never closed), or -1. */
static int site_dir(exchange_t *ex)
{
    const host_t *h = host_of(ex);
    return h ? h->dirfd : -1;
}

/* ---- the router's entry ---- */

/* Is the path's last segment a control file's name (anywhere: a root that
   serves its vhosts' directories must not give theirs away)? */
static int control_file(const char *p, size_t n)
{
    const char *slash = memrchr(p, '/', n);
    const char *last = slash ? slash + 1 : p;
    size_t k = (size_t)(p + n - last);
    return (k == 10 && !memcmp(last, "_redirects", 10)) || (k == 8 && !memcmp(last, "_headers", 8));
}

/* Does ex's site have a file (or a directory with index.html) at path, or
   does a producer take the request (a -P rule, CGI: router_produced), or
   -S's pages? */
static int exists(exchange_t *ex, const path_t *p)
{
    const site_t *s = ex->site;
    char rel[EX_PATH_CAP + 16];
    hbuf_t b = hb_init(rel, sizeof rel);
    hb_put(&b, p->path + 1, p->len - 1);
    if (p->path[p->len - 1] == '/')
        hb_puts(&b, "index.html");
    if (!hb_str(&b) || path_hidden(p->path, p->len))
        return 0;
    if (router_produced(s, ex, 0))
        return 1; /* a -P rule's or a CGI pattern's request: its program answers */
    if (status_page_on(s) && (status_handler.match(ex) || metrics_handler.match(ex)))
        return 1; /* -S's pages, which come after the producers */
    int dfd = site_dir(ex);
    int fd = dfd < 0 ? -1 : fs_open_beneath(dfd, p->len > 1 ? rel : "index.html",
                                            site_root_check(s));
    struct stat st;
    int r = fd >= 0 && fstat(fd, &st) == 0;
    if (r && S_ISDIR(st.st_mode)) {
        int i = openat(fd, "index.html", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        r = i >= 0 && fstat(i, &st) == 0 && S_ISREG(st.st_mode);
        if (i >= 0)
            close(i);
    }
    if (fd >= 0)
        close(fd);
    return r;
}

/* Is what an Authorization field decodes to (dec[0..n)) the word w[0..k)?
   Every byte is looked at, so that the time does not tell how much agreed. */
static int same_secret(const char *w, size_t k, const char *dec, size_t n)
{
    volatile unsigned char d = k != n;
    for (size_t i = 0; i < k; i++)
        d |= (unsigned char)(w[i] ^ (i < n ? dec[i] : 0));
    return d == 0;
}

/* Do ex's Basic credentials match one of value's "user:password" words? */
static int basic_ok(const exchange_t *ex, const char *value)
{
    const http_str_t *a = http_header(ex->req, "Authorization");
    char b64[400], dec[320]; /* auth_pairs: words of 200 bytes at most */
    size_t dl = 0, tl = 0;
    if (!a || a->n < 7 || strncasecmp(a->p, "basic ", 6))
        return 0;
    while (tl + 6 < a->n && a->p[6 + tl] != ' ' && a->p[6 + tl] != '\t')
        tl++;
    if (!tl || tl >= sizeof b64)
        return 0;
    memcpy(b64, a->p + 6, tl), b64[tl] = 0;
    if (scan_base64(b64, dec, &dl) != tl || dl >= sizeof dec)
        return 0;
    int ok = 0;
    for (size_t k; *(value += strspn(value, " \t")); value += k) {
        k = strcspn(value, " \t");
        ok |= same_secret(value, k, dec, dl);
    }
    return ok;
}

/* Is path[0..n) in a _headers block with Basic-Auth (Netlify's password
   protection) whose credentials ex's request does not carry? */
static int locked(const exchange_t *ex, const sf_dir_t *d, const char *path, size_t n)
{
    uint32_t idx[64];
    unsigned k = d && d->hdr && d->hdr->nauth ? sf_headers_match(d->hdr, path, n, idx, 64) : 0;
    for (unsigned i = 0; i < k; i++) {
        const sf_block_t *bl = &d->hdr->b[idx[i]];
        for (uint32_t j = 0; j < bl->n; j++) {
            const sf_hfield_t *f = &d->hdr->f[bl->first + j];
            if (f->auth && !basic_ok(ex, f->value))
                return 1;
        }
    }
    return 0;
}

/* 401 asking for Basic-Auth's credentials, or 429 while ex's address has
   failed too often (as .htaccess's, handlers/auth.c); failures counted. */
static int lock_out(exchange_t *ex)
{
    site_t *s = ex->site;
    unsigned wait = limits_auth_wait(s->limits, ex->peer, gio_now(s->loop));
    char num[24];
    snprintf(num, sizeof num, "%u", wait);
    if (wait)
        return ex_error(ex, 429, "Retry-After", num);
    if (http_header(ex->req, "Authorization"))
        limits_auth_failed(s->limits, ex->peer, gio_now(s->loop));
    return ex_error(ex, 401, "WWW-Authenticate", "Basic realm=\"_headers\", charset=\"UTF-8\"");
}

/* May ex be answered the file at p (below d's directory, open on dfd) as a
   page: would a request for it be served?  Not a dotfile, a rule file, a
   program or a backup copy of one (site->program), nothing behind a
   closed directory, .htaccess or Basic-Auth (slurp: world-readable). */
static int page_allowed(exchange_t *ex, const sf_dir_t *d, int dfd, const path_t *p)
{
    const site_t *s = ex->site;
    char realm[2];
    fs_at_t at = site_at(s, d->dir);
    return !path_hidden(p->path, p->len) && !control_file(p->path, p->len) &&
           !(s->program && s->program(s, p->path, p->len)) && !locked(ex, d, p->path, p->len) &&
           fs_public(&at, p->path + 1, -1, FS_ANY) &&
           htaccess_check(dfd, p->path, p->len, NULL, 0, realm, sizeof realm) == 0;
}

/* A rule's page: the file at to (a path) with the rule's status; without
   one (or one a request could not have: page_allowed), the site's error
   answer for it. */
static int rule_page(exchange_t *ex, const sf_dir_t *d, const char *to, int status)
{
    char dec[EX_PATH_CAP + 8];
    path_t p;
    size_t n = 0;
    char *page = NULL;
    int dfd = -1;
    if (path_from_target(to, strlen(to), dec, sizeof dec, &p) == 0 && p.len > 1 &&
        (dfd = site_dir(ex)) >= 0 && page_allowed(ex, d, dfd, &p))
        page = slurp(dfd, p.path + 1, SF_PAGE_MAX, &n, site_root_check(ex->site), 1);
    if (!page)
        return ex_error(ex, status, NULL, NULL);
    const char *type = mime_lookup(ex->site->mime, p.path, p.len);
    int r = ex_head(ex, status, type, n, -1);
    if (r != 0) {
        free(page);
        return r < 0 ? -1 : 0;
    }
    return ex_body_buf(ex, page, n, EX_FREE);
}

/* ex's answer with the query of t kept: appended to to (in b) unless to
   has its own. */
static void keep_query(hbuf_t *b, const char *to, const path_t *t)
{
    if (t->query && !strchr(to, '?'))
        hb_puts(b, "?"), hb_put(b, t->query, t->query_len);
}

static int answered(int r)
{
    return r < 0 ? -1 : 0;
}

/* The first _redirects rule for t, done: an answer (0, -1), or
   HANDLER_NOT_MINE (none, shadowed, or a rewrite: the router goes on). */
static int redirect_rule(exchange_t *ex, const sf_dir_t *d, const path_t *t)
{
    sf_caps_t caps;
    const sf_rule_t *r = sf_redirects_match(d->red, t->path, t->len, &caps);
    if (!r)
        return HANDLER_NOT_MINE;
    int redirect = r->status >= 300 && r->status < 400;
    if (!redirect && !r->force && exists(ex, t))
        return HANDLER_NOT_MINE; /* shadowed by the file */
    char to[HTTP_MAX_TARGET + 1], full[HTTP_MAX_TARGET + 1];
    long n = sf_subst(to, sizeof to, r->to, r->tolen, &caps);
    hbuf_t b = hb_init(full, sizeof full);
    hb_put(&b, to, n < 0 ? 0 : (size_t)n);
    if (r->status != 404 || redirect)
        keep_query(&b, to, t);
    char note[32];
    snprintf(note, sizeof note, "_redirects:%d", r->line);
    ex_log_note(ex->log_rule, note);
    if (n < 0 || !hb_str(&b))
        return answered(ex_error(ex, 414, NULL, NULL));
    if (redirect)
        return answered(ex_error(ex, r->status, "Location", full));
    if (r->status != 200)
        return answered(rule_page(ex, d, full, r->status));
    char dec[EX_PATH_CAP + 8];
    path_t p; /* the files answer the rest, and a path that does not parse (400) */
    if (path_from_target(full, hb_len(&b), dec, sizeof dec, &p) == 0) {
        if (control_file(p.path, p.len)) /* as for the client's own path */
            return answered(ex_error(ex, 404, NULL, NULL));
        if (locked(ex, d, p.path, p.len))
            return answered(lock_out(ex));
    }
    if (ex_retarget(ex, full, hb_len(&b)) < 0) /* a loop of rewrites cannot be: one pass */
        return answered(ex_error(ex, errno == EINVAL ? 400 : 500, NULL, NULL));
    return HANDLER_NOT_MINE;
}

/* The fields of _headers' blocks for t into ex's slot (copied: the table
   may change while the answer goes); Basic-Auth's are never sent. */
static int headers_for(exchange_t *ex, const sf_dir_t *d, const path_t *t)
{
    uint32_t idx[64];
    unsigned k = sf_headers_match(d->hdr, t->path, t->len, idx, 64);
    if (!k)
        return 0;
    sf_req_t *q = malloc(sizeof *q);
    if (!q)
        return -1;
    q->n = 0, q->used = 0;
    size_t names = 0;
    for (unsigned i = 0; i < k; i++) {
        const sf_block_t *bl = &d->hdr->b[idx[i]];
        sf_caps_t caps = {0};
        if (bl->pat.dynamic)
            sf_pat_match(&bl->pat, t->path, t->len, &caps);
        for (uint32_t j = 0; j < bl->n && q->n < SF_REQ_FIELDS; j++) {
            const sf_hfield_t *f = &d->hdr->f[bl->first + j];
            size_t nl = strlen(f->name) + 1;
            if (f->auth)
                continue;
            if (nl >= SF_REQ_BUF - q->used || (names += nl) > SF_REQ_NAMES)
                break;
            char *name = memcpy(q->buf + q->used, f->name, nl);
            long vl = f->detach ? 0 : sf_subst_keep(q->buf + q->used + nl,
                                                    SF_REQ_BUF - q->used - nl, f->value,
                                                    strlen(f->value), &caps, SF_FIELD_KEEP);
            if (vl < 0)
                break;
            q->op[q->n++] = (ex_field_t){name, f->detach ? NULL : q->buf + q->used + nl};
            q->used += nl + (f->detach ? 0 : (size_t)vl + 1);
        }
    }
    ex_slot_t *sl = hslot(ex, HSLOT_SITE);
    sl->p = q;
    sl->end = NULL;
    return 1;
}

static void req_end(exchange_t *ex, ex_slot_t *s)
{
    (void)ex;
    free(s->p);
    s->p = NULL;
}

static int sitefiles_serve(exchange_t *ex)
{
    ex_slot_t *sl = hslot(ex, HSLOT_SITE);
    if (sl->n) /* a local redirect routes again: the rules ran on the request */
        return HANDLER_NOT_MINE;
    sl->n = 1;
    path_t t;
    if (ex_path(ex, &t) != 0)
        return HANDLER_NOT_MINE; /* the files answer 400 */
    const sf_dir_t *d = dir_of(ex);
    if (d && d->hdr) {
        int r = headers_for(ex, d, &t);
        if (r < 0)
            return answered(ex_error(ex, 500, NULL, NULL));
        if (r)
            sl->end = req_end;
    }
    if (control_file(t.path, t.len)) /* never served: as if it were not there */
        return answered(ex_error(ex, 404, NULL, NULL));
    if (locked(ex, d, t.path, t.len))
        return answered(lock_out(ex));
    return d && d->red ? redirect_rule(ex, d, &t) : HANDLER_NOT_MINE;
}

/* The entry's streams (a rewrite's, handler.h): before router_streams asks
   the producers whether they take a request's body, a _redirects rule that
   rewrites ex's request (200) does so now, so that the body goes to the
   rewritten path's producer (a POST to a path that "/api/:op
   /cgi-bin/api.cgi 200" rewrites), not dropped as a file's request's would
   be.  Anything else is left to the entry's turn: 0, always. */
static int sitefiles_streams(exchange_t *ex)
{
    path_t t;
    if (hslot(ex, HSLOT_SITE)->n || !ex->req_len || ex_path(ex, &t) != 0 ||
        control_file(t.path, t.len))
        return 0; /* the entry answers it, in its turn */
    const sf_dir_t *d = dir_of(ex);
    sf_caps_t caps;
    const sf_rule_t *r = d && d->red ? sf_redirects_match(d->red, t.path, t.len, &caps) : NULL;
    if (r && r->status == 200) /* the rewrite (unless shadowed: serve asks), now; the */
        (void)sitefiles_serve(ex); /* entry's turn does nothing more */
    return 0;
}

/* ---- the hooks ---- */

/* Is name one whose several lines all go (a _headers value adds to the
   answer's, never replaces it)? */
static int list_field(const char *name)
{
    return !strcasecmp(name, "set-cookie") || !strcasecmp(name, "vary") ||
           !strcasecmp(name, "link");
}

void sitefiles_head(head_t *h, const exchange_t *ex)
{
    sf_req_t *q = ex->slot[HSLOT_SITE].p;
    if (!q)
        return;
    unsigned m = 0;
    for (unsigned i = 0; i < h->nfields && m < EX_FIELDS_MAX; i++, m++)
        q->merged[m] = h->fields[i];
    for (unsigned i = 0; i < q->n; i++) {
        const ex_field_t *op = &q->op[i];
        if (!strcasecmp(op->name, "content-type")) {
            h->ctype = op->value; /* NULL: detached */
            continue;
        }
        unsigned o = 0; /* drop what it detaches or replaces (an earlier block's too) */
        for (unsigned j = 0; j < m; j++)
            if (strcasecmp(q->merged[j].name, op->name) || (op->value && list_field(op->name)))
                q->merged[o++] = q->merged[j];
        m = o;
        if (op->value && m < EX_FIELDS_MAX)
            q->merged[m++] = *op;
    }
    h->fields = q->merged;
    h->nfields = m;
}

char *sitefiles_page(exchange_t *ex, int status, size_t *n)
{
    unsigned i = 0;
    while (i < NPAGES && pages[i] != status)
        i++;
    if (i == NPAGES || !ex->req || !ex->site)
        return NULL;
    const sf_dir_t *d = dir_of(ex);
    if (!d || !d->page[i])
        return NULL;
    char *p = malloc(d->pagelen[i] + 1);
    if (p)
        memcpy(p, d->page[i], d->pagelen[i]), *n = d->pagelen[i];
    return p;
}

/* ---- a loop's state ---- */

static int sf_init(site_t *s)
{
    sf_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "gatling: site files: out of memory\n");
        return -1;
    }
    siphash_key(st->key);
    hstate_set(s, HSTATE_SITEFILES, st);
    int64_t now = gio_wallclock(s->loop);
    int fd = s->cfg->vhosts && s->cfg->vhost_only ? -1 : dup(s->rootfd);
    if (fd >= 0) /* the root's site: read now, its bad lines said at start */
        dir_entry(s, st, "", fd, now), close(fd);
    if (!s->cfg->vhosts)
        return 0;
    DIR *dd = fdopendir(dup(s->rootfd)); /* the vhosts' directories, as the root's children */
    struct dirent *e;
    while (dd && (e = readdir(dd)) && st->ndirs < SF_DIRS_MAX / 2) {
        const char *n = e->d_name; /* a host's name ("example.org:80"), or default */
        fd = n[0] == '.' || (!strpbrk(n, ".:") && strcmp(n, "default"))
                 ? -1 : openat(s->rootfd, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0)
            dir_entry(s, st, n, fd, now), close(fd);
    }
    if (dd)
        closedir(dd);
    return 0;
}

static void sf_free(site_t *s)
{
    sf_state_t *st = hstate(s, HSTATE_SITEFILES);
    if (!st)
        return;
    for (unsigned i = 0; i < 256; i++)
        for (sf_dir_t *d = st->dirs[i], *next; d; d = next)
            next = d->next, dir_free(d);
    free(st);
    hstate_set(s, HSTATE_SITEFILES, NULL);
}

const handler_t sitefiles_handler = {
    .name = "_redirects, _headers", .phase = HANDLER_REWRITE, .serve = sitefiles_serve,
    .init = sf_init, .free = sf_free, .streams = sitefiles_streams,
};

/* ---- --check ---- */

/* --check names each block with Basic-Auth: its passwords lie in the file
   in plain text, and its paths answer 401 without them. */
static void auth_said(const sf_headers_t *h, const char *path)
{
    for (uint32_t i = 0; i < h->nb; i++)
        for (uint32_t j = 0; j < h->b[i].n; j++)
            if (h->f[h->b[i].first + j].auth)
                fprintf(stderr, "gatling: note: %s%s_headers:%d: Basic-Auth: the block's paths "
                        "answer 401 without one of its user:password pairs (kept in the file "
                        "in plain text; the field is never sent; gatling.8, SITE FILES)\n",
                        path, *path ? "/" : "", h->b[i].line);
}

int sitefiles_check(int dirfd, const char *path)
{
    int bad = 0;
    for (unsigned i = 0; i < 2; i++) {
        size_t n = 0;
        errno = 0;
        char *text = slurp(dirfd, file_names[i], i ? SF_HEADERS_FILE_MAX : SF_REDIRECTS_FILE_MAX,
                           &n, NULL, 0);
        bad_ctx_t c = {NULL, path, file_names[i], 0, 0};
        if (!text && errno == EFBIG)
            bad_line(&c, 0, "too large or not a file: not applied");
        if (text) {
            sf_redirects_t r;
            sf_headers_t h;
            if (!i && sf_redirects_parse(&r, text, n, bad_line, &c) == 0) {
                unread_said(&c, &r);
                sf_redirects_free(&r);
            }
            if (i && sf_headers_parse(&h, text, n, bad_line, &c) == 0) {
                auth_said(&h, path);
                sf_headers_free(&h);
            }
        }
        bad_done(&c);
        bad |= c.said || (!text && errno == EFBIG);
        free(text);
    }
    return bad ? -1 : 0;
}
