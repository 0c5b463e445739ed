/*
 * handler — from a parsed request to a queued response.  handler.c checks
 * what every request must satisfy (Host, framing, method) and dispatches;
 * each kind of resource has its own file (static.c: files and directories).
 */
#ifndef GATLING_HANDLER_H
#define GATLING_HANDLER_H

#include "conn/conn.h"

/*
 * Check the request's body framing (RFC 9112 6): sets c->body and
 * c->body_left.  Returns 0, or the status to answer (400 for invalid or
 * conflicting framing, 413 over CONN_BODY_MAX).
 */
int handler_framing(conn_t *c, const http_request_t *req);

/* Queue the response to req on c.  0, or -1 if nothing could be queued. */
int handler_dispatch(conn_t *c, const http_request_t *req);

/* GET/HEAD of a file or directory below the document root (static.c). */
int static_serve(conn_t *c, const http_request_t *req);

#endif
