/*
 * cache_int — what the response cache's three files share.  cache.c (the
 * router's step: keys, lookups, PURGE and invalidation, init and free)
 * calls cache_fetch.c (readers waiting on or served from an entry, the
 * fetches with their codec, the clock), and both call cache_entry.c (a
 * stored response: keys and Vary, freshness, serving it, and what HTTP's
 * caching rules make of a backend's head).  No call goes back up (make
 * layers).  Not for other handlers: cache.h is the cache's interface.
 */
#ifndef GATLING_CACHE_INT_H
#define GATLING_CACHE_INT_H

#include "cache_conf.h"
#include "handlers/handler.h"
#include "handlers/hstate.h"
#include "http/cachectl.h"
#include "http/exchange.h"
#include "site/rstore.h"
#include "site/site.h"
#include "gio.h"

#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#define CACHE_PASS_SECS 10   /* an unshareable response: requests go by for this long */
#define CACHE_VARIANTS 8     /* stored responses per URL (Vary) */
#define CACHE_HEAD_MAX 16384 /* a stored response's fields */
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
    gio_timer_t tick; /* the cache's clock (cf_tick) */
    gio_timer_t cluster_tick; /* --cluster: the other nodes' purges (cache_cluster.c) */
    uint64_t cluster_next;    /* ... the next one to take from site/cluster.h's ring */
    rstore_t store;
    cfetch_t *fetches;
    cache_vh_t vh[CACHE_CONF_VHOSTS];
} cache_t;

/* The wall clock and the loop's monotonic clock, for c. */
static inline int64_t now_s(cache_t *c)
{
    return gio_wallclock(c->site->loop);
}

static inline int64_t now_ms(cache_t *c)
{
    return gio_now(c->site->loop);
}

/* The cache's slot in an exchange (hstate.h): p holds the entry a hit is
   served from or the watch of an unsafe method's response, end lets it go;
   n has the flags below. */
enum {
    CS_PASS = 1,   /* the cache lets this request by: a fetch's own, or sent past */
    CS_WATCHED = 2 /* an unsafe method's response is watched (a redirect: once) */
};

static inline ex_slot_t *cslot(exchange_t *ex)
{
    return hslot(ex, HSLOT_CACHE);
}

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

/* ---- cache_cluster.c: --cluster's purges ---- */

/* Take the other nodes' purges every CC_TICK_MS (nothing without --cluster). */
void cc_start(cache_t *c);
void cc_stop(cache_t *c);

/* A PURGE accepted here: to the side process, for the other nodes (never
   waits: a full pipe drops it, counted). */
void cc_send(cache_t *c, const char *key, size_t n);

/* ---- cache_entry.c: a stored response ---- */

/* scheme, then the Host lower-cased without a default port or a final dot,
   then the target: "https\0example.org\0/a?b".  Length, or 0: not cached. */
size_t ce_key(const exchange_t *ex, char *k, size_t cap);

/* Every stored response of key[0..n) goes (an unsafe method, a PURGE):
   how many (those being filled stay). */
size_t ce_invalidate(cache_t *c, const char *key, size_t n);

/* PURGE of key ("https\0..." or "http\0..."): the URL under both schemes,
   or with a final '*' every URL below it.  How many responses went. */
size_t ce_purge(cache_t *c, const char *key, size_t n);

/* Does r match the Vary values stored with e? */
int ce_vary_match(const rs_entry_t *e, const http_request_t *r);

/* e's Vary block from the response's Vary value and the request r.  0, or -1:
   not storable (too many or too long). */
int ce_vary_store(cache_t *c, rs_entry_t *e, const char *v, const http_request_t *r);

/* e's age in ms at now_ms (the loop's monotonic clock): its age when it
   came, and the time since.  Milliseconds, not seconds: a one-second
   micro-cache must last a second, not from 0 to 1 s by where a second
   boundary falls. */
int64_t ce_age(const rs_entry_t *e, int64_t now_ms);

/* Is e fresh at now_ms? */
int ce_fresh(const rs_entry_t *e, int64_t now_ms);

/* Within a window of secs past its freshness (not for must-revalidate). */
int ce_stale_within(const rs_entry_t *e, int64_t now, int64_t secs);

/* The stored fields onto ex, with Age and Cache-Status (age and cs live in
   the caller until its ex_head).  notmod: only those a 304 carries. */
void ce_put_fields(exchange_t *ex, const rs_entry_t *e, const char *age, const char *cs,
                   int notmod);

