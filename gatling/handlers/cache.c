/* The response cache in front of the dynamic handlers: see cache.h. */
#include "cache.h"
#include "cache_conf.h"
#include "cgi.h"
#include "http/byterange.h"
#include "http/cachectl.h"
#include "http/conditional.h"
#include "http/hbuf.h"
#include "http/owfat.h"
#include "proxy.h"
#include "site/rstore.h"
#include "site/jobs.h"
#include "site/site.h"
#include "site/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define TICK_MS 250

struct cfetch;

/* A client's request the cache answers over time: one waiting for a fetch's
   head, or served from an entry that is still being filled. */
typedef struct reader {
    exchange_t *ex;
    struct cache *c;
    rs_entry_t *e;    /* held: the entry it is served from; NULL while waiting */
    struct cfetch *f; /* the fetch it waits for (on f->waiters), or NULL */
    struct reader *prev, *next, **list;
    unsigned part; /* the next part of e to hand over */
    uint8_t owner; /* began f: may receive an unshareable answer */
    uint8_t head_sent;
    uint8_t whole; /* it waits for the complete body (a Range, a conditional) */
    uint8_t done;  /* its response is complete */
} reader_t;

enum { F_HEAD, F_STORE, F_PASS, F_DROP };

/* A fetch: an exchange of the cache's own, with no client. */
typedef struct cfetch {
    exchange_t ex; /* first */
    struct cache *c;
    http_request_t req;
    char *buf; /* the request's bytes */
    struct sockaddr_storage peer;
    rs_entry_t *e;     /* held: the entry it fills (RS_FILLING until its head) */
    rs_entry_t *stale; /* held: the stored response it revalidates, or NULL */
    reader_t *waiters; /* for its head */
    reader_t *owner;
    struct cfetch *prev, *next;
    int64_t began_ms, request_time;
    int64_t ttl, grace, errors; /* the vhost's settings when it began */
    int64_t lock_ms;            /* ... its waiters wait this long, then ask themselves */
    uint8_t mode;               /* F_* */
    uint8_t transient;          /* its 5xx goes to the waiters, stored for none */
    uint8_t finished;           /* nothing more comes: reap it */
} cfetch_t;

typedef struct cache {
    site_t *site;
    watch_t w;
    int fd; /* never readable: the watch's deadline is the cache's clock */
    rstore_t store;
    cfetch_t *fetches;
    int ticking;
    cache_vh_t vh[CACHE_CONF_VHOSTS];
} cache_t;

static const ex_producer_t reader_producer;
static int fetch_drops(const http_str_t *name);
static const ex_codec_t fetch_codec;

static int64_t now_s(cache_t *c)
{
    return gio_wallclock(c->site->loop);
}

static int64_t now_ms(cache_t *c)
{
    return gio_now(c->site->loop);
}

static void arm(cache_t *c, int64_t in_ms)
{
    gio_set_deadline(c->site->loop, c->fd, gio_now(c->site->loop) + in_ms);
    c->ticking = 1;
}

/* ---- keys and Vary ---- */

/* scheme, then the Host lower-cased without a default port or a final dot,
   then the target: "https\0example.org\0/a?b".  Length, or 0: not cached. */
static size_t make_key(const exchange_t *ex, char *k, size_t cap)
{
    const http_request_t *r = ex->req;
    const http_str_t *host = http_header(r, "Host");
    hbuf_t b = hb_init(k, cap);
    hb_put(&b, ex->secure ? "https" : "http", ex->secure ? 6 : 5);
    size_t hn = host ? host->n : 0;
    const char *hp = host ? host->p : "";
    const char *dflt = ex->secure ? ":443" : ":80";
    if (hn > strlen(dflt) && !memcmp(hp + hn - strlen(dflt), dflt, strlen(dflt)))
        hn -= strlen(dflt);
    if (hn && hp[hn - 1] == '.')
        hn--;
    if (hn > 255 || !r->target.n || r->target.p[0] != '/')
        return 0;
    for (size_t i = 0; i < hn; i++) {
        char ch = hp[i] >= 'A' && hp[i] <= 'Z' ? (char)(hp[i] + 32) : hp[i];
        hb_put(&b, &ch, 1);
    }
    hb_put(&b, "", 1);
    hb_put(&b, r->target.p, r->target.n);
    return b.over ? 0 : hb_len(&b);
}

/* The request's fields named name[0..n) as one normalised value into out
   (cap): "\x01" when there is none.  Length, or (size_t)-1: too long. */
static size_t vary_value(const http_request_t *r, const char *name, size_t n, char *out, size_t cap)
{
    char joined[2048];
    size_t jl = 0;
    int any = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        if (h->name.n != n || strncasecmp(h->name.p, name, n))
            continue;
        if (jl + 2 + h->value.n > sizeof joined)
            return (size_t)-1;
        if (any)
            memcpy(joined + jl, ", ", 2), jl += 2;
        memcpy(joined + jl, h->value.p, h->value.n), jl += h->value.n;
        any = 1;
    }
    if (!any) {
        if (cap < 1)
            return (size_t)-1;
        out[0] = 1;
        return 1;
    }
    return cc_vary_norm(joined, jl, out, cap);
}

/* Does r match the Vary values stored with e? */
static int vary_match(const rs_entry_t *e, const http_request_t *r)
{
    char v[2048];
    for (size_t i = 0; i < e->varylen;) {
        const char *name = e->vary + i;
        size_t nl = strlen(name);
        const char *val = name + nl + 1;
        size_t vl = strlen(val);
        size_t k = vary_value(r, name, nl, v, sizeof v);
        if (k != vl || memcmp(v, val, vl))
            return 0;
        i += nl + vl + 2;
    }
    return 1;
}

/* e's Vary block from the response's Vary value and the request r.  0, or -1:
   not storable (too many or too long). */
static int vary_store(cache_t *c, rs_entry_t *e, const char *v, const http_request_t *r)
{
    char blk[4096], val[2048];
    hbuf_t b = hb_init(blk, sizeof blk);
    size_t pos = 0, nl;
    const char *name;
    int n = 0;
    while ((nl = cc_vary_next(v, strlen(v), &pos, &name)) > 0) {
        size_t vl = vary_value(r, name, nl, val, sizeof val);
        if (vl == (size_t)-1 || ++n > 16 || fetch_drops(&(http_str_t){name, nl}))
            return -1; /* a field the fetch does not send: its value is not what the backend saw */
        for (size_t i = 0; i < nl; i++) {
            char ch = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] + 32) : name[i];
            hb_put(&b, &ch, 1);
        }
        hb_put(&b, "", 1), hb_put(&b, val, vl), hb_put(&b, "", 1);
    }
    if (b.over || (hb_len(&b) && !(e->vary = malloc(hb_len(&b)))) ||
        rs_charge(&c->store, e, hb_len(&b)) < 0)
        return -1;
    if (hb_len(&b))
        memcpy(e->vary, blk, hb_len(&b));
    e->varylen = hb_len(&b);
    return 0;
}

/* ---- serving a stored response ---- */

/* e's age in ms at now_ms (the loop's monotonic clock): its age when it
   came, and the time since.  Milliseconds, not seconds: a one-second
   micro-cache must last a second, not from 0 to 1 s by where a second
   boundary falls. */
static int64_t entry_age(const rs_entry_t *e, int64_t now_ms)
{
    int64_t a = e->initial_age * 1000 + (now_ms - e->stored_ms);
    return a < 0 ? 0 : a;
}

static int fresh(const rs_entry_t *e, int64_t now_ms)
{
    return entry_age(e, now_ms) < e->lifetime * 1000;
}

