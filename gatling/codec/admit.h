/*
 * admit — what an HTTP/2 and an HTTP/3 stream's request goes through before
 * the router sees it, alike for both (h2/h2_stream.c, h3/h3.c): its fields
 * kept within a head's cap (HTTP_MAX_HEAD, as for HTTP/1.1: past it 431), a
 * connection's field blocks full (the stream refused, the client may send it
 * again), -R's last request, -A's rate limit, HEAD, the access log's request
 * line; then, once the stream is over, its access-log line and counts, and
 * the informational heads (100 Continue, 103 Early Hints) a stream sends;
 * and for a request with a body, its length, whether a producer takes it
 * as it comes, or 413.
 *
 * What each codec does about it (a GOAWAY, a reset of the stream or of the
 * connection, its own counter) comes through its sb_ops_t
 * (stream_body.h): last, turned_away, info, log_facts.  Nothing here knows
 * a frame.
 */
#ifndef GATLING_ADMIT_H
#define GATLING_ADMIT_H

#include "stream_body.h"

#include <stddef.h>
#include <stdint.h>

/*
 * n bytes of a request field, kept in the stream's blocks NUL-terminated,
 * or NULL: the head is over HTTP_MAX_HEAD (b->bad: 431 at admit_request),
 * or the connection's blocks are full (the stream is refused, admit_refuse).
 */
const char *admit_keep(sbody_t *b, const uint8_t *p, size_t n);

/* The connection holds too many request fields: the stream is refused (the
   codec counts it, SB_NO_ROOM, and resets it, SB_REFUSED), once. */
void admit_refuse(sbody_t *b);

/*
 * The request is complete (or answered before its body: 413): the
 * connection's count and -R (the codec's last() says GOAWAY), -A (the
 * codec's turned_away(SB_RATE_LIMITED)), a head over the cap (431, the
 * codec's turned_away(SB_FIELDS_OVER)), HEAD, the access log's request line
 * written into req (the stream's, ex->req; no room: refused).  0: the
 * router answers it; -1: it was answered or refused here.
 */
int admit_request(sbody_t *b, http_request_t *req);

/* What admit_body found: the body is read and dropped, taken by a producer
   as it comes, or too large to read (413 at once). */
enum { ADMIT_DROP, ADMIT_EARLY, ADMIT_TOO_LARGE };

/*
 * A request head with a body to come: its length into the exchange
 * (req_len: the Content-Length, -1 when none); ADMIT_EARLY when a producer
 * takes the body as it comes (router_streams; b->early: the codec
 * dispatches at once), unless the head is bad or refused; else
 * ADMIT_TOO_LARGE for a length over CODEC_BODY_MAX (the codec answers 413,
 * counted and logged as any request), else ADMIT_DROP.  Then, but for 413,
 * the codec sends 100 Continue if asked (admit_continue).
 */
int admit_body(sbody_t *b);

/* The stream is over: its access-log line and the status page's counts. */
void admit_log(sbody_t *b);

/* Expect: 100-continue (RFC 9110 10.1.1): the client waits for a 100
   before its body; sent through the codec's info().  0, or -1 (ENOMEM). */
int admit_continue(sbody_t *b);

/* 103 Early Hints (the exchange's hints op, for both codecs). */
int admit_codec_hints(exchange_t *ex, const char *link);

#endif
