/*
 * Static files and directories: GET and HEAD below the document root.
 *
 * A request goes: path normalisation -> virtual host -> the open-file cache
 * (fcache.c) or, on a miss, lookup() which opens the file below the vhost
 * directory and learns what is needed to answer (type, .htaccess, siblings)
 * -> access control -> content coding -> conditionals -> ranges -> head and
 * body.  Everything a miss learns is cached for FCACHE_TTL_MS with the file.
 *
 * Only world-readable regular files are published (as in the original
 * gatling): a file that exists but lacks S_IROTH is 403, so a mistaken chmod
 * on the server never leaks a private file.  Dotfiles are never served.
 */
#define _GNU_SOURCE
#include "http/byterange.h"
#include "site/encoding.h"
#include "site/fs.h"
#include "router.h"
#include "http/hbuf.h"
#include "htaccess.h"
#include "site/jobs.h"
#include "site/peerlimits.h"
#include "listing.h"
#include "site/mime.h"
#include "http/owfat.h"
#include "http/path.h"
#include "http/response.h"
#include "site/site.h"
#include "conn/conn.h"
#include "status.h"
#include "site/vhost.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MAX (VHOST_NAME_MAX + CONN_PATH_CAP + 8)
#define EXTRA_MAX 1024 /* the extra header lines of a file response */

/* What one request is about, gathered once and passed along. */
typedef struct target {
    path_t p;
    char vhost[VHOST_NAME_MAX];
    char key[KEY_MAX]; /* vhost name + path: the fcache key */
    size_t keylen;
} target_t;

/* Status for a failed open: missing, forbidden, or we are out of descriptors. */
static int open_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR: return 404;
    case ENAMETOOLONG: return 414;
    case EMFILE:
    case ENFILE:
    case ENOMEM: return 503;
    default: return 403; /* EACCES, EXDEV (leaves the root), ELOOP, ... */
    }
}

/* The directory t's virtual host is served from (the caller closes it). */
static int open_vhost(const site_t *s, const target_t *t, int *which)
{
    const char *name = s->cfg->vhosts ? t->vhost : NULL;
    return vhost_open(s->rootfd, name, s->cfg->vhost_only, site_root_check(s), which);
}

/*
 * The vhost_combined log names the directory that served, host:port as
 * Apache's %v:%p: the vhost's own name, "default:port", or "-:port" for the
 * document root, so that goaccess's VCOMBINED format reads every line.
 */
static void log_vhost(conn_t *c, const target_t *t, int which)
{
    if (!c->site->cfg->log_vhost)
        return;
    hbuf_t b = hb_init(c->blk->vhost, sizeof c->blk->vhost);
    if (which == VHOST_NAMED) {
        hb_puts(&b, t->vhost);
    } else {
        hb_puts(&b, which == VHOST_DEFAULT ? "default:" : "-:");
        hb_num(&b, c->local_port);
    }
    if (!hb_str(&b)) /* cannot happen: names are VHOST_NAME_MAX, the buffer is larger */
        c->blk->vhost[0] = 0;
}

/*
 * A redirect to prefix + the encoded path (+ suffix) + the query.  A Location
 * that would not fit the response head (a long -r URL and a long path whose
 * bytes all need escaping) is refused as 414: the URI is what is too long.
 */
static int redirect(conn_t *c, int status, const char *prefix, const path_t *p, const char *suffix)
{
    size_t plen = strlen(prefix), cap = CONN_HEAD_CAP - 1024; /* room for the rest */
    char *loc = malloc(cap);
    if (!loc)
        return -1;
    hbuf_t b = hb_init(loc, cap);
    hb_puts(&b, "Location: ");
    hb_puts(&b, prefix);
    if (p->len) { /* a prefix URL ending in '/' gets no second slash */
        size_t skip = plen && prefix[plen - 1] == '/';
        hb_encode(&b, p->path + skip, p->len - skip, PATH_KEEP);
    }
    hb_puts(&b, suffix);
    if (p->query) {
        hb_puts(&b, "?");
        hb_put(&b, p->query, p->query_len);
    }
    hb_puts(&b, "\r\n");
    const char *extra = hb_str(&b);
    int r = extra ? resp_error(c, status, extra) : resp_error(c, 414, NULL);
    free(loc);
    return r;
}

