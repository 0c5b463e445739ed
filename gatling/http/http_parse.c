/* The request-head parser: see http_parse.h. */
#include "http_parse.h"
#include "owfat.h"

#include <string.h>

/* RFC 9110 5.6.2 tchar: ALPHA, DIGIT and "!#$%&'*+-.^_`|~", as a bit set
   over ASCII (a test per byte of every method and field name) */
static int is_tchar(unsigned char c)
{
    static const uint64_t set[2] = {0x03ff6cfa00000000u, 0x57ffffffc7fffffeu};
    return c < 128 && (set[c >> 6] >> (c & 63) & 1);
}

/* field-value octets: VCHAR, obs-text, SP, HTAB */
static int is_vchar(unsigned char c)
{
    return c >= 0x20 ? c != 0x7f : c == '\t';
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Strip the CR of a CRLF line end; a CR anywhere else is malformed. */
static int content_end(const char *p, const char *lf, const char **e)
{
    *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    return memchr(p, '\r', *e - p) == NULL;
}

/*
 * The request line, a byte at a time (not its LF): 0 to go on, or a status.
 * Left to right, so that the first byte that cannot belong to the line
 * decides: a prefix gets the verdict the whole line would get.
 */
static int request_line_byte(unsigned char c, size_t i, http_progress_t *pr)
{
    static const char version[] = "HTTP/0.0";
    if (!pr->sp1) { /* the method: tchars, then one space */
        if (is_tchar(c))
            return 0;
        if (c != ' ' || i == pr->line)
            return 400;
        pr->sp1 = i + 1;
        return 0;
    }
    if (!pr->sp2) { /* the target: visible ASCII, then one space */
        if (http_target_byte(c))
            return i - pr->sp1 >= HTTP_MAX_TARGET ? 414 : 0;
        if (c != ' ' || i == pr->sp1)
            return 400;
        pr->sp2 = i + 1;
        return 0;
    }
    /* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive; then a CR may
       come before the LF */
    size_t k = i - pr->sp2;
    if (k < sizeof version - 1)
        return (version[k] == '0' ? c >= '0' && c <= '9' : c == (unsigned char)version[k]) ? 0 : 400;
    return k == sizeof version - 1 && c == '\r' ? 0 : 400;
}

/* The request line ends at lf: is it whole? Fill in req. */
static long request_line_end(const char *buf, size_t lf, http_request_t *req, int *status,
                             const http_progress_t *pr)
{
    size_t e = lf > pr->line && buf[lf - 1] == '\r' ? lf - 1 : lf;
    *status = 400;
    if (!pr->sp2 || e - pr->sp2 != 8)
        return HTTP_MALFORMED;
    req->line = (http_str_t){buf + pr->line, e - pr->line};
    req->method = (http_str_t){buf + pr->line, pr->sp1 - 1 - pr->line};
    req->target = (http_str_t){buf + pr->sp1, pr->sp2 - 1 - pr->sp1};
    req->version = (buf[pr->sp2 + 5] - '0') * 10 + (buf[pr->sp2 + 7] - '0');
    if (req->version != 10 && req->version != 11) {
        *status = 505;
        return HTTP_MALFORMED;
    }
    return 0;
}

/* (the word tests are exact as yes/no: a borrow only ever runs past a byte
   that already says yes) */
int http_value_ok(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, d;
        memcpy(&x, s + i, 8);
        d = x ^ ones * 0x7f; /* DEL's bytes become 0 */
        if (((x - ones * 0x20) & ~x & high) | ((d - ones) & ~d & high))
            for (size_t k = i; k < i + 8; k++)
                if (!is_vchar((unsigned char)s[k]))
                    return 0;
    }
    for (; i < n; i++)
        if (!is_vchar((unsigned char)s[i]))
            return 0;
    return 1;
}

/* The field line [p, lf), lf > p (the caller took the empty line).  A CR
   before lf ends the line; any other CR fails the name's or the value's
   test, so the line is not searched for one first. */
