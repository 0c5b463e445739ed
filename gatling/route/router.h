/*
 * router — from a request to the handler that answers it: one table of
 * entries (handler.h's handler_t) in the order a request is put to them
 * (router_table.c names every entry; router.c walks it, and the stages and
 * pages include this header to ask it, never a producer by name).
 * router.c's own entries check what every request must satisfy (Host) and
 * answer what no resource is needed for (--acme's HTTP-01, 421, the -X
 * redirect to HTTPS, OPTIONS, 405, 501); each handler's entry is in its own
 * file (status.c: -k and /server-status, metrics.c, cache.c, proxy.c,
 * cgi.c, static.c: files and directories).  Handlers take an exchange and
 * nothing of the connection it came on (http/exchange.h).
 */
#ifndef GATLING_ROUTER_H
#define GATLING_ROUTER_H

#include "handlers/handler.h"
#include "http/exchange.h"

struct site;

/* Answer ex's request (or hand work to a thread: ex->job): the table of
   router.c, walked in its order, over the entries there on ex's site
   (router_init's list).  0, or -1 if nothing could be answered (ENOMEM). */
int router_dispatch(exchange_t *ex);

/* -X and -x under --acme: is a loaded certificate's name host's (its port
   dropped; NULL: none)?  Without --acme, 1: HTTPS answers every name. */
int router_https_names(const struct site *s, const http_str_t *host);

/* -x: does a response over HTTPS to req (NULL: none parsed) carry
   Strict-Transport-Security?  Under --acme only for a Host a loaded
   certificate names, as -X redirects only those. */
int router_hsts(const struct site *s, const http_request_t *req);

/* The router's own rules, entries of the table (router_table.c): the
   request's terms (Host, --acme's HTTP-01 and files, 421, a client
   certificate, -X), -I's rewrite, and what no entry took (OPTIONS, 405,
   501). */
extern const handler_t router_host_entry, router_acme_entry, router_origin_entry,
    router_client_entry, router_https_entry, router_acme_files_entry, router_index_entry,
    router_methods_entry;

/* The loop begins with a table (router_table.h's router_init gives the
   server's; a unit test its own, tests/unit/t_router.c): all[0..nall), at
   most 32 entries, in the order a request is put to them.  Every handler's
   init, in the table's order (the producers' first), then the list of the
   entries there on site (handler.h's on) that router_dispatch walks.  0, or
   -1 after one printed why (router_free lets go of what the others made);
   -1 before any init for a table out of phase order (an entry whose phase,
   handler.h's HANDLER_*, is below the one before it, or none). */
int router_init_table(struct site *site, const handler_t *const *all, size_t nall);

/* The loop ends: every handler's free, in the table's order (the cache's
   fetches first: they are the proxy's and CGI's requests). */
void router_free(struct site *site);

/* Is path[0..n) (decoded, normalised) a program of some handler on site,
   or a backup copy of one (NAME~, NAME.bak, .swp, .orig, .save, .old)?
   Decided by the file, not by the rule a request matched: handler_t's
   claims say which paths their rules take whole and which extensions they
   run (a -P FastCGI or SCGI rule's, a CGI pattern's: \.php$ makes every
   .php a program, even beside a narrower rule).  1 or 0.  The files
   handler (site->program, set by router_init_table: it is below route/)
   and the site files' pages ask it: such a path is never sent as bytes. */
int router_program(const struct site *site, const char *path, size_t n);

/* Does ex's request go to a producer (CGI, a proxied backend)?  Asked for
   a request with a body, before the body is read: such a body is streamed
   to the producer; any other is read and dropped first.  1 or 0. */
int router_streams(exchange_t *ex);

/* For the stages that wrap a producer (they include this header: the
   router names none of them, router_table.c does): does a producer there
   on site take ex's request (its streams), one whose wrap allows what?
   ex NULL: is such a producer there (asked from a stage's init: the
   producers' inits have run)?  1 or 0. */
int router_produced(const struct site *site, exchange_t *ex, unsigned what);

/* ex's request through the producers (handler.h's wrap), in the table's
   order, as router_dispatch: 0, -1, or HANDLER_NOT_MINE when none takes it. */
int router_produce(exchange_t *ex);

/* For the pages (status.c, metrics.c, which include this header): the
   first producer's answer for
   configuration slot slot (handler.h's backend), or 0. */
int router_backend(const struct site *site, int slot, const char **pool, const char **label,
                   const char **state, unsigned *outstanding);

#endif
