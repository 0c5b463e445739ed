/*
 * fcgi — FastCGI records (the FastCGI 1.0 specification): what
 * handlers/proxy.c writes to a FastCGI backend (php-fpm) and the parser of
 * what comes back.  Pure: no I/O, no allocation, no globals.
 *
 * A record is an 8-byte header (version 1, type, request id, content
 * length up to 65535, padding up to 255), its content, its padding.
 */
#ifndef GATLING_FCGI_H
#define GATLING_FCGI_H

#include <stddef.h>
#include <stdint.h>

#define FCGI_HEADER_LEN 8
#define FCGI_CONTENT_MAX 65535
#define FCGI_KEEP_CONN 1 /* BEGIN_REQUEST flag: the backend keeps the connection */
#define FCGI_RESPONDER 1 /* BEGIN_REQUEST role */

enum {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
};

enum { FCGI_MALFORMED = -1 };

/* The parser's state between calls; start it zeroed for each connection. */
typedef struct fcgi_parser {
    unsigned char hdr[FCGI_HEADER_LEN]; /* the header being collected */
    unsigned hlen;                      /* ... its bytes so far */
    int type;                           /* the record in progress (0: in a header) */
    unsigned id;
    uint32_t left;         /* content bytes still to come */
    unsigned pad;          /* padding bytes still to come */
    unsigned char body[8]; /* END_REQUEST's content */
    unsigned blen;
} fcgi_parser_t;

/* What one call found. */
typedef struct fcgi_piece {
    int type;      /* FCGI_STDOUT or FCGI_STDERR: content p[0..n); FCGI_END_REQUEST:
                      the request ended; 0: nothing (all input consumed) */
    unsigned id;   /* the record's request id */
    const char *p; /* into the caller's buffer */
    size_t n;
    uint32_t app_status; /* END_REQUEST: the application's exit status */
    int proto_status;    /* END_REQUEST: 0 = request complete */
} fcgi_piece_t;

/*
 * Consume the bytes of buf[0..len) up to and including the first piece
 * worth reporting (a run of STDOUT or STDERR content, or a whole
 * END_REQUEST), skipping headers, padding and records of other types
 * (GET_VALUES_RESULT, UNKNOWN_TYPE).  Returns the bytes consumed (more than
 * 0 whenever len is), *pc says what was found; or FCGI_MALFORMED (a
 * version other than 1, an END_REQUEST whose content is not 8 bytes).
 */
long fcgi_next(fcgi_parser_t *st, const char *buf, size_t len, fcgi_piece_t *pc);

/* Write a record header for type, request id, clen content bytes and pad
   padding bytes to out[0..FCGI_HEADER_LEN). */
void fcgi_header(unsigned char *out, int type, unsigned id, unsigned clen, unsigned pad);

/* BEGIN_REQUEST's record (header and content, 16 bytes) to out. */
void fcgi_begin(unsigned char *out, unsigned id, int keep_conn);

/* The bytes name-value pair (nl, vl) takes in a PARAMS stream. */
static inline size_t fcgi_pair_size(size_t nl, size_t vl)
{
    return (nl < 128 ? 1 : 4) + (vl < 128 ? 1 : 4) + nl + vl;
}

/* Write the pair to out (fcgi_pair_size bytes; nl, vl < 2^31); returns that size. */
size_t fcgi_pair(unsigned char *out, const char *name, size_t nl, const char *value, size_t vl);

#endif
