/*
 * h3 — the HTTP/3 codec (RFC 9114, QPACK RFC 9204), on Debian's libnghttp3
 * 0.8, over one QUIC connection of quic.c (libngtcp2).
 *
 * Each request stream has its own exchange, answered by the same router and
 * handlers as an HTTP/1.1 or HTTP/2 request.  Its response becomes a HEADERS
 * frame (:status, server, date, content-length, the fields, names in lower
 * case) and DATA: buffers are handed to nghttp3 where they are, file ranges
 * are read (pread) into blocks of H3_READ_BLOCK bytes (64 KiB) as QUIC asks
 * for them, since every byte is encrypted in user space.  What nghttp3 was
 * given stays until the client acknowledged it (acked_stream_data), at most
 * H3_UNACKED_MAX bytes (1 MiB) per stream, so a stream that is not read
 * holds a bounded amount of memory (h3_int.h, h3_body.c).
 *
 * quic.c owns the transport and calls in here for what belongs to HTTP:
 * stream data in (h3_recv), the bytes to send (nghttp3_conn_writev_stream on
 * h3_ng), acknowledgements, stream ends.  No call here does I/O.
 */
#ifndef GATLING_H3_H
#define GATLING_H3_H

#ifdef HAVE_H3

#include "codec/codec.h"

#include <stddef.h>
#include <stdint.h>

#define H3_MAX_STREAMS 100            /* request streams open at once (transport parameter) */
#define H3_QPACK_TABLE 4096           /* the decoder's dynamic table (QPACK bombs stay small) */
#define H3_QPACK_BLOCKED 16           /* streams that may wait for the encoder stream */
#define H3_POOL_MAX 512               /* streams an endpoint keeps for reuse (h3_pool_new) */
#define H3_RESET_BURST 200            /* rapid reset: request streams the client resets ... */
#define H3_RESET_RATE 50              /* ... then per second (as HTTP/2's, CVE-2023-44487) */

typedef struct h3 h3_t;
typedef struct sb_pool h3_pool_t; /* stream_body.h's sb_pool_t */
typedef struct nghttp3_conn nghttp3_conn;
typedef struct ngtcp2_conn ngtcp2_conn;
typedef struct nghttp3_mem nghttp3_mem;

/*
 * The stream memory the sessions of one endpoint share: a stream that ends
 * goes back to it and the next stream of any of its sessions takes it,
 * still warm in the cache, instead of a malloc of its ~9 KB.  It keeps no
 * more streams than are open (a busy endpoint's stream memory at most
 * doubles) and at most H3_POOL_MAX, and is emptied whenever no stream of
 * any session is open, so an idle server keeps none.  NULL on ENOMEM.
 * h3_pool_free after the last session's h3_free.
 */
h3_pool_t *h3_pool_new(void);
void h3_pool_free(h3_pool_t *p);

/*
 * A session on QUIC connection q whose facts f tells of (f->out is NULL:
 * nothing goes through an output batch); wake(f->conn) runs the connection
 * soon when a job or producer moved a stream; its streams come from pool,
 * nghttp3's memory from mem (the transport's allocator: quic/quic_mem.h).
 * NULL on ENOMEM.
 */
h3_t *h3_new(const codec_conn_t *f, ngtcp2_conn *q, h3_pool_t *pool, const nghttp3_mem *mem);

/* Open the control and QPACK streams (once the handshake gave 1-RTT keys).
   0, or -1: close the connection. */
int h3_bind(h3_t *h);

/* nghttp3's connection, for quic.c's transport glue. */
nghttp3_conn *h3_ng(h3_t *h);

