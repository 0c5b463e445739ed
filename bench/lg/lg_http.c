/* lg_http: request formatting and the incremental response parser. */
#include "lg_http.h"

#include <stdio.h>
#include <string.h>

/* Parser states, in the order a response goes through them. */
enum {
    S_VER,        /* "HTTP/1." and the minor digit */
    S_VER_SP,     /* the space after the version */
    S_CODE,       /* three status digits */
    S_CODE_END,   /* SP, CR or LF after them */
    S_REASON,     /* reason phrase, up to LF */
    S_LINE,       /* start of a header line, or the empty line */
    S_HEAD_LF,    /* CR of the empty line seen */
    S_NAME,       /* header field name */
    S_VAL_SKIP,   /* a value we do not care about, up to LF */
    S_VAL_LEN,    /* Content-Length value */
    S_VAL_TE,     /* Transfer-Encoding value */
    S_VAL_CONN,   /* Connection value */
    S_BODY,       /* Content-Length body */
    S_BODY_CLOSE, /* body delimited by the end of the connection */
    S_CHUNK_SIZE,
    S_CHUNK_EXT,
    S_CHUNK_SIZE_LF,
    S_CHUNK_DATA,
    S_CHUNK_CR,
    S_CHUNK_LF,
    S_TRAILER,
    S_TRAILER_SKIP,
    S_TRAILER_LF,
    S_DONE
};

/* Header names we act on; bit i of lg_resp_t.cand is hname[i]. */
static const char *const hname[] = {"content-length", "transfer-encoding", "connection"};
static const uint8_t hlen[] = {14, 17, 10};
enum { H_LEN = 1, H_TE = 2, H_CONN = 4 };

#define M_MISMATCH 0xfe /* the current token already differs from the word */

void lg_resp_start(lg_resp_t *r, int head)
{
    memset(r, 0, sizeof *r);
    r->state = S_VER;
    if (head)
        r->flags = LG_RESP_HEAD;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}
static int is_ows(int c)
{
    return c == ' ' || c == '\t';
}