static long parse_header(const char *p, const char *lf, http_header_t *h, int *status)
{
    const char *e = lf[-1] == '\r' ? lf - 1 : lf, *q = p;
    *status = 400;
    while (q < e && is_tchar(*q))
        q++;
    /* no empty name, no whitespace before the colon (9112 5.1), no obs-fold */
    if (q == p || q == e || *q != ':')
        return HTTP_MALFORMED;
    h->name = (http_str_t){p, (size_t)(q - p)};
    q++;
    if (!http_value_ok(q, (size_t)(e - q)))
        return HTTP_MALFORMED;
    while (q < e && (*q == ' ' || *q == '\t'))
        q++;
    while (e > q && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    h->value = (http_str_t){q, (size_t)(e - q)};
    return 0;
}

/*
 * The request line at pr->line, whole and well formed, in one pass of a
 * test per byte (request_line_byte's call per byte was most of a head's
 * parse): the offset of its LF, with sp1 and sp2 set as the byte loop sets
 * them; or 0, nothing set, for any line it does not pass (not whole yet,
 * malformed, a target too long), which the byte loop then judges.
 */
static size_t quick_line(const char *buf, size_t len, http_progress_t *pr)
{
    const unsigned char *s = (const unsigned char *)buf, *end = s + len;
    const unsigned char *m = s + pr->line, *p = m, *t;
    while (p < end && is_tchar(*p))
        p++;
    if (p == m || p == end || *p != ' ')
        return 0;
    for (t = ++p; p < end && http_target_byte(*p); p++)
        ;
    /* the target, a space, "HTTP/d.d" and the LF at least */
    if (p == t || p - t > HTTP_MAX_TARGET || end - p < 10 || *p != ' ')
        return 0;
    const unsigned char *v = p + 1;
    if (memcmp(v, "HTTP/", 5) || !is_digit(v[5]) || v[6] != '.' || !is_digit(v[7]))
        return 0;
    p = v + 8;
    if (*p == '\r' && ++p == end)
        return 0;
    if (*p != '\n')
        return 0;
    pr->sp1 = (size_t)(t - s);
    pr->sp2 = (size_t)(v - s);
    return (size_t)(p - s);
}

/* The next line end at or after the progress, or NULL. */
static const char *next_lf(const char *buf, size_t len, const http_progress_t *pr)
{
    size_t from = pr->seen > pr->line ? pr->seen : pr->line;
    return from < len ? memchr(buf + from, '\n', len - from) : NULL;
}

/* The head within buf[0..len), len at most HTTP_MAX_HEAD. */
static long parse_head(const char *buf, size_t len, http_request_t *req, int *status,
                       http_progress_t *pr)
{
    const char *end = buf + len, *lf;
    if (!pr->started) {
        /* 9112 2.2: ignore empty lines before the request line */
        const char *p = buf + pr->line;
        while (p < end && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')))
            p += *p == '\r' ? 2 : 1;
        pr->line = (size_t)(p - buf);
        if (p < end && *p == '\r' && p + 1 == end)
            return HTTP_INCOMPLETE;
        size_t i = pr->seen > pr->line ? pr->seen : pr->line;
        if (i == pr->line && (i = quick_line(buf, len, pr)) == 0)
            i = pr->line; /* the byte loop judges it, from its start */
        for (; i < len && buf[i] != '\n'; i++)
            if ((*status = request_line_byte((unsigned char)buf[i], i, pr)))
                return HTTP_MALFORMED;
        pr->seen = i;
        if (i == len)
            return HTTP_INCOMPLETE;
        if (request_line_end(buf, i, req, status, pr) < 0)
            return HTTP_MALFORMED;
        req->nheaders = 0;
        pr->started = 1;
        pr->line = pr->seen = i + 1;
    }
    while ((lf = next_lf(buf, len, pr))) {
        const char *p = buf + pr->line;
        if (lf == p || (lf == p + 1 && *p == '\r')) /* the empty line: done */
            return lf + 1 - buf;
        if (req->nheaders == HTTP_MAX_HEADERS) {
            *status = 431;
            return HTTP_MALFORMED;
        }
        if (parse_header(p, lf, &req->headers[req->nheaders++], status) < 0)
            return HTTP_MALFORMED;
        pr->line = pr->seen = (size_t)(lf + 1 - buf);
    }
    pr->seen = len; /* no line end in what came so far */
    return HTTP_INCOMPLETE;
}

long http_parse_request_more(const char *buf, size_t len, http_request_t *req, int *status,
                             http_progress_t *pr)
{
    /* nothing past the limit is looked at, so the verdict on a long head
       does not depend on what comes after it */
    long r = parse_head(buf, len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD, req, status, pr);
    if (r == HTTP_INCOMPLETE && len > HTTP_MAX_HEAD) {
        *status = 431;
        return HTTP_MALFORMED;
    }
    return r;
}

long http_parse_request(const char *buf, size_t len, http_request_t *req, int *status)
{
    http_progress_t pr = {0};
    return http_parse_request_more(buf, len, req, status, &pr);
}

int http_request_authority(http_request_t *req)
{
    const char *t = req->target.p, *end = t + req->target.n;
    size_t n = req->target.n, skip = n >= 7 && case_equalb(t, 7, "http://") ? 7
                                   : n >= 8 && case_equalb(t, 8, "https://") ? 8 : 0;
    if (!skip)
        return 0; /* origin-form (or * and CONNECT's): Host says it */
    const char *a = t + skip, *p = a;
    while (p < end && *p != '/' && *p != '?' && *p != '#')
        p++;
    if (p == a || memchr(a, '@', (size_t)(p - a)) || http_header_count(req, "Host") > 1)
        return 400;
    http_str_t auth = {a, (size_t)(p - a)};
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name.n == 4 && case_equalb(req->headers[i].name.p, 4, "Host")) {
            req->headers[i].value = auth;
            return 0;
        }
    if (req->nheaders == HTTP_MAX_HEADERS)
        return 400;
    req->headers[req->nheaders++] = (http_header_t){{"Host", 4}, auth};
    return 0;
}

/* RFC 9110 5.6.4: quoted-string at p; returns its end, or NULL if malformed. */
static const char *skip_quoted(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\' && ++p == end)
            return NULL;
        if (!is_vchar((unsigned char)*p))
            return NULL;
    }
    return NULL;
}

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* *( OWS ";" OWS token "=" ( token / quoted-string ) ) after a coding; NULL if malformed. */
static const char *skip_params(const char *p, const char *end)
{
    for (;;) {
        const char *q = skip_ows(p, end);
        if (q == end || *q != ';')
            return p;
        q = skip_ows(q + 1, end);
        const char *n = q;
        while (q < end && is_tchar((unsigned char)*q))
            q++;
        if (q == n || q == end || *q != '=')
            return NULL;
        if (++q < end && *q == '"') {
            if (!(q = skip_quoted(q, end)))
                return NULL;
        } else {
            for (n = q; q < end && is_tchar((unsigned char)*q); q++)
                ;
            if (q == n)
                return NULL;
        }
        p = q;
    }
}

