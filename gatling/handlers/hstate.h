/*
 * hstate — the handlers' own state, which the layers below carry without
 * knowing it.
 *
 * Per site: hsite_t, site/'s site_t followed by the objects of the handlers
 * that need one per loop (the proxy's rules and backend pools, CGI's, the
 * response cache).  The server makes one (server.c) and hands its site to
 * the codecs, so every exchange's ex->site is the site of an hsite_t:
 * hsite_of() gets back to it.  site/ never names these types.
 *
 * Per exchange: the slots of http/exchange.h, numbered here, one per handler
 * that keeps something across its calls for a request.  Each handler reads
 * and writes only its own (through its file's accessor).
 */
#ifndef GATLING_HSTATE_H
#define GATLING_HSTATE_H

#include "http/exchange.h"
#include "site/site.h"

#include <stddef.h>

struct proxy;
struct cgi_loop;
struct cache;
struct compress;
struct handler;

#define HSITE_ROUTE_MAX 16 /* entries of router.c's table, at most */

typedef struct hsite {
    site_t site;           /* first: what ex->site points to */
    struct proxy *proxy;   /* -P: the rules and backend pools (proxy.h); NULL: none */
    struct cgi_loop *cgi;  /* CGI's state (cgi.c); NULL: no CGI */
    struct cache *cache;   /* the response cache (cache.h); NULL: none */
    struct compress *compress; /* on-the-fly coding of dynamic answers (compress.h) */
    /* router.c's entries there on this site (handler.h's on), in the
       table's order: what router_dispatch walks (router_init) */
    const struct handler *route[HSITE_ROUTE_MAX];
    unsigned nroute;
} hsite_t;

_Static_assert(offsetof(hsite_t, site) == 0, "hsite_of() casts");

/* The hsite_t whose site s is (every site a codec serves is one's). */
static inline hsite_t *hsite_of(site_t *s)
{
    return (hsite_t *)s;
}

static inline const hsite_t *hsite_of_const(const site_t *s)
{
    return (const hsite_t *)s;
}

/* The exchange's slots, by owner. */
enum hslot {
    HSLOT_AUTH,  /* auth.c: the password check's verdict on this request */
    HSLOT_GZIP,  /* gzip.c: this request waited for a gzip job already */
    HSLOT_CACHE, /* cache*.c: the entry a hit holds, or the watch of an unsafe
                    method (and its end); the pass and watched flags */
    HSLOT_DICT,  /* dictionary.c: what this request waited for (a hash, a delta) */
    HSLOT_COMPRESS, /* compress.c: the coding stage between the handler and the codec */
    HSLOTS
};

_Static_assert(HSLOTS <= EX_SLOTS, "more handler slots than http/exchange.h offers");

static inline ex_slot_t *hslot(exchange_t *ex, enum hslot i)
{
    return &ex->slot[i];
}

/*
 * A small value (below 256) about the request ex asks now: a local redirect
 * (ex_redirect) makes it ask another, for which hslot_req() reads 0 again
 * (the value is kept with the redirect count it was set at).
 */
static inline unsigned hslot_req(const exchange_t *ex, enum hslot i)
{
    uintptr_t n = ex->slot[i].n;
    return n >> 8 == ex->redirects ? (unsigned)(n & 0xff) : 0;
}

static inline void hslot_req_set(exchange_t *ex, enum hslot i, unsigned v)
{
    ex->slot[i].n = (uintptr_t)ex->redirects << 8 | (v & 0xff);
}

#endif
