/*
 * conn — one client connection: a small state machine driven by readiness.
 *
 *   READ ──► HANDLE ──► WRITE ──► READ      (keep-alive)
 *              │  ▲        └────► LINGER    (closing: drain unread input)
 *              ▼  │                 └────► CLOSE
 *              BODY                (a request body to read and drop)
 *
 * While a request is being read or answered the connection owns a request
 * block (input buffer, parsed head, path and response-head buffers); an idle
 * keep-alive connection gives it back, so idle connections cost ~200 bytes.
 */
#ifndef GATLING_CONN_H
#define GATLING_CONN_H

#include "gio_batch.h"
#include "http_parse.h"

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

struct server;

typedef enum conn_state {
    CONN_READ,   /* waiting for (the rest of) a request head */
    CONN_HANDLE, /* a complete head is in the buffer: build the response */
    CONN_BODY,   /* reading and dropping the request body, then HANDLE */
    CONN_WRITE,  /* sending the response */
    CONN_LINGER, /* response sent, closing: drain unread input, then close */
    CONN_CLOSE   /* to be freed */
} conn_state_t;

#define CONN_IN_CAP (HTTP_MAX_HEAD + 1024) /* a full head plus pipelined bytes */
#define CONN_PATH_CAP (HTTP_MAX_TARGET + 8)
#define CONN_HEAD_CAP (3 * HTTP_MAX_TARGET + 2048) /* Location carries the encoded path */
#define CONN_BODY_MAX (1 << 20) /* request bodies are dropped; larger ones get 413 */

enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_DONE };

typedef struct conn_block {
    http_request_t req;
    char in[CONN_IN_CAP];
    char path[CONN_PATH_CAP];
    char head[CONN_HEAD_CAP];
    char vhost[272]; /* the request's vhost name, for the access log */
} conn_block_t;

typedef struct conn {
    int kind; /* COOKIE_CONN: first, see server.h */
    int fd;
    conn_state_t state;
    struct server *srv;
    struct conn *prev, *next; /* the server's list of connections */
    conn_block_t *blk;        /* NULL while idle */
    uint32_t inlen;           /* bytes in blk->in */
    uint32_t reqlen;          /* bytes of blk->in taken by the current request */
    uint32_t head_len;        /* bytes of the response head */
    uint16_t status;
    uint16_t local_port;
    uint8_t keepalive, http10, head_only, unread_input;
    uint8_t idle_wait;  /* between requests: read only once the loop says so */
    uint8_t body;       /* BODY_*: framing of the request body */
    uint64_t body_left; /* BODY_LENGTH: bytes still to drop */
    http_chunked_t chunked;
    uint64_t body_len;         /* body bytes of the current response */
    struct fcache_entry *file; /* the open file the response sends, if any */
    struct enc_gz *gz;         /* the gzipped body the response sends, if any */
    gio_batch_t out;
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;
} conn_t;

/* Take over an accepted, non-blocking socket.  NULL (and fd closed) on error. */
conn_t *conn_new(struct server *srv, int fd, const struct sockaddr *peer, socklen_t plen);

/* React to readiness (events) or a passed deadline (events == 0). */
void conn_event(conn_t *c, unsigned events);

/* Shutting down: close now if idle, else after the current response. */
void conn_drain(conn_t *c);

/* The buffer response heads are built in. */
static inline char *conn_head_buf(conn_t *c)
{
    return c->blk->head;
}

#endif
