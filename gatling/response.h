/*
 * response — status lines, response heads and the small HTML error pages.
 * A head is built in the request block's head buffer and queued on the
 * connection's output batch; bodies follow as buffers or file ranges.
 */
#ifndef GATLING_RESPONSE_H
#define GATLING_RESPONSE_H

#include "conn.h"

#include <stdint.h>
#include <time.h>

/* The reason phrase for status ("Unknown" if we never send it). */
const char *resp_reason(int status);

/*
 * Queue a response head: status line, Date, Server, Content-Type (if ctype),
 * Content-Length, Last-Modified (if mtime >= 0), the Connection header the
 * keep-alive decision needs, then `extra` (complete "Name: value\r\n" lines,
 * or NULL).  Sets c->status and c->body_len.  Returns 0, or -1 on ENOMEM.
 */
int resp_head(conn_t *c, int status, const char *ctype, uint64_t len, time_t mtime,
              const char *extra);

/*
 * Queue a complete error (or other bodyless-by-nature) response with a small
 * HTML body; statuses that end the connection (400, 414, 431, ...) turn
 * keep-alive off.  `extra` as for resp_head.
 */
int resp_error(conn_t *c, int status, const char *extra);

#endif
