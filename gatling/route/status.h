/*
 * status — /server-status (gatling -S): open connections, requests and bytes
 * in total and per second (site/stats.h), as HTML or (with ?json) JSON.
 * Only loopback clients get it; with -W each worker reports its own numbers
 * (/metrics, metrics.h, sums them).
 * The health check a load balancer polls (-k) is here too.
 */
#ifndef GATLING_STATUS_H
#define GATLING_STATUS_H

#include "handlers/handler.h"
#include "http/exchange.h"
#include "http/path.h"
#include "site/site.h"

#include <sys/socket.h>

/* May ex's client read /server-status and /metrics: a loopback address
   (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104), or one --status-from lists? */
int status_allowed(const exchange_t *ex);

/* This loop's numbers: its counters, and the gauges and counters others
   keep (counters.h's M and G rows, the backends'), for both pages. */
void status_snapshot(const site_t *s, stats_snap_t *snap);

/* The ACME client's status file read and parsed (site/acme_chal.h), for
   the pages to read once a request: malloc'd (free it), or NULL (no --acme,
   not written yet, unreadable, no memory). */
struct acme_status *status_acme(const site_t *s);

/* The side processes' numbers (counters.h's A and O rows: the ACME client's
   status, st from status_acme) into snap->side, after the workers' sum: one
   number for the whole server.  side.has says which are there (none: st
   NULL). */
void status_side(const site_t *s, const struct acme_status *st, stats_snap_t *snap);

/* Queue the status page (json: the JSON form).  0, or -1 on ENOMEM. */
int status_serve(exchange_t *ex, int json);

/*
 * -k: if ex asks for the health check's path (GET or HEAD, any Host or
 * none, a query ignored), answer it from memory: 200 "ok", or 503
 * "draining" once a drain has begun (site->draining, its -g grace
 * included), counted.  1 when answered, 0 when ex is another request, -1
 * on ENOMEM.
 */
int status_health(exchange_t *ex);

/* -S: are the pages there at all on s (the router's on, for both pages)? */
int status_page_on(const struct site *s);

/* -S: is ex a GET or HEAD of page ("/server-status", "/metrics"), its path
   decoded (into ex->path, p)?  1 or 0. */
int status_page_asked(exchange_t *ex, const char *page, path_t *p);

/* -X: is ex a request for /server-status or /metrics (-S) from a client
   status_allowed lets read them?  Those are answered where they are asked,
   over plain HTTP too, never redirected: a scraper on loopback or in
   --status-from speaks to an address, which no certificate names.  1 or 0. */
int status_stays_plain(exchange_t *ex);

/* The router's entries (router.c's table): -k's health check, and
   /server-status (403 but to status_allowed's clients). */
extern const handler_t status_health_handler, status_handler;

#endif
