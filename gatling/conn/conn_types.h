/*
 * The connection's types: its states (in processing order: conn.h draws
 * them), the request block, the set of one loop, conn_t.  No functions: so
 * that the files conn.c is split into include them (through conn_int.h)
 * without pointing back at conn.c (make layers: no circle between files).
 */
#ifndef GATLING_CONN_TYPES_H
#define GATLING_CONN_TYPES_H

#include "gio_batch.h"
#include "h1/h1.h"
#include "http/http_parse.h"
#include "site/site.h"
#include "site/watch.h"

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
    CONN_H2,        /* HTTP/2: the codec's session reads and writes (h2/h2.c) */
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
    gio_timer_t goaway; /* draining: the first GOAWAY to the H2 ones that stayed quiet */
} conn_set_t;

typedef struct conn {
    watch_t w; /* the loop's cookie (site/watch.h): conn_event */
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
    uint8_t h2_goaway_due; /* H2, draining: the first GOAWAY waits for the client's next bytes */
    uint8_t early;        /* HTTPS: early data read, the handshake not complete (0.5-RTT) */
    uint8_t early_hold;   /* HANDLE: a request not safe to replay waits for the handshake */
    struct conn *poke_next;
    struct ssl_st *ssl;   /* HTTPS: the TLS session (from the first ClientHello byte on) */
    struct h2 *h2;        /* HTTP/2: the codec's session (h2/h2.c) */
    uint64_t h2_window_at; /* H2 with streams open: what had moved when the -B window began */
    gio_batch_t out;
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;
} conn_t;

#endif
