/*
 * The caching rules (http/cachectl.c, RFC 9111 and 5861): Cache-Control of
 * responses and requests, Pragma, what a shared cache may store, freshness
 * lifetime, initial age, Age values, HTTP-dates, targeted fields (RFC 9213:
 * CDN-Cache-Control) and Vary.  Every input is given in a
 * buffer of its exact size, without a NUL: the SAN build sees an over-read.
 */
#include "tap.h"
#include "cachectl.h"

#define MAX CC_DELTA_MAX

static char *exact(const char *s, size_t *n)
{
    *n = strlen(s);
    char *b = malloc(*n ? *n : 1);
    memcpy(b, s, *n);
    return b;
}

static cc_resp_t resp(const char *s)
{
    size_t n;
    char *b = exact(s, &n);
    cc_resp_t cc;
    cc_resp_init(&cc);
    cc_parse_resp(&cc, b, n);
    free(b);
    return cc;
}

static int64_t delta(const char *s)
{
    size_t n;
    char *b = exact(s, &n);
    int64_t v = cc_delta(b, n);
    free(b);
    return v;
}

static void test_init(void)
{
    cc_resp_t r;
    memset(&r, 0x5a, sizeof r);
    cc_resp_init(&r);
    ok(r.max_age == CC_NONE && r.s_maxage == CC_NONE && r.stale_while_revalidate == CC_NONE &&
           r.stale_if_error == CC_NONE && !r.no_store && !r.no_cache && !r.private_ && !r.public_ &&
           !r.must_revalidate && !r.must_understand && !r.immutable,
       "cc_resp_init: every delta CC_NONE, every flag 0");
    r = resp("");
    ok(r.max_age == CC_NONE && !r.no_store && !r.no_cache, "empty value: nothing");
    r = resp(" , ,,\t,");
    ok(r.max_age == CC_NONE && !r.no_store && !r.public_, "only commas and spaces: nothing");
}

static void test_resp_values(void)
{
    is_int(resp("max-age=3600").max_age, 3600, "max-age=3600");
    is_int(resp("MAX-AGE=60").max_age, 60, "upper-case name");
    is_int(resp("Max-Age=60, S-MaxAge=30").s_maxage, 30, "mixed-case s-maxage");
    is_int(resp("max-age=\"10\"").max_age, 10, "quoted value read as its digits");
    is_int(resp("max-age = 10").max_age, 10, "whitespace around =");
    is_int(resp("  public ,  max-age=7  ").max_age, 7, "whitespace around commas");
    is_int(resp("max-age=0").max_age, 0, "max-age=0");
    is_int(resp("max-age=007").max_age, 7, "leading zeros");
    is_int(resp("max-age=2147483647").max_age, 2147483647, "2^31 - 1 as is");
    is_int(resp("max-age=2147483648").max_age, MAX, "2^31 as is");
    is_int(resp("max-age=2147483649").max_age, MAX, "2^31 + 1 capped");
    is_int(resp("max-age=99999999999999999999999999999").max_age, MAX,
           "huge number capped at CC_DELTA_MAX");
    is_int(resp("max-age=abc").max_age, 0, "invalid max-age counts as 0");
    is_int(resp("max-age=-1").max_age, 0, "negative max-age counts as 0");
    is_int(resp("max-age=+5").max_age, 0, "signed max-age counts as 0");
    is_int(resp("max-age=1.5").max_age, 0, "fraction counts as 0");
    is_int(resp("max-age=10s").max_age, 0, "trailing junk counts as 0");
    is_int(resp("max-age=1 0").max_age, 0, "inner space counts as 0");
    is_int(resp("max-age=").max_age, 0, "empty max-age counts as 0");
    is_int(resp("max-age=\"\"").max_age, 0, "empty quoted max-age counts as 0");
    is_int(resp("max-age").max_age, 0, "max-age without value counts as 0");
    is_int(resp("s-maxage=x").s_maxage, 0, "invalid s-maxage counts as 0");
    is_int(resp("max-age=\"1\\0\"").max_age, 0, "escape in a quoted number: invalid");
    is_int(resp("max-age=\"10\"x").max_age, 0, "bytes after a quoted value: invalid");
    is_int(resp("max-age=60, max-age=30").max_age, 30, "duplicate keeps the smaller");
    is_int(resp("max-age=30, max-age=60").max_age, 30, "... in either order");
    is_int(resp("max-age=60, max-age=abc").max_age, 0, "duplicate with an invalid one: 0");
    is_int(resp("max-ages=5").max_age, CC_NONE, "longer name is another directive");
    is_int(resp("max-ag=5").max_age, CC_NONE, "shorter name is another directive");
    is_int(resp("x-max-age=5").max_age, CC_NONE, "prefixed name is another directive");
    is_int(resp("max-age=600, stale-while-revalidate=30").stale_while_revalidate, 30,
           "stale-while-revalidate (RFC 5861 3 example)");
    is_int(resp("max-age=600, stale-if-error=1200").stale_if_error, 1200,
           "stale-if-error (RFC 5861 4 example)");
    is_int(resp("STALE-IF-ERROR=\"60\"").stale_if_error, 60, "stale-if-error quoted, any case");
    is_int(resp("stale-if-error=abc").stale_if_error, 0, "invalid stale-if-error counts as 0");
    is_int(resp("stale-if-error").stale_if_error, 0, "bare stale-if-error counts as 0");
    is_int(resp("stale-if-error=60, stale-if-error=5").stale_if_error, 5,
           "duplicate stale-if-error keeps the smaller");
    is_int(resp("stale-while-revalidate=99999999999").stale_while_revalidate, MAX,
           "stale-while-revalidate capped");
}

