/*
 * h1 — the HTTP/1.1 codec: the only code that writes HTTP/1.1.  From a
 * parsed request head it decides keep-alive (RFC 9112 9.3 and our caps)
 * and the body's framing, answers 100-continue, and sets up the exchange
 * the handlers answer; their answer becomes the head http/head.h walks (a
 * status line, Server and Date made once a second for a 200, Content-Length
 * or chunked framing, Connection, the exchange's fields) as text in the
 * request block's head buffer, and the body goes onto the connection's output batch
 * behind it (writev and sendfile, as gio_batch sends them).  HEAD is
 * handled here once: the head goes, the body does not.  A head that does
 * not fit its buffer becomes a 500 and closes the connection.  The canned
 * answers sent past the state machine (408, the 503s of the caps and of a
 * full worker queue) are here too.  The codec knows its connection only by
 * the facts it is handed (codec/codec.h): conn.c calls it, never the reverse.
 */
#ifndef GATLING_H1_H
#define GATLING_H1_H

#include "codec/codec.h"
#include "gio_batch.h"
#include "http/exchange.h"
#include "http/http_parse.h"
#include "site/site.h"

#include <stdint.h>
#include <sys/socket.h>

#define H1_HEAD_CAP (EX_FIELD_MAX + 1024) /* a head with its longest field */

enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };

/*
 * One request on an HTTP/1.1 connection, in the connection's request
 * block: the exchange the handlers answer (first: the codec finds its h1_t
 * from the exchange), what the codec decided about the request, and the
 * buffer the response head is written in.
 */
typedef struct h1 {
    exchange_t ex;
    gio_batch_t *out;       /* the connection's output batch */
    struct ssl_st *ssl;     /* HTTPS: the session (Host of another certificate: 421) */
    uint32_t head_len;      /* bytes of the response head */
    uint8_t keepalive;      /* the connection stays open after this response */
    uint8_t http10;         /* an HTTP/1.0 request: keep-alive is said, not implied */
    uint8_t body;           /* BODY_*: framing of the request body */
    uint64_t body_left;     /* BODY_LENGTH: bytes still to drop */
    http_chunked_t chunked; /* BODY_CHUNKED: where the body's framing is */
    /* a producer's response (exchange.h): */
    uint8_t streamed;       /* its head said no length (EX_LEN_STREAM) */
    uint8_t chunked_out;    /* its body is framed chunked (else to the close, for HTTP/1.0) */
    uint8_t tunnel;         /* a 101: raw bytes both ways until either side ends */
    uint8_t ended;          /* the body is complete (ex_body_end) or cut (ex_body_abort) */
    uint8_t input_held;     /* input() took less than offered: wait for ex_input_ready */
    uint8_t input_done;     /* input() was told the body ended (last) */
    uint8_t redispatch;     /* a local redirect: the connection routes the request again */
    void (*wake)(void *conn); /* a producer did something: the connection runs soon */
    char head[H1_HEAD_CAP];
} h1_t;

/* A fresh exchange in h for the next request on the connection f tells of. */
void h1_init(h1_t *h, const codec_conn_t *f);

/*
 * A complete head req is parsed: decide keep-alive (draining: the server is
 * shutting down; requests: begun on this connection so far, for -R) and the
 * body's framing.  Returns 0, or the status to answer (400 for invalid or
 * conflicting framing, 413 over CODEC_BODY_MAX, 501 for an unknown coding).
 */
int h1_request(h1_t *h, const http_request_t *req, int draining, uint32_t requests);

/* The request's body is over CODEC_BODY_MAX, which bounds the bodies dropped
   (a producer takes any length): 413. */
int h1_body_too_large(const h1_t *h);

/*
 * A producer's request body: offer what of it is in in[0..*have) to the
 * producer (in a tunnel, all of it; eof: the client closed).  Taken bytes
 * and framing are removed from in (*have shrinks; what follows the body,
 * a pipelined request, stays).  Returns 1 when the body is done, 0 when it
 * needs more (or the producer holds back: h->input_held), -400 for
 * malformed chunked framing.
 */
int h1_feed(h1_t *h, char *in, uint32_t *have, int eof);

/*
 * A body no producer takes (the request is answered once it is read): drop
 * what of it is in in[0..*have), framed as h1_feed frames it.  Returns 1
 * when the body is done, 0 when it needs more, -400 for malformed chunked
 * framing, -413 when a chunked body passes CODEC_BODY_MAX (a length over it
 * is h1_body_too_large, before the first byte).
 */
int h1_drop(h1_t *h, char *in, uint32_t *have);

/* The "100 Continue" to send (NULL: none) for a request with a body, if its
   client waits for it; body_coming: bytes of the body are here already. */
const char *h1_continue(const http_request_t *req, int body_coming, size_t *len);

/* What to send, best effort, on a socket given up on: 408 after a head
   that did not come in time, 503 when the worker threads are too far
   behind. */
const char *h1_late(int status, size_t *len);

/*
 * Over a connection cap: answer 503 on the accepted socket fd at once,
 * without reading the request, and close it (tls: close only).
 */
void h1_refuse(int fd, int tls);

#endif