/* A symlink whose target is a URL ("http://...") stands for a redirect to it. */
static int url_symlink(conn_t *c, int dirfd, const char *rel)
{
    char target[2048], loc[2100];
    ssize_t n = readlinkat(dirfd, *rel ? rel : ".", target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = 0;
    if (strncmp(target, "http://", 7) && strncmp(target, "https://", 8))
        return 0;
    for (ssize_t i = 0; i < n; i++)
        if ((unsigned char)target[i] <= ' ' || target[i] == 0x7f)
            return 0; /* never put a control character into a header */
    hbuf_t b = hb_init(loc, sizeof loc);
    hb_puts(&b, "Location: ");
    hb_put(&b, target, (size_t)n);
    hb_puts(&b, "\r\n");
    const char *extra = hb_str(&b); /* 2047 + 12 bytes always fit */
    return (extra ? resp_error(c, 301, extra) : resp_error(c, 500, NULL)) < 0 ? -1 : 1;
}

/* A directory's listing, generated fresh (never cached). */
static int serve_listing(conn_t *c, int dirfd, const target_t *t)
{
    char *page;
    size_t len;
    if (listing_render(dirfd, t->p.path, t->p.len, t->p.query, t->p.query_len, &page, &len) < 0)
        return resp_error(c, open_status(errno), NULL);
    int r = resp_head(c, 200, "text/html; charset=utf-8", len, -1,
                      "X-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n");
    if (r != 0 || c->head_only) {
        free(page);
        return r < 0 ? -1 : 0;
    }
    if (gio_batch_add_buf(&c->out, page, len, GIO_BATCH_FREE) < 0) {
        free(page);
        return -1;
    }
    return 0;
}

/*
 * Open the index of the directory open on *fd (replacing *fd), or answer
 * with a listing or 403.  Returns 0 with *fd the index file and *name its
 * name, 1 when a response was queued, -1 on failure.
 */
static int access_denied(conn_t *c, const http_request_t *req, const target_t *t, const char *path,
                         char **granted);

/*
 * Before an answer that would tell whether t exists (404, 403, 301, a
 * redirect): below a protected directory, a client without the right
 * credentials gets 401 whatever is there, or not.  0 to go on.
 */
static int guard(conn_t *c, const http_request_t *req, const target_t *t)
{
    return access_denied(c, req, t, t->p.path, NULL);
}

static int open_index(conn_t *c, const http_request_t *req, int *fd, const char **name,
                      const target_t *t)
{
    site_t *s = c->site;
    const char *names[] = {"index.html", s->cfg->index2};
    for (size_t i = 0; i < 2 && names[i]; i++) {
        int ifd = fs_open_beneath(*fd, names[i], site_root_check(s));
        if (ifd >= 0) {
            close(*fd);
            *fd = ifd, *name = names[i];
            return 0;
        }
    }
    int r;
    if (!s->cfg->listings) {
        if ((r = guard(c, req, t)) == 0)
            r = resp_error(c, 403, NULL);
    }
    else if ((r = access_denied(c, req, t, t->p.path, NULL)) == 0) /* .htaccess guards listings */
        r = serve_listing(c, *fd, t);
    close(*fd);
    *fd = -1;
    return r < 0 ? -1 : 1;
}

/* Miss: answer the error or redirect for a path that does not open. */
static int not_found(conn_t *c, int vfd, const target_t *t, int err)
{
    if (err == ENOENT || err == EXDEV) {
        int r = url_symlink(c, vfd, t->p.path + 1);
        if (r)
            return r < 0 ? -1 : 0;
    }
    if (open_status(err) == 503)
        site_error(c->site, "openat2()", err, &c->peer.sa, t->p.path);
    if (open_status(err) == 404 && c->site->cfg->redirect)
        return redirect(c, 302, c->site->cfg->redirect, &t->p, "");
    return resp_error(c, open_status(err), NULL);
}

/*
 * Which .htaccess governs the file open on fd?  The one on its URL path, and
 * also the one on the path symlinks really led to: a link in an open
 * directory must not be a way around a protected one.  Sets *auth to the
 * path to check credentials against (NULL: not protected).  Returns 0, 500
 * (an .htaccess cannot be read: fail closed) or -1 (ENOMEM).
 */
static int governing_htaccess(int vfd, int fd, const target_t *t, char **auth)
{
    char real[CONN_PATH_CAP + 16], realm[2];
    const char *paths[2] = {t->p.path, NULL};
    if (fs_path_below(vfd, fd, t->p.path + 1, real, sizeof real) == 0 && strcmp(real, t->p.path))
        paths[1] = real;
    *auth = NULL;
    for (int i = 0; i < 2 && paths[i]; i++) {
        int h = htaccess_check(vfd, paths[i], strlen(paths[i]), NULL, 0, realm, sizeof realm);
        if (h == 500)
            return 500;
        if (h == 401)
            return (*auth = strdup(paths[i])) ? 0 : -1;
    }
    return 0;
}

/*
 * Cache miss: open the file for t below its vhost directory and fill a cache
 * entry.  Returns the entry (referenced), or NULL when a response (error,
 * redirect, listing) was queued instead — *failed says if queuing failed.
 */
static fcache_entry_t *lookup(conn_t *c, const http_request_t *req, const target_t *t, int *failed)
{
    site_t *s = c->site;
    fcache_entry_t e = {.fd = -1};
    const char *name = NULL;
    int r = 0, which, vfd = open_vhost(s, t, &which);
    log_vhost(c, t, which);
    e.vhost_dir = which;
    *failed = 0;
    if (vfd < 0) { /* no directory serves it, or out of descriptors: 404 or 503 */
        int st = open_status(errno);
        if (st == 503)
            site_error(s, "openat2()", errno, &c->peer.sa, "the vhost directory");
        *failed = resp_error(c, st == 503 ? 503 : 404, NULL) < 0;
        return NULL;
    }
    int fd = fs_open_beneath(vfd, t->p.path + 1, site_root_check(s));
    if (fd < 0) {
        int err = errno;
        if ((r = guard(c, req, t)) == 0)
            r = not_found(c, vfd, t, err);
        goto done;
    }
    if (fstat(fd, &e.st) < 0)
        goto forbidden;
    if (S_ISDIR(e.st.st_mode)) {
        if (t->p.path[t->p.len - 1] != '/') {
            close(fd);
            if ((r = guard(c, req, t)) == 0)
                r = redirect(c, 301, "", &t->p, "/");
            goto done;
        }
        if ((r = open_index(c, req, &fd, &name, t)) != 0)
            goto done;
        if (fstat(fd, &e.st) < 0)
            goto forbidden;
    }
    if (!S_ISREG(e.st.st_mode) || !(e.st.st_mode & S_IROTH))
        goto forbidden;
    if ((r = governing_htaccess(vfd, fd, t, &e.auth)) != 0) {
        close(fd);
        if (r == 500)
            site_error(s, ".htaccess check", 0, &c->peer.sa, t->p.path);
        r = r == 500 ? resp_error(c, 500, NULL) : -1;
        goto done;
    }
    size_t rl = t->p.len - 1 + (name ? strlen(name) : 0);
    if (!(e.rel = malloc(rl + 1)))
        goto fail;
    snprintf(e.rel, rl + 1, "%s%s", t->p.path + 1, name ? name : "");
    e.protect = e.auth != NULL;
    e.fd = fd;
    e.type = mime_lookup(s->mime, e.rel, rl);
    e.siblings = s->cfg->gzip ? enc_siblings(vfd, e.rel, &e.st, ENC_ALL) : 0;
    enc_etag(e.etag, &e.st, ENC_IDENTITY);
    fcache_entry_t *f = fcache_put(s->fcache, t->key, t->keylen, &e, gio_now(s->loop));
    if (!f) {
        free(e.rel), free(e.auth);
        goto fail;
    }
    close(vfd);
    return f;
forbidden:
    close(fd);
    if ((r = guard(c, req, t)) == 0)
        r = resp_error(c, 403, NULL);
    goto done;
fail:
    close(fd);
    r = -1;
done:
    close(vfd);
    *failed = r < 0;
    return NULL;
}

/* The cache entry of the precompressed sibling `enc` of f (referenced), or NULL. */
static fcache_entry_t *sibling(conn_t *c, const target_t *t, const fcache_entry_t *f, int enc)
{
    site_t *s = c->site;
    char key[KEY_MAX + 8];
    size_t n = t->keylen;
    memcpy(key, t->key, n);
    key[n++] = 0; /* no request path contains a NUL: these keys are apart */
    size_t sl = strlen(enc_suffix(enc));
    if (sl > sizeof key - n)
        return NULL; /* cannot happen: suffixes are 3 bytes, the key has 8 spare */
    memcpy(key + n, enc_suffix(enc), sl);
    n += sl;
    fcache_entry_t *g = fcache_get(s->fcache, key, n, gio_now(s->loop));
    if (g)
        return g;
    fcache_entry_t e = {.type = f->type};
    int vfd = open_vhost(s, t, NULL);
    if (vfd < 0)
        return NULL;
    e.fd = enc_open_sibling(vfd, f->rel, &f->st, enc, &e.st);
    close(vfd);
    if (e.fd < 0)
        return NULL;
    enc_etag(e.etag, &e.st, enc); /* its own bytes, its own tag */
    if (!(g = fcache_put(s->fcache, key, n, &e, gio_now(s->loop))))
        close(e.fd);
    return g;
}

/* A date header's value, or -1 if absent or unparsable (then it is ignored). */
static time_t header_date(const http_request_t *req, const char *name)
{
    const http_str_t *v = http_header(req, name);
    char buf[64];
    time_t t;
    if (!v || v->n == 0 || v->n >= sizeof buf)
        return -1;
    memcpy(buf, v->p, v->n);
    buf[v->n] = 0;
    return scan_httpdate(buf, &t) == v->n ? t : -1;
}

/* RFC 9110 13.2.2: the preconditions in their order.  0, 304 or 412. */
static int preconditions(const http_request_t *req, const char *etag, time_t mtime)
{
    const http_str_t *im = http_header(req, "If-Match");
    const http_str_t *inm = http_header(req, "If-None-Match");
    time_t t;
    if (im) {
        if (!enc_etag_match(im->p, im->n, etag, 0))
            return 412;
    } else if ((t = header_date(req, "If-Unmodified-Since")) >= 0 && mtime > t) {
        return 412;
    }
    if (inm)
        return enc_etag_match(inm->p, inm->n, etag, 1) ? 304 : 0;
    if ((t = header_date(req, "If-Modified-Since")) >= 0 && mtime <= t)
        return 304;
    return 0;
}

/*
 * Does If-Range (absent: yes) let the Range header apply?  RFC 9110 13.1.5:
 * one entity-tag compared strongly (a weak tag, or a list, which the field
 * does not allow, never matches), or an HTTP-date equal to Last-Modified.
 */
static int if_range_ok(const http_request_t *req, const char *etag, time_t mtime)
{
    const http_str_t *ir = http_header(req, "If-Range");
    if (!ir)
        return 1;
    if (http_header_count(req, "If-Range") > 1)
        return 0;
    if (ir->n && (ir->p[0] == '"' || ir->p[0] == 'W'))
        return etag[0] == '"' && ir->n == strlen(etag) && !memcmp(ir->p, etag, ir->n);
    return header_date(req, "If-Range") == mtime; /* an exact Last-Modified */
}

/* The body: the whole of it, from a file or a buffer. */
typedef struct body {
    int fd; /* -1: buf */
    const char *buf;
    uint64_t size;
} body_t;

/* A cached file's bytes: from memory when it is held there (one send with the head). */
static body_t file_body(const fcache_entry_t *f)
{
    if (f->data)
        return (body_t){.fd = -1, .buf = f->data, .size = (uint64_t)f->st.st_size};
    return (body_t){.fd = f->fd, .size = (uint64_t)f->st.st_size};
}

static int add_part(conn_t *c, const body_t *b, uint64_t off, uint64_t len)
{
    if (b->fd >= 0)
        return gio_batch_add_file(&c->out, b->fd, off, len, 0);
    return gio_batch_add_buf(&c->out, b->buf + off, len, 0);
}

/* 206 with several ranges: multipart/byteranges (RFC 9110 14.6). */
static int serve_multipart(conn_t *c, const body_t *b, const char *type, time_t mtime,
                           const char *extra, const byterange_t *r, int n)
{
    char boundary[40], ctype[96];
    hbuf_t bb = hb_init(boundary, sizeof boundary);
    hb_puts(&bb, "gatling-");
    hb_num(&bb, b->size);
    hb_puts(&bb, "-");
    hb_num(&bb, (uint64_t)gio_now(c->site->loop));
    hbuf_t cb = hb_init(ctype, sizeof ctype);
    hb_puts(&cb, "multipart/byteranges; boundary=");
    hb_puts(&cb, hb_str(&bb) ? boundary : "");
    /* each part's head: delimiter, two fields, three numbers of 20 digits */
    size_t per = 128 + strlen(type) + 3 * 20 + sizeof boundary, cap = per * (size_t)(n + 1);
    char *heads = malloc(cap);
    if (!heads || !hb_str(&cb)) {
        free(heads);
        return heads ? resp_error(c, 500, NULL) : -1;
    }
    /* the closing delimiter goes first in the buffer: its chunk, sent last,
       owns the allocation, and gio_batch frees a buffer by its start */
    hbuf_t h = hb_init(heads, cap);
    hb_puts(&h, "\r\n--");
    hb_puts(&h, boundary);
    hb_puts(&h, "--\r\n");
    size_t closing = hb_len(&h), off[BYTERANGE_MAX + 1];
    uint64_t total = closing;
    for (int i = 0; i < n; i++) {
        off[i] = hb_len(&h);
        hb_puts(&h, i ? "\r\n--" : "--");
        hb_puts(&h, boundary);
        hb_puts(&h, "\r\nContent-Type: ");
        hb_puts(&h, type);
        hb_puts(&h, "\r\nContent-Range: bytes ");
        hb_num(&h, r[i].first);
        hb_puts(&h, "-");
        hb_num(&h, r[i].last);
        hb_puts(&h, "/");
        hb_num(&h, b->size);
        hb_puts(&h, "\r\n\r\n");
        total += r[i].last - r[i].first + 1;
    }
    off[n] = hb_len(&h);
    total += off[n] - closing;
    int rc = h.over ? resp_error(c, 500, NULL) : resp_head(c, 206, ctype, total, mtime, extra);
    for (int i = 0; !h.over && rc == 0 && !c->head_only && i < n; i++) {
        rc = gio_batch_add_buf(&c->out, heads + off[i], off[i + 1] - off[i], 0);
        if (rc == 0)
            rc = add_part(c, b, r[i].first, r[i].last - r[i].first + 1);
    }
    /* the last piece owns the buffer: chunks are released in order */
    if (!h.over && rc == 0 && !c->head_only &&
        gio_batch_add_buf(&c->out, heads, closing, GIO_BATCH_FREE) == 0)
        return 0;
    free(heads); /* HEAD, an error answered instead, or a failure before the owner was queued */
    return rc < 0 ? -1 : 0;
}

/* 200, 206 or 416 for body b, honouring Range. */
static int serve_body(conn_t *c, const http_request_t *req, const body_t *b, const char *type,
                      time_t mtime, const char *etag, hbuf_t *extra)
{
    const http_str_t *rh = http_header(req, "Range");
    byterange_t r[BYTERANGE_MAX];
    int n = 0;
    /* Range applies to GET only (RFC 9110 14.2); a repeated Range field is
       not a list we could combine, so it is ignored like an invalid one */
    if (rh && !c->head_only && http_header_count(req, "Range") == 1 &&
        if_range_ok(req, etag, mtime))
        n = byterange_parse(rh->p, rh->n, b->size, r, BYTERANGE_MAX);
    if (n == BYTERANGE_UNSATISFIABLE) { /* an error: none of the file's metadata */
        char cr[64];
        hbuf_t h = hb_init(cr, sizeof cr);
        hb_puts(&h, "Content-Range: bytes */");
        hb_num(&h, b->size);
        hb_puts(&h, "\r\n");
        return resp_error(c, 416, hb_str(&h)); /* 23 + 20 + 3 bytes always fit */
    }
    const char *ex = hb_str(extra);
    if (!ex)
        return resp_error(c, 500, NULL);
    if (n > 1)
        return serve_multipart(c, b, type, mtime, ex, r, n);
    uint64_t off = 0, len = b->size;
    int status = 200;
    if (n == 1) {
        off = r[0].first, len = r[0].last - r[0].first + 1, status = 206;
        hb_puts(extra, "Content-Range: bytes ");
        hb_num(extra, r[0].first);
        hb_puts(extra, "-");
        hb_num(extra, r[0].last);
        hb_puts(extra, "/");
        hb_num(extra, b->size);
        hb_puts(extra, "\r\n");
        if (!(ex = hb_str(extra)))
            return resp_error(c, 500, NULL);
    }
    int rc = resp_head(c, status, type, len, mtime, ex);
    if (rc != 0 || c->head_only || len == 0)
        return rc < 0 ? -1 : 0;
    return add_part(c, b, off, len);
}

/* A gzip compression for the request, on a worker thread. */
typedef struct gzip_job {
    conn_job_t cj; /* first: conn.c frees the whole struct */
    enc_gzjob_t *g;
} gzip_job_t;

static void gzip_work(job_t *j)
{
    enc_gzip_run(((gzip_job_t *)j)->g);
}

static void gzip_finish(conn_job_t *cj, conn_t *c)
{
    (void)c; /* the request finds the result in the cache when it is dispatched again */
    enc_gzip_end(((gzip_job_t *)cj)->g);
}

/*
 * The file is not gzipped yet: hand the compression to a worker thread and
 * let the request wait for it (1), or, if it is being compressed for another
 * request already or too much is in flight, serve identity (0).
 */
static int gzip_wait(conn_t *c, fcache_entry_t *f)
{
    gzip_job_t *z = calloc(1, sizeof *z);
    if (!z)
        return 0;
    if (!(z->g = enc_gzip_begin(c->site->gzcache, f->fd, &f->st))) {
        free(z);
        return 0;
    }
    z->cj.job.work = gzip_work;
    z->cj.finish = gzip_finish;
    c->job = &z->cj;
    return 1;
}

/* Serve the cached file f: coding, validators, preconditions, ranges. */
static int serve_file(conn_t *c, const http_request_t *req, const target_t *t, fcache_entry_t *f)
{
    site_t *s = c->site;
    const http_str_t *ae = http_header(req, "Accept-Encoding");
    unsigned avail = f->siblings;
    if (enc_gzip_eligible(s->gzcache, f->type, &f->st))
        avail |= ENC_GZIP;
    int enc = avail ? enc_choose(ae ? ae->p : NULL, ae ? ae->n : 0, avail) : ENC_IDENTITY;
    body_t b = file_body(f);
    time_t mtime = f->st.st_mtime; /* the representation's, whatever the coding */
    const char *type = f->type;
    char etag[ENC_ETAG_MAX], extra[EXTRA_MAX];
    c->file = f;
    if (enc != ENC_IDENTITY && (f->siblings & enc)) { /* a precompressed sibling */
        fcache_entry_t *g = sibling(c, t, f, enc);
        if (g) {
            fcache_release(f);
            c->file = g;
            b = file_body(g);
            memcpy(etag, g->etag, sizeof etag);
        } else {
            enc = ENC_IDENTITY; /* vanished since the miss: serve the file itself */
            memcpy(etag, f->etag, sizeof etag);
        }
    } else {
        if (enc == ENC_GZIP) { /* gzip on the fly, from the cache */
            if ((c->gz = enc_gzip_lookup(s->gzcache, &f->st))) {
                b = (body_t){.fd = -1, .buf = (const char *)c->gz->data, .size = c->gz->len};
            } else if (errno == ENOENT && !c->gzip_tried && gzip_wait(c, f)) {
                c->gzip_tried = 1; /* once per request: then identity */
                c->file = NULL;
                fcache_release(f);
                return 0;
            } else {
                enc = ENC_IDENTITY;
            }
        }
        if (enc)
            enc_etag(etag, &f->st, enc);
        else
            memcpy(etag, f->etag, sizeof etag);
    }
    /* first what a cache needs to update a stored response (all a 304 may
       carry, RFC 9110 15.4.5), then what describes these bytes; no printf
       on this path, it runs for every request */
    hbuf_t x = hb_init(extra, sizeof extra);
    hb_puts(&x, "ETag: ");
    hb_puts(&x, etag);
    hb_puts(&x, "\r\n");
    if (avail)
        hb_puts(&x, "Vary: Accept-Encoding\r\n");
    if (s->cfg->max_age >= 0) {
        hb_puts(&x, "Cache-Control: max-age=");
        hb_num(&x, (uint64_t)s->cfg->max_age);
        hb_puts(&x, "\r\nExpires: ");
        hb_date(&x, (time_t)(gio_wallclock(s->loop) + s->cfg->max_age));
        hb_puts(&x, "\r\n");
    }
    int pre = preconditions(req, etag, mtime);
    if (pre == 304) {
        const char *ex = hb_str(&x);
        return ex ? resp_head(c, 304, NULL, 0, mtime, ex) < 0 ? -1 : 0 : resp_error(c, 500, NULL);
    }
    if (pre == 412)
        return resp_error(c, 412, NULL);
    hb_puts(&x, "Accept-Ranges: bytes\r\nX-Content-Type-Options: nosniff\r\n");
    if (enc) {
        hb_puts(&x, "Content-Encoding: ");
        hb_puts(&x, enc_name(enc));
        hb_puts(&x, "\r\n");
    }
    return serve_body(c, req, &b, type, mtime, etag, &x);
}

/* Equal bytes, in a time that does not depend on where they differ. */
static int same_bytes(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* The password check of one request, on a worker thread (conn.h, jobs.h). */
typedef struct auth_job {
    conn_job_t cj; /* first: conn.c frees the whole struct */
    htaccess_pending_t p;
    int good;
} auth_job_t;

static void auth_work(job_t *j)
{
    auth_job_t *a = (auth_job_t *)j;
    a->good = htaccess_verify(&a->p);
}

static void auth_finish(conn_job_t *cj, conn_t *c)
{
    auth_job_t *a = (auth_job_t *)cj;
    explicit_bzero(&a->p, sizeof a->p); /* verify wiped the password, unless it never ran */
    if (c)
        c->auth_verdict = a->good ? AUTH_GOOD : AUTH_BAD;
}


/*
 * .htaccess: 0 to go on, 1 when a 401/500 was queued, 2 when the password
 * check was handed to a worker thread (c->job; the request is dispatched
 * again with c->auth_verdict set), or -1.  crypt costs tens of milliseconds:
 * it never runs on the loop.  *granted (if not NULL) remembers the last
 * Authorization value that passed for a cached file, so a page's assets,
 * which come with the same credentials, pay for it once per file and
 * second (the cache's lifetime), not once per request.
 */
static int access_denied(conn_t *c, const http_request_t *req, const target_t *t, const char *path,
                         char **granted)
{
    site_t *s = c->site;
    const http_str_t *auth = http_header(req, "Authorization");
    char realm[128], hdr[200];
    if (auth && granted && *granted && strlen(*granted) == auth->n &&
        same_bytes(*granted, auth->p, auth->n))
        return 0;
    if (c->auth_verdict == AUTH_GOOD) {
        limits_auth_ok(s->limits, &c->peer.sa, gio_now(s->loop));
        if (auth && granted) {
            free(*granted);
            *granted = strndup(auth->p, auth->n); /* NULL on ENOMEM: no harm */
        }
        return 0;
    }
    unsigned wait = limits_auth_wait(s->limits, &c->peer.sa, gio_now(s->loop));
    if (wait) { /* failing again and again: no password check for a while */
        s->stats.auth_throttled++;
        hbuf_t b = hb_init(hdr, sizeof hdr);
        hb_puts(&b, "Retry-After: ");
        hb_num(&b, wait);
        hb_puts(&b, "\r\n");
        const char *ex = hb_str(&b);
        return (ex ? resp_error(c, 429, ex) : resp_error(c, 500, NULL)) < 0 ? -1 : 1;
    }
    htaccess_pending_t p;
    int vfd = open_vhost(s, t, NULL);
    int h = vfd < 0 ? 500
                    : htaccess_prepare(vfd, path, strlen(path), auth ? auth->p : NULL,
                                       auth ? auth->n : 0, realm, sizeof realm, &p);
    if (vfd >= 0)
        close(vfd);
    /* the credentials' key for the memory of failures: path, NUL, value */
    char key[CONN_PATH_CAP + 1100];
    size_t pl = strlen(path), kl = 0;
    if (auth && pl + 1 + auth->n <= sizeof key) {
        memcpy(key, path, pl + 1);
        memcpy(key + pl + 1, auth->p, auth->n);
        kl = pl + 1 + auth->n;
    }
    if (h == HTACCESS_VERIFY && c->auth_verdict == AUTH_NONE && kl &&
        limits_cred_failed(s->limits, key, kl, gio_now(s->loop))) {
        s->stats.auth_remembered++; /* the same wrong password again: no hashing */
        c->auth_verdict = AUTH_BAD;
    } else if (h == HTACCESS_VERIFY && c->auth_verdict == AUTH_BAD) {
        limits_auth_failed(s->limits, &c->peer.sa, gio_now(s->loop));
        if (kl)
            limits_cred_note_failed(s->limits, key, kl, gio_now(s->loop));
    }
    if (h == HTACCESS_VERIFY && c->auth_verdict == AUTH_NONE) {
        auth_job_t *a = malloc(sizeof *a);
        if (a) {
            memset(a, 0, sizeof a->cj);
            a->p = p;
            a->cj.job.work = auth_work;
            a->cj.finish = auth_finish;
            c->job = &a->cj;
        }
        explicit_bzero(&p, sizeof p);
        return a ? 2 : -1;
    }
    if (h == HTACCESS_VERIFY) { /* the thread said no */
        explicit_bzero(&p, sizeof p);
        h = 401;
    }
    if (h == 0)
        return 0;
    if (h != 401) {
        site_error(s, ".htaccess check", 0, &c->peer.sa, path); /* unreadable or malformed */
        return resp_error(c, 500, NULL) < 0 ? -1 : 1;
    }
    hbuf_t b = hb_init(hdr, sizeof hdr);
    hb_puts(&b, "WWW-Authenticate: Basic realm=\"");
    hb_puts(&b, realm);
    hb_puts(&b, "\", charset=\"UTF-8\"\r\n");
    const char *ex = hb_str(&b); /* realm[128] + 50 bytes always fit */
    return (ex ? resp_error(c, 401, ex) : resp_error(c, 500, NULL)) < 0 ? -1 : 1;
}

/* Is any segment of the normalised path a dotfile ("/.x")? */
static int has_dotfile(const path_t *p)
{
    return memmem(p->path, p->len, "/.", 2) != NULL;
}

int static_serve(conn_t *c, const http_request_t *req)
{
    site_t *s = c->site;
    const config_t *cfg = s->cfg;
    target_t t;
    int st = path_from_target(req->target.p, req->target.n, c->blk->path, CONN_PATH_CAP, &t.p);
    if (st)
        return resp_error(c, st, NULL);
    if (has_dotfile(&t.p))
        return resp_error(c, 404, NULL);
    if (cfg->status_page && !strcmp(t.p.path, "/server-status")) {
        if (!status_is_loopback(&c->peer.sa))
            return resp_error(c, 403, NULL);
        return status_serve(c, t.p.query && t.p.query_len == 4 && !memcmp(t.p.query, "json", 4));
    }
    t.vhost[0] = 0;
    /* RFC 9112 3.2.2: an absolute-form target's authority overrides Host */
    const http_str_t *host = t.p.authority.p ? &t.p.authority : http_header(req, "Host");
    int vn = cfg->vhosts ? vhost_name(host, c->local_port, cfg->keep_host_port, t.vhost) : 0;
    if (vn < 0)
        return resp_error(c, 400, NULL);
    t.keylen = (size_t)vn;
    memcpy(t.key, t.vhost, t.keylen);
    memcpy(t.key + t.keylen, t.p.path, t.p.len);
    t.keylen += t.p.len;
    fcache_entry_t *f = fcache_get(s->fcache, t.key, t.keylen, gio_now(s->loop));
    if (!f) {
        int failed;
        if (!(f = lookup(c, req, &t, &failed)))
            return failed ? -1 : 0;
    } else {
        log_vhost(c, &t, f->vhost_dir);
    }
    if (f->protect) {
        int r = access_denied(c, req, &t, f->auth, &f->granted);
        if (r) {
            fcache_release(f);
            return r < 0 ? -1 : 0;
        }
    }
    return serve_file(c, req, &t, f);
}