/* Within a window of secs past its freshness (not for must-revalidate). */
static int stale_within(const rs_entry_t *e, int64_t now, int64_t secs)
{
    return !e->must_revalidate && secs > 0 && entry_age(e, now) < (e->lifetime + secs) * 1000;
}

/* The stored fields onto ex, with Age and Cache-Status (age and cs live in
   the caller until its ex_head).  notmod: only those a 304 carries. */
static void put_fields(exchange_t *ex, const rs_entry_t *e, const char *age, const char *cs,
                       int notmod)
{
    static const char *const keep304[] = {"etag", "cache-control",    "expires",
                                          "vary", "content-location", "last-modified"};
    const char *p = e->head;
    for (unsigned i = 0; i < e->nfields; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        int ok = !notmod;
        for (size_t k = 0; !ok && k < sizeof keep304 / sizeof keep304[0]; k++)
            ok = !strcasecmp(name, keep304[k]);
        if (ok)
            ex_field(ex, name, value);
    }
    ex_field(ex, "Age", age);
    ex_field(ex, "Cache-Status", cs);
    ex->date = e->date[0] ? e->date : NULL;
}

/* The body parts of e from off, len bytes, onto ex (by reference: the
   caller holds e until ex ends).  0 or -1. */
static int put_body(exchange_t *ex, const rs_entry_t *e, uint64_t off, uint64_t len)
{
    for (unsigned i = 0; i < e->nparts && len; i++) {
        const rs_part_t *pt = &e->parts[i];
        if (off >= pt->n) {
            off -= pt->n;
            continue;
        }
        size_t k = pt->n - (size_t)off < len ? pt->n - (size_t)off : (size_t)len;
        if (ex_body_buf(ex, pt->p + off, k, 0) < 0)
            return -1;
        off = 0, len -= k;
    }
    return 0;
}

/* A 206 of one range, or 416, when Range asks for it and If-Range lets it:
   0 if the whole response is to go, else the result of the answer. */
static int serve_range(exchange_t *ex, const rs_entry_t *e, char *age, const char *cs, int *done)
{
    const http_str_t *rg = http_header(ex->req, "Range");
    *done = 0;
    if (!rg || e->status != 200 || ex->head_only ||
        !cond_if_range(ex->req, e->etag ? e->etag : "", e->mtime))
        return 0;
    byterange_t r[1];
    int n = byterange_parse(rg->p, rg->n, e->body_len, r, 1);
    if (n == 0)
        return 0;
    char cr[80];
    hbuf_t b = hb_init(cr, sizeof cr);
    *done = 1;
    if (n < 0) {
        hb_puts(&b, "bytes */"), hb_num(&b, e->body_len);
        return ex_error(ex, 416, "Content-Range", hb_str(&b));
    }
    hb_puts(&b, "bytes "), hb_num(&b, r[0].first), hb_puts(&b, "-"), hb_num(&b, r[0].last);
    hb_puts(&b, "/"), hb_num(&b, e->body_len);
    put_fields(ex, e, age, cs, 0);
    ex_field(ex, "Content-Range", hb_str(&b));
    int h = ex_head(ex, 206, e->ctype, r[0].last - r[0].first + 1, -1);
    if (h)
        return h < 0 ? -1 : 0;
    return put_body(ex, e, r[0].first, r[0].last - r[0].first + 1);
}

/* Answer ex from the complete entry e: 304/412 for its preconditions, a
   range, or the whole.  The caller holds e until ex ends.  0 or -1. */
static int serve_whole(exchange_t *ex, const rs_entry_t *e, const char *cs, int64_t now)
{
    char age[24];
    hbuf_t ab = hb_init(age, sizeof age);
    hb_num(&ab, (uint64_t)entry_age(e, now) / 1000);
    hb_str(&ab);
    /* no Last-Modified: the stored Date stands for it (RFC 9111 4.3.2) */
    time_t lm = e->mtime >= 0 ? e->mtime : (time_t)(e->response_time - e->initial_age);
    int pre = cond_preconditions(ex->req, e->etag ? e->etag : "\"\x7f\"", lm);
    if (pre == 412)
        return ex_error(ex, 412, NULL, NULL);
    if (pre == 304 && e->status == 200) {
        put_fields(ex, e, age, cs, 1);
        return ex_head(ex, 304, NULL, 0, -1) < 0 ? -1 : 0;
    }
    int done, r = serve_range(ex, e, age, cs, &done);
    if (done)
        return r;
    put_fields(ex, e, age, cs, 0);
    int h = ex_head(ex, e->status, e->ctype, e->body_len, -1);
    if (h)
        return h < 0 ? -1 : 0;
    return put_body(ex, e, 0, e->body_len);
}

/* A hit answered at once: ex holds e until it ends. */
static void hit_release(exchange_t *ex)
{
    rs_entry_t *e = ex->hold;
    cache_t *c = ex->site->cache;
    ex->hold = NULL;
    if (e && c)
        rs_release(&c->store, e);
}

static int serve_hit(cache_t *c, exchange_t *ex, rs_entry_t *e, const char *cs)
{
    rs_hold(e);
    ex->hold = e;
    ex->release = hit_release;
    return serve_whole(ex, e, cs, now_ms(c));
}

/* ---- readers ---- */

static void list_add(reader_t **list, reader_t *r)
{
    r->list = list;
    r->prev = NULL;
    r->next = *list;
    if (*list)
        (*list)->prev = r;
    *list = r;
}

static void list_del(reader_t *r)
{
    if (!r->list)
        return;
    *(r->prev ? &r->prev->next : r->list) = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->list = NULL;
    r->prev = r->next = NULL;
}

static void reader_free(reader_t *r)
{
    list_del(r);
    if (r->f && r->f->owner == r)
        r->f->owner = NULL;
    if (r->e)
        rs_release(&r->c->store, r->e);
    free(r);
}

/* r's exchange goes to the router again, past the cache (bypass) or for
   another look (a Vary that did not match). */
static void reader_redispatch(reader_t *r, int bypass)
{
    exchange_t *ex = r->ex;
    ex->producer = NULL;
    ex->pctx = NULL;
    reader_free(r);
    ex->cache_pass = (uint8_t)bypass;
    ex->date = NULL;
    ex->nfields = 0;
    ex->fields_over = 0;
    ex->codec->redispatch(ex);
}

static void reader_error(reader_t *r, int status, const exchange_t *from)
{
    r->done = 1;
    list_del(r);
    exchange_t *ex = r->ex;
    ex->nfields = 0, ex->fields_over = 0;
    ex->date = NULL;
    if (from && from->nfields == 1) /* Retry-After, Allow, ... */
        ex_field(ex, from->fields[0].name, from->fields[0].value);
    ex->codec->error(ex, status);
}

/* Send r the head of e (filling or complete) and what of its body is in. */
static void reader_start(reader_t *r, rs_entry_t *e, const char *cs, int64_t now)
{
    exchange_t *ex = r->ex;
    if (!r->e)
        rs_hold(e), r->e = e;
    list_del(r);
    if (e->state == RS_READY || e->state == RS_GONE) {
        r->done = 1;
        if (serve_whole(ex, e, cs, now) < 0 || ex_body_end(ex) < 0)
            ex_body_abort(ex);
        return;
    }
    if (http_header(ex->req, "Range") || http_header(ex->req, "If-None-Match") ||
        http_header(ex->req, "If-Modified-Since") || http_header(ex->req, "If-Match") ||
        http_header(ex->req, "If-Unmodified-Since")) {
        r->whole = 1; /* answered from the complete response */
        list_add((reader_t **)&e->readers, r);
        return;
    }
    char age[24];
    hbuf_t ab = hb_init(age, sizeof age);
    hb_num(&ab, (uint64_t)entry_age(e, now) / 1000);
    hb_str(&ab);
    put_fields(ex, e, age, cs, 0);
    int h = ex_head(ex, e->status, e->ctype, e->len, -1);
    if (h) {
        r->done = 1;
        if (h < 0)
            ex_body_abort(ex);
        return;
    }
    r->head_sent = 1;
    list_add((reader_t **)&e->readers, r);
    for (; r->part < e->nparts; r->part++)
        if (ex_body_buf(ex, e->parts[r->part].p, e->parts[r->part].n, 0) < 0) {
            list_del(r), r->done = 1;
            ex_body_abort(ex);
            return;
        }
}

