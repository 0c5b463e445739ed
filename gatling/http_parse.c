/* The request-head parser: see http_parse.h. */
#include "http_parse.h"
#include "owfat.h"

#include <string.h>

/* RFC 9110 5.6.2 tchar */
static int is_tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && memchr(extra, c, sizeof extra - 1));
}

/* field-value octets: VCHAR, obs-text, SP, HTAB */
static int is_vchar(unsigned char c)
{
    return c >= 0x20 ? c != 0x7f : c == '\t';
}

/* End of the line starting at p: points at the LF; NULL if not in buf yet. */
static const char *line_end(const char *p, const char *end)
{
    return memchr(p, '\n', end - p);
}

/* Strip the CR of a CRLF line end; a CR anywhere else is malformed. */
static int content_end(const char *p, const char *lf, const char **e)
{
    *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    return memchr(p, '\r', *e - p) == NULL;
}

static long parse_request_line(const char *p, const char *lf, http_request_t *req, int *status)
{
    const char *e, *q = p;
    *status = 400;
    if (!content_end(p, lf, &e))
        return HTTP_MALFORMED;
    req->line = (http_str_t){p, (size_t)(e - p)};
    while (q < e && is_tchar(*q))
        q++;
    if (q == p || q == e || *q != ' ')
        return HTTP_MALFORMED;
    req->method = (http_str_t){p, (size_t)(q - p)};
    const char *t = ++q;
    while (q<e && * q> 0x20 && *q < 0x7f)
        q++;
    if (q - t > HTTP_MAX_TARGET) {
        *status = 414;
        return HTTP_MALFORMED;
    }
    if (q == t || q == e || *q != ' ')
        return HTTP_MALFORMED;
    req->target = (http_str_t){t, (size_t)(q - t)};
    q++;
    /* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive */
    if (e - q != 8 || memcmp(q, "HTTP/", 5) || q[5] < '0' || q[5] > '9' || q[6] != '.' ||
        q[7] < '0' || q[7] > '9')
        return HTTP_MALFORMED;
    req->version = (q[5] - '0') * 10 + (q[7] - '0');
    if (req->version != 10 && req->version != 11) {
        *status = 505;
        return HTTP_MALFORMED;
    }
    return 0;
}

