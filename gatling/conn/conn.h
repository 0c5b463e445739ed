/*
 * conn — one client connection: a small state machine driven by readiness
 * and deadlines.  The states, in processing order:
 *
 *   IDLE ─► HEAD ─► HANDLE ─► DISPATCH ─► WRITE ─► IDLE     (keep-alive)
 *                     │          ▲  │  ▲      └───► LINGER ─► CLOSE
 *                     ▼          │  ▼  │
 *                     BODY ──────┘  WAIT         (a body to drop; a job off the loop)
 *   HEAD ─► TARPIT ─► CLOSE                      (-A: over the request rate)
 *   HANDSHAKE ─► HEAD                            (HTTPS: the TLS handshake first)
 *   PROXY ─► IDLE/HEAD or HANDSHAKE              (-y: the PROXY header before all)
 *   HANDSHAKE ─► H2 ─► LINGER                    (HTTPS, ALPN h2)
 *   DISPATCH ─► STREAM ─► IDLE or LINGER         (a producer: CGI, proxy)
 *   HEAD ─► H2                                   (the h2c preface, on the first request)
 *
 * Each state that waits has its own deadline, counted when it fires:
 *   IDLE    -T, the keep-alive idle timeout (a new connection: the head deadline)
 *   HEAD    -s, the whole request head, from its first byte (slowloris)
 *   BODY    -B, a minimum rate, checked over windows (slow bodies)
 *   WRITE   -B, the same for the response (slow readers)
 *   WAIT    -s, for a worker thread to check a password (jobs.h)
 *   LINGER  a short drain of unread input before closing
 *   TARPIT  -T, then close
 *   HANDSHAKE  -s, like a head: bytes that are no TLS handshake close at once
 *   PROXY   -s from the accept, for the PROXY header and the request head
 *           (or the handshake) after it
 *   STREAM  -B over windows while response bytes are queued or the request
 *           body is awaited; none while only the producer is awaited (it
 *           keeps its own deadline, -Q)
 *   H2      -s while a request head is incomplete (until the first request
 *           has ended; a frame begun; a stream's HEADERS without its
 *           END_STREAM), else -T while no stream is open and nothing is
 *           queued; with streams open or frames queued, -B over windows,
 *           as WRITE
 * While a request is read or answered the connection owns a request block
 * (input buffer, parsed head, the exchange the handlers fill, response-head
 * buffer); an IDLE connection holds none, so idle connections cost ~200
 * bytes (conn_t is 184 on x86-64; an HTTP/2 one holds its h2_t too,
 * ~720 bytes, and ~9 KiB per open stream: h2/h2.c).  What is
 * HTTP/1.1 about a connection (framing, keep-alive, the bytes of a
 * response head) is the codec's, h1/h1.c; conn.c and its parts
 * (conn_*.c: conn/README) are the socket's: reading, TLS, deadlines,
 * sending the batch.
 */
#ifndef GATLING_CONN_H
#define GATLING_CONN_H

#include "conn_types.h" /* conn_t, its states, the request block, the set */

enum { CONN_NEW_TLS = 1, CONN_NEW_PROXY = 2 };

/*
 * Take over an accepted, non-blocking socket.  how: CONN_NEW_TLS for HTTPS
 * (with the certificate store, site->proc->tls); CONN_NEW_PROXY for a listener behind a
 * proxy (-y): the connection reads a PROXY header first, and its peer
 * becomes the client that header names.  Without CONN_NEW_PROXY the caller
 * has counted peer open in site->limits (limits_conn_open), and the
 * connection closes it when it ends; with it, the connection counts the
 * client itself.  NULL (and fd closed) on error.
 */
conn_t *conn_new(conn_set_t *set, site_t *site, int fd, const struct sockaddr *peer,
                 socklen_t plen, unsigned how);

/* React to readiness (events) or a passed deadline (events == 0): the
   loop calls it through the connection's watch (c->w), the listener right
   after accept when the request is there already (-a). */
void conn_event(conn_t *c, unsigned events);

/*
 * Shutting down: every connection answers at most one more request, with
 * Connection: close.  An idle keep-alive connection gets a second for it
 * (its client may have sent one already), then closes; tarpitted ones close
 * now.  An HTTP/2 one gets its first GOAWAY ahead of the answers to what its
 * client sends next, or after CONN_H2_GOAWAY_QUIET_MS (250 ms) of quiet.
 */
void conn_set_drain(conn_set_t *set);

/*
 * Run the connections a producer woke (exchange.h: a CGI's or a backend's
 * events change what a connection has to send or read).  They run here,
 * after the loop's events, never inside the producer's own call.  Returns
 * 1 if some were woken again meanwhile (the loop must not sleep).
 */
int conn_set_run_poked(conn_set_t *set);

/* Free the spare request blocks (the connections are closed by then). */
void conn_set_free(conn_set_t *set);

#endif
