/* The response cache in front of the dynamic handlers, the router's step:
   see cache.h; its fetches and readers are cache_fetch.c's, a stored
   response cache_entry.c's (cache_int.h). */
#include "cache.h"
#include "router.h"
#include "cache_int.h"
#include "http/hbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- the router's step ---- */

/* PURGE of a URL (both schemes), or with a final '*' of every URL below. */
static int purge(cache_t *c, exchange_t *ex, const cache_conf_t *k, char *key, size_t n)
{
    if (!cache_conf_purger(k, ex->peer))
        return ex_error(ex, 403, NULL, NULL);
    size_t purged = ce_purge(c, key, n);
    cc_send(c, key, n); /* --cluster: to the other nodes */
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
   the URI it names on the same origin, invalidated too (RFC 9111 4.4).
   The origin is the key's Host, after the site's name (ce_key). */
static void invalidate_named(cache_t *c, const char *key, size_t n, const char *v)
{
    const char *h = key + strlen(key) + 1, *sp = strchr(h, ' ');
    size_t scheme = strlen(key), pre = scheme + strlen(h) + 2;
    size_t host = strlen(sp ? sp + 1 : h);
    char k[RS_KEY_MAX];
    const char *path = NULL;
    if (v[0] == '/' && v[1] != '/') {
        path = v;
    } else if (!strncasecmp(v, key, scheme) && !strncmp(v + scheme, "://", 3) &&
               !strncasecmp(v + scheme + 3, sp ? sp + 1 : h, host) &&
               v[scheme + 3 + host] == '/') {
        path = v + scheme + 3 + host;
    }
    size_t pl = path ? strlen(path) : 0;
    if (!path || pre + pl > sizeof k || pre > n)
        return;
    memcpy(k, key, pre);
    memcpy(k + pre, path, pl);
    ce_invalidate(c, k, pre + pl);
}

static int inval_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    inval_t *iv = cslot(ex)->p;
    if (status >= 200 && status < 400) {
        ce_invalidate(iv->c, iv->key, iv->n);
        for (unsigned i = 0; i < ex->nfields; i++)
            if (!strcasecmp(ex->fields[i].name, "Location") ||
                !strcasecmp(ex->fields[i].name, "Content-Location"))
                invalidate_named(iv->c, iv->key, iv->n, ex->fields[i].value);
    }
    return iv->orig->head(ex, status, ctype, len, mtime);
}

static void inval_end(exchange_t *ex, ex_slot_t *s)
{
    inval_t *iv = s->p;
    ex->codec = iv->orig;
    s->p = NULL;
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
    ex_slot_t *s = cslot(ex);
    s->p = iv;
    s->end = inval_end;
    s->n |= CS_WATCHED;
    return 0;
}

/* Is ex's request one the cache may answer for everyone?  (RFC 9111 3.5,
   and the operator's cookie list) */
