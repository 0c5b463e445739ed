/*
 * A site's _redirects and _headers (route/sitefiles_parse.c).  Input: a file
 * text, then after the first NUL byte a request's path.  The text is parsed
 * as both files; the path (made rooted) is matched against both.
 * Invariants: the limits hold; a rule found matches the path and its
 * destination substituted fits, with no byte a target or a field may not
 * carry; the blocks found are in order, each one matching; owned fields are
 * never kept.
 */
#include "route/sitefiles_parse.h"
#include "fuzz.h"

static void check_dest(const sf_rule_t *r, const sf_caps_t *c)
{
    char out[4200];
    long n = sf_subst(out, sizeof out, r->to, r->tolen, c);
    CHECK(n < (long)sizeof out);
    for (long i = 0; i < n; i++)
        CHECK((unsigned char)out[i] > 0x20 && (unsigned char)out[i] < 0x7f);
    CHECK(n < 0 || out[n] == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(data, 0, size);
    size_t tn = nul ? (size_t)(nul - text) : size;
    char path[600] = "/";
    size_t pn = 1;
    if (nul)
        for (const char *p = nul + 1; p < text + size && pn < sizeof path - 1; p++)
            if (*p) /* a decoded path carries no NUL */
                path[pn++] = *p;
    sf_redirects_t r;
    sf_headers_t h;
    if (sf_redirects_parse(&r, text, tn, NULL, NULL) == 0) {
        CHECK(r.ix.nstatic <= SF_STATIC_MAX && r.ix.ndyn <= SF_DYNAMIC_MAX);
        CHECK(r.n == r.ix.nstatic + r.ix.ndyn);
        sf_caps_t c, c2;
        const sf_rule_t *m = sf_redirects_match(&r, path, pn, &c);
        if (m) {
            CHECK(sf_pat_match(&m->from, path, pn, &c2));
            check_dest(m, &c);
        }
        sf_redirects_free(&r);
    }
    if (sf_headers_parse(&h, text, tn, NULL, NULL) == 0) {
        uint32_t idx[64];
        unsigned k = sf_headers_match(&h, path, pn, idx, 64);
        sf_caps_t c;
        for (unsigned i = 0; i < k; i++) {
            CHECK(idx[i] < h.nb && (i == 0 || idx[i] > idx[i - 1]));
            CHECK(sf_pat_match(&h.b[idx[i]].pat, path, pn, &c));
        }
        for (uint32_t i = 0; i < h.nf; i++)
            CHECK(!sf_field_owned(h.f[i].name) && h.f[i].name[0]);
        sf_headers_free(&h);
    }
    return 0;
}
