/* Preconditions and entity-tags: see conditional.h. */
#include "conditional.h"
#include "cachectl.h"

#include <string.h>

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/*
 * entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE at s[i..n).  Returns the index
 * past it with *weak and the opaque-tag (quotes included) in *op, *on, or 0
 * if malformed.
 */
static size_t parse_etag(const char *s, size_t i, size_t n, int *weak, const char **op, size_t *on)
{
    *weak = 0;
    if (i + 1 < n && s[i] == 'W' && s[i + 1] == '/')
        *weak = 1, i += 2;
    if (i >= n || s[i] != '"')
        return 0;
    size_t start = i++;
    for (; i < n && s[i] != '"'; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x21 || ch == 0x7f) /* etagc = %x21 / %x23-7E / obs-text */
            return 0;
    }
    if (i >= n)
        return 0;
    *op = s + start;
    *on = ++i - start;
    return i;
}

int cond_etag_match(const char *h, size_t n, const char *etag, int weak)
{
    int ew;
    const char *eo;
    size_t eon;
    if (!h || !etag || !parse_etag(etag, 0, strlen(etag), &ew, &eo, &eon))
        return 0;
    int matched = 0;
    for (size_t i = 0; i < n;) {
        if (is_ows(h[i]) || h[i] == ',') {
            i++;
            continue;
        }
        if (h[i] == '*') {
            matched = 1;
            i++;
        } else {
            int w;
            const char *o;
            size_t on, j = parse_etag(h, i, n, &w, &o, &on);
            if (!j)
                return 0;
            /* 8.8.3.2: strong needs both strong; weak ignores W/ on both. */
            if (on == eon && !memcmp(o, eo, on) && (weak || (!w && !ew)))
                matched = 1;
            i = j;
        }
        while (i < n && is_ows(h[i]))
            i++;
        if (i < n && h[i] != ',')
            return 0;
    }
    return matched;
}

/* A date header's value, or -1 if absent or unparsable (then it is ignored):
   any of RFC 9110 5.6.7's three forms, by the one HTTP-date parser
   (cachectl.h's cc_http_date; now reads an rfc850-date's two-digit year). */
static time_t header_date(const http_request_t *req, const char *name, int64_t now)
{
    const http_str_t *v = http_header(req, name);
    if (!v)
        return -1;
    return (time_t)cc_http_date(v->p, v->n, now);
}

/* RFC 9110 13.2.2: the preconditions in their order.  0, 304 or 412. */
int cond_preconditions(const http_request_t *req, const char *etag, time_t mtime, int64_t now)
{
    const http_str_t *im = http_header(req, "If-Match");
    const http_str_t *inm = http_header(req, "If-None-Match");
    time_t t;
    if (im) {
        if (!cond_etag_match(im->p, im->n, etag, 0))
            return 412;
    } else if ((t = header_date(req, "If-Unmodified-Since", now)) >= 0 && mtime > t) {
        return 412;
    }
    if (inm)
        return cond_etag_match(inm->p, inm->n, etag, 1) ? 304 : 0;
    if ((t = header_date(req, "If-Modified-Since", now)) >= 0 && mtime <= t)
        return 304;
    return 0;
}

/* RFC 9110 13.1.5 */
int cond_if_range(const http_request_t *req, const char *etag, time_t mtime, int64_t now)
{
    const http_str_t *ir = http_header(req, "If-Range");
    if (!ir)
        return 1;
    if (http_header_count(req, "If-Range") > 1)
        return 0;
    if (ir->n && (ir->p[0] == '"' || ir->p[0] == 'W'))
        return etag[0] == '"' && ir->n == strlen(etag) && !memcmp(ir->p, etag, ir->n);
    return header_date(req, "If-Range", now) == mtime; /* an exact Last-Modified */
}