static void test_resp_flags(void)
{
    cc_resp_t r = resp("no-store");
    ok(r.no_store && !r.no_cache && r.max_age == CC_NONE, "no-store");
    r = resp("No-Cache");
    ok(r.no_cache && !r.no_store, "No-Cache, any case");
    r = resp("no-cache=\"set-cookie, x\", max-age=5");
    ok(r.no_cache && r.max_age == 5, "no-cache with a quoted list: the comma does not split");
    r = resp("private=\"set-cookie, max-age=9\", max-age=5");
    ok(r.private_ && r.max_age == 5, "private with a quoted list hiding a max-age");
    r = resp("no-cache=\"a, \\\"b, no-store\", public");
    ok(r.no_cache && !r.no_store && r.public_, "escaped quote inside a quoted-string");
    r = resp("no-cache=\"a, no-store");
    ok(r.no_cache && r.no_store, "unclosed quote: the comma splits, no-store seen");
    r = resp("foo=\"a\"b, no-store");
    ok(r.no_store, "bytes after a closed quote: the comma splits");
    r = resp("x\"y, no-store, z\"");
    ok(r.no_store, "stray quotes in names hide nothing");
    r = resp("private");
    ok(r.private_ && !r.public_, "private");
    r = resp("PUBLIC");
    ok(r.public_, "PUBLIC");
    r = resp("must-revalidate");
    ok(r.must_revalidate, "must-revalidate");
    r = resp("proxy-revalidate");
    ok(r.must_revalidate, "proxy-revalidate");
    r = resp("s-maxage=10");
    ok(r.must_revalidate && r.s_maxage == 10, "s-maxage implies proxy-revalidate (5.2.2.10)");
    r = resp("max-age=10");
    ok(!r.must_revalidate, "max-age alone does not");
    r = resp("must-understand, no-store");
    ok(r.must_understand && r.no_store, "must-understand, no-store (5.2.2.3)");
    r = resp("public, max-age=604800, immutable");
    ok(r.immutable && r.public_ && r.max_age == 604800, "immutable (RFC 8246 example)");
    r = resp("no-transform, community=\"UCI\", x=\"a,b\"");
    ok(!r.no_store && !r.no_cache && !r.private_ && r.max_age == CC_NONE,
       "unknown directives ignored");
    r = resp("private, community=\"UCI\"");
    ok(r.private_ && !r.public_, "private, community=\"UCI\" (RFC 9111 5.2.3 example)");
    r = resp("no-store=1");
    ok(r.no_store, "a flag with a value is still the flag");
    r = resp("no store");
    ok(!r.no_store, "a name with a space inside is another directive");
    r = resp("nostore, no-storex, no-");
    ok(!r.no_store, "near names are other directives");
}

static void test_resp_lines(void)
{
    cc_resp_t r;
    cc_resp_init(&r);
    cc_parse_resp(&r, "max-age=60", 10);
    cc_parse_resp(&r, "no-cache", 8);
    cc_parse_resp(&r, "max-age=20, public", 18);
    ok(r.max_age == 20 && r.no_cache && r.public_, "three field lines add up");
    cc_resp_init(&r);
    cc_parse_resp(&r, "max-age=60, no-store", 7);
    ok(r.max_age == 0 && !r.no_store, "n bounds the value: \"max-age\" only");
    cc_resp_init(&r);
    cc_parse_resp(&r, "max-age=60, no-store", 10);
    ok(r.max_age == 60 && !r.no_store, "n bounds the value: \"max-age=60\" only");
}

static void test_heuristic(void)
{
    const int yes[] = {200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501};
    const int no[] = {0, 100, 101, 201, 202, 302, 303, 304, 307, 400, 403, 500, 502, 503, 999, -1};
    int all = 1;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        all &= cc_status_heuristic(yes[i]);
    ok(all, "the 12 heuristically cacheable statuses (RFC 9110 15.1)");
    all = 1;
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        all &= !cc_status_heuristic(no[i]);
    ok(all, "no other status");
}

