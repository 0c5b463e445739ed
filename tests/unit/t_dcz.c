/*
 * Compression dictionaries (RFC 9842): the Available-Dictionary parse and
 * its refusals, match patterns, .dictionary lines and the Use-As-Dictionary
 * value, Accept-Encoding's dcz, and the dcz framing: 40 bytes of header
 * with the dictionary's SHA-256, then a zstd frame that zstd, given the
 * dictionary as prefix, decodes to the file byte for byte.
 */
#include "http/dcz.h"
#include "site/dict.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* base64 of SHA-256("abc") and the hash itself */
static const char *ABC64 = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=";
static const uint8_t ABC[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};

static int avail(const char *v)
{
    uint8_t h[32];
    int r = dcz_parse_available(v, strlen(v), h);
    return r == 0 && !memcmp(h, ABC, 32) ? 1 : r == 0 ? 2 : 0;
}

static void available(void)
{
    char v[128];
    snprintf(v, sizeof v, ":%s:", ABC64);
    is_int(avail(v), 1, "a byte sequence of 32 bytes");
    snprintf(v, sizeof v, "  :%.43s:  ", ABC64);
    is_int(avail(v), 1, "padding optional, OWS around");
    snprintf(v, sizeof v, ":%s:;x=1", ABC64);
    is_int(avail(v), 1, "parameters ignored");
    snprintf(v, sizeof v, ":%s:, :%s:", ABC64, ABC64);
    is_int(avail(v), 0, "a list: refused");
    snprintf(v, sizeof v, "%s", ABC64);
    is_int(avail(v), 0, "no colons: refused");
    snprintf(v, sizeof v, ":%.40s:", ABC64);
    is_int(avail(v), 0, "too short: refused");
    snprintf(v, sizeof v, ":%sAAAA:", ABC64);
    is_int(avail(v), 0, "too long: refused");
    snprintf(v, sizeof v, ":%s:", ABC64);
    v[5] = '-';
    is_int(avail(v), 0, "base64url's '-': refused");
    snprintf(v, sizeof v, ":%.42sb=:", ABC64); /* 'b' leaves non-zero pad bits */
    is_int(avail(v), 0, "non-canonical last character: refused");
    is_int(avail(""), 0, "empty: refused");
    is_int(avail(":"), 0, "one colon: refused");
    is_int(avail("::"), 0, "nothing inside: refused");
    uint8_t h[32];
    is_int(dcz_parse_available(v, 10, h), -1, "a cut value: refused, nothing read past n");
    snprintf(v, sizeof v, "\t:%s:\t", ABC64);
    is_int(avail(v), 1, "tabs around");
    snprintf(v, sizeof v, ":%s", ABC64);
    is_int(avail(v), 0, "no closing colon: refused");
    snprintf(v, sizeof v, ":%.43sA:", ABC64);
    is_int(avail(v), 0, "44 characters, the last not '=': refused");
    snprintf(v, sizeof v, ":%s:x", ABC64);
    is_int(avail(v), 0, "a byte after the colon that starts no parameter: refused");
    is_int(avail(":/+9zZaA09+/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:"), 2,
           "every class of base64 character: another hash");
}

static int m(const char *pat, const char *path)
{
    return dcz_match(pat, strlen(pat), path, strlen(path));
}

