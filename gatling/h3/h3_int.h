/*
 * h3_int — what the HTTP/3 codec's two files share (not for anyone else):
 * the session and stream structures and the calls from one file into the
 * other.  The calls go one way:
 *   h3.c         the session: h3.h's functions, nghttp3's callbacks, the
 *                stream pool, a request's fields and its dispatch, the
 *                stream's sb_ops (HEADERS from a status and fields, resets,
 *                flow control)
 *     -> h3_body.c  the response body: its parts as DATA vectors for
 *                nghttp3 (file ranges read into blocks, kept until
 *                acknowledged)
 * and both use codec/stream_body.c (what a stream does alike over HTTP/2).
 */
#ifndef GATLING_H3_INT_H
#define GATLING_H3_INT_H

#ifdef HAVE_H3
#include "codec/codec.h"
#include "codec/stream_body.h"
#include "http/exchange.h"

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <stddef.h>
#include <stdint.h>

/* as h3.h says (not included: its functions are h3.c's, and h3_body.c would
   point back at it) */
typedef struct h3 h3_t;
typedef struct sb_pool h3_pool_t; /* stream_body.h's sb_pool_t */

#define H3_READ_BLOCK (64 * 1024)     /* a file is read in blocks of this size ... */
#define H3_UNACKED_MAX (1024 * 1024)  /* ... at most this much unacknowledged per stream */

/* A block read from a file for nghttp3, kept until the client acknowledged
   the body up to its end (bytes the server holds anyway need no record). */
typedef struct h3_sent {
    struct h3_sent *next;
    uint64_t end; /* the body offset after its last byte */
    char *b;      /* the bytes, in an allocation of their own (aligned as malloc gives) */
} h3_sent_t;

typedef struct h3_stream {
    exchange_t ex; /* first: the stream is found from its exchange */
    sbody_t sb;    /* then its body (stream_body.h) */
    h3_t *h3;
    int64_t id;
    uint8_t dispatched, answered, headed, peer_ended, in_body;
    uint8_t produced;
    uint8_t malformed; /* RFC 9114 4.1.2: reset H3_MESSAGE_ERROR when its fields end */
    uint8_t held; /* came in 0-RTT, not safe to answer early: waits for the handshake */
    uint8_t fin_owed; /* the response's end still to go to QUIC (h3_fin_owed) */
    int64_t begun;    /* gio_now ms when its fields began (-s) */
    uint64_t body_got;  /* request body bytes dropped: at most CODEC_BODY_MAX */
    uint64_t unacked;   /* body bytes sent and not yet acknowledged */
    uint64_t cur_off; /* in sb.parts[sb.cur] */
    h3_sent_t *sent, **sent_tail; /* blocks read, oldest first */
    struct h3_stream *next, **prevp; /* the session's list (open, dead or spare) */
    http_request_t req;
} h3_stream_t; /* followed in its allocation by its first block of fields (sb.first: SB_CHUNK) */

struct h3 {
    nghttp3_conn *ng;
    ngtcp2_conn *q;
    codec_conn_t f;
    h3_stream_t *open_list, *dead;
    h3_pool_t *pool;   /* where its streams come from and go back to */
    unsigned open;
    unsigned heading;  /* open streams whose request head has not ended */
    unsigned fins_owed; /* streams with fin_owed set */
    sb_conn_t sc; /* what its streams share: wake, bytes held (bodies, fields), drainers */
    uint8_t goaway, bound;
    uint8_t done; /* the handshake completed (h3_handshake_done): no more early data */
    uint8_t headed; /* a request's fields have ended once (-s: no first-request deadline) */
    uint8_t capped; /* the GOAWAY was -R's: streams below it are still answered */
    /* a shutdown in two steps (RFC 9114 5.2, h3_goaway): the notice (GOAWAY
       with the largest id) went at notice_at; shut, the GOAWAY with the last
       stream went, and new streams are refused */
    uint8_t shut;
    unsigned after_notice; /* request streams headed since the notice */
    int64_t notice_at;
    int64_t bound_at; /* gio_now ms of h3_bind */
    uint8_t level;        /* the address's recent offences (peer_allowance) */
    uint8_t calm;         /* a flood was counted: the connection ends */
    uint64_t reset_milli; /* rapid reset's bucket, in thousandths of a stream */
    int64_t reset_at;     /* ... filled up to then (gio_now ms) */
    int64_t reset_last;   /* the stream last counted (RESET_STREAM and STOP_SENDING: once) */
    uint32_t resets;      /* ... how many were (the log line of a rapid reset) */
    char sni[256];        /* the TLS server name, for 421; snilen 0: none */
    size_t snilen;
    ex_client_t *client;  /* the client's certificate where asked (h3_client_cert), or NULL */
};

/* The stream cannot go on: both directions end with code (both files). */
static inline void stream_abort(h3_stream_t *s, uint64_t code)
{
    if (!s->sb.closed)
        ngtcp2_conn_shutdown_stream(s->h3->q, s->id, code);
}

/* Flow control: n bytes of the stream are consumed (the client may send
   more).  Both files; inline, as every STREAM frame's data comes here. */
static inline void consume(h3_t *h, int64_t id, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(h->q, id, n);
    ngtcp2_conn_extend_max_offset(h->q, n);
}

/* ---- h3_body.c: the bodies ---- */

/* nghttp3's data reader (nghttp3_data_reader.read_data): the next vectors
   of the body, until H3_UNACKED_MAX is out unacknowledged; a file range is
   read (pread) into a block of H3_READ_BLOCK bytes kept until acknowledged.
   NGHTTP3_ERR_WOULDBLOCK when nothing is there yet (sb.waits: resumed
   when a part comes) or a read failed (the stream is reset). */
nghttp3_ssize h3_read_data(nghttp3_conn *ng, int64_t id, nghttp3_vec *vec, size_t veccnt,
                           uint32_t *pflags, void *user, void *stream_user);

/* nghttp3's acked_stream_data callback: n more bytes of the body the client
   acknowledged; the blocks read for them are freed, a reader that waited for
   room resumes.  0. */
int h3_on_acked(nghttp3_conn *ng, int64_t id, uint64_t n, void *user, void *stream_user);

#endif
#endif