/*
 * libnghttp3 0.8 loses a response's end when it has no bytes of its own:
 * the FIN that read_data's EOF left after the last DATA was handed out is a
 * zero-length entry of the stream's queue, and the acknowledgement of that
 * last DATA pops it too (nghttp3_stream_add_ack_offset; fixed in nghttp3
 * 1.10, pull request 339).  If QUIC did not take the FIN when it was offered
 * (congestion- or pacing-limited: ngtcp2_conn_writev_stream wrote nothing, or
 * a packet without it), nghttp3 never offers it again and the client waits
 * for the stream's end forever.  So quic.c tells h3_fin_owed(id) of a FIN
 * with no bytes that QUIC did not take, asks h3_owed_fin for one to send
 * itself first (-1: none), and h3_fin_gone(id) once QUIC took it or the
 * stream cannot send any more.  This one: stream id's end alone was
 * offered and not taken.
 */
void h3_fin_owed(h3_t *h, int64_t id);

/* A request stream whose end quic.c is to send itself, or -1. */
int64_t h3_owed_fin(const h3_t *h);

/* QUIC took stream id's end, or the stream can send no more (reset, gone). */
void h3_fin_gone(h3_t *h, int64_t id);

/* The connection goes: streams' jobs and producers are told, all is freed. */
void h3_free(h3_t *h);

/* Stream data from the client.  0, or a negative nghttp3 error: close the
   connection with nghttp3_err_infer_quic_app_error_code of it. */
int h3_recv(h3_t *h, int64_t stream_id, const uint8_t *p, size_t n, int fin);

/* Free the streams that ended (never from inside nghttp3's callbacks). */
void h3_sweep(h3_t *h);

/*
 * The client reset request stream id (RESET_STREAM or STOP_SENDING, the two
 * of one stream counted once when they come together): rapid reset's cost
 * (a request begun and dropped) for the price of a frame or two.
 * The first H3_RESET_BURST, then H3_RESET_RATE a second, scaled down as
 * HTTP/2's by the address's recent offences (peer_budget).  0, or -1: past
 * that, once counted (h3_rapid_reset) and remembered against the address
 * (peer_offence) and logged (one line: the client, the count): the caller
 * closes the connection with H3_EXCESSIVE_LOAD.
 */
int h3_client_reset(h3_t *h, int64_t id);

/* The TLS server name the client asked for (SNI), for 421 (RFC 9110 7.4):
   a Host that another certificate would answer is misdirected. */
void h3_server_name(h3_t *h, const char *name, size_t len);

/* The handshake completed (after h3_client_cert): requests that came in
   0-RTT and were held (codec_early_safe) are answered now; later ones are
   not early data. */
void h3_handshake_done(h3_t *h);

/* The client's certificate (mutual TLS, tls/tls.h's tls_client_quic), for
   the exchanges: h owns facts from here (NULL: none asked). */
void h3_client_cert(h3_t *h, ex_client_t *facts);

/*
 * -s: when (gio_now ms) a request head is overdue, as over HTTP/2: the
 * first request's, counted from the handshake's end (h3_bind), or the
 * oldest stream's whose fields began and have not ended.  INT64_MAX if no
 * head is awaited.  quic.c closes the connection then (timeout_head).
 */
int64_t h3_head_due(const h3_t *h);

/* Request streams the session allows at once: fewer for an address whose floods
   are remembered (peer_budget), as HTTP/2's. */
unsigned h3_max_streams(const h3_t *h);

/*
 * Shutting down (SIGTERM/SIGHUP, a reload's drain, -R), in two steps as RFC
 * 9114 5.2 allows and nghttp3 offers: first the notice, a GOAWAY with the
 * largest stream id, so that the requests the client sent before it read
 * it are still answered; then, H3_NOTICE_MS later (h3_shut_due: the
 * connection's timer calls h3_shut), or once the client opened a window of
 * streams since, the GOAWAY with the last stream, after which a new one is
 * rejected (H3_REQUEST_REJECTED).  The streams in flight finish.
 */
#define H3_NOTICE_MS 1000
void h3_goaway(h3_t *h);

/* The second step (now, if the first one is not said yet). */
void h3_shut(h3_t *h);

/* When the second step is due (gio_now ms), or INT64_MAX. */
int64_t h3_shut_due(const h3_t *h);

/* The second GOAWAY was sent and no stream is left: the connection may close. */
int h3_done(const h3_t *h);

#endif
#endif
