/*
 * What the files of the connection share (conn.c and its parts; not for
 * handlers, nor for server.c, which has conn.h).  Calls go one way, down
 * this list, never back up (make layers checks it):
 *
 *   conn.c           the driver (run, conn_event), conn_new and its free,
 *                    and the answering states HANDLE, DISPATCH, WAIT,
 *                    WRITE, STREAM, H2
 *   conn_open.c      the opening states: PROXY, HANDSHAKE
 *   conn_read.c      reading: IDLE, HEAD, BODY, LINGER, STREAM's input
 *   conn_h2.c        H2's deadline after each pass, and what a passed one
 *                    does
 *   conn_deadline.c  every other state's deadline (enter), and what a
 *                    passed one does, counted by kind
 *   conn_write.c     sending: the batch under the per-event budget, over
 *                    TLS or not; small best-effort messages
 *   conn_request.c   request blocks, the exchange a block holds, the
 *                    request's access-log line
 *   conn_facts.c     what a codec is told of the connection (codec_conn_t),
 *                    the woken connections' list
 */
#ifndef GATLING_CONN_INT_H
#define GATLING_CONN_INT_H

#include "conn_types.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes one connection may send per event: fairness between clients. */
#define CONN_SEND_BUDGET (1 << 20)
/* --acme-on-demand: how often a handshake paused for its certificate looks again,
   and tls_want's value meanwhile (no GIO_* bit: it waits for nothing of the socket) */
#define CONN_PAUSE_LOOK_MS 50
#define CONN_TLS_PAUSED 0x80
#define CONN_DRAIN_GRACE_MS 1000 /* shutting down: how long an idle connection may still send */
/* shutting down: how long an HTTP/2 client may stay quiet before it gets the first GOAWAY
   anyway (conn.c's conn_set_drain) */
#define CONN_H2_GOAWAY_QUIET_MS 250

/* c->h2_busy: streams open or frames queued (a -B window runs); a request
   head incomplete (the -s deadline runs, before any other) */
#define CONN_H2_BUSY 1
#define CONN_H2_HEAD 2

/* conn_open.c */

/* PROXY: the header (-y), then the request or the handshake. */
void conn_st_proxy(conn_t *c);

/* HANDSHAKE: is it TLS at all; then OpenSSL's handshake; ALPN h2 starts H2. */
void conn_st_handshake(conn_t *c);

/* conn_read.c */

/* Read from the client: through TLS on HTTPS.  GIO_AGAIN: call conn_want_input. */
long conn_read(conn_t *c, void *buf, size_t len);

/* The handshake is complete: counted (handshakes, resumed, kTLS). */
void conn_tls_ready(conn_t *c);

/* What became of a handshake's early data, counted once it is known. */
void conn_early_count(conn_t *c);

/* While c->early: read the rest of the early data into the block (past
   inlen) and complete the handshake.  1 complete (c->early 0), GIO_AGAIN
   (conn_want_input), GIO_ERR. */
int conn_early_finish(conn_t *c);

/* After GIO_AGAIN from conn_read: wait for what the read needs. */
void conn_want_input(conn_t *c);

/* Answer status on a stream that cannot be trusted any more, then close. */
void conn_fail(conn_t *c, int status);

/* The connection speaks HTTP/2 from here on; what was read goes to the codec. */
void conn_start_h2(conn_t *c);

/* IDLE, HEAD, BODY, LINGER: the reading states. */
void conn_st_idle(conn_t *c, unsigned events);
void conn_st_head(conn_t *c);
void conn_st_body(conn_t *c);
void conn_st_linger(conn_t *c);

/* STREAM: the request body or a tunnel's bytes to the producer.  0, or -1
   when the connection ends (logged, state CLOSE). */
int conn_stream_input(conn_t *c, unsigned events);

/* conn_deadline.c */

/* -T, a deadline capped by a non-zero -T, -s, the -B window (milliseconds). */
int64_t conn_idle_ms(const conn_t *c);
int64_t conn_capped_ms(const conn_t *c, int64_t ms);
int64_t conn_head_ms(const conn_t *c);
int64_t conn_window_ms(const conn_t *c);

/* The connection's deadline, ms from now (0: none). */
void conn_deadline(conn_t *c, int64_t ms);

/* What a -B window measures: bytes moved (acknowledged, for a response).
   Not in H2 (conn_h2.c adds the session's request body bytes to
   conn_acked). */
uint64_t conn_moved(const conn_t *c);

/* Response bytes the client acknowledged (what was sent less what the
   kernel still holds unacknowledged). */
uint64_t conn_acked(const conn_t *c);

/* Go to state st, with the deadline st waits under. */
void conn_enter(conn_t *c, conn_state_t st);

/* A deadline passed: 1 if the connection goes on (a -B window that was met).
   Not in H2 (conn_h2_timed_out). */
int conn_timed_out(conn_t *c);

/* conn_h2.c */

/* After a pass of H2: its deadline, and what to wait for. */
void conn_h2_wait(conn_t *c, int progress, unsigned send_want);

/* A deadline passed in H2: 1 if the connection goes on. */
int conn_h2_timed_out(conn_t *c);

/* conn_write.c */

/* Send from the batch, at most budget bytes; want: what TLS waits for. */
long conn_send(conn_t *c, uint64_t budget, unsigned *want);

/* A tiny message on an idle socket, best effort (100 Continue, 408, 503). */
void conn_send_small(conn_t *c, const char *msg, size_t len);

/* What the codec says, best effort, on a socket given up on (408, 503). */
void conn_late(conn_t *c, int status);

/* STREAM: push what is queued; the producer hears when it fell below
   EX_STREAM_LOW.  -1: the client went away. */
int conn_stream_send(conn_t *c, unsigned *want);

/* conn_request.c */

/* A request block from the loop's pool (NULL: out of memory); back to it. */
conn_block_t *conn_block_get(conn_set_t *set);
void conn_block_put(conn_set_t *set, conn_block_t *b);

/* A fresh exchange for the next request; the end of one (its file, gzip entry). */
void conn_new_exchange(conn_t *c);
void conn_end_exchange(exchange_t *ex);

/* Log the request that just ended (also one cut short). */
void conn_log_request(conn_t *c);

/* conn_facts.c */

/* A producer woke the connection (codec_conn_t's wake): conn_set_run_poked runs it. */
void conn_poke(void *conn);
void conn_unpoke(conn_t *c);

/* What a codec is told of its connection. */
codec_conn_t conn_facts(conn_t *c);

#endif
