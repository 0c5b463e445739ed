/* The CGI response head parser: see cgi_head.h. */
#include "cgi_head.h"

#include <string.h>

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Is s[0..n) the name name (lower case), ignoring case? */
static int name_is(const char *s, size_t n, const char *name)
{
    size_t k = strlen(name);
    if (n != k)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != name[i])
            return 0;
    return 1;
}

/* RFC 9110 5.6.2 tchar */
static int tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Three digits 100-999 at p[0..3), then the end or a space and a reason
   phrase: 0, or -1. */
static int status_code(const char *p, size_t n, cgi_head_t *h)
{
    if (n < 3 || !digit(p[0]) || !digit(p[1]) || !digit(p[2]) || p[0] == '0')
        return -1;
    if (n > 3 && p[3] != ' ')
        return -1;
    h->status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    h->reason = n > 4 ? (http_str_t){p + 4, n - 4} : (http_str_t){p + n, 0};
    return 0;
}

/* A decimal length of at most 18 digits: 0, or -1. */
static int length_value(const char *p, size_t n, int64_t *out)
{
    int64_t v = 0;
    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!digit(p[i]))
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Fields the codec writes itself or that describe one connection. */
static int dropped(const char *name, size_t n)
{
    static const char *const names[] = {"connection", "keep-alive", "transfer-encoding",
                                        "te", "trailer", "upgrade", "proxy-connection",
                                        "date", "server"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (name_is(name, n, names[i]))
            return 1;
    return 0;
}

/* One field line p[0..n) (no line end): 0, or -1. */
static int field(const char *p, size_t n, cgi_head_t *h)
{
    size_t i = 0;
    while (i < n && tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i == n || p[i] != ':') /* no name, no colon, or space before it */
        return -1;
    const char *name = p;
    size_t nl = i++;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    size_t e = n;
    while (e > i && (p[e - 1] == ' ' || p[e - 1] == '\t'))
        e--;
    http_str_t v = {p + i, e - i};
    if (name_is(name, nl, "status"))
        return h->status || status_code(v.p, v.n, h) < 0 ? -1 : 0;
    if (name_is(name, nl, "content-length"))
        return h->content_length >= 0 || length_value(v.p, v.n, &h->content_length) < 0 ? -1 : 0;
    if (name_is(name, nl, "location")) {
        if (h->location.p || !v.n)
            return -1;
        h->location = v;
        return 0;
    }
    if (name_is(name, nl, "content-type")) {
        if (h->content_type.p || !v.n)
            return -1;
        h->content_type = v;
        return 0;
    }
    if (dropped(name, nl))
        return 0;
    if (h->nfields == CGI_FIELDS_MAX)
        return -1;
    h->fields[h->nfields++] = (http_header_t){{name, nl}, v};
    return 0;
}

/* An NPH status line "HTTP/1.x NNN reason": 0, or -1. */
static int status_line(const char *p, size_t n, cgi_head_t *h)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) || !digit(p[7]) || p[8] != ' ')
        return -1;
    h->nph = 1;
    return status_code(p + 9, n - 9, h);
}

/* The complete head buf[0..end): its lines, each checked by the scan. */
static long parse_lines(const char *buf, size_t end, cgi_head_t *h)
{
    size_t at = 0, lines = 0;
    h->content_length = -1;
    while (at < end) {
        const char *nl = memchr(buf + at, '\n', end - at);
        size_t n = (size_t)(nl - (buf + at)); /* the scan found every line's LF */
        if (n && buf[at + n - 1] == '\r')
            n--;
        if (n == 0)
            break; /* the empty line */
        const char *p = buf + at;
        int r = lines == 0 && n >= 5 && !memcmp(p, "HTTP/", 5) ? status_line(p, n, h)
                                                                 : field(p, n, h);
        if (r < 0 || p[0] == ' ' || p[0] == '\t') /* obs-fold */
            return CGI_MALFORMED;
        lines++;
        at = (size_t)(nl - buf) + 1;
    }
    return lines ? (long)end : CGI_MALFORMED;
}

long cgi_head_parse(const char *buf, size_t len, cgi_head_t *h)
{
    size_t i = h->scanned;
    for (; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        size_t n = i - h->line; /* the line's bytes before this one */
        if (i >= CGI_HEAD_MAX)
            return CGI_MALFORMED;
        if (c == '\n' && n && buf[i - 1] == '\r')
            n--; /* the CR of CR LF is not the line's */
        if (n >= (size_t)CGI_LINE_MAX + (c == '\n' || c == '\r'))
            return CGI_MALFORMED;
        if (c == '\r') {
            if (i + 1 >= CGI_HEAD_MAX)
                return CGI_MALFORMED; /* its LF could only be past the bound */
            if (i + 1 == len)
                break; /* look again when the next byte is here */
            if (buf[i + 1] != '\n')
                return CGI_MALFORMED; /* a bare CR: a line end to some, not to others */
            continue;
        }
        if (c == '\n') {
            if (n == 0) {
                h->scanned = i + 1;
                return parse_lines(buf, i + 1, h);
            }
            h->line = i + 1;
            continue;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return CGI_MALFORMED;
    }
    h->scanned = i;
    return CGI_INCOMPLETE;
}