static int storable(int status, const char *cc, int expires, int lm, int auth, int64_t ttl)
{
    cc_resp_t r = resp(cc);
    return cc_storable(status, &r, expires, lm, auth, ttl);
}

static void test_storable(void)
{
    is_int(storable(200, "max-age=60", 0, 0, 0, 0), 1, "200 max-age");
    is_int(storable(200, "", 1, 0, 0, 0), 1, "200 Expires");
    is_int(storable(200, "s-maxage=5", 0, 0, 0, 0), 1, "200 s-maxage");
    is_int(storable(200, "", 0, 0, 0, 0), 0, "200 with no freshness, no ttl, no Last-Modified");
    is_int(storable(200, "", 0, 1, 0, 0), 1, "200 with Last-Modified: heuristic");
    is_int(storable(200, "", 0, 0, 0, 60), 1, "200 with the operator's ttl");
    is_int(storable(404, "", 0, 0, 0, 60), 1, "404 with the operator's ttl");
    is_int(storable(200, "", 0, 0, 0, -5), 0, "negative ttl is none");
    is_int(storable(302, "", 0, 1, 0, 60), 0, "302: not heuristically cacheable");
    is_int(storable(302, "max-age=60", 0, 0, 0, 0), 1, "302 with max-age");
    is_int(storable(307, "", 1, 0, 0, 0), 1, "307 with Expires");
    is_int(storable(500, "public", 0, 0, 0, 0), 1, "500 with public");
    is_int(storable(200, "public", 0, 0, 0, 0), 1, "200 with public");
    is_int(storable(206, "max-age=60", 0, 0, 0, 60), 0, "206 never");
    is_int(storable(304, "max-age=60, public", 1, 1, 0, 60), 0, "304 never");
    is_int(storable(100, "max-age=60", 0, 0, 0, 0), 0, "1xx never");
    is_int(storable(600, "max-age=60", 0, 0, 0, 0), 0, "status past 599 never");
    is_int(storable(0, "max-age=60", 0, 0, 0, 0), 0, "status 0 never");
    is_int(storable(200, "no-store, max-age=60", 1, 1, 0, 60), 0, "no-store");
    is_int(storable(200, "private, max-age=60", 0, 0, 0, 60), 0, "private");
    is_int(storable(200, "private=\"x\", public, max-age=6", 0, 0, 0, 0), 0, "private=x");
    is_int(storable(200, "max-age=60, no-store", 0, 0, 0, 0), 0, "no-store after max-age");
    is_int(storable(200, "no-cache", 0, 0, 0, 60), 1, "no-cache may be stored");
    is_int(storable(200, "max-age=abc", 0, 0, 0, 0), 1, "invalid max-age: stored stale");
    is_int(storable(200, "max-age=60", 0, 0, 1, 0), 0, "Authorization with max-age: no");
    is_int(storable(200, "", 1, 1, 1, 60), 0, "Authorization with Expires: no");
    is_int(storable(200, "max-age=60, public", 0, 0, 1, 0), 1, "Authorization, public");
    is_int(storable(200, "max-age=60, must-revalidate", 0, 0, 1, 0), 1,
           "Authorization, must-revalidate");
    is_int(storable(200, "max-age=60, proxy-revalidate", 0, 0, 1, 0), 1,
           "Authorization, proxy-revalidate");
    is_int(storable(200, "s-maxage=60", 0, 0, 1, 0), 1, "Authorization, s-maxage");
    is_int(storable(200, "public, no-store", 0, 0, 1, 60), 0, "Authorization, public, no-store");
    is_int(storable(200, "must-understand, max-age=60", 0, 0, 0, 0), 1,
           "must-understand with a known status");
    is_int(storable(299, "must-understand, max-age=60", 0, 0, 0, 0), 0,
           "must-understand with an unknown status");
    is_int(storable(200, "must-understand, no-store, max-age=60", 0, 0, 0, 0), 0,
           "must-understand does not override no-store here");
}

static int64_t life(const char *cc, int status, int64_t date, int64_t expires, int64_t lm,
                    int64_t rt, int64_t ttl)
{
    cc_resp_t r = resp(cc);
    return cc_lifetime(&r, status, date, expires, lm, rt, ttl);
}