static int known_coding(const char *p, size_t n)
{
    static const char *const known[] = {"gzip", "x-gzip", "deflate", "compress", "x-compress"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (n == strlen(known[i]) && case_equalb(p, n, known[i]))
            return 1;
    return 0;
}

/*
 * One field line's list; *chunked counts chunked, *last says whether the
 * last coding so far is chunked.  0, or 400/501.
 */
static int te_line(const http_str_t *v, int *chunked, int *last, int *any)
{
    const char *p = v->p, *end = v->p + v->n;
    for (;;) {
        p = skip_ows(p, end);
        if (p < end && *p == ',') { /* empty elements are allowed (9110 5.6.1) */
            p++;
            continue;
        }
        if (p == end)
            return 0;
        const char *t = p;
        while (p < end && is_tchar((unsigned char)*p))
            p++;
        if (p == t)
            return 400;
        size_t n = (size_t)(p - t);
        int is_chunked = n == 7 && case_equalb(t, 7, "chunked");
        if (!is_chunked && !known_coding(t, n))
            return 501;
        const char *q = skip_ows(p, end);
        if (is_chunked && q < end && *q == ';')
            return 400; /* chunked takes no parameters (9112 7) */
        if (!(p = skip_params(p, end)))
            return 400;
        p = skip_ows(p, end);
        if (p < end && *p != ',')
            return 400; /* "foo chunked": two tokens without a comma */
        *chunked += is_chunked;
        *last = is_chunked;
        *any = 1;
    }
}

int http_transfer_coding(const http_request_t *req)
{
    int chunked = 0, last = 0, any = 0, seen = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const http_header_t *h = &req->headers[i];
        if (h->name.n != 17 || !case_equalb(h->name.p, 17, "Transfer-Encoding"))
            continue;
        seen = 1;
        int st = te_line(&h->value, &chunked, &last, &any);
        if (st)
            return st;
    }
    if (!seen)
        return HTTP_TE_NONE;
    /* 9112 6.3: a final coding other than chunked leaves the length unknown */
    return any && last && chunked == 1 ? HTTP_TE_CHUNKED : 400;
}

