/*
 * hstate — the handlers' own state, which the layers below carry without
 * knowing it.
 *
 * Per site: an index of states in site/'s site_t (its hstate[]), one for
 * each handler that needs one per loop (the router's list, the proxy's rules
 * and backend pools, CGI's, the response cache, the coding stage), as h2o's
 * h2o_context_get_handler_context: hstate() with the handler's HSTATE_*.
 * site/ never names these types.
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

/* The site's states, by owner: each handler sets only its own (route/compress.c
   asks the router whether a producer that allows coding is there, never a
   producer's state by name). */
enum hstate {
    HSTATE_ROUTE,    /* router.c: the entries there on the site (its route_t) */
    HSTATE_PROXY,    /* proxy.c: -P's rules and backend pools (proxy_t); NULL: none */
    HSTATE_CGI,      /* cgi.c: CGI's state (cgi_loop_t); NULL: no CGI */
    HSTATE_CACHE,    /* cache.c: the response cache (cache_t); NULL: none */
    HSTATE_COMPRESS, /* compress.c: on-the-fly coding of dynamic answers (compress_t) */
    HSTATE_STATUS,   /* status.c: -S's samples for the graphs (status_loop_t); NULL: no -S */
    HSTATE_SITEFILES, /* route/sitefiles.c: the sites' _redirects, _headers, pages */
    HSTATE_HOST,      /* host.c: the sites behind the names (host.h) */
    HSTATES
};

_Static_assert(HSTATES <= SITE_HSTATES, "more handler states than site/site.h offers");

static inline void *hstate(const site_t *s, enum hstate i)
{
    return s->hstate[i];
}

static inline void hstate_set(site_t *s, enum hstate i, void *p)
{
    s->hstate[i] = p;
}

/* The exchange's slots, by owner. */
enum hslot {
    HSLOT_AUTH,  /* auth.c: the password check's verdict on this request */
    HSLOT_GZIP,  /* gzip.c: this request waited for a gzip job already */
    HSLOT_CACHE, /* cache*.c: the entry a hit holds, or the watch of an unsafe
                    method (and its end); the pass and watched flags */
    HSLOT_DICT,  /* dictionary.c: what this request waited for (a hash, a delta) */
    HSLOT_COMPRESS, /* compress.c: the coding stage between the handler and the codec */
    HSLOT_SITE,     /* route/sitefiles.c: _headers' fields for the answer; n: routed */
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