static void test_lifetime(void)
{
    const int64_t T = 1700000000, N = CC_NONE;
    is_int(life("max-age=60, s-maxage=30", 200, T, T + 99, N, T, 0), 30, "s-maxage first");
    is_int(life("max-age=60", 200, T, T + 99, N, T, 5), 60, "max-age before Expires, ttl");
    is_int(life("max-age=0", 200, T, T + 99, T - 1000, T, 5), 0, "max-age=0");
    is_int(life("", 200, T, T + 99, T - 1000, T, 5), 99, "Expires - Date");
    is_int(life("", 302, T, T + 99, N, T, 0), 99, "Expires on any status");
    is_int(life("", 200, T, T - 99, N, T, 60), 0, "Expires before Date: 0, not negative");
    is_int(life("", 200, T, 0, N, T, 60), 0, "invalid Expires (0): already expired");
    is_int(life("", 200, N, T + 50, N, T + 10, 0), 40, "no Date: the response time stands");
    is_int(life("", 200, N, T + 50, N, N, 0), 0, "Expires with neither Date nor response time");
    is_int(life("", 200, T, N, N, T, 300), 300, "heuristic: the operator's ttl");
    is_int(life("", 200, T, N, T - 1000, T, 0), 100, "heuristic: 10%% of Date - Last-Modified");
    is_int(life("", 200, T, N, T - 1000, T, 300), 300, "the ttl before Last-Modified");
    is_int(life("", 200, T, N, T - 100 * 86400, T, 0), 86400, "10%% capped at a day");
    is_int(life("", 200, T, N, T + 1000, T, 0), 0, "Last-Modified after Date: 0");
    is_int(life("", 200, N, N, T - 1000, T, 0), 100, "no Date: response time - Last-Modified");
    is_int(life("", 200, T, N, N, T, 0), 0, "nothing to go by: 0");
    is_int(life("", 302, T, N, T - 1000, T, 300), 0, "no heuristic for 302");
    is_int(life("public", 500, T, N, T - 1000, T, 300), 0, "nor for a public 500");
    is_int(life("no-cache, max-age=60", 200, T, T + 99, N, T, 60), 0, "no-cache: 0");
    is_int(life("s-maxage=99999999999", 200, T, N, N, T, 0), MAX, "capped s-maxage");
    is_int(life("", 200, INT64_MIN, INT64_MAX, N, T, 0), MAX, "Expires - Date never overflows");
    is_int(life("", 200, INT64_MAX, INT64_MIN, N, T, 0), 0, "... nor under");
    is_int(life("", 200, INT64_MAX, N, INT64_MIN, T, 0), 86400, "nor Date - Last-Modified");
    is_int(life("", 200, T, N, N, T, INT64_MAX), MAX, "a huge ttl capped");
}

static void test_age(void)
{
    const int64_t T = 1700000000, N = CC_NONE;
    is_int(cc_initial_age(N, T, T, T), 0, "nothing: 0");
    is_int(cc_initial_age(N, N, N, N), 0, "all absent: 0");
    is_int(cc_initial_age(N, T - 30, T - 2, T), 30, "apparent age: response time - Date");
    is_int(cc_initial_age(N, T, T - 2, T), 2, "no Age: the response delay");
    is_int(cc_initial_age(100, T, T - 2, T), 102, "Age + response delay (4.2.3)");
    is_int(cc_initial_age(10, T - 60, T - 2, T), 60, "apparent age when larger");
    is_int(cc_initial_age(60, T - 10, T - 2, T), 62, "corrected age value when larger");
    is_int(cc_initial_age(5, T + 100, T - 1, T), 6, "Date in the future: apparent age 0");
    is_int(cc_initial_age(5, T, T + 10, T), 5, "response before request: no delay");
    is_int(cc_initial_age(5, N, N, T), 5, "no request time: Age only");
    is_int(cc_initial_age(5, T - 50, T - 3, N), 5, "no response time: Age only");
    is_int(cc_initial_age(MAX, T, T - 100, T), MAX, "Age 2^31 + delay capped");
    is_int(cc_initial_age(INT64_MAX, T, T - 100, T), MAX, "a huge age capped");
    is_int(cc_initial_age(-7, T, T - 1, T), 1, "a negative age is absent");
    is_int(cc_initial_age(0, INT64_MIN, INT64_MIN, INT64_MAX), MAX, "extreme times capped");
    is_int(cc_initial_age(0, INT64_MAX, INT64_MAX, INT64_MIN), 0, "... and never negative");
}

static void test_delta(void)
{
    is_int(delta("0"), 0, "Age: 0");
    is_int(delta("60"), 60, "Age: 60");
    is_int(delta(" 60\t"), 60, "whitespace around");
    is_int(delta("2147483648"), MAX, "2^31");
    is_int(delta("18446744073709551616"), MAX, "2^64 capped");
    is_int(delta("9223372036854775808"), MAX, "2^63 capped");
    is_int(delta(""), CC_NONE, "empty: none");
    is_int(delta("  "), CC_NONE, "spaces: none");
    is_int(delta("-1"), CC_NONE, "-1: none");
    is_int(delta("+1"), CC_NONE, "+1: none");
    is_int(delta("1.5"), CC_NONE, "1.5: none");
    is_int(delta("1, 2"), CC_NONE, "a list: none");
    is_int(delta("1 2"), CC_NONE, "inner space: none");
    is_int(delta("0x10"), CC_NONE, "hex: none");
    is_int(delta("\"5\""), CC_NONE, "quoted: none (Age is a bare number)");
}