size_t http_header_count_n(const http_request_t *req, const char *name, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < req->nheaders; i++)
        k += req->headers[i].name.n == n && http_name_eq(req->headers[i].name.p, name, n);
    return k;
}

int http_list_has(http_str_t s, const char *tok)
{
    size_t n = strlen(tok);
    const char *p = s.p, *end = s.p + s.n;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *q = p;
        while (q < end && *q != ',')
            q++;
        const char *e = q;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - p) == n && case_equalb(p, n, tok))
            return 1;
        p = q;
    }
    return 0;
}

/*
 * The chunked framing, one state per place in RFC 9112 7.1's grammar, so
 * that input split anywhere parses the same:
 *
 *   chunk-size  = 1*HEXDIG
 *   chunk-ext   = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
 *   ext-val     = token / quoted-string
 *   trailer     = *( field-line CRLF ) CRLF
 *
 * Line ends are CRLF or a bare LF (as in the head).  Anything else is
 * malformed: "0x3d", "5 x", a trailer line without a colon.
 */
enum {
    CH_SIZE,       /* hex digits of the size */
    CH_EXT_BWS,    /* after the size or an extension: BWS, then ';' or the line end */
    CH_EXT_NAME0,  /* after ';': BWS, then the name's first tchar */
    CH_EXT_NAME,   /* in the name: tchar, or BWS / '=' / ';' / line end */
    CH_EXT_EQ,     /* after the name and BWS: '=', ';' or the line end */
    CH_EXT_VAL0,   /* after '=': BWS, then a token or a quote */
    CH_EXT_TOKEN,  /* in a token value */
    CH_EXT_QUOTED, /* in a quoted value */
    CH_EXT_QESC,   /* after a backslash in a quoted value */
    CH_SIZE_LF,    /* after the CR of the size line */
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TR_START, /* start of a trailer line: a name, or the final line end */
    CH_TR_NAME,
    CH_TR_VALUE,
    CH_TR_LF,  /* after the CR of a trailer line */
    CH_END_LF, /* after the CR of the final empty line */
};

#define CHUNK_LINE_MAX 4096   /* a size line or trailer line longer than this is abuse */
#define CHUNK_EXTRA_MAX 16384 /* extensions and trailers of one body: past this, abuse too */

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* Handle a line end at ch in the size line: 0 to go on, -1 if ch is none. */
static int size_line_end(http_chunked_t *st, unsigned char ch)
{
    if (ch == '\r')
        st->state = CH_SIZE_LF;
    else if (ch == '\n')
        st->state = st->left ? CH_DATA : CH_TR_START, st->linelen = 0;
    else
        return -1;
    return 0;
}

