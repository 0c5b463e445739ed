/*
 * router — from a request to the handler that answers it.  router.c checks
 * what every request must satisfy (Host, method), answers what no resource
 * is needed for (OPTIONS, the -X redirect to HTTPS, 421, 405, 501) and
 * dispatches; each kind of resource has its own file (static.c: files and
 * directories, status.c: /server-status).  Handlers take an exchange and
 * nothing of the connection it came on (http/exchange.h).
 */
#ifndef GATLING_ROUTER_H
#define GATLING_ROUTER_H

#include "http/exchange.h"

/* Answer ex's request (or hand work to a thread: ex->job).  0, or -1 if
   nothing could be answered (ENOMEM). */
int router_dispatch(exchange_t *ex);

/* Does ex's request go to a producer (CGI, a proxied backend)?  Asked for
   a request with a body, before the body is read: such a body is streamed
   to the producer; any other is read and dropped first.  1 or 0. */
int router_streams(exchange_t *ex);

#endif