/* The new parts of e to every reader streaming it; at the end, the end. */
static void readers_feed(cache_t *c, rs_entry_t *e, int end)
{
    int64_t now = now_ms(c);
    for (reader_t *r = e->readers, *next; r; r = next) {
        next = r->next;
        if (r->whole) {
            if (end)
                reader_start(r, e, "gatling; fwd=miss; collapsed", now);
            continue;
        }
        for (; r->part < e->nparts; r->part++)
            if (ex_body_buf(r->ex, e->parts[r->part].p, e->parts[r->part].n, 0) < 0)
                break;
        if (r->part < e->nparts || end) {
            list_del(r), r->done = 1;
            if (r->part < e->nparts || ex_body_end(r->ex) < 0)
                ex_body_abort(r->ex);
        }
    }
}

/* Every reader of e loses it: those that have a head see it cut, the
   others go to the backend themselves. */
static void readers_cut(rs_entry_t *e)
{
    for (reader_t *r = e->readers, *next; r; r = next) {
        next = r->next;
        if (r->head_sent) {
            list_del(r), r->done = 1;
            ex_body_abort(r->ex);
        } else {
            reader_redispatch(r, 1);
        }
    }
}

static size_t r_input(exchange_t *ex, const char *p, size_t n, int last)
{
    (void)ex, (void)p, (void)last;
    return n; /* a cached request has no body */
}

static void r_drained(exchange_t *ex)
{
    reader_t *r = ex->pctx;
    cfetch_t *f = r->f;
    if (f && f->mode == F_PASS && f->owner == r && f->ex.producer)
        f->ex.producer->drained(&f->ex);
}

static void fetch_finish(cfetch_t *f);

static void r_end(exchange_t *ex)
{
    reader_t *r = ex->pctx;
    cfetch_t *f = r->f;
    if (f && f->owner == r && f->mode == F_PASS) { /* nobody else wants it */
        f->mode = F_DROP;
        fetch_finish(f);
    }
    reader_free(r);
}

static const ex_producer_t reader_producer = {r_input, r_drained, r_end};

static reader_t *reader_new(cache_t *c, exchange_t *ex)
{
    reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ex = ex;
    r->c = c;
    ex->producer = &reader_producer;
    ex->pctx = r;
    return r;
}

/* ---- fetches ---- */

/* Request fields a fetch does not send: the cache answers conditionals and
   ranges itself; nothing unkeyed may change what the backend answers. */
static int fetch_drops(const http_str_t *name)
{
    /* clang-format off */
    static const char *const drop[] = {
        "range", "if-range", "if-none-match", "if-modified-since", "if-match",
        "if-unmodified-since", "cache-control", "pragma", "cookie", "content-length",
        "transfer-encoding", "expect", "x-http-method-override", "x-http-method",
        "x-method-override", "x-original-url", "x-rewrite-url", "x-forwarded-server",
        "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-scheme", "x-host",
        "surrogate-capability", "forwarded", "x-forwarded-for"};
    /* clang-format on */
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (name->n == strlen(drop[i]) && !strncasecmp(name->p, drop[i], name->n))
            return 1;
    return 0;
}

/* f's request: GET of ex's target with its fields less fetch_drops, plus
   the validators of stale.  0, or -1 (ENOMEM). */
static int fetch_request(cfetch_t *f, const exchange_t *ex, const rs_entry_t *stale)
{
    const http_request_t *o = ex->req;
    char lm[32] = "";
    if (stale && stale->mtime >= 0) {
        hbuf_t b = hb_init(lm, sizeof lm);
        hb_date(&b, stale->mtime);
        hb_str(&b);
    }
    size_t need = o->target.n + 64 + strlen(lm) + (stale && stale->etag ? strlen(stale->etag) : 0);
    for (size_t i = 0; i < o->nheaders; i++)
        need += o->headers[i].name.n + o->headers[i].value.n;
    if (!(f->buf = malloc(need)))
        return -1;
    char *p = f->buf;
    memcpy(p, o->target.p, o->target.n);
    f->req.method = (http_str_t){"GET", 3};
    f->req.target = (http_str_t){p, o->target.n};
    f->req.line = f->req.target;
    f->req.version = 11;
    p += o->target.n;
    for (size_t i = 0; i < o->nheaders && f->req.nheaders < HTTP_MAX_HEADERS - 3; i++) {
        const http_header_t *h = &o->headers[i];
        if (fetch_drops(&h->name))
            continue;
        http_header_t *d = &f->req.headers[f->req.nheaders++];
        memcpy(p, h->name.p, h->name.n), d->name = (http_str_t){p, h->name.n}, p += h->name.n;
        memcpy(p, h->value.p, h->value.n), d->value = (http_str_t){p, h->value.n};
        p += h->value.n;
    }
    f->req.headers[f->req.nheaders++] = /* who Surrogate-Control may speak to */
        (http_header_t){{"Surrogate-Capability", 20}, {"gatling=\"Surrogate/1.0\"", 23}};
    if (stale && stale->etag)
        f->req.headers[f->req.nheaders++] =
            (http_header_t){{"If-None-Match", 13}, {stale->etag, strlen(stale->etag)}};
    if (*lm) {
        memcpy(p, lm, strlen(lm));
        f->req.headers[f->req.nheaders++] =
            (http_header_t){{"If-Modified-Since", 17}, {p, strlen(lm)}};
    }
    return 0;
}

/* Run f's request through the handler that takes it.  0, or -1: none
   answered (the caller fails the fetch). */
static int fetch_route(cfetch_t *f)
{
    exchange_t *ex = &f->ex;
    int r = proxy_dispatch(ex);
    if (r == PROXY_NOT_MINE)
        r = cgi_serve(ex);
    if (ex->job) { /* a password check: not for a fetch, which has no credentials */
        ex_job_t *xj = ex->job;
        ex->job = NULL;
        xj->job.cancelled = 1;
        xj->finish(xj, NULL);
        free(xj);
        r = -1;
    }
    return r == 0 ? 0 : -1;
}

static void fetch_fail(cfetch_t *f, int status);

/* A fetch for ex's request, filling e (held), revalidating stale (or NULL):
   owner (or NULL: a background refresh) waits for it. */
