/*
 * cgi_head — the head of a CGI response (RFC 3875 6.2-6.3), as a CGI
 * script, a FastCGI or an SCGI backend writes it: header fields up to an
 * empty line, with Status, Location, Content-Type and Content-Length read
 * out, and, for a non-parsed-header (NPH) script, an "HTTP/1.x NNN reason"
 * status line first.
 *
 * A pure function over the caller's buffer: no I/O, no allocation, no
 * globals; the results are pointer/length pairs into that buffer.  It is
 * incremental: the caller keeps the cgi_head_t between calls and passes the
 * buffer again, grown at its end, and only the new bytes are searched for
 * the end of the head.  Lines end in LF or CR LF; a CR anywhere else, a NUL
 * or another control character (HTAB excepted in values), a line longer than
 * CGI_LINE_MAX, a head longer than CGI_HEAD_MAX or with more than
 * CGI_FIELDS_MAX other fields, a folded line or a field name that is no
 * token makes the head malformed, so nothing a script writes can inject a
 * field or a response of its own.
 */
#ifndef GATLING_CGI_HEAD_H
#define GATLING_CGI_HEAD_H

#include "http_parse.h"

#include <stddef.h>
#include <stdint.h>

#define CGI_HEAD_MAX 16384  /* a longer head is malformed */
#define CGI_LINE_MAX 8192   /* so is a longer line (its line end not counted) */
#define CGI_FIELDS_MAX 32   /* other fields than the ones read out */

enum {
    CGI_MALFORMED = -1, /* answer 502 */
    CGI_INCOMPLETE = -2 /* need more bytes */
};

typedef struct cgi_head {
    /* the results, valid when cgi_head_parse returned a length */
    int status;        /* Status: or the NPH status line, 100-999; 0: none given */
    http_str_t reason; /* its reason phrase (may be empty) */
    int nph;           /* the head began with an HTTP/1.x status line */
    http_str_t location, content_type; /* {NULL, 0}: absent */
    int64_t content_length;            /* -1: absent */
    size_t nfields;
    http_header_t fields[CGI_FIELDS_MAX]; /* the others, in order, without the
                                             hop-by-hop ones and the codec's own
                                             (Connection, Keep-Alive,
                                             Transfer-Encoding, TE, Trailer,
                                             Upgrade, Proxy-Connection, Date,
                                             Server) */
    /* progress between calls (start zeroed) */
    size_t scanned; /* bytes searched for the head's end */
    size_t line;    /* where the current line began */
} cgi_head_t;

/*
 * Parse the CGI response head at buf[0..len).  h starts zeroed for each
 * response and is passed again with the same buffer, grown at its end.
 * Returns the length of the head (its empty line included; the body follows
 * it), CGI_INCOMPLETE, or CGI_MALFORMED (also as soon as a line or the head
 * is seen to be too long or to hold a forbidden byte).  A head that is only
 * an empty line is malformed (RFC 3875 6.2: at least one CGI field), as is a
 * Status or Content-Length given twice or not a number, or Status outside
 * 100-999.
 */
long cgi_head_parse(const char *buf, size_t len, cgi_head_t *h);

#endif