static void patterns(void)
{
    ok(m("/js/app.*.js", "/js/app.v2.js"), "a star in the middle");
    ok(m("/js/app.*.js", "/js/app..js"), "a star matches nothing too");
    ok(!m("/js/app.*.js", "/js/app.v2.css"), "the suffix must match");
    ok(!m("/js/app.*.js", "/css/app.v2.js"), "the prefix must match");
    ok(m("/js/*", "/js/a/b/c.js"), "a star crosses '/' (URLPattern's .*)");
    ok(m("/a*b*c", "/aXXbYYbc"), "backtracking");
    ok(!m("/a*b*c", "/aXXbYYb"), "backtracking, no match");
    ok(m("/exact.js", "/exact.js") && !m("/exact.js", "/exact.jsx"), "a literal path");
    ok(dcz_pattern_ok("/js/app.*.js", 12), "a pattern we read");
    ok(!dcz_pattern_ok("js/app.js", 9), "not absolute: refused");
    ok(!dcz_pattern_ok("/js/:name.js", 12), "URLPattern groups: refused");
    ok(!dcz_pattern_ok("/js/a\"b", 7), "a quote: refused");
    ok(!dcz_pattern_ok("/js/a?b", 7), "a query: refused");
    ok(!dcz_pattern_ok("", 0), "empty: refused");
    ok(!dcz_pattern_ok("/a b", 4), "a space: refused");
    ok(!dcz_pattern_ok("/a\177", 3), "DEL: refused");
    ok(!dcz_pattern_ok("/a\001", 3), "a control byte: refused");
    char longp[DCZ_PATTERN_MAX + 1];
    memset(longp, 'a', sizeof longp);
    longp[0] = '/';
    ok(!dcz_pattern_ok(longp, DCZ_PATTERN_MAX), "%d bytes: refused", DCZ_PATTERN_MAX);
    ok(dcz_pattern_ok(longp, DCZ_PATTERN_MAX - 1), "... one less is read");
    ok(m("/js/**", "/js/x") && m("/js/**", "/js/"), "stars at the end match the rest");
}

