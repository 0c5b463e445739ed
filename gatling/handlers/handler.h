/*
 * handler — what a handler gives the router: one entry (handler_t) in its
 * own file, named in route/router_table.c's table, whose order is the
 * order the router asks them in.  A handler's per-loop state (an object in the site's
 * index of them, hstate.h's HSTATE_*) is made by its init and let go by its
 * free, which server.c calls for every entry through router_init and
 * router_free; nothing else of a handler is known outside its files: the
 * router asks every entry the same questions.  (A contract the handlers
 * share: no .c.)
 */
#ifndef GATLING_HANDLER_H
#define GATLING_HANDLER_H

#include "http/exchange.h"

struct site;

/*
 * A producer (the files aside: a backend, a script) is its files plus one
 * entry in router_table.c with streams, claims and wrap: the stages and
 * the router learn of it there and nowhere else.
 */

/*
 * Where an entry stands in the router's table, its phase: the table is in
 * phase order, and router_init refuses one that is not (so where a new
 * entry goes is its type, and its place within the phase the behaviour the
 * table's comment gives).
 */
enum handler_phase {
    HANDLER_CHECK = 1, /* the request's terms: -k, Host, ACME, TLS's, -X: answer or pass */
    HANDLER_REWRITE,   /* the site's own rules: a redirect, a page, a rewrite the router
                          goes on with (its streams: the rewrite, done before a body's
                          way is asked) */
    HANDLER_STAGE,     /* wraps whatever producer answers (--compress, the cache) */
    HANDLER_PRODUCE,   /* a producer the stages wrap (a backend, CGI) */
    HANDLER_PAGE,      /* the server's own pages (-S) */
    HANDLER_LAST,      /* what answers every request left: the files, OPTIONS/405/501 */
};

/* A handler's serve: ex's request was not its own, the router goes on. */
#define HANDLER_NOT_MINE 1

typedef struct handler {
    const char *name; /* for a reader of the table (and a debugger) */
    uint8_t phase;    /* enum handler_phase: where it stands in the table */
    /*
     * Is ex's request this handler's?  1 or 0; cheap (the method, a path, an
     * option).  NULL: serve decides, answering HANDLER_NOT_MINE for a
     * request that is not (a proxy rule's or a CGI pattern's match is made
     * once, where the request is then sent).
     */
    int (*match)(exchange_t *ex);
    /* Answer ex's request (or hand work to a thread: ex->job): 0, -1 if
       nothing could be answered (ENOMEM), or HANDLER_NOT_MINE. */
    int (*serve)(exchange_t *ex);
    /* The loop begins: its state for site (NULL: none).  0, or -1 after
       printing why to stderr (the server does not start). */
    int (*init)(struct site *site);
    /* The loop ends: what init made goes (NULL: nothing).  Called for every
       entry, also one whose init failed or was never called. */
    void (*free)(struct site *site);
    /* Is the handler there at all on site (its options, what init made)?
       NULL: always.  Asked once, after every init: a request is put only
       to the entries there (no call for what the site does not use). */
    int (*on)(const struct site *site);
    /* Would serve take ex's request body as it comes, a producer's (a
       backend, a script)?  NULL: never, the codec reads and drops a body
       before serve (router_streams).  A HANDLER_REWRITE entry's is its
       rewrite, done before the producers are asked: 0 to go on, 1 when it
       answered the request itself (no producer takes the body). */
    int (*streams)(exchange_t *ex);
    /* Is path[0..n) (decoded, normalised) a program of this handler's on
       some host: a -P rule's pattern, a CGI pattern, matched as the
       handler matches it, or a file with an extension a pattern names
       (cgienv_exts)?  NULL: it has none.  Such a path is never sent
       as a file (router_program, static.c): it is run or refused. */
    int (*claims)(const struct site *site, const char *path, size_t n);
    /* A producer's answers, as the stages that wrap one may take them
       (HANDLER_STORE: the response cache; HANDLER_CODE: --compress): the
       stages ask the router (router_produced, router_produce), never a
       producer by name.  0: not a producer a stage wraps. */
    unsigned wrap;
    /* The producer's backends, for the pages (/server-status, /metrics):
       slot's pool, address as written, state and requests outstanding; 0:
       the slot is free, 1: down or draining, 2: up (proxy_backend()).  The
       slots are the configuration's (CONFIG_BACKENDS), the counters'
       index.  NULL: it has none.  The pages ask the router
       (router_backend), never a producer by name. */
    int (*backend)(const struct site *site, int slot, const char **pool, const char **label,
                   const char **state, unsigned *outstanding);
    /* Under -X (every plain request redirected to HTTPS): does this entry
       answer ex over plain HTTP all the same (-S's pages, for the clients
       allowed them)?  NULL: never. */
    int (*plain)(exchange_t *ex);
} handler_t;

#define HANDLER_STORE 1u
#define HANDLER_CODE 2u

#endif
