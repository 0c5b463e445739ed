/*
 * response — status lines, response heads and the small HTML error pages.
 * A head is built in the request block's head buffer and queued on the
 * connection's output batch; bodies follow as buffers or file ranges.
 */
#ifndef GATLING_RESPONSE_H
#define GATLING_RESPONSE_H

#include "conn/conn.h"

#include <stdint.h>
#include <time.h>

/* The reason phrase for status ("Unknown" if we never send it). */
const char *resp_reason(int status);

enum { RESP_REPLACED = 1 };

/*
 * Queue a response head: status line, Date, Server, Content-Type (if ctype),
 * Content-Length, Last-Modified (if mtime >= 0), the Connection header that
 * c->keepalive says, then `extra` (complete "Name: value\r\n" lines, or
 * NULL).  Sets c->status, c->body_len and c->head_len.  Returns 0; or
 * RESP_REPLACED when the head did not fit its buffer and a complete 500 was
 * queued instead (the caller queues no body); or -1 on ENOMEM.
 */
int resp_head(conn_t *c, int status, const char *ctype, uint64_t len, time_t mtime,
              const char *extra);

/*
 * Queue a complete error (or other bodyless-by-nature) response with a small
 * HTML body; `extra` as for resp_head.  Whether the connection stays open is
 * the caller's decision (c->keepalive), made before this call.  A head that
 * does not fit becomes a 500 (and the connection closes).  0, or -1 on ENOMEM.
 */
int resp_error(conn_t *c, int status, const char *extra);

#endif