/* The names of a Vary value joined by '|', into buf. */
static const char *vary(const char *s, char *buf)
{
    size_t n, pos = 0, len;
    char *b = exact(s, &n);
    const char *name;
    int inside = 1;
    buf[0] = 0;
    while ((len = cc_vary_next(b, n, &pos, &name))) {
        inside &= name >= b && name + len <= b + n;
        if (buf[0])
            strcat(buf, "|");
        strncat(buf, name, len);
    }
    ok(inside && pos == n, "Vary \"%s\": every name inside it, pos n at the end", s);
    free(b);
    return buf;
}

static int star(const char *s)
{
    size_t n;
    char *b = exact(s, &n);
    int r = cc_vary_star(b, n);
    free(b);
    return r;
}

static void test_vary(void)
{
    char buf[256];
    is_str(vary("Accept-Encoding", buf), "Accept-Encoding", "one name");
    is_str(vary("accept-encoding, accept-language", buf), "accept-encoding|accept-language",
           "two names");
    is_str(vary("  a  ,\tb\t,c  ", buf), "a|b|c", "spaces and tabs around");
    is_str(vary(",, a,,  , b,", buf), "a|b", "empty members skipped");
    is_str(vary("", buf), "", "empty value");
    is_str(vary(" , ,\t", buf), "", "only separators");
    is_str(vary("a b, c", buf), "a b|c", "a member that is not a token, as it is");
    is_str(vary("*", buf), "*", "star is a member too");
    size_t pos = 99;
    const char *name = NULL;
    is_int(cc_vary_next("a", 1, &pos, &name), 0, "pos past n: the end");
    ok(name == NULL, "*name untouched at the end");
    ok(star("*"), "Vary: *");
    ok(star(" * "), "Vary:  * ");
    ok(star("accept, *"), "Vary: accept, *");
    ok(star("*,accept"), "Vary: *,accept");
    ok(!star("accept"), "no star");
    ok(!star(""), "empty: no star");
    ok(!star("**"), "** is not *");
    ok(!star("a*"), "a* is not *");
    ok(!star("\"*\""), "quoted star is not *");
}

static size_t norm(const char *s, char *out, size_t cap)
{
    size_t n;
    char *b = exact(s, &n);
    size_t k = cc_vary_norm(b, n, out, cap);
    if (k != (size_t)-1)
        out[k] = 0;
    free(b);
    return k;
}

static void norm_is(const char *s, const char *want)
{
    char out[256];
    size_t k = norm(s, out, sizeof out - 1);
    ok(k != (size_t)-1 && strcmp(out, want) == 0, "norm \"%s\" -> \"%s\"", s, want);
    if (k != (size_t)-1 && strcmp(out, want))
        printf("#   got \"%s\"\n", out);
    if (k != (size_t)-1) { /* normalised again: the same */
        char again[256];
        norm(out, again, sizeof again - 1);
        ok(strcmp(again, out) == 0, "norm of \"%s\" is itself", out);
    }
}

static void test_norm(void)
{
    norm_is("gzip, deflate", "gzip,deflate");
    norm_is("  gzip ,\tdeflate  ", "gzip,deflate");
    norm_is("en-US,  en;q=0.5", "en-US,en;q=0.5");
    norm_is("a   b", "a b");
    norm_is("a \t b", "a b");
    norm_is("a\tb", "a b");
    norm_is("", "");
    norm_is("   ", "");
    norm_is(" , ", ",");
    norm_is("a,,b", "a,,b");
    norm_is("x; a=\"b  ,  c\" ,  y", "x; a=\"b  ,  c\",y");
    norm_is("\"a \\\"  b\"  c", "\"a \\\"  b\" c");
    norm_is("a \"b  ", "a \"b");
    norm_is("a \"b\\", "a \"b\\");
    char out[16];
    is_int(norm("gzip, deflate", out, 12), 12, "fits exactly");
    is_int(norm("gzip, deflate", out, 11), (size_t)-1, "one byte short: (size_t)-1");
    is_int(norm("a  b", out, 2), (size_t)-1, "no room for the space");
    is_int(norm("\"a b\"", out, 4), (size_t)-1, "no room for the quoted-string");
    is_int(cc_vary_norm("   ", 3, NULL, 0), 0, "nothing to write, no buffer");
}

static int64_t age_value(const char *s)
{
    size_t n;
    char *b = exact(s, &n);
    int64_t v = cc_age_value(b, n);
    free(b);
    return v;
}