/* One byte of the size line (size and extensions).  0, or HTTP_MALFORMED. */
static int size_line(http_chunked_t *st, unsigned char ch)
{
    if (++st->linelen > CHUNK_LINE_MAX)
        return HTTP_MALFORMED;
    switch (st->state) {
    case CH_SIZE: {
        int h = scan_fromhex(ch);
        if (h >= 0) {
            if (st->linelen > 15) /* more than 60 bits of size */
                return HTTP_MALFORMED;
            st->left = st->left << 4 | (unsigned)h;
            return 0;
        }
        if (st->linelen == 1)
            return HTTP_MALFORMED; /* no digit at all */
        st->state = CH_EXT_BWS;
        return size_line(st, ch) < 0 ? HTTP_MALFORMED : (st->linelen--, 0);
    }
    case CH_EXT_BWS:
        if (is_ws(ch))
            return 0;
        if (ch == ';')
            return st->state = CH_EXT_NAME0, 0;
        return size_line_end(st, ch) < 0 ? HTTP_MALFORMED : 0;
    case CH_EXT_NAME0:
        if (is_ws(ch))
            return 0;
        return is_tchar(ch) ? (st->state = CH_EXT_NAME, 0) : HTTP_MALFORMED;
    case CH_EXT_NAME:
        if (is_tchar(ch))
            return 0;
        st->state = CH_EXT_EQ;
        /* fall through */
    case CH_EXT_EQ:
        if (is_ws(ch))
            return 0;
        if (ch == '=')
            return st->state = CH_EXT_VAL0, 0;
        if (ch == ';')
            return st->state = CH_EXT_NAME0, 0;
        return size_line_end(st, ch) < 0 ? HTTP_MALFORMED : 0;
    case CH_EXT_VAL0:
        if (is_ws(ch))
            return 0;
        if (ch == '"')
            return st->state = CH_EXT_QUOTED, 0;
        return is_tchar(ch) ? (st->state = CH_EXT_TOKEN, 0) : HTTP_MALFORMED;
    case CH_EXT_TOKEN:
        if (is_tchar(ch))
            return 0;
        st->state = CH_EXT_BWS;
        return size_line(st, ch) < 0 ? HTTP_MALFORMED : (st->linelen--, 0);
    case CH_EXT_QUOTED:
        if (ch == '"')
            return st->state = CH_EXT_BWS, 0;
        if (ch == '\\')
            return st->state = CH_EXT_QESC, 0;
        return is_vchar(ch) ? 0 : HTTP_MALFORMED;
    case CH_EXT_QESC:
        return is_vchar(ch) ? (st->state = CH_EXT_QUOTED, 0) : HTTP_MALFORMED;
    }
    return HTTP_MALFORMED;
}

/* One byte of the trailer section.  0, 1 when it ended, or HTTP_MALFORMED. */
static int trailer(http_chunked_t *st, unsigned char ch)
{
    switch (st->state) {
    case CH_TR_START:
        if (ch == '\r')
            return st->state = CH_END_LF, 0;
        if (ch == '\n')
            return 1;
        st->linelen = 1;
        return is_tchar(ch) ? (st->state = CH_TR_NAME, 0) : HTTP_MALFORMED;
    case CH_TR_NAME:
        if (++st->linelen > CHUNK_LINE_MAX)
            return HTTP_MALFORMED;
        if (ch == ':')
            return st->state = CH_TR_VALUE, 0;
        return is_tchar(ch) ? 0 : HTTP_MALFORMED;
    case CH_TR_VALUE:
        if (++st->linelen > CHUNK_LINE_MAX)
            return HTTP_MALFORMED;
        if (ch == '\r')
            return st->state = CH_TR_LF, 0;
        if (ch == '\n')
            return st->state = CH_TR_START, 0;
        return is_vchar(ch) ? 0 : HTTP_MALFORMED;
    case CH_TR_LF:
        return ch == '\n' ? (st->state = CH_TR_START, 0) : HTTP_MALFORMED;
    case CH_END_LF:
        return ch == '\n' ? 1 : HTTP_MALFORMED;
    }
    return HTTP_MALFORMED;
}

int http_chunked_data(http_chunked_t *st, const char *buf, size_t len, size_t *used,
                      size_t *data_at, size_t *data_len)
{
    size_t i = 0;
    *data_len = 0;
    *used = 0; /* what a malformed body reports: callers add it before they look at r */
    while (i < len) {
        unsigned char ch = (unsigned char)buf[i];
        int r;
        switch (st->state) {
        case CH_SIZE_LF:
            if (ch != '\n')
                return HTTP_MALFORMED;
            i++;
            st->state = st->left ? CH_DATA : CH_TR_START;
            st->linelen = 0;
            break;
        case CH_DATA: { /* a span of data: the caller takes it before we go on */
            size_t k = len - i < st->left ? len - i : (size_t)st->left;
            st->left -= k, st->total += k;
            if (!st->left)
                st->state = CH_DATA_CR;
            *data_at = i, *data_len = k;
            *used = i + k;
            return HTTP_CHUNKED_MORE;
        }
        case CH_DATA_CR:
            i++;
            if (ch == '\n')
                st->state = CH_SIZE, st->linelen = 0;
            else if (ch == '\r')
                st->state = CH_DATA_LF;
            else
                return HTTP_MALFORMED;
            break;
        case CH_DATA_LF:
            if (ch != '\n')
                return HTTP_MALFORMED;
            i++;
            st->state = CH_SIZE, st->linelen = 0;
            break;
        case CH_TR_START:
        case CH_TR_NAME:
        case CH_TR_VALUE:
        case CH_TR_LF:
        case CH_END_LF:
            i++;
            if (++st->extra > CHUNK_EXTRA_MAX || (r = trailer(st, ch)) < 0)
                return HTTP_MALFORMED;
            if (r == 1) {
                *used = i;
                return HTTP_CHUNKED_DONE;
            }
            break;
        default: /* the size line */
            i++;
            if (st->state != CH_SIZE && ++st->extra > CHUNK_EXTRA_MAX)
                return HTTP_MALFORMED; /* endless extensions: data bytes are counted elsewhere */
            if (size_line(st, ch) < 0)
                return HTTP_MALFORMED;
            if (st->state == CH_DATA)
                st->linelen = 0;
            break;
        }
    }
    *used = i;
    return HTTP_CHUNKED_MORE;
}