static int request_shared(const exchange_t *ex, const cache_conf_t *k)
{
    const http_request_t *r = ex->req;
    if (ex->req_len != 0 || http_header(r, "Authorization") || http_header(r, "Upgrade"))
        return 0;
    if (ex->client && ex->client->cert)
        return 0; /* an identity, as Authorization: never one's answer to another */
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
            if (f && ms - f->began_ms < f->lock_ms && (!e->status || ce_vary_match(e, ex->req)))
                fd->filling = e;
        } else if (ce_vary_match(e, ex->req)) {
            if (ce_fresh(e, ms))
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
    if (st && ce_stale_within(st, now, st->swr)) { /* serve it, refresh it once */
        c->site->stats.cache_stale++;
        if (!st->fetch) {
            rs_entry_t *e = rs_new(&c->store, h, key, n, gio_now(c->site->loop));
            if (e && !cf_fetch_start(c, ex, e, st, k, NULL))
                rs_unlink(&c->store, e);
        }
        return cf_serve_hit(c, ex, st, "gatling; hit; detail=stale");
    }
    reader_t *r = cf_reader_new(c, ex);
    if (!r)
        return -1;
    cfetch_t *busy = st && st->fetch ? st->fetch : fd->filling ? fd->filling->fetch : NULL;
    if (busy && !busy->finished &&
        (busy->mode == F_HEAD || (busy->mode == F_STORE && busy->e->state == RS_FILLING))) {
        c->site->stats.cache_collapsed++;
        if (busy->mode == F_HEAD) {
            r->f = busy;
            cf_list_add(&busy->waiters, r);
        } else {
            cf_reader_start(r, busy->e, "gatling; fwd=miss; collapsed", now);
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
    if (!cf_fetch_start(c, ex, e, st, k, r)) {
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
    size_t n = ce_key(ex, key, sizeof key);
    const http_request_t *r = ex->req;
    int get = http_method_is(r, "GET") || http_method_is(r, "HEAD");
    if (!n)
        return CACHE_NOT_MINE;
    if (http_method_is(r, "PURGE"))
        return purge(c, ex, k, key, n) < 0 ? -1 : 0;
    if (!get) {
        if (!http_method_is(r, "OPTIONS") && !http_method_is(r, "TRACE") &&
            watch_unsafe(c, ex, key, n) < 0)
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
        return cf_serve_hit(c, ex, fd.fresh, "gatling; hit");
    }
    if (fd.pass) {
        c->site->stats.cache_passes++;
        ex_field(ex, "Cache-Status", "gatling; fwd=uri-miss; detail=pass");
        ex_log_note(ex->log_cache, "gatling; fwd=uri-miss; detail=pass");
        return CACHE_NOT_MINE;
    }
    if (!ticking(c))
        arm(c, 1000);
    return miss(c, ex, k, h, key, n, &fd);
}

int cache_dispatch(exchange_t *ex)
{
    cache_t *c = hstate(ex->site, HSTATE_CACHE);
    if (!c || cslot(ex)->n & (CS_PASS | CS_WATCHED)) /* watched: a redirect's request */
        return CACHE_NOT_MINE;
    const cache_vh_t *vh;
    const cache_conf_t *k = cache_conf_of(c->vh, c->site, ex, &vh);
    if (!k || !router_produced(ex->site, ex, HANDLER_STORE))
        return CACHE_NOT_MINE;
    int r = cached(c, ex, k);
    if (r == 0 && !ex->vhost[0]) /* the directory that served, as every producer logs it */
        vhost_log_name(vh->which, vh->name, ex->local_port, ex->vhost, sizeof ex->vhost);
    return r;
}

int cache_init(site_t *site)
{
    cache_t *c = calloc(1, sizeof *c); /* its clock stopped */
    if (!c)
        return -1;
    c->site = site;
    const config_t *cfg = site->cfg;
    rs_init(&c->store, cfg->cache_mem ? (size_t)cfg->cache_mem : CACHE_MEM_DEFAULT,
            cfg->cache_object ? (size_t)cfg->cache_object : CACHE_OBJECT_DEFAULT, CACHE_IDLE_MS);
    hstate_set(site, HSTATE_CACHE, c);
    cc_start(c);
    return 0;
}

void cache_free(site_t *site)
{
    cache_t *c = hstate(site, HSTATE_CACHE);
    if (!c)
        return;
    while (c->fetches) {
        cfetch_t *f = c->fetches;
        f->waiters = NULL;
        f->owner = NULL;
        cf_fetch_free(f);
    }
    rs_free(&c->store);
    cache_conf_table_free(c->vh);
    gio_timer_stop(site->loop, &c->tick);
    cc_stop(c);
    hstate_set(site, HSTATE_CACHE, NULL);
    free(c);
}

void cache_mem(const site_t *site, uint64_t *bytes, uint64_t *entries, uint64_t *evictions)
{
    const cache_t *c = hstate(site, HSTATE_CACHE);
    *bytes = c ? c->store.bytes : 0;
    *entries = c ? c->store.entries : 0;
    *evictions = c ? c->store.evictions : 0;
}

/* The response cache: only where something dynamic could be cached. */
static int cache_route_init(site_t *site)
{
    if (!router_produced(site, NULL, HANDLER_STORE) || cache_init(site) == 0)
        return 0;
    fprintf(stderr, "gatling: cannot set up the response cache: %s\n", strerror(errno));
    return -1;
}

static int cache_on(const site_t *site)
{
    return hstate(site, HSTATE_CACHE) != NULL;
}

const handler_t cache_handler = {
    .name = "cache", .phase = HANDLER_STAGE, .serve = cache_dispatch, .init = cache_route_init, .free = cache_free,
    .on = cache_on,
};

/* --cache mem[,object]: 1M..64G of responses, each at most object (4K..mem). */
static int cache_set(config_t *cfg, const optdef_t *o, char *arg)
{
    char mem[24];
    const char *comma;
    (void)o;
    if (opt_first(arg, mem, sizeof mem, &comma) < 0 ||
        (cfg->cache_mem = opt_size(mem, 1 << 20, 64LL << 30)) < 0)
        return -1;
    cfg->cache_object = comma ? opt_size(comma, 4096, 64LL << 30) : 0;
    if (comma && cfg->cache_object > cfg->cache_mem) /* the largest response must fit */
        return opt_set_why("the object size %s is larger than the memory %s: a response the "
                           "cache keeps is at most its memory (object 4K-mem)", comma, mem), -1;
    if (!comma && cfg->cache_mem < CACHE_OBJECT_DEFAULT)
        cfg->cache_object = cfg->cache_mem;
    return cfg->cache_object < 0 ? -1 : 0;
}

const optdef_t cache_opts[] = {
    OPT_ROW_FN(0, "cache", OPT_BYTES, OPT_ANY, 0, cache_set, 0,
               "not mem[,object]: sizes with K, M or G, mem 1M-64G, object 4K-mem",
        "  --cache mem[,object]  the response cache in front of -P and CGI, for hosts\n"
        "            with a .cache file: bytes held (64M) and the largest response (1M)\n"),
    OPT_LAST};
