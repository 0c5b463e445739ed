/*
 * h2 — the HTTP/2 codec (RFC 9113), gatling's own frame layer driven by
 * gatling's own loop: conn.c reads the socket and hands the bytes to
 * h2_recv, which cuts them into frames (a frame wholly in the read buffer
 * is parsed where it lies; one that comes in pieces is gathered in a 16 KiB
 * buffer held only while the connection is busy); h2_fill puts what is to be
 * sent onto the connection's output batch, which conn.c sends as for
 * HTTP/1.1 (writev and sendfile, or through TLS).  HPACK: requests are
 * decoded by Debian's libnghttp2's public nghttp2_hd_inflate_* (hardened
 * against HPACK bombs), responses encoded by our own h2_hpack.c (the
 * dynamic table it mirrors makes a repeated field one byte); both tables
 * 4 KiB, each made on first use: a connection that has sent no request
 * holds neither.
 *
 * Each stream has its own exchange, answered by the same router and
 * handlers as an HTTP/1.1 request; the streams are a list per connection,
 * and a freed one is kept for the next (no malloc per stream while the
 * connection is busy; an idle connection keeps none).  Frames we make go
 * into 16 KiB blocks the connection keeps while busy: control frames and
 * HEADERS as they arise (HPACK writes into the block: the wire order is the
 * encoding order), DATA frames' 9-byte headers when h2_fill frames them.
 * The batch points into the blocks, and a DATA frame's payload is the
 * body's buffer or file range itself (sendfile on plain connections), at
 * most one TLS record's worth (16 KiB - 9) under TLS.  A stream that has
 * ended is kept (with its file and buffers) until the batch has sent
 * everything queued before it: h2_fill only adds to an empty batch, and
 * frees the ended streams first; several streams' frames go in one fill.
 *
 * Which stream's DATA goes first is RFC 9218's urgency and incremental
 * (SETTINGS_NO_RFC7540_PRIORITIES=1; the priority field, PRIORITY_UPDATE):
 * the lowest urgency first, the non-incremental streams one at a time in the
 * order they came, the incremental ones in turns.  Flow control is ours
 * (stream and connection windows both ways; request bodies open the windows
 * as they are dropped or taken by their producer), and so are RFC 9113's
 * rules: stream states (5.1), frame sizes, SETTINGS, PING, GOAWAY,
 * CONTINUATION, the request's fields (8.2, 8.3: pseudo-headers, names in
 * lower case, no connection-specific fields, TE, content-length against
 * DATA); a trailer section is checked and dropped.  The floods are bounded
 * per connection (stats.h's H2_FLOOD_*): every defence that ends a
 * connection goes through one function, GOAWAY ENHANCE_YOUR_CALM.
 *
 * The files (h2_int.h says what they share; calls go one way, down):
 * h2.c, the session (these functions, frames in, SETTINGS, PING, GOAWAY,
 * WINDOW_UPDATE, the request's fields) -> h2_stream.c (streams, their
 * exchanges and the codec ops, request bodies, dispatch, DATA by priority)
 * -> h2_out.c (the frame blocks, control frames out, connection errors, the
 * flood limits); all of them use h2_frame.c, the wire format as pure
 * functions (tests/unit/t_h2_frame.c).
 */
#ifndef GATLING_H2_H
#define GATLING_H2_H

#include "codec/codec.h"

#include <stddef.h>
#include <stdint.h>

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24

typedef struct h2 h2_t;

/* How far p[0..n) matches the client connection preface: 1 all of it (n >=
   24), 0 a prefix so far (read more), -1 it is something else. */
int h2_preface(const char *p, size_t n);

/*
 * A session on the connection f tells of (f->out: its batch); wake(f->conn)
 * is called when a stream's job (site/jobs.h) has resumed and frames may be
 * waiting.  NULL on ENOMEM.
 */
h2_t *h2_new(const codec_conn_t *f, void (*wake)(void *conn));

/* The connection goes: streams' jobs are told, everything is freed. */
void h2_free(h2_t *h);

/* Bytes from the client.  0, or -1: the connection is to be closed (GOAWAY,
   if any, is queued: call h2_fill once more). */
int h2_recv(h2_t *h, const uint8_t *p, size_t n);

/*
 * If the batch is empty: free the streams that ended, then queue the frames
 * that are ready, up to about max bytes.  Returns bytes queued (0: none),
 * or -1 on a fatal error.
 */
long h2_fill(h2_t *h, size_t max);

/* Does the session want more input (asked within a pass, before a read)? */
int h2_want_read(const h2_t *h);

/* Is the session over (GOAWAY both ways, or nothing more to do)? */
int h2_done(const h2_t *h);

/* What the connection asks after each pass of the session, in one report
   (h2_report): the deadline it waits under and whether it reads. */
typedef struct h2_report {
    unsigned streams; /* streams open (being answered) */
    /* of those, the ones that wait only for their producer (a CGI, a
       backend: nothing queued, the request body complete, or paused in a
       self-paced exchange: a gRPC stream, which -Q times): not the
       client's doing, so no -B window runs for them */
    unsigned waiting;
    /* streams whose request body is still coming, and the body bytes read
       in all (they are progress, as bytes sent are, for the -B window) */
    unsigned bodies;
    uint64_t body_bytes;
    /* since when (gio_now() ms) a request head has been incomplete, or 0 if
       none is: the -s deadline runs from there, as for an HTTP/1.1 head.  A
       head is incomplete from the session's start until the first request
       has ended, while a frame has begun to arrive and is not complete, and
       while a stream's request has begun (HEADERS) and not ended
       (END_STREAM) */
    int64_t head_since;
    uint8_t want_read; /* h2_want_read's answer */
    /* the first GOAWAY of a shutdown is said and the second is not: its
       PING unanswered yet (h2_goaway); a connection that has nothing else
       to do then waits a bounded while, then closes after h2_expire's */
    uint8_t goaway_wait;
} h2_report_t;

/* The session's report now into r (walks the streams only while some wait
   for a producer or a head). */
void h2_report(const h2_t *h, h2_report_t *r);

/* Shutting down (SIGTERM/SIGHUP, a reload's drain): GOAWAY in two steps
   (RFC 9113 6.8: 2^31-1 and a PING, then the last stream once the PING is
   answered); the streams in flight, and those on their way, finish.  The
   frames are queued now: a drain calls it when the client next sends
   (conn.c's conn_set_drain says why). */
void h2_goaway(h2_t *h);

/*
 * A deadline has passed (-s for an incomplete head, -T for an idle
 * connection) and the connection is about to be closed: the bytes of a
 * GOAWAY (NO_ERROR, last stream the highest one answered, so the client
 * knows the stream cut off was not acted on and may send it again) in buf,
 * for the caller to send best effort as it sends a 408 over HTTP/1.1.
 * Returns their length, 0 if a frame is half sent (they cannot go now) or
 * cap is under 17.
 */
size_t h2_expire(h2_t *h, char *buf, size_t cap);

#endif