/* RFC 9110 tchar: what a field name may be made of. */
static int is_tchar(int c)
{
    if (c >= '0' && c <= '9')
        return 1;
    c = lower(c);
    if (c >= 'a' && c <= 'z')
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* One character of a token list element, matched against word w. */
static void tok_char(uint8_t *m, const char *w, unsigned wl, int c)
{
    if (*m < wl && w[*m] == lower(c))
        (*m)++;
    else
        *m = M_MISMATCH;
}

/* End of a token: 1 if it was exactly w (length wl), 0 if it was another, -1 if empty. */
static int tok_end(uint8_t *m, unsigned wl)
{
    int r = *m == wl ? 1 : *m == 0 ? -1 : 0;
    *m = 0;
    return r;
}

/* A delimiter or end of line in the Transfer-Encoding value. */
static void te_delim(lg_resp_t *r)
{
    int t = tok_end(&r->m1, 7);
    if (t == 1)
        r->flags |= LG_RESP_CHUNKED;
    else if (t == 0) /* another coding after chunked: chunked is not the last */
        r->flags &= ~LG_RESP_CHUNKED;
}

static void conn_delim(lg_resp_t *r)
{
    if (tok_end(&r->m1, 5) == 1)
        r->flags |= LG_RESP_CLOSE;
    if (tok_end(&r->m2, 10) == 1)
        r->flags |= LG_RESP_KEEPALIVE;
}

/* Content-Length: OWS digits OWS; the value goes to r->left until EOL. */
static int len_char(lg_resp_t *r, int c)
{
    if (c >= '0' && c <= '9') {
        if (r->m1 == 2 || r->left > (UINT64_MAX - 9) / 10)
            return -1;
        r->left = r->left * 10 + (uint64_t)(c - '0');
        r->m1 = 1;
        return 0;
    }
    if (is_ows(c) || c == '\r') {
        if (r->m1 == 1)
            r->m1 = 2;
        return 0;
    }
    return -1;
}

static int len_end(lg_resp_t *r)
{
    if (!r->m1)
        return -1;
    if ((r->flags & LG_RESP_HAVE_LEN) && r->len != r->left)
        return -1; /* two different lengths: RFC 9112 6.3 says reject */
    r->len = r->left;
    r->left = 0;
    r->flags |= LG_RESP_HAVE_LEN;
    return 0;
}

/* A field name is complete (the ':' was seen): pick what to do with the value. */
static uint8_t name_end(lg_resp_t *r)
{
    r->m1 = r->m2 = 0;
    if ((r->cand & H_LEN) && r->pos == hlen[0])
        return S_VAL_LEN;
    if ((r->cand & H_TE) && r->pos == hlen[1])
        return S_VAL_TE;
    if ((r->cand & H_CONN) && r->pos == hlen[2])
        return S_VAL_CONN;
    return S_VAL_SKIP;
}

static void name_char(lg_resp_t *r, int c)
{
    c = lower(c);
    for (unsigned i = 0; i < 3; i++)
        if ((r->cand & (1u << i)) && (r->pos >= hlen[i] || hname[i][r->pos] != c))
            r->cand &= (uint8_t) ~(1u << i);
    if (r->pos < 255)
        r->pos++;
}

/* The empty line ending the head: decide how the body is delimited. */
static int head_end(lg_resp_t *r)
{
    if (r->status < 200) {
        if (r->status == 101)
            return -1; /* a protocol switch: not something a load generator follows */
        /* an interim response: the final one follows on the same connection */
        uint32_t head = r->head;
        lg_resp_start(r, r->flags & LG_RESP_HEAD);
        r->head = head;
        return S_VER;
    }
    r->flags |= LG_RESP_IN_BODY;
    if ((r->flags & LG_RESP_HEAD) || r->status == 204 || r->status == 304)
        return S_DONE;
    if (r->flags & LG_RESP_CHUNKED) {
        if (r->flags & LG_RESP_HAVE_LEN) /* both: chunked wins, then close (RFC 9112 6.3) */
            r->flags |= LG_RESP_CLOSE;
        r->len = 0;
        r->m1 = 0;
        return S_CHUNK_SIZE;
    }
    if (r->flags & LG_RESP_HAVE_LEN) {
        r->left = r->len;
        return r->left ? S_BODY : S_DONE;
    }
    r->flags |= LG_RESP_CLOSE;
    return S_BODY_CLOSE;
}

/* One byte of the status line (S_VER .. S_CODE_END); 1, or -1 if malformed. */
static long status_step(lg_resp_t *r, int c)
{
    switch (r->state) {
    case S_VER:
        if (r->pos < 7) {
            if (c != "HTTP/1."[r->pos])
                return -1;
            r->pos++;
            return 1;
        }
        if (c < '0' || c > '9')
            return -1;
        if (c == '0')
            r->flags |= LG_RESP_HTTP10;
        r->state = S_VER_SP;
        return 1;
    case S_VER_SP:
        if (c != ' ')
            return -1;
        r->state = S_CODE;
        r->pos = 0;
        return 1;
    case S_CODE:
        if (c < '0' || c > '9')
            return -1;
        r->status = (uint16_t)(r->status * 10 + (c - '0'));
        if (++r->pos == 3) {
            if (r->status < 100 || r->status > 599)
                return -1;
            r->state = S_CODE_END;
        }
        return 1;
    case S_CODE_END:
        if (c == '\n')
            r->state = S_LINE;
        else if (c == ' ' || c == '\r')
            r->state = S_REASON;
        else
            return -1;
        return 1;
    }
    return -1;
}

/*
 * One step in the head: consume bytes of p[0..n) (n > 0) and return how many,
 * or -1 if malformed.  A step that consumes nothing changes the state.
 */
static long head_step(lg_resp_t *r, const char *p, size_t n)
{
    int c = (unsigned char)p[0];
    const char *lf;
    int s;
    if (r->state <= S_CODE_END)
        return status_step(r, c);
    switch (r->state) {
    case S_REASON:
    case S_VAL_SKIP:
        lf = memchr(p, '\n', n);
        if (!lf)
            return (long)n;
        r->state = S_LINE;
        return lf - p + 1;
    case S_LINE:
        if (c == '\r') {
            r->state = S_HEAD_LF;
        } else if (c == '\n') {
            if ((s = head_end(r)) < 0)
                return -1;
            r->state = (uint8_t)s;
        } else if (is_ows(c)) {
            r->state = S_VAL_SKIP; /* obsolete line folding: ignore the continuation */
        } else if (is_tchar(c)) {
            r->state = S_NAME;
            r->cand = H_LEN | H_TE | H_CONN;
            r->pos = 0;
            name_char(r, c);
        } else {
            return -1;
        }
        return 1;
    case S_HEAD_LF:
        if (c != '\n')
            return -1;
        s = head_end(r);
        if (s < 0)
            return -1;
        r->state = (uint8_t)s;
        return 1;
    case S_NAME:
        if (c == ':')
            r->state = name_end(r);
        else if (is_tchar(c))
            name_char(r, c);
        else
            return -1;
        return 1;
    case S_VAL_LEN:
        if (c == '\n') {
            if (len_end(r) < 0)
                return -1;
            r->state = S_LINE;
        } else if (len_char(r, c) < 0) {
            return -1;
        }
        return 1;
    case S_VAL_TE:
    case S_VAL_CONN:
        if (c == '\n' || c == '\r' || c == ',' || is_ows(c)) {
            if (r->state == S_VAL_TE)
                te_delim(r);
            else
                conn_delim(r);
            if (c == '\n')
                r->state = S_LINE;
        } else if (r->state == S_VAL_TE) {
            tok_char(&r->m1, "chunked", 7, c);
        } else {
            tok_char(&r->m1, "close", 5, c);
            tok_char(&r->m2, "keep-alive", 10, c);
        }
        return 1;
    }
    return -1;
}

/* One step in chunk framing (size line, CRLF after data, trailer); as head_step(). */
static long chunk_step(lg_resp_t *r, const char *p, size_t n)
{
    int c = (unsigned char)p[0];
    const char *lf;
    switch (r->state) {
    case S_CHUNK_SIZE:
        if ((c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f')) {
            if (r->len >> 58)
                return -1; /* a chunk of 2^62 bytes: not a real one */
            r->len = r->len * 16 + (uint64_t)(c <= '9' ? c - '0' : lower(c) - 'a' + 10);
            r->m1 = 1;
            return 1;
        }
        if (!r->m1)
            return -1;
        if (c == ';' || is_ows(c))
            r->state = S_CHUNK_EXT;
        else if (c == '\r')
            r->state = S_CHUNK_SIZE_LF;
        else if (c == '\n')
            goto size_done;
        else
            return -1;
        return 1;
    case S_CHUNK_EXT:
        lf = memchr(p, '\n', n);
        if (!lf)
            return (long)n;
        r->state = S_CHUNK_SIZE_LF;
        return lf - p; /* leave the LF for S_CHUNK_SIZE_LF */
    case S_CHUNK_SIZE_LF:
        if (c != '\n')
            return -1;
    size_done:
        r->left = r->len;
        r->state = r->len ? S_CHUNK_DATA : S_TRAILER;
        return 1;
    case S_CHUNK_CR:
        if (c == '\r')
            r->state = S_CHUNK_LF;
        else if (c == '\n')
            goto next_chunk;
        else
            return -1;
        return 1;
    case S_CHUNK_LF:
        if (c != '\n')
            return -1;
    next_chunk:
        r->state = S_CHUNK_SIZE;
        r->len = 0;
        r->m1 = 0;
        return 1;
    case S_TRAILER:
        if (c == '\r')
            r->state = S_TRAILER_LF;
        else if (c == '\n')
            r->state = S_DONE;
        else
            r->state = S_TRAILER_SKIP;
        return 1;
    case S_TRAILER_SKIP:
        lf = memchr(p, '\n', n);
        if (!lf)
            return (long)n;
        r->state = S_TRAILER;
        return lf - p + 1;
    case S_TRAILER_LF:
        if (c != '\n')
            return -1;
        r->state = S_DONE;
        return 1;
    }
    return -1;
}

/* One step in the body; same contract as head_step(). */
static long body_step(lg_resp_t *r, const char *p, size_t n)
{
    size_t take;
    switch (r->state) {
    case S_BODY:
    case S_CHUNK_DATA:
        take = n < r->left ? n : (size_t)r->left;
        r->left -= take;
        r->body += take;
        if (!r->left)
            r->state = r->state == S_BODY ? S_DONE : S_CHUNK_CR;
        return (long)take;
    case S_BODY_CLOSE: r->body += n; return (long)n;
    }
    return chunk_step(r, p, n);
}

int lg_resp_parse(lg_resp_t *r, const char *p, size_t n, size_t *used)
{
    size_t i = 0;
    while (i < n && r->state != S_DONE) {
        long k;
        if (r->state < S_BODY) {
            k = head_step(r, p + i, n - i);
            if (k < 0)
                return LG_HTTP_BAD;
            r->head += (uint32_t)k;
            if (r->head > LG_HTTP_MAX_HEAD)
                return LG_HTTP_BAD;
        } else {
            k = body_step(r, p + i, n - i);
            if (k < 0)
                return LG_HTTP_BAD;
        }
        i += (size_t)k;
    }
    *used = i;
    return r->state == S_DONE ? LG_HTTP_DONE : LG_HTTP_MORE;
}

int lg_resp_eof(lg_resp_t *r)
{
    if (r->state == S_BODY_CLOSE) {
        r->state = S_DONE;
        return LG_HTTP_DONE;
    }
    return r->head == 0 ? LG_HTTP_MORE : LG_HTTP_BAD;
}

int lg_resp_keepalive(const lg_resp_t *r)
{
    if (r->flags & LG_RESP_CLOSE)
        return 0;
    if (r->flags & LG_RESP_HTTP10)
        return (r->flags & LG_RESP_KEEPALIVE) != 0;
    return 1;
}

size_t lg_req_format(char *buf, size_t cap, const char *method, const char *host, const char *path,
                     int keepalive, const char *extra)
{
    int n =
        snprintf(buf, cap, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gatling-bench\r\n%s%s\r\n",
                 method, path, host, keepalive ? "" : "Connection: close\r\n", extra ? extra : "");
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}
