/*
 * head — a response's head, the same for every protocol: the fields the
 * server adds itself (Server, Date, Content-Type, Content-Length,
 * Last-Modified, HSTS) in their order, then the handler's; and whether a
 * response has a body at all.  The values that are the site's (the
 * server's name, the date, Last-Modified's string, HSTS's max-age) come in
 * a head_t that the codec fills (codec_head_facts); which fields go, in
 * what order and when, is decided here only.  One pass puts them in a table
 * (head_fields_t) that each codec reads: HTTP/1.1 writes each as a text
 * line (h1/h1.c), HTTP/2 and HTTP/3 take the names in lower case, the
 * server's own already so (codec/stream_body.c).  Pure: no allocation, no
 * I/O.
 */
#ifndef GATLING_HEAD_H
#define GATLING_HEAD_H

#include "exchange.h"
#include "response.h"

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

/* The most fields a head has: the server's (status, Server, Date,
   Content-Type, Content-Length or framing, Last-Modified, HSTS,
   Connection) and the handler's. */
#define HEAD_FIELDS_MAX (8 + EX_FIELDS_MAX)

/*
 * A head's fields, in order, as one pass makes them (head_start,
 * head_rest), for the codecs to read directly.  Field i is low[i], what
 * HTTP/2 and HTTP/3 send: the name in lower case ("content-length"), the
 * value, their lengths; and name[i], the name as HTTP/1.1 spells it
 * ("Content-Length").  The first is always ":status" (HTTP/1.1 makes it
 * its status line).  From handler on are the handler's, as it gave them:
 * their low[i].name is NULL (the codec lowers name[i]; low[i].nlen is its
 * length).  The numbers' digits are kept here.
 */
typedef struct head_fields {
    unsigned n, handler;
    http_field_t low[HEAD_FIELDS_MAX];
    const char *name[HEAD_FIELDS_MAX];
    char status[24];
    char length[24];
    char hsts[40]; /* "max-age=" and the digits */
} head_fields_t;

/* The status, Server and Date of h into t, from its start: the start of
   every head (what HTTP/1.1 keeps made for a second). */
void head_start(const head_t *h, head_fields_t *t);

/* The rest of h's fields, appended to t after head_start's (or from none,
   t->n 0, where the codec keeps the start made already): Content-Type,
   Content-Length (only where head_has_body(0, status), with a known
   length; a HEAD's is the GET's) or else HTTP/1.1's framing,
   Last-Modified, HSTS, HTTP/1.1's Connection, then the handler's (at most
   EX_FIELDS_MAX of them: t always has room). */
void head_rest(const head_t *h, head_fields_t *t);

/* Both, in order: the whole head. */
void head_build(const head_t *h, head_fields_t *t);

/* Does the response carry a body?  Not to a HEAD (head_only, RFC 9110
   9.3.2), nor with a 1xx, 204 or 304 status (RFC 9110 6.4.1): what every
   codec and every handler that relays a backend's body asks. */
int head_has_body(int head_only, int status);

#endif
