/*
 * lg_http — the HTTP/1.x client side of the load generators: building a
 * request and parsing responses incrementally.
 *
 * The response parser is a pure state machine over the bytes it is given: no
 * I/O, no allocation, no copy of the input.  Its whole state is the small
 * lg_resp_t below, so one read buffer can serve every connection of a
 * process and a response may arrive split at any byte.  It understands what a
 * client must understand to find the end of a response (RFC 9112 section 6.3):
 * the status line, Content-Length, Transfer-Encoding: chunked (with chunk
 * extensions and trailers), Connection: close / keep-alive, interim 1xx
 * responses, bodiless 204/304/HEAD responses, and bodies delimited by close.
 * Anything that does not start with "HTTP/1." is malformed at once, so a
 * server that speaks something else gives an error instead of a hang.
 */
#ifndef LG_HTTP_H
#define LG_HTTP_H

#include <stddef.h>
#include <stdint.h>

enum {
    LG_HTTP_BAD = -1, /* malformed: not HTTP, or a framing error */
    LG_HTTP_MORE = 0, /* every byte consumed, the response is not complete */
    LG_HTTP_DONE = 1  /* a final response is complete */
};

/* Flags gathered from the response head. */
enum {
    LG_RESP_HTTP10 = 1,    /* HTTP/1.0 status line */
    LG_RESP_CLOSE = 2,     /* Connection: close, or body delimited by close */
    LG_RESP_KEEPALIVE = 4, /* Connection: keep-alive */
    LG_RESP_CHUNKED = 8,   /* Transfer-Encoding ends in chunked */
    LG_RESP_HAVE_LEN = 16, /* Content-Length seen */
    LG_RESP_HEAD = 32,     /* the request was HEAD: no body whatever the head says */
    LG_RESP_IN_BODY = 64   /* the head is complete */
};

#define LG_HTTP_MAX_HEAD 65536 /* a longer response head is malformed */

typedef struct lg_resp {
    uint8_t state;
    uint8_t flags;
    uint8_t cand;   /* header names still matching the current name */
    uint8_t m1, m2; /* token matchers for the current header value */
    uint8_t pos;    /* position in the status line / header name */
    uint16_t status;
    uint32_t head; /* bytes of the head so far */
    uint64_t len;  /* Content-Length, or the chunk size being parsed */
    uint64_t left; /* body or chunk bytes still to come */
    uint64_t body; /* body bytes of this response (chunk framing excluded) */
} lg_resp_t;

/* Prepare r for the next response; head != 0 if the request was HEAD. */
void lg_resp_start(lg_resp_t *r, int head);

/*
 * Feed n bytes at p.  *used gets how many were consumed: on LG_HTTP_DONE the
 * bytes after *used belong to the next response (call lg_resp_start() and
 * feed them again); on LG_HTTP_MORE all n were consumed; on LG_HTTP_BAD the
 * connection is unusable.  1xx interim responses are consumed silently.
 */
int lg_resp_parse(lg_resp_t *r, const char *p, size_t n, size_t *used);

/*
 * The peer closed the connection.  Returns LG_HTTP_DONE if that completes the
 * response (a body delimited by close), LG_HTTP_MORE if the response had not
 * begun (not a byte of it arrived), LG_HTTP_BAD if it was cut short.
 */
int lg_resp_eof(lg_resp_t *r);

/* Has any byte of the current response arrived? */
static inline int lg_resp_begun(const lg_resp_t *r)
{
    return r->state != 0 || r->head != 0;
}

/* After LG_HTTP_DONE: may the connection carry another request? */
int lg_resp_keepalive(const lg_resp_t *r);

/*
 * Format a request into buf (cap bytes): METHOD path HTTP/1.1, Host, a
 * User-Agent, "Connection: close" unless keepalive, then extra (a block of
 * complete "Name: value\r\n" lines, may be NULL).  Returns its length, or 0
 * if it does not fit.
 */
size_t lg_req_format(char *buf, size_t cap, const char *method, const char *host, const char *path,
                     int keepalive, const char *extra);

#endif