static cfetch_t *fetch_start(cache_t *c, const exchange_t *ex, rs_entry_t *e, rs_entry_t *stale,
                             const cache_conf_t *k, reader_t *owner)
{
    cfetch_t *f = calloc(1, sizeof *f);
    if (!f || fetch_request(f, ex, stale) < 0) {
        free(f);
        return NULL;
    }
    exchange_t *fx = &f->ex;
    size_t plen =
        ex->peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    memcpy(&f->peer, ex->peer, plen);
    fx->req = &f->req;
    fx->secure = ex->secure;
    fx->local_port = ex->local_port;
    fx->peer = (struct sockaddr *)&f->peer;
    fx->site = c->site;
    fx->codec = &fetch_codec;
    fx->conn = f;
    fx->cache_pass = 1;
    f->c = c;
    f->e = e, rs_hold(e), e->fetch = f;
    if ((f->stale = stale))
        rs_hold(stale), stale->fetch = f;
    f->began_ms = gio_now(c->site->loop);
    f->request_time = now_s(c);
    f->ttl = cache_conf_ttl(k, ex->path[0] ? ex->path : "/");
    f->grace = k->grace;
    f->errors = k->errors;
    f->lock_ms = k->lock * 1000;
    if ((f->owner = owner))
        owner->owner = 1, owner->f = f, list_add(&f->waiters, owner);
    f->next = c->fetches;
    if (c->fetches)
        c->fetches->prev = f;
    c->fetches = f;
    if (!c->ticking)
        arm(c, TICK_MS);
    c->site->stats.cache_fetches++;
    if (fetch_route(f) < 0 && f->mode == F_HEAD && !f->finished)
        fetch_fail(f, 502);
    return f;
}

/* The fetch's exchange ends on the next tick: never from inside its
   handler's call. */
static void fetch_finish(cfetch_t *f)
{
    if (f->finished)
        return;
    f->finished = 1;
    if (f->e && f->e->fetch == f)
        f->e->fetch = NULL;
    if (f->stale && f->stale->fetch == f)
        f->stale->fetch = NULL;
    arm(f->c, 0);
}

static void fetch_free(cfetch_t *f)
{
    cache_t *c = f->c;
    ex_end(&f->ex);
    *(f->prev ? &f->prev->next : &c->fetches) = f->next;
    if (f->next)
        f->next->prev = f->prev;
    for (reader_t *r = f->waiters, *next; r; r = next) { /* none by now; to be sure */
        next = r->next;
        reader_redispatch(r, 1);
    }
    if (f->owner)
        f->owner->f = NULL;
    if (f->e) {
        if (f->e->state == RS_FILLING)
            rs_unlink(&c->store, f->e);
        rs_release(&c->store, f->e);
    }
    if (f->stale)
        rs_release(&c->store, f->stale);
    free(f->buf);
    free(f);
}

/* The waiters get the stale response (stale-if-error, or a 304 made it
   fresh again): each from the complete entry. */
static void waiters_serve(cfetch_t *f, rs_entry_t *e, const char *cs)
{
    int64_t now = now_ms(f->c);
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        r->f = NULL;
        reader_start(r, e, cs, now);
    }
    f->waiters = NULL;
    f->owner = NULL;
}

/* Is stale there and may it answer for a failed fetch? */
static int stale_if_error(cfetch_t *f)
{
    rs_entry_t *s = f->stale;
    /* stale-if-error's window, else grace: RFC 9111 4.2.4 lets a cache cut
       off from its origin answer stale, unless must-revalidate (stale_within) */
    int64_t win = s ? (s->sie > 0 ? s->sie : f->grace) : 0;
    return s && s->state == RS_READY && stale_within(s, now_ms(f->c), win);
}

/* The backend failed before a head (502, 504, a handler's error page). */
static void fetch_fail(cfetch_t *f, int status)
{
    if (stale_if_error(f)) {
        f->c->site->stats.cache_stale_errors++;
        waiters_serve(f, f->stale, "gatling; hit; detail=stale-if-error");
    } else {
        if (f->stale && f->stale->must_revalidate && status >= 500) /* RFC 9111 5.2.2.2 */
            status = 504;
        for (reader_t *r = f->waiters, *next; r; r = next) {
            next = r->next;
            r->f = NULL;
            reader_error(r, status, &f->ex);
        }
        f->waiters = NULL;
        f->owner = NULL;
    }
    f->mode = F_DROP;
    fetch_finish(f);
}

/* ---- the fetch's codec: its response comes here ---- */

/* The response's facts, from its fields. */
typedef struct resp_facts {
    cc_resp_t cc;
    const char *vary, *etag;
    int set_cookie, has_expires, has_lm;
    int64_t expires, age, date;
    time_t mtime;
    size_t headlen;
    unsigned nfields;
} resp_facts_t;

static int64_t field_date(const char *v)
{
    time_t t;
    size_t n = strlen(v);
    return n && scan_httpdate(v, &t) == n ? (int64_t)t : -1;
}

/* Fields the cache keeps to itself: Age (it makes its own), Surrogate-Control
   (meant for it, W3C Edge Architecture). */
static int unstored(const char *name)
{
    return !strcasecmp(name, "Age") || !strcasecmp(name, "Surrogate-Control");
}

/* Surrogate-Control v into cc: a directive targeted at a device (";name")
   counts only when the name is ours, which each fetch's
   Surrogate-Capability announces (W3C Edge Architecture 1.0). */
static int surrogate_parse(cc_resp_t *cc, const char *v)
{
    char clean[512];
    hbuf_t b = hb_init(clean, sizeof clean);
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ','), *semi;
        size_t n = end ? (size_t)(end - p) : strlen(p);
        semi = memchr(p, ';', n);
        int ours = !semi || ((size_t)(p + n - semi - 1) == 7 && !strncmp(semi + 1, "gatling", 7));
        if (ours)
            hb_put(&b, p, semi ? (size_t)(semi - p) : n), hb_puts(&b, ",");
        p += n + (end != NULL);
    }
    if (b.over || !hb_len(&b))
        return 0; /* nothing in it for us: Cache-Control speaks */
    cc_parse_resp(cc, clean, hb_len(&b));
    return 1;
}

static void facts(const exchange_t *ex, resp_facts_t *rf)
{
    cc_resp_t sc;
    int has_sc = 0;
    memset(rf, 0, sizeof *rf);
    cc_resp_init(&rf->cc);
    cc_resp_init(&sc);
    rf->expires = rf->age = CC_NONE;
    rf->mtime = -1;
    rf->date = ex->resp_date ? ex->resp_date : CC_NONE;
    for (unsigned i = 0; i < ex->nfields; i++) {
        const char *n = ex->fields[i].name, *v = ex->fields[i].value;
        if (!strcasecmp(n, "Age")) { /* not one delta-seconds: stale (RFC 9111 5.1) */
            rf->age = rf->age == CC_NONE ? cc_delta(v, strlen(v)) : CC_DELTA_MAX;
            rf->age = rf->age == CC_NONE ? CC_DELTA_MAX : rf->age;
        } else if (!strcasecmp(n, "Surrogate-Control"))
            has_sc |= surrogate_parse(&sc, v);
        if (unstored(n))
            continue;
        rf->headlen += strlen(n) + strlen(v) + 2;
        rf->nfields++;
        if (!strcasecmp(n, "Cache-Control"))
            cc_parse_resp(&rf->cc, v, strlen(v));
        else if (!strcasecmp(n, "Set-Cookie"))
            rf->set_cookie = 1;
        else if (!strcasecmp(n, "Vary"))
            rf->vary = rf->vary ? "*" : v; /* two Vary lines: not worth it */
        else if (!strcasecmp(n, "ETag"))
            rf->etag = v;
        else if (!strcasecmp(n, "Expires")) {
            int64_t t = field_date(v);
            rf->has_expires = 1;
            rf->expires = t < 0 ? 0 : t; /* an invalid Expires is in the past */
        } else if (!strcasecmp(n, "Last-Modified")) {
            int64_t t = field_date(v);
            rf->has_lm = t >= 0;
            rf->mtime = (time_t)t;
        }
    }
    if (has_sc) { /* it speaks to the cache in Cache-Control's place; private stays */
        sc.private_ |= rf->cc.private_;
        rf->cc = sc;
    }
}

