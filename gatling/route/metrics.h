/*
 * metrics — /metrics (gatling -S): every counter of /server-status, a
 * request duration histogram per protocol and the per-backend proxy
 * counters, in Prometheus' text exposition format (version 0.0.4), to the
 * clients /server-status is for.  With -W the page sums every worker's
 * numbers (site/stats.h's shared table): whichever worker answers, the page
 * is the server's.
 */
#ifndef GATLING_METRICS_H
#define GATLING_METRICS_H

#include "handlers/handler.h"
#include "http/exchange.h"
#include "site/site.h"

/*
 * -W: the loop did something (or has just started): publish this loop's
 * numbers into its slot once the last publish is METRICS_PUBLISH_MS old,
 * by a timer of the loop's (site->stats_timer), armed here if it is not
 * already.  Without -W nothing.
 */
void metrics_owe(site_t *s);

#define METRICS_PUBLISH_MS 100

/* Queue the page.  0, or -1 on ENOMEM. */
int metrics_serve(exchange_t *ex);

/* The router's entry (router.c's table): /metrics, to status_allowed's
   clients (403 to the others). */
extern const handler_t metrics_handler;

#endif
