/*
 * cache — the shared response cache in front of every dynamic source (-P
 * backends: HTTP, FastCGI, SCGI; CGI programs), on the exchange: no codec
 * and no backend knows of it (gatling.8, RESPONSE CACHE).
 *
 * A virtual host whose directory holds a file named .cache has it: a GET
 * or HEAD that a proxy rule or CGI would answer is looked up by scheme,
 * host and target (and the request fields its stored response varies on).
 * A fresh entry is a hit, served from memory like a static file (Range, HEAD
 * and the client's conditionals answered from it; with --compress, in the
 * client's coding from a coded body kept beside it, cache_coded.c).  A miss starts a fetch:
 * an exchange of the cache's own, with no client, that the proxy or CGI
 * answers; every request for the key that comes meanwhile waits on it (one
 * backend request however many ask) and is answered as the response
 * arrives, streamed as it is stored.  A stale entry is revalidated
 * (If-None-Match, If-Modified-Since) and, within its stale-while-revalidate
 * window (or the micro-cache's grace), served while one fetch refreshes it
 * in the background; within stale-if-error it answers when the backend
 * fails.  A response that may not be shared (Set-Cookie, private, no-store,
 * Vary: *) is remembered as "pass" for a while: the requests after it go to
 * the backend at once, not one after another.  Unsafe methods invalidate
 * the URI; PURGE removes one URL or (ending in '*') every URL under a prefix.
 *
 * The entries live in site/rstore.c; what HTTP allows is http/cachectl.c.
 */
#ifndef GATLING_CACHE_H
#define GATLING_CACHE_H

#include "handlers/handler.h"
#include "http/exchange.h"
#include "site/optdef.h"

struct site;

#define CACHE_MEM_DEFAULT (64 << 20)
#define CACHE_OBJECT_DEFAULT (1 << 20)

/* --cache: its row of the options table (site/optdef.h). */
extern const optdef_t cache_opts[];
#define CACHE_IDLE_MS (600 * 1000) /* an entry not asked for in 10 min goes */

/* Set up the cache of site (caps from site->cfg), kept in site's
   HSTATE_CACHE (hstate.h); nothing is allocated until a vhost with a
   .cache file is asked for.  0, or -1 after saying why. */
int cache_init(struct site *site);

/* Free every entry and end every fetch (the loop is going). */
void cache_free(struct site *site);

enum { CACHE_NOT_MINE = HANDLER_NOT_MINE };

/*
 * The router's step before the proxy and CGI: answer ex from the cache
 * (a hit, a wait, a fetch, a PURGE), or CACHE_NOT_MINE for the router to
 * go on (no .cache, not a dynamic request, one that bypasses the cache:
 * then it may have added Cache-Status and watch the response, to invalidate
 * on an unsafe method's success).  0 (answered or under way), -1 (ENOMEM).
 */
int cache_dispatch(exchange_t *ex);

/* What the store holds now, for /server-status: bytes, entries, and the
   entries evicted (for room, or idle) since start. */
void cache_mem(const struct site *site, uint64_t *bytes, uint64_t *entries, uint64_t *evictions);

/* The router's entry (router.c's table): cache_dispatch; its init makes a
   cache only where something dynamic could be cached (-P, -w, -z). */
extern const handler_t cache_handler;

#endif