/* Copy ex's fields (less Age) into e's head block. */
static int store_head(cache_t *c, rs_entry_t *e, const exchange_t *ex, const resp_facts_t *rf,
                      const char *ctype)
{
    size_t n = rf->headlen + (ctype ? strlen(ctype) + 1 : 0);
    if (n > CACHE_HEAD_MAX || rs_charge(&c->store, e, n) < 0 || !(e->head = malloc(n + 1)))
        return -1;
    char *p = e->head;
    for (unsigned i = 0; i < ex->nfields; i++) {
        const char *name = ex->fields[i].name, *v = ex->fields[i].value;
        if (unstored(name))
            continue;
        size_t nl = strlen(name) + 1, vl = strlen(v) + 1;
        memcpy(p, name, nl);
        memcpy(p + nl, v, vl);
        if (!strcasecmp(name, "ETag"))
            e->etag = p + nl;
        p += nl + vl;
        e->nfields++;
    }
    if (ctype)
        memcpy(p, ctype, strlen(ctype) + 1), e->ctype = p;
    e->headlen = n;
    return 0;
}

/* May this response be shared with other clients at all? */
static int shareable(const resp_facts_t *rf, int status)
{
    return !rf->set_cookie && !rf->cc.private_ && !rf->cc.no_store &&
           !(rf->vary && cc_vary_star(rf->vary, strlen(rf->vary))) && status >= 200 &&
           status != 206;
}

/* What HTTP and the vhost allow to be stored of it, with its lifetime. */
static int storable(cfetch_t *f, int status, uint64_t len, const resp_facts_t *rf, int64_t *life)
{
    int err = status >= 400;
    int64_t ttl = err ? f->errors : f->ttl;
    if (!shareable(rf, status) || status == 304 || (err && status != 404 && status != 410) ||
        (err && !f->errors) || (len != EX_LEN_STREAM && len > f->c->store.max_object))
        return 0;
    /* no-cache with a validator: stored, and revalidated (collapsed) at every use */
    if (!cc_storable(status, &rf->cc, rf->has_expires, rf->has_lm, 0, ttl) &&
        !(rf->cc.no_cache && (rf->etag || rf->has_lm) && cc_status_heuristic(status)))
        return 0;
    *life = cc_lifetime(&rf->cc, status, rf->date, rf->has_expires ? rf->expires : CC_NONE,
                        rf->has_lm ? rf->mtime : CC_NONE, now_s(f->c), ttl);
    if (err && *life > f->errors)
        *life = f->errors;
    return *life > 0 || rf->etag || rf->has_lm; /* else it could never be used */
}

/* The entry's times and rules from the response. */
static void entry_times(cfetch_t *f, rs_entry_t *e, const resp_facts_t *rf, int64_t life)
{
    int64_t now = now_s(f->c);
    e->stored_ms = now_ms(f->c);
    int64_t delay = (e->stored_ms - f->began_ms) / 1000; /* the fetch took, in whole seconds */
    e->request_time = now - delay;
    e->response_time = now;
    e->initial_age = cc_initial_age(rf->age, rf->date, e->request_time, now);
    e->lifetime = life;
    e->micro = rf->cc.max_age == CC_NONE && rf->cc.s_maxage == CC_NONE && !rf->has_expires;
    e->swr = rf->cc.stale_while_revalidate > 0 ? rf->cc.stale_while_revalidate
             : e->micro                        ? f->grace
                                               : 0;
    e->sie = rf->cc.stale_if_error > 0 ? rf->cc.stale_if_error : 0;
    e->must_revalidate = rf->cc.must_revalidate || rf->cc.no_cache;
}

/* The Date every answer from e carries: its origin's. */
static void entry_date(rs_entry_t *e, int64_t t)
{
    hbuf_t b = hb_init(e->date, sizeof e->date);
    hb_date(&b, (time_t)t);
    if (!hb_str(&b))
        e->date[0] = 0;
}

/* Fields a 304 does not change in the stored response (RFC 9111 3.2): its
   framing and coding, and what the cache keeps to itself or never shares. */
static int kept_on_update(const char *name)
{
    static const char *const keep[] = {"content-length", "content-encoding", "transfer-encoding",
                                       "content-range",  "set-cookie",       "etag",
                                       "content-md5"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (!strcasecmp(name, keep[i]))
            return 1;
    return unstored(name);
}

static int named_in(const exchange_t *ex, const char *name)
{
    for (unsigned i = 0; i < ex->nfields; i++)
        if (!strcasecmp(ex->fields[i].name, name))
            return 1;
    return 0;
}

/* Append name: value to the head block at *p; count it in e. */
static void head_put(rs_entry_t *e, char **p, const char *name, const char *value)
{
    size_t nl = strlen(name) + 1, vl = strlen(value) + 1;
    memcpy(*p, name, nl);
    memcpy(*p + nl, value, vl);
    if (!strcasecmp(name, "ETag"))
        e->etag = *p + nl;
    *p += nl + vl;
    e->nfields++;
}

/* s's stored fields with the 304's in place of those of the same names
   (RFC 9111 3.2), and its Content-Type if it sent one.  0, or -1: s is
   left as it was. */
static int head_update(cache_t *c, rs_entry_t *s, const exchange_t *ex, const char *ctype)
{
    size_t n = 0;
    const char *p = s->head;
    for (unsigned i = 0; i < s->nfields; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        if (kept_on_update(name) || !named_in(ex, name))
            n += (size_t)(p - name);
    }
    for (unsigned i = 0; i < ex->nfields; i++)
        if (!kept_on_update(ex->fields[i].name))
            n += strlen(ex->fields[i].name) + strlen(ex->fields[i].value) + 2;
    const char *ct = ctype ? ctype : s->ctype;
    n += ct ? strlen(ct) + 1 : 0;
    char *h;
    if (n > CACHE_HEAD_MAX || (n > s->headlen && rs_charge(&c->store, s, n - s->headlen) < 0) ||
        !(h = malloc(n + 1)))
        return -1;
    char *q = h, *old = s->head;
    unsigned nf = s->nfields;
    s->nfields = 0, s->etag = NULL;
    for (p = old; nf--;) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        if (kept_on_update(name) || !named_in(ex, name))
            head_put(s, &q, name, value);
    }
    for (unsigned i = 0; i < ex->nfields; i++)
        if (!kept_on_update(ex->fields[i].name))
            head_put(s, &q, ex->fields[i].name, ex->fields[i].value);
    s->ctype = NULL;
    if (ct) {
        memmove(q, ct, strlen(ct) + 1); /* ct may be in old: still there */
        s->ctype = q;
    }
    free(old);
    s->head = h;
    s->headlen = n > s->headlen ? n : s->headlen; /* what is counted */
    return 0;
}

/* A 304 to a revalidation: the stored response is fresh again, its fields
   updated from the 304's (RFC 9111 4.3.4). */