/* RFC 9111 5.1: the first member of a list; an invalid one is ignored (CC_NONE). */
static void test_age_value(void)
{
    is_int(age_value("60"), 60, "Age: 60");
    is_int(age_value("0, 7200"), 0, "Age: 0, 7200: the first member");
    is_int(age_value("7200, 0"), 7200, "Age: 7200, 0: the first member");
    is_int(age_value(" 5 ,x"), 5, "whitespace around the first member");
    is_int(age_value("0, 0"), 0, "Age: 0, 0");
    is_int(age_value("abc"), CC_NONE, "non-numeric: ignored");
    is_int(age_value("-7200"), CC_NONE, "negative: ignored");
    is_int(age_value("7200.0"), CC_NONE, "float: ignored");
    is_int(age_value("7200;foo=bar"), CC_NONE, "a parameter: ignored");
    is_int(age_value(""), CC_NONE, "empty: ignored");
    is_int(age_value(", 5"), CC_NONE, "an empty first member: ignored");
    is_int(age_value("2147483649"), MAX, "past 2^31: 2^31 (1.2.2)");
}

#define NOW 1795678881 /* Thu, 26 Nov 2026 */

static int64_t date(const char *s)
{
    size_t n;
    char *b = exact(s, &n);
    int64_t v = cc_http_date(b, n, NOW);
    free(b);
    return v;
}

