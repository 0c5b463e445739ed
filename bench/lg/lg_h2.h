/*
 * lg_h2 — the HTTP/2 client side of the load generators: one libnghttp2
 * client session per connection, fed and drained through memory
 * (nghttp2_session_mem_recv / mem_send), so that the caller's loop does all
 * the I/O, plain or TLS.  No I/O, no clock and no globals here.
 *
 * A session has a fixed number of stream slots (the streams a connection
 * may keep in flight); each submitted request takes one and carries the
 * caller's value t (the issue time) until its stream ends.  Ended streams
 * are not reported through callbacks into the caller (nghttp2 forbids
 * sending from inside its callbacks, and the caller would want to send
 * the next request at once): the caller feeds what it read, then takes the
 * ended streams one by one with lg_h2_next() and frees their slots so.
 *
 * A stream ends with a complete response (END_STREAM on HEADERS or DATA:
 * final status and DATA bytes), or is lost: reset by the server
 * (RST_STREAM: LG_E_RST), refused by the server's GOAWAY (its id above
 * GOAWAY's last stream id: LG_E_GOAWAY), or closed by nghttp2 itself for a
 * malformed response or a protocol error (LG_E_PARSE).
 */
#ifndef LG_H2_H
#define LG_H2_H

#include <stddef.h>
#include <stdint.h>

#include "gio_batch.h"

#define LG_H2_MAX_STREAMS 1024 /* slots per session */

/* One request's header fields, made once and submitted many times. */
typedef struct lg_h2_req lg_h2_req_t;

/*
 * :method, :scheme (https if tls), :authority, :path, user-agent, then the
 * fields of extra ("Name: value\r\n" lines, may be NULL) with their names in
 * lower case.  Fields HTTP/2 forbids (Connection, Keep-Alive,
 * Proxy-Connection, Transfer-Encoding, Upgrade) are left out, and a Host
 * field replaces :authority.  NULL when out of memory.
 */
lg_h2_req_t *lg_h2_req_new(const char *method, int tls, const char *authority, const char *path,
                           const char *extra);
void lg_h2_req_free(lg_h2_req_t *q);

/* How a stream ended. */
typedef struct lg_h2_end {
    int64_t t;       /* the value given to lg_h2_submit() */
    int kind;        /* -1: a complete response; else the LG_E_* kind it was lost to */
    int begun;       /* lost: some of its response had arrived */
    unsigned status; /* complete: the final status */
    uint64_t body;   /* DATA payload bytes received on the stream */
} lg_h2_end_t;

typedef struct lg_h2 lg_h2_t;

/*
 * A client session with `streams` slots (1..LG_H2_MAX_STREAMS).  The
 * connection preface and SETTINGS (no push; 1 GiB receive windows, as
 * h2load's defaults, so that flow control never paces a benchmark) are
 * queued: the first lg_h2_fill() sends them.  NULL when out of memory.
 */
lg_h2_t *lg_h2_new(unsigned streams);

/* Free the session (streams still open are dropped; nothing is reported). */
void lg_h2_free(lg_h2_t *h);

/*
 * How many more requests may be submitted now: free slots, at most the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS less the streams open, and 0
 * after a GOAWAY.
 */
unsigned lg_h2_room(lg_h2_t *h);

/* Submit a request (END_STREAM on its HEADERS) in a free slot.  0, or -1. */
int lg_h2_submit(lg_h2_t *h, const lg_h2_req_t *q, int64_t t);

/*
 * Feed n bytes read from the connection.  0; or the LG_E_* kind of a
 * connection that cannot go on: LG_E_NOH2 when the first bytes are an
 * HTTP/1.x response (a server without HTTP/2 answering the preface),
 * LG_E_PARSE when nghttp2 gives up on the session.  Streams that ended are
 * waiting for lg_h2_next() either way.
 */
int lg_h2_feed(lg_h2_t *h, const char *p, size_t n);

/* Take the next ended stream into *e and free its slot: 1, or 0 if none. */
int lg_h2_next(lg_h2_t *h, lg_h2_end_t *e);

/*
 * If b is empty, move what the session has to send (at most about 64 KiB)
 * into it; the bytes live in the session until the next call, which is
 * made only once b is empty again.  Returns the bytes added (0: nothing to
 * send, or b not empty yet), or -1 (out of memory, or a session error).
 */
long lg_h2_fill(lg_h2_t *h, gio_batch_t *b);

/* Streams submitted and not yet taken by lg_h2_next(). */
unsigned lg_h2_inflight(const lg_h2_t *h);

/* Has any response of the streams in flight begun to arrive? */
int lg_h2_begun(const lg_h2_t *h);

/* Did the server send GOAWAY?  1 with its error code in *code, or 0. */
int lg_h2_goaway(const lg_h2_t *h, uint32_t *code);

/* Is the session over (nghttp2 wants neither to read nor to write)? */
int lg_h2_over(lg_h2_t *h);

#endif
