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
 * ~720 bytes, and ~9 KiB per open stream: conn/h2.c).  What is
 * HTTP/1.1 about a connection (framing, keep-alive, the bytes of a
 * response head) is the codec's, conn/h1.c; conn.c is the
 * socket's: reading, TLS, deadlines, sending the batch.
 */
#ifndef GATLING_CONN_H
#define GATLING_CONN_H

#include "gio_batch.h"
#include "h1.h"
#include "http/http_parse.h"
#include "site/site.h"

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

typedef enum conn_state {
    CONN_IDLE,   /* no request yet: wait for the loop to report data */
    CONN_HEAD,   /* reading (the rest of) a request head */
    CONN_HANDLE, /* a complete head is in the buffer: build the response */
    CONN_BODY,     /* reading and dropping the request body */
    CONN_DISPATCH, /* the request is read: let the handler answer it */
    CONN_WAIT,     /* the handler waits for a job on a worker thread */
    CONN_WRITE,    /* sending the response */
    CONN_LINGER, /* response sent, closing: drain unread input, then close */
    CONN_TARPIT, /* over the request rate: held, unread, until the deadline */
    CONN_HANDSHAKE, /* HTTPS: the TLS handshake */
    CONN_H2,        /* HTTP/2: the codec's session reads and writes (conn/h2.c) */
    CONN_PROXY,     /* -y: reading the PROXY header (proxyproto.h) */
    CONN_STREAM,    /* a producer answers (CGI, proxy): its body out, the request body in */
    CONN_CLOSE   /* to be freed */
} conn_state_t;

#define CONN_IN_CAP (HTTP_MAX_HEAD + 1024) /* a full head plus pipelined bytes */
#define CONN_SPARE_BLOCKS 32    /* request blocks kept for reuse */

typedef struct conn_block {
    http_request_t req;
    http_progress_t prog; /* how far the head in `in` is parsed */
    uint64_t moved;       /* BODY: body bytes read, for the rate check (-B) */
    uint64_t window_at;   /* BODY, WRITE: what had moved when the rate window began */
    h1_t h1;              /* the codec's request: the exchange, framing, the response head */
    char in[CONN_IN_CAP];
} conn_block_t;

/* The connections of one loop: the owner (server.c) embeds it. */
typedef struct conn_set {
    struct conn *list; /* every open connection, for the shutdown */
    conn_block_t *spare[CONN_SPARE_BLOCKS];
    int nspare;
    int draining; /* shutting down: every response is the last */
    struct conn *poked; /* connections a producer woke: run by conn_set_run_poked */
} conn_set_t;

typedef struct conn {
    int kind; /* the loop cookie's kind (server.c): first */
    int fd;
    conn_state_t state;
    site_t *site;
    conn_set_t *set;
    struct conn *prev, *next; /* the set's list */
    conn_block_t *blk;        /* NULL while idle */
    uint32_t inlen;           /* bytes in blk->in */
    uint32_t reqlen;          /* bytes of blk->in taken by the current request */
    uint32_t requests;        /* requests begun on this connection */
    uint16_t local_port;
    uint8_t unread_input;
    uint8_t tls_want;     /* HTTPS: what OpenSSL waits for (GIO_READ/WRITE) after GIO_AGAIN */
    uint8_t tls;          /* accepted on the HTTPS port */
    uint8_t tls_drained;  /* the last TLS read found nothing more (GIO_AGAIN) */
    uint8_t h2_busy;      /* H2: streams open or frames queued (-B runs); a head incomplete (-s) */
    uint8_t counted;      /* the peer is counted open in site->limits (-K): close it once */
    uint8_t poked;        /* on the set's poked list */
    uint8_t stream_busy;  /* STREAM: the client is waited for (a -B window runs) */
    struct conn *poke_next;
    struct ssl_st *ssl;   /* HTTPS: the TLS session (from the first ClientHello byte on) */
    struct h2 *h2;        /* HTTP/2: the codec's session (conn/h2.c) */
    uint64_t h2_window_at; /* H2 with streams open: what had moved when the -B window began */
    gio_batch_t out;
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;
} conn_t;

enum { CONN_NEW_TLS = 1, CONN_NEW_PROXY = 2 };

/*
 * Take over an accepted, non-blocking socket.  how: CONN_NEW_TLS for HTTPS
 * (with cfg->tls's certificates); CONN_NEW_PROXY for a listener behind a
 * proxy (-y): the connection reads a PROXY header first, and its peer
 * becomes the client that header names.  Without CONN_NEW_PROXY the caller
 * has counted peer open in site->limits (limits_conn_open), and the
 * connection closes it when it ends; with it, the connection counts the
 * client itself.  NULL (and fd closed) on error.
 */
conn_t *conn_new(conn_set_t *set, site_t *site, int kind, int fd, const struct sockaddr *peer,
                 socklen_t plen, unsigned how);

/* React to readiness (events) or a passed deadline (events == 0). */
void conn_event(conn_t *c, unsigned events);

/*
 * Shutting down: every connection answers at most one more request, with
 * Connection: close.  An idle keep-alive connection gets a second for it
 * (its client may have sent one already), then closes; tarpitted ones close
 * now.
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

/* The state's name, for debug output and tests. */
const char *conn_state_name(conn_state_t st);


#endif