static void freshen(cfetch_t *f, rs_entry_t *s, const exchange_t *ex, const char *ctype)
{
    resp_facts_t rf;
    facts(ex, &rf);
    int explicit = rf.cc.max_age != CC_NONE || rf.cc.s_maxage != CC_NONE || rf.has_expires;
    head_update(f->c, s, ex, ctype);
    /* the stored response's rules, with what the 304 said of them */
    resp_facts_t now;
    exchange_t view = {.nfields = 0, .resp_date = ex->resp_date};
    const char *p = s->head;
    for (unsigned i = 0; i < s->nfields && view.nfields < EX_FIELDS_MAX; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        view.fields[view.nfields++] = (ex_field_t){name, value};
    }
    facts(&view, &now);
    now.age = rf.age;
    if (now.has_lm)
        s->mtime = now.mtime;
    int64_t life =
        cc_lifetime(&now.cc, s->status, now.date, now.has_expires ? now.expires : CC_NONE,
                    now.has_lm ? now.mtime : CC_NONE, now_s(f->c), f->ttl);
    if (!explicit && s->micro && f->ttl > 0)
        life = f->ttl;
    entry_times(f, s, &now, life);
    entry_date(s, now.date != CC_NONE ? now.date : s->response_time);
    f->c->site->stats.cache_revalidated++;
}

static void to_pass(cfetch_t *f, int status, const char *ctype, uint64_t len, time_t mtime,
                    int mark);

static void fetch_stored(cfetch_t *f, int status, const char *ctype, uint64_t len,
                         const resp_facts_t *rf, int64_t life)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    if (vary_store(c, e, rf->vary ? rf->vary : "", &f->req) < 0 ||
        store_head(c, e, &f->ex, rf, ctype) < 0) {
        to_pass(f, status, ctype, len, -1, 1);
        return;
    }
    e->status = status;
    e->mtime = rf->mtime;
    e->len = len;
    entry_times(f, e, rf, life);
    entry_date(e, rf->date != CC_NONE ? rf->date : e->response_time);
    f->mode = F_STORE;
    int64_t now = now_ms(c);
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        if (r != f->owner)
            r->f = NULL;
        if (!vary_match(e, r->ex->req)) {
            reader_redispatch(r, 0);
            continue;
        }
        reader_start(r, e, r->owner ? "gatling; fwd=miss; stored" : "gatling; fwd=miss; collapsed",
                     now);
    }
    f->waiters = NULL;
}

/* The response may not be stored: the owner gets it, the other waiters go
   to the backend themselves.  mark: it may not be shared at all (Set-Cookie,
   private, ...): the key is "pass" for a while, so that the next requests
   do not queue behind each other; a 4xx (maybe provoked by one request's
   fields) leaves no mark. */
static void to_pass(cfetch_t *f, int status, const char *ctype, uint64_t len, time_t mtime,
                    int mark)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    readers_cut(e); /* none unless the head was stored */
    e->fetch = NULL;
    if (mark) {
        e->state = RS_PASS;
        e->pass_until = now_s(c) + CACHE_PASS_SECS;
    } else {
        rs_unlink(&c->store, e); /* f still holds it */
    }
    c->site->stats.cache_passes++;
    reader_t *o = f->owner;
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        if (r != o)
            reader_redispatch(r, 1);
    }
    if (!o) {
        f->mode = F_DROP;
        fetch_finish(f);
        return;
    }
    list_del(o);
    f->mode = F_PASS;
    exchange_t *ox = o->ex;
    ox->nfields = 0;
    for (unsigned i = 0; i < f->ex.nfields; i++)
        if (strcasecmp(f->ex.fields[i].name, "Surrogate-Control"))
            ex_field(ox, f->ex.fields[i].name, f->ex.fields[i].value);
    ex_field(ox, "Cache-Status", "gatling; fwd=miss; detail=pass");
    int h = ex_head(ox, status, ctype, len, mtime);
    o->head_sent = 1;
    if (h) {
        o->done = 1;
        f->mode = F_DROP;
        fetch_finish(f);
    }
}

static int fx_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode != F_HEAD)
        return -1;
    ex->status = (uint16_t)status;
    if (status < 200) /* 1xx: a tunnel (no Upgrade is sent) or nothing */
        return -1;
    if (f->stale && status == 304) {
        freshen(f, f->stale, ex, ctype);
        waiters_serve(f, f->stale, "gatling; fwd=stale; fwd-status=304");
        f->mode = F_DROP;
        fetch_finish(f);
        return 0;
    }
    if (status >= 500 && stale_if_error(f)) {
        fetch_fail(f, status);
        return -1;
    }
    resp_facts_t rf;
    facts(ex, &rf);
    if (rf.mtime < 0 && mtime >= 0)
        rf.mtime = mtime, rf.has_lm = 1;
    int64_t life = 0;
    if (storable(f, status, len, &rf, &life)) {
        fetch_stored(f, status, ctype, len, &rf, life);
    } else if (status >= 500 && shareable(&rf, status)) {
        f->transient = 1; /* a failing backend's answer: one for all who wait */
        fetch_stored(f, status, ctype, len, &rf, 0);
    } else {
        to_pass(f, status, ctype, len, mtime, status < 400 || !shareable(&rf, status));
    }
    if (f->mode == F_STORE && f->stale && !f->transient) /* a new response replaces the old */
        rs_unlink(&f->c->store, f->stale);
    return f->mode == F_DROP ? -1 : 0;
}

static int fx_error(exchange_t *ex, int status)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_HEAD)
        fetch_fail(f, status);
    else if (f->mode == F_PASS && f->owner)
        reader_error(f->owner, status, ex), f->mode = F_DROP, fetch_finish(f);
    return 0;
}

/* Over the per-object cap while storing: the owner (if it streams) goes on
   without the cache, the other readers are cut, the key passes. */
static void store_overflow(cfetch_t *f)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    reader_t *o = f->owner && f->owner->list == (reader_t **)&e->readers && f->owner->head_sent &&
                          f->owner->part == e->nparts
                      ? f->owner
                      : NULL;
    if (o)
        list_del(o);
    readers_cut(e);
    e->state = RS_PASS;
    e->pass_until = now_s(c) + CACHE_PASS_SECS;
    e->fetch = NULL;
    c->site->stats.cache_passes++;
    if (o) {
        o->f = f;
        f->mode = F_PASS;
    } else {
        f->mode = F_DROP;
        fetch_finish(f);
    }
}

static int fx_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        return ex_body_buf(f->owner->ex, p, n, flags);
    if (f->mode != F_STORE || !n) {
        if (flags & EX_FREE)
            free((void *)p);
        return f->mode == F_DROP ? -1 : 0;
    }
    char *q = (char *)p;
    if (!(flags & EX_FREE) && (q = malloc(n)))
        memcpy(q, p, n);
    if (!q || rs_append(&f->c->store, f->e, q, n) < 0) { /* q is still ours */
        store_overflow(f);
        if (f->mode == F_PASS) {
            if (!q && (q = malloc(n)))
                memcpy(q, p, n);
            return q ? ex_body_buf(f->owner->ex, q, n, EX_FREE) : -1;
        }
        free(q);
        return -1;
    }
    readers_feed(f->c, f->e, 0);
    return 0;
}

static int fx_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    (void)fd, (void)off, (void)len;
    fx_error(ex, 502); /* no handler in front of the cache sends files */
    return -1;
}

static int fx_misdirected(exchange_t *ex, const char *host, size_t n)
{
    (void)ex, (void)host, (void)n;
    return 0;
}

/* The response is complete: the entry serves hits from now on. */
static void entry_ready(cache_t *c, rs_entry_t *e)
{
    e->state = RS_READY;
    unsigned n = 0;
    for (rs_entry_t *o = rs_first(&c->store, e->hash, e->key, e->klen), *next; o; o = next) {
        next = rs_next(o);
        if (o == e)
            continue;
        int same = o->state == RS_READY && o->varylen == e->varylen &&
                   (!o->varylen || !memcmp(o->vary, e->vary, o->varylen));
        if (same || o->state == RS_PASS || (o->state == RS_READY && ++n >= CACHE_VARIANTS))
            rs_unlink(&c->store, o);
    }
}

