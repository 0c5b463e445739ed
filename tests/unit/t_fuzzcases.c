/*
 * Inputs that libFuzzer found (tests/fuzz), kept as regression tests: each
 * failed on the code of its day.
 */
#include "tap.h"
#include "http_parse.h"
#include "vhost.h"
#include "optdef.h"

#include <regex.h>
#include <time.h>

#include <stdlib.h>

static int host(const char *h, char *out)
{
    http_str_t v = {h, strlen(h)};
    return vhost_name(&v, 80, 0, out);
}

/* The verdict on buf[0..k) must be the one on the whole, once it is given. */
static int same_verdict(const char *buf, size_t len, size_t k)
{
    static http_request_t a, b;
    int sa = 0, sb = 0;
    long ra = http_parse_request(buf, k, &a, &sa), rb = http_parse_request(buf, len, &b, &sb);
    return ra == HTTP_INCOMPLETE || (ra == rb && (ra != HTTP_MALFORMED || sa == sb));
}

int main(void)
{
    char out[VHOST_NAME_MAX];
    /* fuzz_host: brackets took any hex digits, colons and dots, ".." too */
    is_int(host("[1..11A11]", out), -1, "Host [1..11A11]: not an IPv6 address, 400");
    is_int(host("[1.2.3.4]", out), -1, "Host [1.2.3.4]: not an IPv6 address");
    is_int(host("[]", out), -1, "Host []");
    http_str_t nul = {"[::1\0]:", 8}; /* the parser never passes a NUL; the function refuses it too */
    is_int(vhost_name(&nul, 80, 0, out), -1, "Host with a NUL inside the brackets");
    ok(host("[::1]", out) > 0 && !strcmp(out, "[::1]:80"), "Host [::1] still fine: %s", out);
    ok(host("[2001:DB8::A]:8080", out) > 0 && !strcmp(out, "[2001:db8::a]:80"),
       "Host [2001:DB8::A]:8080 lower-cased, port replaced: %s", out);

    /* an earlier fuzz_head finding: "G\x01T /" and a long target was 414 while
       its line was unfinished and 400 once whole; the line is now judged left
       to right, and nothing past HTTP_MAX_HEAD is looked at */
    size_t n = 4100 + 64;
    char *buf = malloc(n + HTTP_MAX_HEAD + 64);
    memcpy(buf, "G\x01T /", 5);
    memset(buf + 5, 'a', 4101);
    memcpy(buf + 4106, " HTTP/1.1\r\n\r\n", 13);
    int st = 0;
    static http_request_t req;
    ok(http_parse_request(buf, 4106, &req, &st) == HTTP_MALFORMED && st == 400,
       "G\\x01T and a long target, unfinished: 400 (was 414), %d", st);
    ok(same_verdict(buf, 4119, 4106), "... the same verdict as the whole line");
    memcpy(buf, "GET /", 5);
    buf[3000] = '\r';
    ok(http_parse_request(buf, 3001, &req, &st) == HTTP_MALFORMED && st == 400,
       "a CR inside the target: 400 at once, %d", st);
    buf[3000] = 'a';
    ok(http_parse_request(buf, 4106, &req, &st) == HTTP_MALFORMED && st == 414,
       "a long target: 414 before the line ends, %d", st);
    buf[4105] = '\r';
    ok(same_verdict(buf, 4119, 4106) && st == 414, "... and a CR after it does not change that");
    memcpy(buf + 4096, " HTTP/1.1X", 10);
    ok(http_parse_request(buf, 4106, &req, &st) == HTTP_MALFORMED && st == 400,
       "a byte after the version: 400 before the line ends, %d", st);
    /* a method longer than the head limit, then a bad byte */
    memset(buf, 'G', HTTP_MAX_HEAD + 8);
    buf[HTTP_MAX_HEAD + 4] = 1;
    ok(http_parse_request(buf, HTTP_MAX_HEAD + 1, &req, &st) == HTTP_MALFORMED && st == 431,
       "a method past the head limit: 431, %d", st);
    ok(same_verdict(buf, HTTP_MAX_HEAD + 8, HTTP_MAX_HEAD + 1), "... also with a bad byte after it");
    /* a header line across the limit with a bad byte past it */
    size_t h = (size_t)snprintf(buf, 64, "GET / HTTP/1.1\r\nX: ");
    memset(buf + h, 'v', HTTP_MAX_HEAD + 8 - h);
    buf[HTTP_MAX_HEAD + 4] = 1;
    memcpy(buf + HTTP_MAX_HEAD + 8, "\r\n\r\n", 4);
    ok(http_parse_request(buf, HTTP_MAX_HEAD + 12, &req, &st) == HTTP_MALFORMED && st == 431,
       "a header line across the limit with a control byte past it: 431, %d", st);
    ok(same_verdict(buf, HTTP_MAX_HEAD + 12, HTTP_MAX_HEAD + 1), "... as for its prefix");
    free(buf);

    /* fuzz_options: -w 'X++...+' (41 of them) held regcomp past libFuzzer's 10 s
       (22 took over a minute and gigabytes): each stacked + doubles the tree */
    char re[64] = "X";
    memset(re + 1, '+', 41), re[42] = 0;
    ok(!opt_regex_bounded(re, OPT_REGEX_NODES), "-w X+{41}: refused before regcomp");
    ok(!opt_regex_bounded("^/a((b+)+)+{100}{100}", OPT_REGEX_NODES), "nested + and {m,n}");
    ok(!opt_regex_bounded("(abcdefghij){30000}", OPT_REGEX_NODES), "{30000}: counted as such");
    /* ... and -P 'F/unix:/php/:...hp++?++++++++++ache': under the bound, but 10 s of
       regcomp's epsilon closures */
    ok(!opt_regex_bounded("\\||0|||||||||||hp++?++++++++++ache", OPT_REGEX_NODES),
       "stacked repetitions under the bound");
    ok(!opt_regex_bounded("a+?", OPT_REGEX_NODES) && !opt_regex_bounded("a{2}*", OPT_REGEX_NODES),
       "a+? and a{2}*: refused");
    ok(opt_regex_bounded("(((((((((((a+)+)+)+)+)+)+)+)+)+)+)+", OPT_REGEX_NODES),
       "nested groups of + within the bound: taken (regcomp: milliseconds)");
    ok(!opt_regex_bounded("((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))",
                          OPT_REGEX_NODES), "groups 32 deep");
    const char *fine[] = {"\\.cgi$", "^/cgi-bin/", "^/(a+|b*|[c-z]{1,5})+x?$", "[]+]{2,3}",
                          "^/(x+)?$", "a\\++",
                          "^/api/v[0-9]+/(users|items)/[^/]+$", "x{1000}"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        regex_t r;
        clock_t t0 = clock();
        ok(opt_regex_bounded(fine[i], OPT_REGEX_NODES) &&
               !regcomp(&r, fine[i], REG_EXTENDED | REG_NOSUB),
           "%s: taken, and compiles", fine[i]);
        regfree(&r);
        ok(clock() - t0 < CLOCKS_PER_SEC, "... in under a second");
    }
    return tap_done();
}
