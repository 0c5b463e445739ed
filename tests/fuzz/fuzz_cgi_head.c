/* CGI response heads (http/cgi_head.c): bounds, verdicts, no byte a script
   could inject a field or a response with in any result, and the parser fed
   in pieces giving what one call over the whole gives. */
#include "fuzz.h"
#include "http/cgi_head.h"

/* No CR, LF or NUL in s: what the handler copies into a response head. */
static int clean(http_str_t s)
{
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] == '\r' || s.p[i] == '\n' || s.p[i] == 0)
            return 0;
    return 1;
}

static void check_complete(const char *buf, size_t size, long n, const cgi_head_t *h)
{
    CHECK((size_t)n <= size && n <= CGI_HEAD_MAX);
    CHECK(buf[n - 1] == '\n');
    CHECK(h->status == 0 || (h->status >= 100 && h->status <= 999));
    CHECK(h->content_length >= -1);
    CHECK(h->nfields <= CGI_FIELDS_MAX);
    const http_str_t *s[] = {&h->reason, &h->location, &h->content_type};
    for (size_t i = 0; i < 3; i++)
        CHECK(inside(s[i]->p, s[i]->n, buf, (size_t)n) && clean(*s[i]));
    for (size_t i = 0; i < h->nfields; i++) {
        const http_header_t *f = &h->fields[i];
        CHECK(f->name.n > 0 && inside(f->name.p, f->name.n, buf, (size_t)n));
        CHECK(inside(f->value.p, f->value.n, buf, (size_t)n));
        CHECK(clean(f->name) && clean(f->value) && !memchr(f->name.p, ':', f->name.n));
    }
}

/* Fed in pieces of `step` bytes, one buffer growing: the same verdict, and
   every earlier verdict incomplete. */
static void check_pieces(const char *buf, size_t size, long n, const cgi_head_t *whole, size_t step)
{
    cgi_head_t h;
    memset(&h, 0, sizeof h);
    long m = CGI_INCOMPLETE;
    size_t k = 0;
    while (m == CGI_INCOMPLETE && k < size) {
        k = k + step < size ? k + step : size;
        m = cgi_head_parse(buf, k, &h);
    }
    if (n == CGI_INCOMPLETE) {
        CHECK(m == CGI_INCOMPLETE);
    } else if (n == CGI_MALFORMED) {
        CHECK(m == CGI_MALFORMED);
    } else {
        CHECK(m == n && h.status == whole->status && h.nfields == whole->nfields);
        CHECK(h.content_length == whole->content_length && h.nph == whole->nph);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    cgi_head_t h;
    memset(&h, 0, sizeof h);
    long n = cgi_head_parse(buf, size, &h);
    CHECK(n == CGI_INCOMPLETE || n == CGI_MALFORMED || n > 0);
    if (n == CGI_INCOMPLETE) /* a reader never waits for more than the bound */
        CHECK(size < CGI_HEAD_MAX);
    if (n > 0)
        check_complete(buf, size, n, &h);
    check_pieces(buf, size, n, &h, 1);
    check_pieces(buf, size, n, &h, size > 64 ? size / 7 + 1 : 3);
    free(buf);
    return 0;
}