static int fx_body_end(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner) {
        f->owner->done = 1;
        ex_body_end(f->owner->ex);
    } else if (f->mode == F_STORE && f->transient) {
        rs_unlink(&f->c->store, f->e); /* its readers hold it to the end */
        readers_feed(f->c, f->e, 1);
    } else if (f->mode == F_STORE) {
        entry_ready(f->c, f->e);
        f->c->site->stats.cache_stored++;
        readers_feed(f->c, f->e, 1);
    }
    f->mode = F_DROP;
    fetch_finish(f);
    return 0;
}

static void fx_body_abort(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        ex_body_abort(f->owner->ex);
    else if (f->mode == F_STORE) {
        rs_unlink(&f->c->store, f->e);
        readers_cut(f->e);
    } else if (f->mode == F_HEAD)
        fetch_fail(f, 502);
    f->mode = F_DROP;
    fetch_finish(f);
}

/* Storing: the entry takes what comes (bounded by the object cap); passing
   to the owner: its client's pace. */
static uint64_t fx_queued(const exchange_t *ex)
{
    const cfetch_t *f = (const cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        return ex_queued(f->owner->ex);
    return f->mode == F_DROP ? UINT64_MAX : 0;
}

static void fx_input_ready(exchange_t *ex)
{
    (void)ex;
}

/* A CGI's local redirect: the fetch is routed again at once, when a backend
   or CGI answers the new path; else (a file, a listing) every waiter asks
   itself, past the cache, and the URL is "pass". */
static void fx_redispatch(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (!proxy_streams(ex) && !cgi_match(ex)) {
        rs_entry_t *e = f->e;
        e->state = RS_PASS;
        e->pass_until = now_s(f->c) + CACHE_PASS_SECS;
        e->fetch = NULL;
        for (reader_t *r = f->waiters, *next; r; r = next) {
            next = r->next;
            reader_redispatch(r, 1);
        }
        f->mode = F_DROP;
        fetch_finish(f);
        return;
    }
    if (fetch_route(f) < 0 && f->mode == F_HEAD && !f->finished)
        fetch_fail(f, 502);
}

static const ex_codec_t fetch_codec = {
    .head = fx_head,
    .error = fx_error,
    .body_buf = fx_body_buf,
    .body_file = fx_body_file,
    .misdirected = fx_misdirected,
    .body_end = fx_body_end,
    .body_abort = fx_body_abort,
    .queued = fx_queued,
    .input_ready = fx_input_ready,
    .redispatch = fx_redispatch,
};

/* ---- the clock: finished fetches, lock timeouts, idle entries ---- */

static void tick(watch_t *w, unsigned events)
{
    cache_t *c = (cache_t *)((char *)w - offsetof(cache_t, w));
    (void)events;
    c->ticking = 0;
    int64_t now = gio_now(c->site->loop);
    for (cfetch_t *f = c->fetches, *next; f; f = next) {
        next = f->next;
        if (f->finished) {
            fetch_free(f);
            continue;
        }
        if (f->waiters && now - f->began_ms >= f->lock_ms) { /* the lock times out */
            for (reader_t *r = f->waiters, *rn; r; r = rn) {
                rn = r->next;
                if (r == f->owner)
                    continue;
                c->site->stats.cache_lock_timeouts++;
                reader_redispatch(r, 1);
            }
        }
    }
    rs_sweep(&c->store, now);
    if (c->fetches)
        arm(c, TICK_MS);
    else if (c->store.entries)
        arm(c, 1000);
}

/* ---- the router's step ---- */

static void ban_one(rstore_t *s, rs_entry_t *e, void *arg)
{
    (void)arg;
    if (e->state != RS_FILLING)
        rs_unlink(s, e);
}

/* Every stored response of key[0..n) goes (an unsafe method, a PURGE). */
static size_t invalidate(cache_t *c, const char *key, size_t n)
{
    size_t k = 0;
    uint32_t h = rs_hash(key, n);
    for (rs_entry_t *e = rs_first(&c->store, h, key, n), *next; e; e = next) {
        next = rs_next(e);
        if (e->state != RS_FILLING)
            rs_unlink(&c->store, e), k++;
    }
    return k;
}

/* PURGE of a URL (both schemes), or with a final '*' of every URL below. */
static int purge(cache_t *c, exchange_t *ex, const cache_conf_t *k, char *key, size_t n)
{
    if (!cache_conf_purger(k, ex->peer))
        return ex_error(ex, 403, NULL, NULL);
    size_t purged = 0;
    for (int scheme = 0; scheme < 2; scheme++) {
        size_t off = scheme ? 5 : 6; /* "https\0" or "http\0" */
        char alt[RS_KEY_MAX + 8];
        memcpy(alt, scheme ? "http" : "https", off);
        memcpy(alt + off, key + (ex->secure ? 6 : 5), n - (ex->secure ? 6 : 5));
        size_t an = off + n - (ex->secure ? 6 : 5);
        if (an && alt[an - 1] == '*')
            purged += rs_each_prefix(&c->store, alt, an - 1, ban_one, NULL);
        else
            purged += invalidate(c, alt, an);
    }
    c->site->stats.cache_purges++;
    char *page = malloc(64);
    if (!page)
        return -1;
    hbuf_t b = hb_init(page, 64);
    hb_puts(&b, "purged "), hb_num(&b, purged), hb_puts(&b, "\n");
    return ex_page(ex, "text/plain", page, hb_len(&b));
}

/* An unsafe method's success invalidates its URI (RFC 9111 4.4): the
   codec's head is watched.  */
typedef struct inval {
    ex_codec_t codec;
    const ex_codec_t *orig;
    cache_t *c;
    size_t n;
    char key[];
} inval_t;

/* Location or Content-Location v of a response to the request of key[0..n):
   the URI it names on the same origin, invalidated too (RFC 9111 4.4). */
static void invalidate_named(cache_t *c, const char *key, size_t n, const char *v)
{
    size_t scheme = strlen(key), host = strlen(key + scheme + 1), pre = scheme + host + 2;
    char k[RS_KEY_MAX];
    const char *path = NULL;
    if (v[0] == '/' && v[1] != '/') {
        path = v;
    } else if (!strncasecmp(v, key, scheme) && !strncmp(v + scheme, "://", 3) &&
               !strncasecmp(v + scheme + 3, key + scheme + 1, host) &&
               v[scheme + 3 + host] == '/') {
        path = v + scheme + 3 + host;
    }
    size_t pl = path ? strlen(path) : 0;
    if (!path || pre + pl > sizeof k || pre > n)
        return;
    memcpy(k, key, pre);
    memcpy(k + pre, path, pl);
    invalidate(c, k, pre + pl);
}

static int inval_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    inval_t *iv = ex->hold;
    if (status >= 200 && status < 400) {
        invalidate(iv->c, iv->key, iv->n);
        for (unsigned i = 0; i < ex->nfields; i++)
            if (!strcasecmp(ex->fields[i].name, "Location") ||
                !strcasecmp(ex->fields[i].name, "Content-Location"))
                invalidate_named(iv->c, iv->key, iv->n, ex->fields[i].value);
    }
    return iv->orig->head(ex, status, ctype, len, mtime);
}

static void inval_release(exchange_t *ex)
{
    inval_t *iv = ex->hold;
    ex->codec = iv->orig;
    ex->hold = NULL;
    free(iv);
}