int http_chunked_skip(http_chunked_t *st, const char *buf, size_t len, size_t *used)
{
    size_t at = 0, u, d, n;
    int r;
    do {
        r = http_chunked_data(st, buf + at, len - at, &u, &d, &n);
        at += u;
    } while (r == HTTP_CHUNKED_MORE && n && at < len);
    *used = at;
    return r;
}

void http_chunked_unread(http_chunked_t *st, size_t n)
{
    st->left += n;
    st->total -= n;
    st->state = CH_DATA;
}

int http_chunked_decode(http_chunked_t *st, char *buf, size_t len, size_t *used, size_t *out)
{
    size_t i = 0, o = 0;
    while (i < len) {
        if (st->state == CH_DATA) { /* data: moved down over the framing before it */
            size_t k = len - i < st->left ? len - i : (size_t)st->left;
            memmove(buf + o, buf + i, k);
            o += k, i += k;
            st->left -= k, st->total += k;
            if (!st->left)
                st->state = CH_DATA_CR;
            continue;
        }
        size_t u; /* framing: a byte at a time, so the skipper never eats data */
        int r = http_chunked_skip(st, buf + i, 1, &u);
        i += u;
        if (r != HTTP_CHUNKED_MORE) {
            *used = i, *out = o;
            return r;
        }
    }
    *used = i, *out = o;
    return HTTP_CHUNKED_MORE;
}

/* "HTTP/1.x 200 reason" up to e: 0, or HTTP_MALFORMED. */
static int status_line(const char *p, const char *e, http_response_t *resp)
{
    /* RFC 9112 4: HTTP-version SP 3DIGIT SP [reason]; a missing SP before an
       empty reason is tolerated, as every client does */
    if (e - p < 12 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return HTTP_MALFORMED;
    for (int k = 9; k < 12; k++)
        if (p[k] < '0' || p[k] > '9')
            return HTTP_MALFORMED;
    if (e - p > 12 && p[12] != ' ')
        return HTTP_MALFORMED;
    for (const char *c = p + 12; c < e; c++)
        if (!is_vchar((unsigned char)*c))
            return HTTP_MALFORMED;
    resp->version = p[7] == '1' ? 11 : 10;
    resp->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    return resp->status < 100 ? HTTP_MALFORMED : 0;
}

long http_parse_response(const char *buf, size_t len, http_response_t *resp)
{
    const char *p = buf, *end = buf + len, *lf, *e;
    int status;
    resp->nheaders = 0;
    if (!(lf = memchr(p, '\n', len)))
        return memcmp(buf, "HTTP/1.", len < 7 ? len : 7) ? HTTP_MALFORMED : HTTP_INCOMPLETE;
    if (!content_end(p, lf, &e) || status_line(p, e, resp) < 0)
        return HTTP_MALFORMED;
    for (p = lf + 1; p < end; p = lf + 1) {
        if (!(lf = memchr(p, '\n', (size_t)(end - p))))
            return HTTP_INCOMPLETE;
        if (lf == p || (lf == p + 1 && *p == '\r'))
            return (long)(lf + 1 - buf);
        if (resp->nheaders == HTTP_MAX_HEADERS ||
            parse_header(p, lf, &resp->headers[resp->nheaders], &status) < 0)
            return HTTP_MALFORMED;
        resp->nheaders++;
    }
    return HTTP_INCOMPLETE;
}