static long parse_header(const char *p, const char *lf, http_header_t *h, int *status)
{
    const char *e, *q = p;
    *status = 400;
    if (!content_end(p, lf, &e))
        return HTTP_MALFORMED;
    while (q < e && is_tchar(*q))
        q++;
    /* no empty name, no whitespace before the colon (9112 5.1), no obs-fold */
    if (q == p || q == e || *q != ':')
        return HTTP_MALFORMED;
    h->name = (http_str_t){p, (size_t)(q - p)};
    for (const char *c = ++q; c < e; c++)
        if (!is_vchar(*c))
            return HTTP_MALFORMED;
    while (q < e && (*q == ' ' || *q == '\t'))
        q++;
    while (e > q && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    h->value = (http_str_t){q, (size_t)(e - q)};
    return 0;
}

long http_parse_request(const char *buf, size_t len, http_request_t *req, int *status)
{
    const char *p = buf, *end = buf + len, *lf;
    /* 9112 2.2: ignore empty lines before the request line */
    while (p < end && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')))
        p += *p == '\r' ? 2 : 1;
    if (p < end && *p == '\r' && p + 1 == end)
        return HTTP_INCOMPLETE;
    req->nheaders = 0;
    if (!(lf = line_end(p, end))) {
        /* judge an unfinished line early, so nobody can make us buffer it */
        const char *sp = memchr(p, ' ', end - p);
        if (sp && (size_t)(end - sp) > HTTP_MAX_TARGET + 2 && !memchr(sp + 1, ' ', end - sp - 1)) {
            *status = 414;
            return HTTP_MALFORMED;
        }
        if (len > HTTP_MAX_HEAD) {
            *status = 431;
            return HTTP_MALFORMED;
        }
        return HTTP_INCOMPLETE;
    }
    if (parse_request_line(p, lf, req, status) < 0)
        return HTTP_MALFORMED;
    for (p = lf + 1;; p = lf + 1) {
        if (!(lf = line_end(p, end)))
            break;
        if (lf == p || (lf == p + 1 && *p == '\r')) { /* the empty line: done */
            if ((size_t)(lf + 1 - buf) > HTTP_MAX_HEAD) {
                *status = 431;
                return HTTP_MALFORMED;
            }
            return lf + 1 - buf;
        }
        if (req->nheaders == HTTP_MAX_HEADERS) {
            *status = 431;
            return HTTP_MALFORMED;
        }
        if (parse_header(p, lf, &req->headers[req->nheaders++], status) < 0)
            return HTTP_MALFORMED;
    }
    /* the head is unfinished; it may not grow past the limit */
    if (len > HTTP_MAX_HEAD) {
        *status = 431;
        return HTTP_MALFORMED;
    }
    return HTTP_INCOMPLETE;
}

const http_str_t *http_header(const http_request_t *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name.n == n && case_equalb(req->headers[i].name.p, n, name))
            return &req->headers[i].value;
    return NULL;
}

size_t http_header_count(const http_request_t *req, const char *name)
{
    size_t k = 0, n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        k += req->headers[i].name.n == n && case_equalb(req->headers[i].name.p, n, name);
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

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF };

#define CHUNK_LINE_MAX 4096 /* a size line or trailer line longer than this is abuse */

int http_chunked_skip(http_chunked_t *st, const char *buf, size_t len, size_t *used)
{
    size_t i = 0;
    while (i < len) {
        unsigned char ch = buf[i];
        switch (st->state) {
        case CH_SIZE: {
            int h = scan_fromhex(ch);
            if (h >= 0) {
                if (st->linelen++ >= 15) /* more than 60 bits of size */
                    return HTTP_MALFORMED;
                st->left = st->left << 4 | (unsigned)h;
                i++;
                break;
            }
            if (st->linelen == 0)
                return HTTP_MALFORMED;
            st->state = CH_EXT;
            break;
        }
        case CH_EXT: /* chunk extensions are ignored, up to the line end */
            i++;
            if (ch == '\n' || ch == '\r')
                st->state = ch == '\r' ? CH_SIZE_LF : CH_DATA;
            else if (++st->linelen > CHUNK_LINE_MAX || ch < 0x09)
                return HTTP_MALFORMED;
            if (st->state == CH_DATA && st->left == 0)
                st->state = CH_TRAILER, st->linelen = 0;
            break;
        case CH_SIZE_LF:
            if (ch != '\n')
                return HTTP_MALFORMED;
            i++;
            st->state = st->left ? CH_DATA : CH_TRAILER;
            st->linelen = 0;
            break;
        case CH_DATA: {
            size_t k = len - i < st->left ? len - i : (size_t)st->left;
            st->left -= k, st->total += k, i += k;
            if (!st->left)
                st->state = CH_DATA_CR;
            break;
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
        case CH_TRAILER: /* trailer fields until an empty line */
            i++;
            if (ch == '\n' || (ch == '\r' && st->linelen == 0)) {
                if (st->linelen == 0) {
                    if (ch == '\r') {
                        st->state = CH_TRAILER_LF;
                        break;
                    }
                    *used = i;
                    return HTTP_CHUNKED_DONE;
                }
                st->linelen = 0;
            } else if (++st->linelen > CHUNK_LINE_MAX) {
                return HTTP_MALFORMED;
            }
            break;
        case CH_TRAILER_LF:
            if (ch != '\n')
                return HTTP_MALFORMED;
            *used = i + 1;
            return HTTP_CHUNKED_DONE;
        }
    }
    *used = i;
    return HTTP_CHUNKED_MORE;
}
