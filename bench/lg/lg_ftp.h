/*
 * lg_ftp — the FTP client side of bench (ftp:// URLs): the reply parser,
 * what a reply means in each phase of an anonymous download session, and
 * the port of an EPSV or PASV reply.  No I/O, no clock, no globals: the
 * caller's loop holds the sockets (bench_run.c).
 *
 * The reply parser is a pure incremental state machine like lg_resp_parse
 * (lg_http.h): its whole state is the small lg_ftp_reply_t below, so one
 * read buffer serves every connection and a reply may arrive split at any
 * byte.  It knows RFC 959 section 4.2: a reply is "ddd text" on one line,
 * or a first line "ddd-text", any lines, and a last line starting with the
 * same code and a space.  The first digit must be 1 to 5, so a server that
 * speaks something else (an HTTP server's "HTTP/1.1 400") is malformed at
 * its first byte instead of a hang.
 */
#ifndef LG_FTP_H
#define LG_FTP_H

#include <stddef.h>
#include <stdint.h>

enum {
    LG_FTP_BAD = -1, /* malformed: not an FTP reply, or longer than LG_FTP_MAX_REPLY */
    LG_FTP_MORE = 0, /* every byte consumed, the reply is not complete */
    LG_FTP_DONE = 1  /* a reply is complete */
};

#define LG_FTP_MAX_REPLY 16384 /* a longer reply (all its lines) is malformed */
#define LG_FTP_TEXT 128        /* bytes of the last line's text kept */

typedef struct lg_ftp_reply {
    uint16_t code;          /* the reply code (from the first line), once complete */
    uint8_t state;          /* where in the reply the parser is */
    uint8_t pos;            /* characters of the code matched at a line start */
    uint16_t tlen;          /* bytes in text[] */
    uint32_t len;           /* bytes of this reply so far */
    char text[LG_FTP_TEXT]; /* the last line's text after "ddd ", CR LF excluded,
                               truncated to fit; not NUL-terminated */
} lg_ftp_reply_t;

/* Prepare r for the next reply. */
void lg_ftp_reply_start(lg_ftp_reply_t *r);

/*
 * Feed n bytes at p.  *used gets how many were consumed: on LG_FTP_DONE the
 * bytes after *used belong to the next reply (call lg_ftp_reply_start() and
 * feed them again); on LG_FTP_MORE all n were consumed; on LG_FTP_BAD the
 * connection is unusable.
 */
int lg_ftp_reply_parse(lg_ftp_reply_t *r, const char *p, size_t n, size_t *used);

/* Has any byte of the current reply arrived? */
static inline int lg_ftp_reply_begun(const lg_ftp_reply_t *r)
{
    return r->len != 0;
}

/*
 * The phases of a session: what the client is waiting for.  Login is
 * GREET (the 220), USER, PASS, TYPE (TYPE I); then IDLE between downloads;
 * a download is EPSV (or PASV), DATA (the data connection is being made, no
 * command is outstanding) and RETR (until the transfer's closing reply).
 */
enum {
    LG_FTP_GREET,
    LG_FTP_USER,
    LG_FTP_PASS,
    LG_FTP_TYPE,
    LG_FTP_IDLE,
    LG_FTP_EPSV,
    LG_FTP_PASV,
    LG_FTP_DATA,
    LG_FTP_RETR
};

/* What the client does with a complete reply (lg_ftp_next). */
enum {
    LG_FTP_A_WAIT,      /* a preliminary 1xx: the real reply is still to come */
    LG_FTP_A_USER,      /* greeted: send USER */
    LG_FTP_A_PASS,      /* 331: send PASS */
    LG_FTP_A_TYPE,      /* logged in: send TYPE I */
    LG_FTP_A_READY,     /* TYPE I accepted: the session can download */
    LG_FTP_A_PASV,      /* EPSV refused as unknown or unsupported: try PASV */
    LG_FTP_A_CONNECT,   /* 229 or 227: connect the data connection */
    LG_FTP_A_DONE,      /* 226 or 250: the transfer is complete on the server's side */
    LG_FTP_A_REFUSED,   /* a 4xx or 5xx reply: this login or download failed */
    LG_FTP_A_CLOSING,   /* 421 between downloads: the server closes an idle session */
    LG_FTP_A_UNEXPECTED /* a reply that makes no sense here: a protocol error */
};

/* The action for reply `code` (100..599) in `phase` (LG_FTP_GREET ..). */
int lg_ftp_next(int phase, unsigned code);

/*
 * The port of a 229 reply's "(|||port|)" (RFC 2428: any printable delimiter
 * for '|'), or -1 if the text has none.
 */
int lg_ftp_epsv_port(const char *text, size_t len);

/*
 * The port of a 227 reply's "h1,h2,h3,h4,p1,p2" (with or without the
 * parentheses RFC 959 shows), or -1.  The address is not returned: bench
 * connects the data connection to the address of the control connection,
 * as curl does by default, so that a reply cannot send it to a third host.
 */
int lg_ftp_pasv_port(const char *text, size_t len);

/*
 * The RETR command for an ftp:// URL's path: "RETR " and the path without
 * its first '/' (RFC 1738: the path is relative to the login directory),
 * CR LF.  Into buf (cap bytes); its length, or 0 if it does not fit or the
 * path names no file (empty, or ends in '/').
 */
size_t lg_ftp_retr_format(char *buf, size_t cap, const char *path);

#endif
