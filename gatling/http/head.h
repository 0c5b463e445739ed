/*
 * head — a response's head, the same for every protocol: the fields the
 * server adds itself (Server, Date, Content-Type, Content-Length,
 * Last-Modified, HSTS) in their order, then the handler's; and whether a
 * response has a body at all.  One walk calls a sink per field: HTTP/1.1
 * writes each as a text line (h1/h1.c), HTTP/2 and HTTP/3 in lower case
 * for HPACK and QPACK (codec/stream_body.c).  The values that are the
 * site's (the server's name, the date, Last-Modified's string, HSTS's
 * max-age) come in a
 * head_t that the codec fills (codec_head_facts); which fields go, in what
 * order and when, is decided here only.  Pure: no allocation, no I/O.
 */
#ifndef GATLING_HEAD_H
#define GATLING_HEAD_H

#include "exchange.h"

#include <stddef.h>
#include <stdint.h>

/* What a response's head says besides the handler's fields. */
typedef struct head {
    int status;
    const char *server;       /* Server's value ("gatling/0.1") */
    const char *date;         /* Date's value */
    const char *ctype;        /* Content-Type's value; NULL: none */
    uint64_t len;             /* the body's length (EX_LEN_STREAM: not known) */
    const char *modified;     /* Last-Modified's value; NULL: none */
    int64_t hsts;             /* Strict-Transport-Security's max-age; < 0: none */
    const char *framing;      /* HTTP/1.1: Transfer-Encoding, where no Content-Length goes */
    const char *connection;   /* HTTP/1.1: Connection's value; NULL: none */
    const ex_field_t *fields; /* the handler's, in the order it added them */
    unsigned nfields;
} head_t;

/* Which field a sink is given: the server's own in the order they go, then
   the handler's. */
enum {
    HEAD_STATUS, /* ":status", num: the status (HTTP/1.1 makes it its status line) */
    HEAD_SERVER,
    HEAD_DATE,
    HEAD_CTYPE,
    HEAD_LENGTH,
    HEAD_FRAMING,
    HEAD_MODIFIED,
    HEAD_HSTS,
    HEAD_CONNECTION,
    HEAD_HANDLER
};

/* One field: its name as HTTP/1.1 spells it ("Content-Length"; the
   handler's as it gave it) and, for the server's own, in lower case (lower,
   as HTTP/2 and HTTP/3 send it; NULL for the handler's), its value
   (numeric: the value's text is value then num in decimal: "max-age=" 600). */
typedef struct head_field {
    uint8_t kind;    /* HEAD_* */
    uint8_t numeric; /* num follows value */
    const char *name, *lower, *value;
    size_t nlen, vlen; /* strlen(name), strlen(value) */
    uint64_t num;
} head_field_t;

/* What a codec does with each field, in order; arg is the codec's. */
typedef void (*head_sink_t)(void *arg, const head_field_t *f);

/* The status, Server and Date of h, to sink: the start of every head (what
   HTTP/1.1 keeps made for a second). */
void head_start(const head_t *h, head_sink_t sink, void *arg);

/* The rest of h's fields, to sink, after head_start's: Content-Type,
   Content-Length (only where head_has_body(0, status), with a known
   length; a HEAD's is the GET's) or else HTTP/1.1's framing,
   Last-Modified, HSTS, HTTP/1.1's Connection, then the handler's. */
void head_rest(const head_t *h, head_sink_t sink, void *arg);

/* Both, in order: the whole head. */
void head_walk(const head_t *h, head_sink_t sink, void *arg);

/* Does the response carry a body?  Not to a HEAD (head_only, RFC 9110
   9.3.2), nor with a 1xx, 204 or 304 status (RFC 9110 6.4.1): what every
   codec and every handler that relays a backend's body asks. */
int head_has_body(int head_only, int status);

#endif