/* Answer ex from the complete entry e: 304/412 for its preconditions, a
   range, or the whole (in a stored coding, cv_serve).  The caller holds e
   until ex ends.  0 or -1. */
int ce_serve(exchange_t *ex, rs_entry_t *e, const char *cs, int64_t now);

/* Request fields a fetch does not send: the cache answers conditionals and
   ranges itself; nothing unkeyed may change what the backend answers. */
int ce_fetch_drops(const http_str_t *name);

/* rf gets the response's facts from ex's fields (Cache-Control and Expires, or
   CDN-Cache-Control, or Surrogate-Control aimed at us; Vary, ETag, Last-Modified,
   Age); now (the wall clock) reads a two-digit year. */
void ce_facts(const exchange_t *ex, resp_facts_t *rf, int64_t now);

/* Copy ex's fields (less Age) into e's head block. */
int ce_store_head(cache_t *c, rs_entry_t *e, const exchange_t *ex, const resp_facts_t *rf,
                  const char *ctype);

/* May this response be shared with other clients at all? */
int ce_shareable(const resp_facts_t *rf, int status);

/* The Date every answer from e carries: its origin's. */
void ce_entry_date(rs_entry_t *e, int64_t t);

/* s's stored fields with the 304's in place of those of the same names
   (RFC 9111 3.2), and its Content-Type if it sent one.  0, or -1: s is
   left as it was. */
int ce_head_update(cache_t *c, rs_entry_t *s, const exchange_t *ex, const char *ctype);

/* ---- cache_coded.c: coded bodies of stored responses ---- */

/*
 * Answer ex from e, whose fields (Cache-Status cs among them) are on ex, in
 * the coding ex's --compress stage would give it (compress.h): from e's
 * coded body, made now if it has none (coded whole, once per entry and
 * coding, kept in e and counted in the store while it fits the object cap).
 * The Cache-Status names the coding (buf[cap] holds it until ex_head).  0
 * (answered) or -1 (failed); 1: not for a coded body (no stage, not
 * codable, e not complete, the caps reached): the caller answers as before.
 */
int cv_serve(cache_t *c, exchange_t *ex, rs_entry_t *e, const char *cs, char *buf, size_t cap);

/*
 * r (its fields on its exchange) is about to stream e, still filling: 1 when
 * it wants a coded body and is not the fill's owner (it waits for the whole
 * response, then cv_serve: the fill is coded once per coding, not once per
 * collapsed client); else 0, and an owner's coded stream is kept in e as
 * its coded body when it ends (the hits after it code nothing).
 */
int cv_fill_reader(reader_t *r, rs_entry_t *e);

/* ---- cache_fetch.c: readers, fetches, the clock ---- */

/* Answer ex from e at once (a hit), holding e until ex ends; cs its
   Cache-Status.  0 or -1. */
int cf_serve_hit(cache_t *c, exchange_t *ex, rs_entry_t *e, const char *cs);

/* Put r on list (a fetch's waiters, an entry's readers). */
void cf_list_add(reader_t **list, reader_t *r);

/* Send r the head of e (filling or complete) and what of its body is in. */
void cf_reader_start(reader_t *r, rs_entry_t *e, const char *cs, int64_t now);

/* A reader for ex: the exchange's producer until its response is done.
   NULL: ENOMEM. */
reader_t *cf_reader_new(cache_t *c, exchange_t *ex);

/* A fetch for ex's request, filling e (held), revalidating stale (or NULL):
   owner (or NULL: a background refresh) waits for it. */
cfetch_t *cf_fetch_start(cache_t *c, const exchange_t *ex, rs_entry_t *e, rs_entry_t *stale,
                         const cache_conf_t *k, reader_t *owner);

/* Free f (finished, or at cache_free), letting go of its entries. */
void cf_fetch_free(cfetch_t *f);

/* The cache's clock (arg: the cache_t): finished fetches reaped, lock
   timeouts, idle entries swept (arm() sets it). */
void cf_tick(gio_loop_t *l, void *arg);

/* The cache's clock (cf_tick) in in_ms (a timer of gio's, moved if set). */
static inline void arm(cache_t *c, int64_t in_ms)
{
    gio_timer_set(c->site->loop, &c->tick, gio_now(c->site->loop) + in_ms, cf_tick, c);
}

/* Is the clock set? */
static inline int ticking(const cache_t *c)
{
    return gio_timer_armed(&c->tick);
}

#endif
