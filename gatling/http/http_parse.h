/*
 * http_parse — the HTTP/1.x request-head parser (RFC 9112 section 2-5).
 *
 * A pure function over the caller's buffer: no I/O, no allocation, no
 * globals.  The results are pointer/length pairs into that buffer.
 */
#ifndef GATLING_HTTP_PARSE_H
#define GATLING_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HTTP_MAX_TARGET 4096 /* longer request-target: 414 */
#define HTTP_MAX_HEAD 16384  /* longer request line + header section: 431 */
#define HTTP_MAX_HEADERS 100 /* more header fields: 431 */

enum {
    HTTP_MALFORMED = -1, /* *status says how to answer: 400, 414, 431, 505 */
    HTTP_INCOMPLETE = -2 /* need more bytes */
};

typedef struct http_str {
    const char *p;
    size_t n;
} http_str_t;

/* A byte the request-target may hold: visible ASCII (RFC 9112 3.2). */
static inline int http_target_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f;
}

typedef struct http_header {
    http_str_t name, value; /* value without surrounding whitespace */
} http_header_t;

typedef struct http_request {
    http_str_t method, target;
    http_str_t line; /* the whole request line, for the access log */
    int version;     /* 10 for HTTP/1.0, 11 for HTTP/1.1 */
    size_t nheaders;
    http_header_t headers[HTTP_MAX_HEADERS];
} http_request_t;

/*
 * Parse the request head at buf[0..len).  Returns the number of bytes of the
 * head (request line, headers and the empty line; leading empty lines are
 * skipped and counted), HTTP_INCOMPLETE, or HTTP_MALFORMED with *status set.
 * Bare LF line ends are accepted; obs-fold, control characters and
 * whitespace before a header's colon are not.  An over-long target or head
 * is reported as soon as it is seen, before the head is complete; a verdict
 * on a prefix is the verdict on anything that prefix begins (the line is
 * judged left to right, and nothing past HTTP_MAX_HEAD bytes is looked at).
 */
long http_parse_request(const char *buf, size_t len, http_request_t *req, int *status);

/*
 * The same, resumable: a head that arrives in pieces is parsed as it comes,
 * each byte looked at once, so a head dripped a byte per read costs O(n),
 * not O(n^2).  pr starts zeroed for each new head and is passed again with
 * the same buf (grown at its end, not moved) and req: the lines parsed so
 * far stay in req.  Same results as http_parse_request on the whole.
 */
typedef struct http_progress {
    size_t line;  /* the first line not parsed yet */
    size_t seen;  /* bytes already searched for that line's end */
    size_t sp1;   /* the request line's first space + 1 (0: none yet) */
    size_t sp2;   /* ... and its second */
    int started;  /* the request line is parsed */
} http_progress_t;

long http_parse_request_more(const char *buf, size_t len, http_request_t *req, int *status,
                             http_progress_t *pr);

/* Is every byte of s[0..n) a field-value octet (RFC 9110 5.5: VCHAR,
   obs-text, SP, HTAB; no other control byte, no DEL)?  1 yes, 0 no.  Eight
   bytes a step: a word with a control byte or DEL is judged byte by byte. */
int http_value_ok(const char *s, size_t n);

/* Is a[0..n) the field name b[0..n), ignoring the case of letters?  (A
   name is tchars: only a letter's case bit may differ.) */
static inline int http_name_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y && ((x ^ y) != 0x20 || (x | 0x20) - 'a' > 'z' - 'a'))
            return 0;
    }
    return 1;
}

/* The value of the first header named name (n bytes, case-insensitive), or
   NULL.  Inline: a request asks for a dozen fields it mostly does not have,
   and the call cost more than a walk over a few names' lengths. */
static inline const http_str_t *http_header_n(const http_request_t *req, const char *name,
                                              size_t n)
{
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name.n == n && http_name_eq(req->headers[i].name.p, name, n))
            return &req->headers[i].value;
    return NULL;
}

/* How many header fields are named name (n bytes, case-insensitive). */
size_t http_header_count_n(const http_request_t *req, const char *name, size_t n);

/* The same for a NUL-terminated name: inline, so that a literal's length is
   counted by the compiler, not by strlen on every request. */
static inline const http_str_t *http_header(const http_request_t *req, const char *name)
{
    return http_header_n(req, name, strlen(name));
}

static inline size_t http_header_count(const http_request_t *req, const char *name)
{
    return http_header_count_n(req, name, strlen(name));
}

