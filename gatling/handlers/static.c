/*
 * Static files and directories: GET and HEAD below the document root.
 *
 * A request goes: path normalisation -> virtual host -> the open-file cache
 * (fcache.c) or, on a miss, lookup() which opens the file below the vhost
 * directory and learns what is needed to answer (type, .htaccess, siblings)
 * -> access control (auth.c) -> content coding (gzip.c) -> conditionals
 * (http/conditional.c) -> ranges (ranges.c) -> head and body.  Everything a
 * miss learns is cached for FCACHE_TTL_MS with the file.
 *
 * Only what everyone may read is published, whoever runs the server (as in
 * the original gatling, and more): a world-readable regular file (S_IROTH)
 * every directory on whose way below the root is world-searchable (S_IXOTH),
 * the way symlinks lead included (fs_public, site/fs.h); a listing also
 * needs its directory world-readable.  Anything else that exists is 403, as
 * is whatever is missing behind a closed directory, so that a server run as
 * root answers as an unprivileged one would, and a mistaken chmod never
 * leaks a private file.  Dotfiles are never served, but for /.well-known/
 * (RFC 8615: path_hidden()).
 */
#define _GNU_SOURCE
#include "auth.h"
#include "dictionary.h"
#include "gzip.h"
#include "hints.h"
#include "ranges.h"
#include "redirect.h"
#include "static.h"
#include "target.h"
#include "htaccess.h"
#include "listing.h"
#include "http/conditional.h"
#include "http/hbuf.h"
#include "site/encoding.h"
#include "site/fs.h"
#include "site/mime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The vhost_combined log (and the JSON log's vhost) names the directory
   that served (vhost_log_name(): host:port as Apache's %v:%p). */
static void log_vhost(exchange_t *ex, const target_t *t, int which)
{
    if (ex->site->cfg->log_vhost || ex->site->cfg->log_json)
        vhost_log_name(which, t->vhost, ex->local_port, ex->vhost, sizeof ex->vhost);
}

/* A directory's listing, generated fresh (never cached). */
static int serve_listing(exchange_t *ex, int dirfd, const target_t *t, const fs_at_t *at)
{
    char *page;
    size_t len;
    if (listing_render(dirfd, at, t->p.path, t->p.len, t->p.query, t->p.query_len, &page, &len) <
        0)
        return ex_error(ex, open_status(errno), NULL, NULL);
    ex_field(ex, "X-Content-Type-Options", "nosniff");
    ex_field(ex, "Cache-Control", "no-cache");
    return ex_page(ex, "text/html; charset=utf-8", page, len);
}

/*
 * Before an answer that would tell whether t exists (404, 403, 301, a
 * redirect): below a protected directory, a client without the right
 * credentials gets 401 whatever is there, or not.  0 to go on.
 */
static int guard(exchange_t *ex, const target_t *t)
{
    return auth_check(ex, t->p.path, NULL);
}

/* 403, unless a protected directory must say 401 first.  > 0 when a
   response was queued (or the password check went to a worker, auth.h),
   -1 on failure. */
static int forbid(exchange_t *ex, const target_t *t)
{
    int r = guard(ex, t);
    if (r == 0)
        r = ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 1;
    return r;
}

/*
 * Open the index of the directory open on *fd (replacing *fd), or answer
 * with a listing or 403.  Returns 0 with *fd the index file and *name its
 * name, 1 when a response was queued, -1 on failure.
 */
static int open_index(exchange_t *ex, int *fd, const char **name, const target_t *t,
                      const fs_at_t *at)
{
    site_t *s = ex->site;
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
    if (!s->cfg->listings || !fs_public(at, t->p.path + 1, *fd, 0))
        r = forbid(ex, t);
    else if ((r = guard(ex, t)) == 0) /* .htaccess guards listings */
        r = serve_listing(ex, *fd, t, at);
    close(*fd);
    *fd = -1;
    return r < 0 ? -1 : 1;
}

/*
 * Miss: answer the error or redirect for a path that does not open.  What
 * is missing, or a URL symlink, behind a closed directory is 403, as for
 * what is there: the answer says nothing of what the directory holds.
 */
static int not_found(exchange_t *ex, int vfd, const target_t *t, const fs_at_t *at, int err)
{
    if ((open_status(err) == 404 || err == EXDEV) && !fs_public(at, t->p.path + 1, -1, FS_LINK) &&
        errno == EACCES)
        return ex_error(ex, 403, NULL, NULL);
    if (err == ENOENT || err == EXDEV) {
        int r = redirect_symlink(ex, vfd, t->p.path + 1);
        if (r)
            return r < 0 ? -1 : 0;
    }
    if (open_status(err) == 503)
        site_error(ex->site, "openat2()", err, ex->peer, t->p.path);
    if (open_status(err) == 404 && ex->site->cfg->redirect)
        return redirect_path(ex, 302, ex->site->cfg->redirect, &t->p, "");
    return ex_error(ex, open_status(err), NULL, NULL);
}

/*
 * Which .htaccess governs the file open on fd?  The one on its URL path, and
 * also the one on the path symlinks really led to: a link in an open
 * directory must not be a way around a protected one.  Sets *auth to the
 * path to check credentials against (NULL: not protected).  Returns 0, 403
 * (an Apache .htaccess denies it), 500 (an .htaccess cannot be read: fail
 * closed) or -1 (ENOMEM).
 */
static int governing_htaccess(int vfd, int fd, const target_t *t, char **auth)
{
    char real[EX_PATH_CAP + 16], realm[2];
    const char *paths[2] = {t->p.path, NULL};
    if (fs_path_below(vfd, fd, t->p.path + 1, real, sizeof real) == 0 && strcmp(real, t->p.path))
        paths[1] = real;
    *auth = NULL;
    for (int i = 0; i < 2 && paths[i]; i++) {
        int h = htaccess_check(vfd, paths[i], strlen(paths[i]), NULL, 0, realm, sizeof realm);
        if (h == 500 || h == 403)
            return h;
        if (h == 401)
            return (*auth = strdup(paths[i])) ? 0 : -1;
    }
    return 0;
}

/*
 * Open what t names below vfd, for a directory its index: 0 with *fd open,
 * *st its stat and *name the index's name (NULL: none); > 0 when a response
 * (error, redirect, listing) was queued instead, -1 on failure.
 */
static int open_target(exchange_t *ex, int vfd, const target_t *t, const fs_at_t *at, int *fd,
                       struct stat *st, const char **name)
{
    int r;
    *name = NULL;
    if ((*fd = fs_open_beneath(vfd, t->p.path + 1, site_root_check(ex->site))) < 0) {
        int err = errno;
        if ((r = guard(ex, t)) == 0)
            r = not_found(ex, vfd, t, at, err);
        return r < 0 ? -1 : 1;
    }
    if (fstat(*fd, st) < 0)
        goto forbidden;
    if (S_ISDIR(st->st_mode) && t->p.path[t->p.len - 1] != '/') {
        if (!fs_public(at, t->p.path + 1, *fd, FS_ANY)) /* a 301 would say it is there */
            goto forbidden;
        close(*fd);
        *fd = -1;
        if ((r = guard(ex, t)) == 0)
            r = redirect_path(ex, 301, "", &t->p, "/");
        return r < 0 ? -1 : 1;
    }
    if (S_ISDIR(st->st_mode)) {
        if ((r = open_index(ex, fd, name, t, at)) != 0)
            return r;
        if (fstat(*fd, st) < 0)
            goto forbidden;
    }
    return 0;
forbidden:
    close(*fd);
    *fd = -1;
    return forbid(ex, t);
}

/* Is path[0..n) a program of a handler's (a -P rule's, a CGI pattern's)? */
static int program(const site_t *s, const char *path, size_t n)
{
    return s->program && s->program(s, path, n);
}

/* A program's path reached the files (its host runs no rule for it: no
   .proxy there): 403, never its source, said once a second at most. */
static int program_refused(exchange_t *ex, const char *path)
{
    char why[EX_PATH_CAP + 160];
    snprintf(why, sizeof why, "%.*s: a program (a path or an extension a -P rule or a CGI "
             "pattern runs, or a backup copy of one) where no rule runs it: 403, not its source",
             EX_PATH_CAP, path);
    site_error(ex->site, "files", 0, ex->peer, why);
    return ex_error(ex, 403, NULL, NULL);
}

/* Is the directory t's index name a program? */
static int index_is_program(const site_t *s, const target_t *t, const char *name)
{
    char path[EX_PATH_CAP + 64];
    hbuf_t b = hb_init(path, sizeof path);
    hb_puts(&b, t->p.path), hb_puts(&b, name);
    return hb_str(&b) ? program(s, path, hb_len(&b)) : 1; /* (too long to be asked by name) */
}

/*
 * Cache miss: open the file for t below its vhost directory and fill a cache
 * entry, if it may be published.  Returns the entry (referenced), or NULL
 * when a response (error, redirect, listing) was queued instead — *failed
 * says if queuing failed.
 */
static fcache_entry_t *lookup(exchange_t *ex, const target_t *t, int *failed)
{
    site_t *s = ex->site;
    fcache_entry_t e = {.fd = -1};
    const char *name;
    int fd = -1, r = 0, which, vfd = target_dir(ex, &which);
    fs_at_t at = site_at(s, vhost_dir(which, t->vhost));
    log_vhost(ex, t, which);
    e.vhost_dir = which;
    *failed = 0;
    if (vfd < 0) { /* no directory serves it, or out of descriptors: 404 or 503 */
        int st = open_status(errno);
        if (st == 503)
            site_error(s, "openat2()", errno, ex->peer, "the vhost directory");
        *failed = ex_error(ex, st == 503 ? 503 : 404, NULL, NULL) < 0;
        return NULL;
    }
    if ((r = open_target(ex, vfd, t, &at, &fd, &e.st, &name)) != 0)
        goto done;
    size_t rl = t->p.len - 1 + (name ? strlen(name) : 0);
    if (!(e.rel = malloc(rl + 1)))
        goto fail;
    snprintf(e.rel, rl + 1, "%s%s", t->p.path + 1, name ? name : "");
    /* a program's file, by its name or as an index (router.c's index_rule
       runs that where a rule may): never its source; checked at a miss, a
       hit passed it */
    if (name ? index_is_program(s, t, name) : program(s, t->p.path, t->p.len)) {
        close(fd);
        r = program_refused(ex, t->p.path);
        goto done;
    }
    if (!S_ISREG(e.st.st_mode) || !fs_public(&at, e.rel, fd, 0)) {
        close(fd);
        r = forbid(ex, t);
        goto done;
    }
    if ((r = governing_htaccess(vfd, fd, t, &e.auth)) != 0) {
        close(fd);
        if (r == 500)
            site_error(s, ".htaccess check", 0, ex->peer, t->p.path);
        r = r == 500 || r == 403 ? ex_error(ex, r, NULL, NULL) : -1;
        goto done;
    }
    e.protect = e.auth != NULL;
    e.fd = fd;
    e.type = mime_lookup(s->mime, e.rel, rl);
    if (!strncmp(e.type, "text/html", 9))
        e.hints = hints_for(vfd, &at, e.rel, site_root_check(s));
    if (s->dict && !e.protect) /* RFC 9842 2.1: no dictionary from behind credentials */
        e.dict = dictionary_for(vfd, &at, e.rel, &e.st, site_root_check(s));
    /* a sibling is e.rel's name + ".br" etc. in its directory, with
       O_NOFOLLOW: the same way as e.rel's, so only its own mode counts */
    e.siblings = s->cfg->gzip ? enc_siblings(vfd, e.rel, &e.st, ENC_ALL) : 0;
    enc_etag(e.etag, &e.st, ENC_IDENTITY);
    fcache_entry_t *f = fcache_put(s->fcache, t->key, t->keylen, &e, gio_now(s->loop));
    if (!f) {
        free(e.auth), free(e.hints), free(e.dict);
        goto fail;
    }
    return f;
fail:
    close(fd);
    r = -1;
done:
    free(e.rel);
    *failed = r < 0;
    return NULL;
}

/* The cache entry of the precompressed sibling `enc` of f (referenced), or NULL. */
static fcache_entry_t *sibling(exchange_t *ex, const target_t *t, const fcache_entry_t *f, int enc)
{
    site_t *s = ex->site;
    char key[TARGET_KEY_MAX + 8];
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
    int vfd = target_dir(ex, NULL);
    if (vfd < 0)
        return NULL;
    e.fd = enc_open_sibling(vfd, f->rel, &f->st, enc, &e.st);
    if (e.fd < 0)
        return NULL;
    enc_etag(e.etag, &e.st, enc); /* its own bytes, its own tag */
    if (!(g = fcache_put(s->fcache, key, n, &e, gio_now(s->loop))))
        close(e.fd);
    return g;
}

/* A cached file's bytes: from memory when it is held there (one send with the head). */
static body_t file_body(const fcache_entry_t *f)
{
    if (f->data)
        return (body_t){.fd = -1, .buf = f->data, .size = (uint64_t)f->st.st_size};
    return (body_t){.fd = f->fd, .size = (uint64_t)f->st.st_size};
}

/* The coding to send f in, and its body and ETag.  Sets ex->file (and
   ex->gz); -1 when the request now waits for a gzip job (ex->job). */
static int choose_coding(exchange_t *ex, const target_t *t, fcache_entry_t *f, unsigned avail,
                         body_t *b, char *etag)
{
    site_t *s = ex->site;
    int d = dictionary_delta(ex, t, f, b, etag);
    if (d > 0)
        ex->file = f; /* held until sent, as for identity: the body is ex's own copy */
    if (d)
        return d < 0 ? -1 : ENC_DCZ;
    const http_str_t *ae = http_header(ex->req, "Accept-Encoding");
    /* a sibling the client takes first (what the admin made, maybe with a
       higher level), else the client's choice of what a worker can code */
    unsigned sib = avail & f->siblings;
    int enc = sib ? enc_choose(ae ? ae->p : NULL, ae ? ae->n : 0, sib) : ENC_IDENTITY;
    if (enc == ENC_IDENTITY && (avail & ~sib))
        enc = enc_choose(ae ? ae->p : NULL, ae ? ae->n : 0, avail);
    *b = file_body(f);
    ex->file = f;
    if (enc != ENC_IDENTITY && (f->siblings & enc)) { /* a precompressed sibling */
        fcache_entry_t *g = sibling(ex, t, f, enc);
        if (!g) { /* vanished since the miss: serve the file itself */
            memcpy(etag, f->etag, ENC_ETAG_MAX);
            return ENC_IDENTITY;
        }
        fcache_release(f);
        ex->file = g;
        *b = file_body(g);
        memcpy(etag, g->etag, ENC_ETAG_MAX);
        return enc;
    }
    if (enc != ENC_IDENTITY) { /* coded on the fly (a worker's job), from the cache */
        if ((ex->gz = enc_coded_lookup(s->gzcache, &f->st, enc))) {
            *b = (body_t){.fd = -1, .buf = (const char *)ex->gz->data, .size = ex->gz->len};
        } else if (errno == ENOENT && gzip_wait(ex, f, enc)) { /* once: then identity */
            ex->file = NULL;
            fcache_release(f);
            return -1;
        } else {
            enc = ENC_IDENTITY;
        }
    }
    if (enc)
        enc_etag(etag, &f->st, enc);
    else
        memcpy(etag, f->etag, ENC_ETAG_MAX);
    return enc;
}

/* Serve the cached file f: coding, validators, preconditions, ranges. */
static int serve_file(exchange_t *ex, const target_t *t, fcache_entry_t *f)
{
    site_t *s = ex->site;
    unsigned avail = f->siblings;
    if (enc_gzip_eligible(s->gzcache, f->type, &f->st))
        avail |= ENC_ALL; /* a sibling where there is one, else on the fly */
    body_t b;
    time_t mtime = f->st.st_mtime; /* the representation's, whatever the coding */
    const char *type = f->type;
    char etag[ENC_ETAG_MAX], max_age[32], expires[32];
    int dict = dictionary_indexed(ex, t, f);
    if (dict < 0)
        return 0; /* waits for its hash */
    const char *use = dict ? f->dict : NULL;
    int enc = choose_coding(ex, t, f, avail, &b, etag);
    if (enc < 0)
        return 0;
    /* first what a cache needs to update a stored response (all a 304 may
       carry, RFC 9110 15.4.5), then what describes these bytes; no printf
       on this path, it runs for every request */
    ex_field(ex, "ETag", etag);
    if (enc == ENC_DCZ)
        ex_field(ex, "Vary", "Accept-Encoding, Available-Dictionary");
    else if (avail)
        ex_field(ex, "Vary", "Accept-Encoding");
    if (use)
        ex_field(ex, "Use-As-Dictionary", use);
    if (s->cfg->max_age >= 0) {
        hbuf_t m = hb_init(max_age, sizeof max_age), e = hb_init(expires, sizeof expires);
        hb_puts(&m, "max-age=");
        hb_num(&m, (uint64_t)s->cfg->max_age);
        hb_date(&e, (time_t)(gio_wallclock(s->loop) + s->cfg->max_age));
        if (!hb_str(&m) || !hb_str(&e)) /* cannot happen: 8 + 20 and 29 bytes */
            return ex_error(ex, 500, NULL, NULL);
        ex_field(ex, "Cache-Control", max_age);
        ex_field(ex, "Expires", expires);
    }
    int pre = cond_preconditions(ex->req, etag, mtime, gio_wallclock(s->loop));
    if (pre == 304)
        return ex_head(ex, 304, NULL, 0, mtime) < 0 ? -1 : 0;
    if (pre == 412)
        return ex_error(ex, 412, NULL, NULL);
    if (f->hints && !ex->head_only && ex_hints(ex, f->hints) < 0)
        return -1;
    ex_field(ex, "Accept-Ranges", "bytes");
    ex_field(ex, "X-Content-Type-Options", "nosniff");
    if (enc)
        ex_field(ex, "Content-Encoding", enc == ENC_DCZ ? "dcz" : enc_name(enc));
    return ranges_serve(ex, &b, type, mtime, etag);
}

int static_serve(exchange_t *ex)
{
    site_t *s = ex->site;
    target_t t;
    int st = ex_path(ex, &t.p);
    if (st)
        return ex_error(ex, st, NULL, NULL);
    if (path_hidden(t.p.path, t.p.len))
        return ex_error(ex, 404, NULL, NULL);
    int vn = target_vhost(s, ex, t.vhost);
    if (vn < 0)
        return ex_error(ex, 400, NULL, NULL);
    t.keylen = (size_t)vn;
    memcpy(t.key, t.vhost, t.keylen);
    memcpy(t.key + t.keylen, t.p.path, t.p.len);
    t.keylen += t.p.len;
    fcache_entry_t *f = fcache_get(s->fcache, t.key, t.keylen, gio_now(s->loop));
    if (!f) {
        int failed;
        if (!(f = lookup(ex, &t, &failed)))
            return failed ? -1 : 0;
    } else {
        log_vhost(ex, &t, f->vhost_dir);
    }
    if (f->protect) {
        int r = auth_check(ex, f->auth, &f->granted);
        if (r) {
            fcache_release(f);
            return r < 0 ? -1 : 0;
        }
    }
    return serve_file(ex, &t, f);
}

static int get_or_head(exchange_t *ex)
{
    return http_method_is(ex->req, "GET") || http_method_is(ex->req, "HEAD");
}

/* (ex_head's EX_REPLACED, a 500 sent instead, is an answer: not HANDLER_NOT_MINE) */
static int static_route(exchange_t *ex)
{
    return static_serve(ex) < 0 ? -1 : 0;
}

const handler_t static_handler = {
    .name = "files", .phase = HANDLER_LAST, .match = get_or_head, .serve = static_route,
};