/* RFC 9110 5.6.7: the three forms, exactly; a two-digit year only in rfc850-date. */
static void test_http_date(void)
{
    is_int(date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777, "IMF-fixdate");
    is_int(date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777, "rfc850-date, 94: 1994");
    is_int(date("Sun Nov  6 08:49:37 1994"), 784111777, "asctime-date");
    is_int(date("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86400, "asctime-date, 2-digit day");
    is_int(date(" Sun, 06 Nov 1994 08:49:37 GMT\t"), 784111777, "whitespace around");
    is_int(date("Thursday, 18-Aug-50 02:01:18 GMT"), 2544400878, "rfc850 50: 2050 (24 years on)");
    is_int(date("Thursday, 18-Aug-77 02:01:18 GMT"), 240717678, "rfc850 77: 1977, not 2077");
    is_int(date("Thu, 01 Jan 1970 00:00:00 GMT"), 0, "the epoch");
    is_int(date("Thu, 01 Jan 1960 00:00:00 GMT"), 0, "before 1970: 0 (in the past)");
    is_int(date("Tue, 19 Jan 2038 14:14:08 GMT"), 2147523248, "past 2^31");
    is_int(date("Sun, 21 Nov 2286 04:46:39 GMT"), 10000039599, "2286");
    is_int(date("THU, 18 AUG 2050 02:01:18 gmt"), 2544400878, "names in any case");
    is_int(date("Thu, 29 Feb 2024 00:00:00 GMT"), 1709164800, "29 February of a leap year");
    is_int(date("Thu, 18 Aug 50 02:01:18 GMT"), -1, "IMF with a two-digit year: invalid");
    is_int(date("Thu, 18 Aug 2050 02:01:18 UTC"), -1, "UTC: invalid");
    is_int(date("Thu, 18 Aug 2050 02:01:18 AEST"), -1, "AEST: invalid");
    is_int(date("Thu 18 Aug 2050 02:01:18 GMT"), -1, "no comma: invalid");
    is_int(date("Thu, 18  Aug  2050 02:01:18 GMT"), -1, "two spaces: invalid");
    is_int(date("Thu, 18-Aug-2050 02:01:18 GMT"), -1, "dashes in IMF: invalid");
    is_int(date("Thu, 18 Aug 2050 02.01.18 GMT"), -1, "periods: invalid");
    is_int(date("Thu, 18 Aug 2050 2:01:18 GMT"), -1, "a one-digit hour: invalid");
    is_int(date("Thu, 18 Aug 2050 24:00:00 GMT"), -1, "hour 24: invalid");
    is_int(date("Thu, 31 Apr 2050 02:01:18 GMT"), -1, "31 April: invalid");
    is_int(date("Thu, 29 Feb 2100 00:00:00 GMT"), -1, "29 February 2100: invalid");
    is_int(date("Thu, 18 Foo 2050 02:01:18 GMT"), -1, "no month: invalid");
    is_int(date("Xyz, 18 Aug 2050 02:01:18 GMT"), -1, "no day name: invalid");
    is_int(date("Thursday, 18-Aug-2050 02:01:18 GMT"), -1, "rfc850 with 4 digits: invalid");
    is_int(date("Thu Aug 18 02:01:18 50"), -1, "asctime with 2 digits: invalid");
    is_int(date("0"), -1, "0: invalid");
    is_int(date(""), -1, "empty: invalid");
    is_int(date("Thu, 18 Aug 2050 02:01:18 GMT, x"), -1, "trailing bytes: invalid");
}

/* A targeted field's parse: 1 and cc, or 0 and cc untouched (max_age 77 marks it). */
static int targeted(const char *s, cc_resp_t *cc)
{
    size_t n;
    char *b = exact(s, &n);
    cc_resp_init(cc);
    cc->max_age = 77;
    int r = cc_parse_targeted(cc, b, n);
    free(b);
    return r;
}

/* RFC 9213: a Dictionary Structured Field of cache directives; a parse error: ignored. */
static void test_targeted(void)
{
    cc_resp_t c;
    ok(targeted("max-age=3600", &c) && c.max_age == 3600, "max-age=3600");
    ok(targeted(" max-age=3600 ", &c) && c.max_age == 3600, "spaces around the field");
    ok(targeted("max-age=2147483648", &c) && c.max_age == MAX, "2^31");
    ok(targeted("max-age=99999999999", &c) && c.max_age == MAX, "11 digits: capped");
    ok(!targeted("max-age=9999999999999999", &c) && c.max_age == 77, "16 digits: not an sf-integer");
    ok(targeted("max-age=0", &c) && c.max_age == 0, "max-age=0");
    ok(targeted("foobar, max-age=3600", &c) && c.max_age == 3600, "an unknown directive");
    ok(targeted("private", &c) && c.private_ && c.max_age == CC_NONE, "private");
    ok(targeted("no-cache", &c) && c.no_cache, "no-cache");
    ok(targeted("no-store", &c) && c.no_store, "no-store");
    ok(targeted("no-store=?0, max-age=5", &c) && !c.no_store && c.max_age == 5, "?0: no directive");
    ok(targeted("no-store=?1", &c) && c.no_store, "?1: the directive");
    ok(targeted("private=(\"set-cookie\" \"x\")", &c) && c.private_, "private with names: set");
    ok(targeted("s-maxage=10;a=1;b", &c) && c.s_maxage == 10 && c.must_revalidate,
       "parameters ignored; s-maxage implies proxy-revalidate");
    ok(targeted("max-age=-5", &c) && c.max_age == 0, "a negative integer: 0");
    ok(targeted("max-age=\"10000\"", &c) && c.max_age == 0, "a string for a delta: 0");
    ok(targeted("max-age=10.5", &c) && c.max_age == 0, "a decimal for a delta: 0");
    ok(targeted("max-age=tok, a=:aGk=:, b=@12, c=?1", &c) && c.max_age == 0, "tokens, bytes, dates");
    ok(targeted("max-age=1,max-age=9", &c) && c.max_age == 1, "twice: the smaller");
    ok(!targeted("max-age=10000, &&&&&", &c) && c.max_age == 77, "a bad member: the field ignored");
    ok(!targeted("MaX-aGe=3600", &c) && c.max_age == 77, "an upper-case key: a parse error");
    ok(!targeted("max-age =100", &c), "a space before =: a parse error");
    ok(!targeted("max-age= 100", &c), "a space after =: a parse error");
    ok(!targeted("max-age=1,", &c), "a trailing comma: a parse error");
    ok(!targeted("max-age=\"abc", &c), "an unclosed string: a parse error");
    ok(!targeted("a=(1 2", &c), "an unclosed inner list: a parse error");
    ok(!targeted("a=?2", &c) && !targeted("a=?", &c), "a bad boolean: a parse error");
    ok(!targeted("", &c) && c.max_age == 77 && !targeted("   ", &c), "empty: ignored");
    /* every bare item's alphabet, and each way one goes wrong (RFC 9651 4.2) */
    static const char *const good[] = {
        "a=*Tok:/!#$%&'*+-.^_`|~9", "a=\"q\\\"b\\\\ ~\"", "a=:AZaz09+/=:", "a=-12.125",
        "a=1;p=\"x\";q=?0;r=*t, b=@-5", "a_b-c.d*9=1", "*x=1", "a=(1 \"s\" t;p=1);q=2",
        "a=()", "a=?1;x",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ok(targeted(good[i], &c) && c.max_age == CC_NONE, "parses: %s", good[i]);
    static const char *const bad[] = {
        "a=\"\\x\"", "a=\"\001\"", "a=\"\177\"", "a=:ab$:", "a=:ab", "a=1.", "a=1.2345",
        "a=1234567890123.5", "a=-", "a=@", "a=@1.5", "a=Tok\001", "a=\001", "A=1", "a\001=1",
        "9a=1", "a=1;P=1", "a=1;p=", "a=(1,2)", "a=1 b=2", "a=1,,b=2", "a=1 ;p=1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(!targeted(bad[i], &c) && c.max_age == 77, "a parse error: %s", bad[i]);
}

/* Each date form's own faults, field by field (issue 55's branches). */
static void test_http_date_fields(void)
{
    static const char *const bad[] = {
        "Thu, 18 Aug 2050 02-01:18 GMT", "Thu, 18 Aug 2050 02:01-18 GMT",
        "Thu, 18 Aug 2050 02:60:18 GMT", "Thu, 18 Aug 2050 02:01:61 GMT",
        "Thu, 18 Aug 2050 0a:01:18 GMT", "Thu, 18 Aug 2050 02:0a:18 GMT",
        "Thu, 18 Aug 2050 02:01:1a GMT", "Thu, 00 Aug 2050 02:01:18 GMT",
        "Thu, 29 Feb 1900 00:00:00 GMT", "Thu, 1a Aug 2050 02:01:18 GMT",
        "Thu, 18 Aug 20x0 02:01:18 GMT", "Thu, 18 Aug-2050 02:01:18 GMT",
        "Thu, 18 Aug 2050-02:01:18 GMT", "Thu, 18 Aug 2050 02:01:18-GMT",
        "Thursday, 1x-Aug-50 02:01:18 GMT", "Thursday, 18-Aug-5x 02:01:18 GMT",
        "Thursday, 18-Aug-50-02:01:18 GMT", "Thursday, 18-Aug-50 02:01:18-GMT",
        "Thursday, 18-Aug-50 02:01:18 UTC", "Thursday, 18 Aug-50 02:01:18 GMT",
        "Thursday, 18-Aug 50 02:01:18 GMT", "Thursday,x18-Aug-50 02:01:18 GMT",
        "Thursday,", "Sun Nov  x 08:49:37 1994", "Sun Nov 16 08:49:37 19x4",
        "Sun Nov-16 08:49:37 1994", "Sun Nov 16-08:49:37 1994", "Sun Nov 16 08:49:37-1994",
        "Sun", "Sun,"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t t = date(bad[i]);
        refused += t == -1;
        if (t != -1)
            printf("#   accepted: %s\n", bad[i]);
    }
    is_int(refused, (int)(sizeof bad / sizeof bad[0]), "every malformed date refused");
    is_int(date("Tue, 29 Feb 2000 00:00:00 GMT"), 951782400, "29 February 2000 (a 400th year)");
    is_int(date("Thu, 18 Aug 2050 02:01:60 GMT"), 2544400920, "a leap second");
    is_int(date("Sat, 01 Jan 0000 00:00:00 GMT"), 0, "year 0 (before the era's start): 0");
    /* rfc850's two digits read from a `now` in 2150: 00 is 2200 (50 years on at most) */
    int64_t now2150 = (int64_t)(2150 - 1970) * 31556952;
    const char *d850 = "Wednesday, 01-Jan-00 00:00:00 GMT";
    const char *imf = "Wed, 01 Jan 2200 00:00:00 GMT";
    is_int(cc_http_date(d850, strlen(d850), now2150), cc_http_date(imf, strlen(imf), 0),
           "rfc850 00 seen from 2150: 2200");
}

/* Each Structured Field item and parameter form's own faults (RFC 8941, issue
   55's branches). */
static void test_targeted_items(void)
{
    cc_resp_t c;
    static const char *const good[] = {
        "*a=1", "a_b-c.d*e=1", "a=-1.5", "a=1.25", "a=\"x\\\"y\\\\\"", "a=tok:/x", "a;  b=1",
        "a=(1;x=2 \"s\"), b", "a=( 1 ),b", "a=();p=1", "a=1 ,\tb=2", "a=@-12", "a=:/+=:",
        "a=?1;b", "a=Tok"};
    int taken = 0;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int r = targeted(good[i], &c);
        taken += r;
        if (!r)
            printf("#   refused: %s\n", good[i]);
    }
    is_int(taken, (int)(sizeof good / sizeof good[0]), "every well-formed member taken");
    static const char *const bad[] = {
        "a=-", "a=1.2345", "a=1234567890123.1", "a=1.", "a=\"x\\n\"", "a=\"x\001\"",
        "a=\"x\x80\"", "a=:ab$:", "a=:abc", "a=@1.5", "a=%", "a;B", "a;b=%", "a=(1 %)",
        "a=(1,2)", "a=1 x", "a=(1;B)", "a=\"x\\", "A", "1a", "a=-x", "a=(", "a;"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int r = !targeted(bad[i], &c) && c.max_age == 77;
        refused += r;
        if (!r)
            printf("#   taken: %s\n", bad[i]);
    }
    is_int(refused, (int)(sizeof bad / sizeof bad[0]), "every malformed member: the field ignored");
}

int main(void)
{
    test_init();
    test_resp_values();
    test_resp_flags();
    test_resp_lines();
    test_heuristic();
    test_storable();
    test_lifetime();
    test_age();
    test_delta();
    test_age_value();
    test_http_date();
    test_targeted();
    test_http_date_fields();
    test_targeted_items();
    test_vary();
    test_norm();
    return tap_done();
}