static int watch_unsafe(cache_t *c, exchange_t *ex, const char *key, size_t n)
{
    inval_t *iv = malloc(sizeof *iv + n);
    if (!iv)
        return -1;
    iv->orig = ex->codec;
    iv->codec = *ex->codec;
    iv->codec.head = inval_head;
    iv->c = c;
    iv->n = n;
    memcpy(iv->key, key, n);
    ex->codec = &iv->codec;
    ex->hold = iv;
    ex->release = inval_release;
    return 0;
}

/* Is ex's request one the cache may answer for everyone?  (RFC 9111 3.5,
   and the operator's cookie list) */
static int request_shared(const exchange_t *ex, const cache_conf_t *k)
{
    const http_request_t *r = ex->req;
    if (ex->req_len != 0 || http_header(r, "Authorization") || http_header(r, "Upgrade"))
        return 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        if (h->name.n == 6 && !strncasecmp(h->name.p, "Cookie", 6) &&
            !cache_conf_cookie_ok(k, h->value.p, h->value.n))
            return 0;
    }
    return 1;
}

/* The stored responses of key for ex: what to do with it. */
typedef struct found {
    rs_entry_t *fresh, *stale, *filling, *pass;
} found_t;

static void lookup(cache_t *c, const exchange_t *ex, uint32_t h, const char *key, size_t n,
                   found_t *fd)
{
    int64_t now = now_s(c), ms = now_ms(c);
    memset(fd, 0, sizeof *fd);
    for (rs_entry_t *e = rs_first(&c->store, h, key, n), *next; e; e = next) {
        next = rs_next(e);
        if (e->state == RS_PASS) {
            if (now < e->pass_until)
                fd->pass = e;
            else
                rs_unlink(&c->store, e);
        } else if (e->state == RS_FILLING) {
            cfetch_t *f = e->fetch;
            if (f && ms - f->began_ms < f->lock_ms && (!e->status || vary_match(e, ex->req)))
                fd->filling = e;
        } else if (vary_match(e, ex->req)) {
            if (fresh(e, ms))
                fd->fresh = e;
            else if (!fd->stale)
                fd->stale = e;
        }
    }
}

/* A miss, a wait, or a stale answer with a refresh behind it. */
static int miss(cache_t *c, exchange_t *ex, const cache_conf_t *k, uint32_t h, const char *key,
                size_t n, found_t *fd)
{
    int64_t now = now_ms(c);
    rs_entry_t *st = fd->stale;
    if (st && stale_within(st, now, st->swr)) { /* serve it, refresh it once */
        c->site->stats.cache_stale++;
        if (!st->fetch) {
            rs_entry_t *e = rs_new(&c->store, h, key, n, gio_now(c->site->loop));
            if (e && !fetch_start(c, ex, e, st, k, NULL))
                rs_unlink(&c->store, e);
        }
        return serve_hit(c, ex, st, "gatling; hit; detail=stale");
    }
    reader_t *r = reader_new(c, ex);
    if (!r)
        return -1;
    cfetch_t *busy = st && st->fetch ? st->fetch : fd->filling ? fd->filling->fetch : NULL;
    if (busy && !busy->finished &&
        (busy->mode == F_HEAD || (busy->mode == F_STORE && busy->e->state == RS_FILLING))) {
        c->site->stats.cache_collapsed++;
        if (busy->mode == F_HEAD) {
            r->f = busy;
            list_add(&busy->waiters, r);
        } else {
            reader_start(r, busy->e, "gatling; fwd=miss; collapsed", now);
        }
        return 0;
    }
    c->site->stats.cache_misses++;
    rs_entry_t *e = rs_new(&c->store, h, key, n, gio_now(c->site->loop));
    if (!e) {
        ex->producer = NULL, ex->pctx = NULL;
        free(r);
        return CACHE_NOT_MINE;
    }
    if (!fetch_start(c, ex, e, st, k, r)) {
        rs_unlink(&c->store, e);
        ex->producer = NULL, ex->pctx = NULL;
        free(r);
        return -1;
    }
    return 0;
}

/* The dynamic request ex with its vhost's settings k. */
static int cached(cache_t *c, exchange_t *ex, const cache_conf_t *k)
{
    char key[RS_KEY_MAX];
    size_t n = make_key(ex, key, sizeof key);
    const http_request_t *r = ex->req;
    int get = http_method_is(r, "GET") || http_method_is(r, "HEAD");
    if (!n)
        return CACHE_NOT_MINE;
    if (http_method_is(r, "PURGE"))
        return purge(c, ex, k, key, n) < 0 ? -1 : 0;
    if (!get) {
        if (!http_method_is(r, "OPTIONS") && !http_method_is(r, "TRACE") && watch_unsafe(c, ex, key, n) < 0)
            return -1;
        return CACHE_NOT_MINE;
    }
    if (!request_shared(ex, k)) {
        c->site->stats.cache_bypass++;
        return CACHE_NOT_MINE;
    }
    uint32_t h = rs_hash(key, n);
    found_t fd;
    lookup(c, ex, h, key, n, &fd);
    if (fd.fresh) {
        c->site->stats.cache_hits++;
        rs_touch(&c->store, fd.fresh, gio_now(c->site->loop));
        return serve_hit(c, ex, fd.fresh, "gatling; hit");
    }
    if (fd.pass) {
        c->site->stats.cache_passes++;
        ex_field(ex, "Cache-Status", "gatling; fwd=uri-miss; detail=pass");
        return CACHE_NOT_MINE;
    }
    if (!c->ticking)
        arm(c, 1000);
    return miss(c, ex, k, h, key, n, &fd);
}

int cache_dispatch(exchange_t *ex)
{
    cache_t *c = ex->site->cache;
    if (!c || ex->cache_pass || ex->release) /* release: watched already (a redirect) */
        return CACHE_NOT_MINE;
    const char *vhost;
    const cache_conf_t *k = cache_conf_of(c->vh, c->site, ex, &vhost);
    if (!k || !(proxy_streams(ex) || cgi_match(ex)))
        return CACHE_NOT_MINE;
    int r = cached(c, ex, k);
    if (r == 0 && !ex->vhost[0]) /* for the access log, as the proxy writes it */
        snprintf(ex->vhost, sizeof ex->vhost, "%s", vhost);
    return r;
}

int cache_init(site_t *site)
{
    int p[2];
    cache_t *c = calloc(1, sizeof *c);
    if (!c || pipe(p) < 0) {
        free(c);
        return -1;
    }
    close(p[1]);
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    c->fd = p[0];
    c->site = site;
    watch_init(&c->w, tick);
    if (gio_add(site->loop, c->fd, &c->w) < 0) {
        close(c->fd);
        free(c);
        return -1;
    }
    const config_t *cfg = site->cfg;
    rs_init(&c->store, cfg->cache_mem ? (size_t)cfg->cache_mem : CACHE_MEM_DEFAULT,
            cfg->cache_object ? (size_t)cfg->cache_object : CACHE_OBJECT_DEFAULT, CACHE_IDLE_MS);
    site->cache = c;
    return 0;
}

void cache_free(site_t *site)
{
    cache_t *c = site->cache;
    if (!c)
        return;
    while (c->fetches) {
        cfetch_t *f = c->fetches;
        f->waiters = NULL;
        f->owner = NULL;
        fetch_free(f);
    }
    rs_free(&c->store);
    cache_conf_table_free(c->vh);
    gio_del(site->loop, c->fd);
    close(c->fd);
    site->cache = NULL;
    free(c);
}

void cache_mem(const site_t *site, uint64_t *bytes, uint64_t *entries, uint64_t *evictions)
{
    const cache_t *c = site->cache;
    *bytes = c ? c->store.bytes : 0;
    *entries = c ? c->store.entries : 0;
    *evictions = c ? c->store.evictions : 0;
}