static void rules(void)
{
    dcz_rule_t r;
    char out[DCZ_PATTERN_MAX * 3];
    is_int(dcz_rule_parse("app.*.js", 8, &r), 1, "a name alone");
    ok(dcz_use_value(&r, "/js/", out, sizeof out), "its value");
    is_str(out, "match=\"/js/app.*.js\"", "the match is the directory's URL and the name");
    const char *l = "  app.*.js match=/js/*.js match-dest=script id=v1 \r";
    is_int(dcz_rule_parse(l, strlen(l), &r), 1, "every option");
    ok(dcz_use_value(&r, "/js/", out, sizeof out), "its value");
    is_str(out, "match=\"/js/*.js\", match-dest=(\"script\"), id=\"v1\"", "as RFC 9842 2.1");
    size_t pn;
    const char *p = dcz_use_match(out, &pn);
    ok(p && pn == 8 && !memcmp(p, "/js/*.js", 8), "the match read back");
    is_int(dcz_rule_parse("# c", 3, &r), 0, "a comment");
    is_int(dcz_rule_parse("   ", 3, &r), 0, "a blank line");
    is_int(dcz_rule_parse("a/b.js", 6, &r), -1, "a name with '/'");
    is_int(dcz_rule_parse("a.js color=red", 14, &r), -1, "an unknown word");
    is_int(dcz_rule_parse("a.js match=rel", 14, &r), -1, "a relative match");
    is_int(dcz_rule_parse("a.js id=\"x\"", 11, &r), -1, "a quote in an id");
    is_int(dcz_use_value(&r, "/", (char[8]){0}, 8), 0, "a value that does not fit: none");
    const char *text = "# rules\nlib.*.js match=/js/lib*\n\nbad/name.js\napp.*.js id=a\n";
    is_int(dcz_rule_for(text, strlen(text), "app.v2.js", "/js/", out, sizeof out) > 0, 1,
           "the first rule that names the file");
    is_str(out, "match=\"/js/app.*.js\", id=\"a\"", "its value");
    ok(dcz_rule_for(text, strlen(text), "lib.v1.js", "/js/", out, sizeof out) &&
           !strcmp(out, "match=\"/js/lib*\""),
       "an explicit match");
    is_int(dcz_rule_for(text, strlen(text), "other.js", "/js/", out, sizeof out), 0,
           "no rule names it");

    is_int(dcz_rule_parse("\ta.js\tmatch-dest=style\t", 23, &r), 1, "tabs between words");
    ok(dcz_use_value(&r, "/css/", out, sizeof out), "its value");
    is_str(out, "match=\"/css/a.js\", match-dest=(\"style\")", "a destination, no id");
    is_int(dcz_use_value(&r, "/css/", out, 24), 0, "a destination that does not fit: none");
    static const char *const bad[] = {
        "a.js match=", "a.js id=", "a\\b.js", "a\001.js", "a\177.js", "a.js match=/a(b)",
        "a.js match-dest=x\"y",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        is_int(dcz_rule_parse(bad[i], strlen(bad[i]), &r), -1, "refused: '%s'", bad[i]);
    char longw[sizeof r.name + 8];
    memset(longw, 'n', sizeof longw);
    is_int(dcz_rule_parse(longw, sizeof longw, &r), -1, "a name longer than its field");
    is_int(dcz_rule_parse("a.js id=v1", 10, &r), 1, "an id alone");
    ok(dcz_use_value(&r, "/", out, sizeof out) && !strcmp(out, "match=\"/a.js\", id=\"v1\""),
       "its value");
    r.match[0] = 0, strcpy(r.name, "a b");
    is_int(dcz_use_value(&r, "/", out, sizeof out), 0, "a name the pattern refuses: none");
    ok(!dcz_use_match("id=\"x\"", &pn), "a value without match: none");
    ok(!dcz_use_match("match=\"/x", &pn), "a match not closed: none");
    const char *last = "app.*.js";
    ok(dcz_rule_for(last, strlen(last), "app.1.js", "/", out, sizeof out) &&
           !strcmp(out, "match=\"/app.*.js\""),
       "a last line without its newline");
}

static void accept_encoding(void)
{
    const char *yes[] = {"gzip, br, zstd, dcb, dcz", "DCZ", "dcz;q=0.5", "br,dcz ; q=1",
                         "\t,dcz;Q = 0.001", "dcz;sq=0", "dcz;q", "dcz;q 0", "dcz;q=1.0",
                         "gzip;q=0.5,\tdcz", "Dcz;level=0"};
    const char *no[] = {"gzip, br", "dcz;q=0", "dcz;q=0.000", "dczx", "xdcz", "dcz;q=x", "",
                        "dcz;q=", "dcz;q=2", "dcz; q=0", "dca", "dzz", "xcz"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        ok(dcz_accepted(yes[i], strlen(yes[i])), "dcz accepted: %s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        ok(!dcz_accepted(no[i], strlen(no[i])), "dcz not accepted: '%s'", no[i]);
    ok(!dcz_accepted(NULL, 0), "no Accept-Encoding");
}

/* A dictionary and a file that shares most of it, as two builds would. */
static void framing(void)
{
    size_t n = 200000;
    uint8_t *dict = malloc(n), *file = malloc(n);
    srand(7);
    for (size_t i = 0; i < n; i++)
        dict[i] = (uint8_t)("abcdefgh"[rand() % 8]);
    memcpy(file, dict, n);
    memcpy(file + 1000, "a change", 8);
    uint8_t hash[32];
    FILE *f = tmpfile();
    fwrite(dict, 1, n, f);
    fflush(f);
    is_int(dict_sha256(fileno(f), n, hash), 0, "the dictionary hashed");
    is_int(dict_sha256(fileno(f), n + 1, hash + 0), -1, "a file shorter than its stat: refused");
    dict_sha256(fileno(f), n, hash);
    FILE *a = tmpfile();
    fwrite("abc", 1, 3, a);
    fflush(a);
    uint8_t h2[32];
    ok(dict_sha256(fileno(a), 3, h2) == 0 && !memcmp(h2, ABC, 32), "SHA-256(\"abc\")");
    size_t len = 0;
    uint8_t *z = dict_dcz(dict, n, hash, file, n, 3, &len);
    ok(z && len > 40 && len < 1000, "the delta is small: %zu bytes", len);
    static const uint8_t magic[8] = {0x5e, 0x2a, 0x4d, 0x18, 0x20, 0, 0, 0};
    ok(z && !memcmp(z, magic, 8) && !memcmp(z + 8, hash, 32), "the header: magic, then the hash");
    uint8_t *back = malloc(n + 1);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 23); /* what a decoder must allow: 8 MB */
    ZSTD_DCtx_refPrefix(d, dict, n);
    size_t got = z ? ZSTD_decompressDCtx(d, back, n + 1, z + 40, len - 40) : 0;
    ok(!ZSTD_isError(got) && got == n && !memcmp(back, file, n), "decoded with the prefix");
    ZSTD_freeDCtx(d);
    fclose(f), fclose(a);
    free(dict), free(file), free(z), free(back);
}

int main(void)
{
    available();
    patterns();
    rules();
    accept_encoding();
    framing();
    return tap_done();
}