/*
 * The request's one authority (RFC 9112 3.2.2): an absolute-form target's
 * ("http://host:port/..." or https) replaces Host, whatever Host said: the
 * Host field's value is made to point at it (a Host field added if there
 * is none), so that everything after the head reads one authority from
 * Host.  Returns 0, or 400: more than one Host, an empty authority, one
 * with userinfo (RFC 9110 4.2.4), or no room for the field.
 */
int http_request_authority(http_request_t *req);

enum { HTTP_TE_NONE = 0, HTTP_TE_CHUNKED = 1 };

/*
 * The request's Transfer-Encoding (RFC 9112 6.1, RFC 9110 10.1.4): every
 * field line of that name, combined as one list.  Returns HTTP_TE_NONE (no
 * such field), HTTP_TE_CHUNKED (a valid list whose final coding is chunked,
 * chunked appearing once), 501 for a coding we do not know, or 400 for a
 * malformed list, one that does not end in chunked, or chunked twice.
 * Known codings: chunked, gzip, x-gzip, deflate, compress, x-compress
 * (bodies are dropped, so a coding before the final chunked costs nothing).
 */
int http_transfer_coding(const http_request_t *req);

/* Is the request's method m (exactly: methods are case-sensitive)? */
static inline int http_method_is(const http_request_t *req, const char *m)
{
    size_t n = strlen(m);
    return req->method.n == n && !memcmp(req->method.p, m, n);
}

/* Whether comma-separated list s contains token tok (case-insensitive). */
int http_list_has(http_str_t s, const char *tok);

/*
 * Skipping a chunked request body (RFC 9112 7.1) incrementally: feed the
 * bytes as they arrive; the decoder remembers where it is between calls.
 */
typedef struct http_chunked {
    int state;        /* internal */
    uint64_t left;    /* bytes of chunk data still to skip */
    uint64_t total;   /* data bytes seen so far (for the size limit) */
    unsigned linelen; /* length of the current size or trailer line */
    unsigned extra;   /* bytes of extensions and trailers so far */
} http_chunked_t;

enum { HTTP_CHUNKED_MORE = 0, HTTP_CHUNKED_DONE = 1 };

/*
 * Consume up to len bytes of chunked framing and data.  Sets *used to the
 * bytes consumed.  Returns HTTP_CHUNKED_DONE when the last chunk and the
 * trailer section are complete (bytes after that belong to the next
 * request), HTTP_CHUNKED_MORE when it needs more, or HTTP_MALFORMED.
 */
int http_chunked_skip(http_chunked_t *st, const char *buf, size_t len, size_t *used);

/*
 * The same, decoding: consume framing up to and including the first span of
 * chunk data, which is buf[*data_at .. *data_at + *data_len) (*data_len 0:
 * none came, all of buf was framing, or the body is done).  Returns as
 * http_chunked_skip.  A caller that could take only part of the span gives
 * the rest back with http_chunked_unread(st, untaken) and offers the same
 * bytes again later.
 */
int http_chunked_data(http_chunked_t *st, const char *buf, size_t len, size_t *used,
                      size_t *data_at, size_t *data_len);
void http_chunked_unread(http_chunked_t *st, size_t n);

/*
 * Decoding a chunked body (a backend's response): as http_chunked_skip, but
 * the data bytes are moved down to buf[0..*out) in place (the framing
 * between them dropped; *out <= *used), for the caller to pass on.
 */
int http_chunked_decode(http_chunked_t *st, char *buf, size_t len, size_t *used, size_t *out);

/* A response head from a backend server (handlers/proxy.c). */
typedef struct http_response {
    int version; /* 10 or 11 */
    int status;  /* 100-999 */
    size_t nheaders;
    http_header_t headers[HTTP_MAX_HEADERS];
} http_response_t;

/*
 * Parse the response head (RFC 9112 4: status line, fields, empty line) at
 * buf[0..len).  Returns the bytes of the head, HTTP_INCOMPLETE, or
 * HTTP_MALFORMED (not HTTP/1.x, a bad status line or field line, more than
 * HTTP_MAX_HEADERS fields).  Field lines as for requests; the caller bounds
 * len (a head that fills its buffer without ending is malformed to it).
 * Pure: pointers into buf, no allocation.
 */
long http_parse_response(const char *buf, size_t len, http_response_t *resp);

#endif
