/*
 * A site's _redirects and _headers (route/sitefiles_parse.c): every form a
 * rule takes (static, placeholders, splat, absolute, statuses, force), the
 * lines refused with their numbers (the others applied), first match wins
 * across the hash and the dynamic list, Cloudflare's limits, trailing
 * slashes and percent-encoding, substitution's bound and encoding, the
 * _headers blocks in order with detach, and the fields gatling owns.
 */
#include "route/sitefiles_parse.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char bad_lines[64];
static int nbad;

static void bad(void *arg, int line, const char *why)
{
    (void)arg, (void)why;
    size_t k = strlen(bad_lines);
    if (k + 8 < sizeof bad_lines)
        snprintf(bad_lines + k, sizeof bad_lines - k, "%s%d", k ? "," : "", line);
    nbad++;
}

static void parse_r(sf_redirects_t *t, const char *text)
{
    bad_lines[0] = 0, nbad = 0;
    if (sf_redirects_parse(t, text, strlen(text), bad, NULL) < 0)
        abort();
}

/* The destination path[0..) gets: "status to" after substitution, or "-". */
static const char *go(const sf_redirects_t *t, const char *path)
{
    static char out[300];
    char to[256];
    sf_caps_t c;
    const sf_rule_t *r = sf_redirects_match(t, path, strlen(path), &c);
    if (!r)
        return "-";
    long n = sf_subst(to, sizeof to, r->to, r->tolen, &c);
    snprintf(out, sizeof out, "%d%s %s", r->status, r->force ? "!" : "", n < 0 ? "(too long)" : to);
    return out;
}

static void test_forms(void)
{
    sf_redirects_t t;
    parse_r(&t, "# a comment\n"
                "/old /new\n"
                "/perm/ /new 308\n"
                "/blog/:year/:slug /posts/:year-:slug 302\n"
                "/ext/* https://example.com/:splat 301\n"
                "/app/* /app/index.html 200\n"
                "/gone /gone.html 410\n"
                "/forced /x.html 200!\n"
                "/caf%C3%A9 /cafe\r\n"
                "  /indented /ok   # a comment after\n");
    is_str(bad_lines, "", "no bad line");
    is_int((int)t.n, 9, "nine rules");
    is_str(go(&t, "/old"), "301 /new", "default status 301");
    is_str(go(&t, "/old/"), "301 /new", "a trailing slash matches the rule without");
    is_str(go(&t, "/perm"), "308 /new", "the rule's trailing slash is not part of it");
    is_str(go(&t, "/blog/2024/hi"), "302 /posts/2024-hi", "placeholders");
    is_str(go(&t, "/blog/2024"), "-", "a placeholder takes one segment, not none");
    is_str(go(&t, "/blog/2024/a/b"), "-", "... nor two");
    is_str(go(&t, "/ext/a/b c"), "301 https://example.com/a/b%20c", "splat, encoded");
    is_str(go(&t, "/ext/"), "301 https://example.com/", "an empty splat");
    is_str(go(&t, "/ext"), "-", "/ext/* does not take /ext");
    is_str(go(&t, "/app/x/y"), "200 /app/index.html", "a rewrite");
    is_str(go(&t, "/gone"), "410 /gone.html", "a page with its status");
    is_str(go(&t, "/forced"), "200! /x.html", "forced");
    is_str(go(&t, "/caf\xc3\xa9"), "301 /cafe", "a percent-encoded rule matches the decoded path");
    is_str(go(&t, "/indented"), "301 /ok", "leading blanks, a comment after");
    is_str(go(&t, "/OLD"), "-", "case matters");
    sf_caps_t c;
    is_int(sf_redirects_match(&t, "/gone", 5, &c)->line, 7, "a rule knows its line");
    sf_redirects_free(&t);
}

static void test_order(void)
{
    sf_redirects_t t;
    parse_r(&t, "/a/:x /dyn1\n/a/b /static2\n/a/b /static3\n/* /all 200\n/c /static5\n");
    is_str(go(&t, "/a/b"), "301 /dyn1", "a dynamic rule before the static one wins");
    is_str(go(&t, "/c"), "200 /all", "... and the splat before /c");
    is_str(go(&t, "/zz"), "200 /all", "the catch-all");
    sf_redirects_free(&t);
    parse_r(&t, "/a/b /static1\n/a/:x /dyn2\n/a/b /static3\n");
    is_str(go(&t, "/a/b"), "301 /static1", "the first static rule of a path");
    is_str(go(&t, "/a/c"), "301 /dyn2", "a dynamic one after it");
    sf_redirects_free(&t);
    /* dynamic rules by their first segment, and those without one, in order */
    parse_r(&t, "/:lang/x /any1\n/a/:y /seg2\n/b/:y /other3\n/:lang/z /any4\n");
    is_str(go(&t, "/a/x"), "301 /any1", "a rule of no first segment before one of /a");
    is_str(go(&t, "/a/z"), "301 /seg2", "/a's before a later one of none");
    is_str(go(&t, "/b/q"), "301 /other3", "/b's chain");
    is_str(go(&t, "/c/z"), "301 /any4", "the list alone");
    is_str(go(&t, "/ab/q"), "-", "a segment that only begins as /a's");
    sf_redirects_free(&t);
    /* the '/'s a rule needs: a trailing one aside, at least those before a splat */
    parse_r(&t, "/:a/:b /two\n/:a/* /under\n/:a /one\n");
    is_str(go(&t, "/x/y/"), "301 /two", "two segments and a trailing slash");
    is_str(go(&t, "/x/y/z"), "301 /under", "three: the splat's");
    is_str(go(&t, "/x/"), "301 /under", "/x/ is under /:a/*");
    is_str(go(&t, "/x"), "301 /one", "/x is not");
    sf_redirects_free(&t);
}

static void test_refused(void)
{
    sf_redirects_t t;
    parse_r(&t, "/ok /fine\n"
                "/one\n"                     /* 2: no destination */
                "/a /b 301 Country=us\n"     /* 3: a condition */
                "/a /b 999\n"                /* 4: status */
                "/a /b 30x\n"                /* 5: not a number */
                "a /b\n"                     /* 6: not a path */
                "/a?x=1 /b\n"                /* 7: a query */
                "/a/*/*/x /b\n"              /* 8: two splats */
                "/a/*/:x /b\n"               /* 9: a placeholder after the splat */
                "/a https://x/ 200\n"        /* 10: a proxy */
                "/a //evil.example/\n"       /* 11: another host by a path */
                "/a /b\x01\n"                /* 12: a control byte */
                "/%zz /b\n"                  /* 13: a bad escape */
                "/ok2 /fine2 302\n");
    is_str(bad_lines, "2,3,4,5,6,7,8,9,10,11,12,13", "each bad line by its number");
    is_int((int)t.n, 2, "the good lines applied");
    is_str(go(&t, "/ok2"), "302 /fine2", "... after the bad ones too");
    sf_redirects_free(&t);

    size_t cap = 2200 * 40;
    char *big = malloc(cap), *p = big;
    for (int i = 0; i < 101; i++)
        p += sprintf(p, "/d%d/* /t%d\n", i, i);
    p += sprintf(p, "/");
    memset(p, 'x', 1000);
    p += 1000;
    p += sprintf(p, " /y\n");
    for (int i = 0; i < 2001; i++)
        p += sprintf(p, "/s%d /t%d\n", i, i);
    for (int i = 0; i < 5; i++)
        p += sprintf(p, "/after%d /x\n", i);
    parse_r(&t, big);
    is_int(nbad, 2, "101st dynamic, a line over 1,000 bytes: refused");
    is_int(t.stop_line, 101 + 1 + 2000 + 1, "both limits full: reading stops (the 2,001st static)");
    is_int((int)t.unread, 14 + 5 * 11, "... the bytes from it on, counted, not read");
    is_int((int)t.ix.nstatic, 2000, "2,000 static rules kept");
    is_int((int)t.ix.ndyn, 100, "100 dynamic rules kept");
    is_str(go(&t, "/s1999"), "301 /t1999", "the last static rule kept");
    is_str(go(&t, "/s2000"), "-", "the one over is not");
    is_str(go(&t, "/d99/q"), "301 /t99", "the last dynamic rule kept");
    /* paths of the rules' lengths that none matches: their buckets' chains
       walked past rules of the same length (with 2,000 and 100 rules, many
       such buckets whatever the table's random seed) */
    int none = 0;
    char path[32];
    for (int i = 1000; i < 2000; i++) { /* "/s1000".."/s1999" are rules */
        snprintf(path, sizeof path, "/z%d", i);
        none += !strcmp(go(&t, path), "-");
    }
    is_int(none, 1000, "1,000 absent paths beside 2,000 static rules: none matched");
    none = 0;
    for (char c = 'e'; c <= 'z'; c++) /* the rules "/dNN/ *": first segments of three */
        for (int i = 10; i < 100; i++) {
            snprintf(path, sizeof path, "/%c%d/q", c, i);
            none += !strcmp(go(&t, path), "-");
        }
    is_int(none, 22 * 90, "1,980 absent first segments beside 100 dynamic rules: none matched");
    sf_redirects_free(&t);
    free(big);
}

/* n dynamic rules (/dI/ and a star, to /tI), one a line, at p: the end of what it wrote. */
static char *dynamic_rules(char *p, int n)
{
    for (int i = 0; i < n; i++)
        p += sprintf(p, "/d%d/* /t%d\n", i, i);
    return p;
}

/* Issue 92: a _redirects of megabytes costs little on the loop: past
   SF_REFUSED_MAX lines refused the rest is not read; a line plainly of a
   kind that is full is refused without being parsed, not counted. */
static void test_refused_bound(void)
{
    sf_redirects_t t;
    size_t cap = 3000 * 40;
    char *big = malloc(cap), *p = big;
    for (int i = 0; i < SF_REFUSED_MAX; i++)
        p += sprintf(p, "nopath%d /x\n", i);
    p += sprintf(p, "/late /x\n");
    parse_r(&t, big);
    is_int(nbad, SF_REFUSED_MAX, "the refused lines told");
    is_int(t.stop_line, SF_REFUSED_MAX + 1, "then reading stops");
    is_int((int)t.unread, 9, "... one line not read");
    is_str(go(&t, "/late"), "-", "... not applied");
    sf_redirects_free(&t);

    p = big;
    for (int i = 0; i < 2000 + SF_REFUSED_MAX + 10; i++)
        p += sprintf(p, "/s%d /t%d\n", i, i);
    p += sprintf(p, "/a%%41 /esc\n/d/:x /dyn\n/b/./c /dot\n/b/.x /dot2\n");
    parse_r(&t, big);
    is_int(nbad, SF_REFUSED_MAX + 10 + 3, "statics over the limit, the escaped, the dots: refused");
    is_int(t.stop_line, 0, "... the plain ones unparsed, not counted: read on");
    is_str(go(&t, "/d/q"), "301 /dyn", "a dynamic rule after them applies");
    sf_redirects_free(&t);

    p = dynamic_rules(big, 101);
    p += sprintf(p, "/:x/.. /home\n");
    parse_r(&t, big);
    is_str(go(&t, "/"), "301 /home", "a placeholder a dot segment removes: static, kept");
    sf_redirects_free(&t);

    p = dynamic_rules(big, 101);
    p += sprintf(p, "  /e%%41/* /esc\nnopath /x\n/s /t\n");
    parse_r(&t, big);
    is_int(nbad, 3, "dynamic rules full: the plain one, the escaped one (parsed), no path: told");
    is_str(go(&t, "/eA/q"), "-", "... the escaped dynamic one over the limit not applied");
    is_str(go(&t, "/s"), "301 /t", "... a static rule after them applies");
    sf_redirects_free(&t);
    free(big);
}

static void test_subst(void)
{
    sf_caps_t c = {0};
    c.splat = "a\r\nb", c.splatlen = 4;
    char out[16];
    is_int((int)sf_subst(out, sizeof out, "/x/:splat", 9, &c), 11, "CR LF encoded");
    is_str(out, "/x/a%0D%0Ab", "... so no field or target can be split");
    is_int((int)sf_subst(out, 8, "/x/:splat", 9, &c), -1, "too long for the room: -1");
    is_int((int)sf_subst(out, sizeof out, "/:nope:80", 9, &c), 9, "an unbound name stays");
    is_str(out, "/:nope:80", "... as it was");
}

/* 300 static blocks, each path its own: each matches its block alone
   (chains walked past the other paths of their buckets, whatever the seed). */
static void test_headers_many(void)
{
    size_t cap = 300 * 32;
    char *text = malloc(cap), *p = text;
    for (int i = 0; i < 300; i++)
        p += sprintf(p, "/h%03d\n  X-N: %d\n", i, i);
    sf_headers_t h;
    bad_lines[0] = 0, nbad = 0;
    if (sf_headers_parse(&h, text, (size_t)(p - text), bad, NULL) < 0)
        abort();
    int alone = 0;
    for (int i = 0; i < 300; i++) {
        char path[16];
        uint32_t idx[4];
        snprintf(path, sizeof path, "/h%03d", i);
        alone += sf_headers_match(&h, path, strlen(path), idx, 4) == 1 && idx[0] == (uint32_t)i;
    }
    is_int(alone, 300, "300 static blocks: each path its own block alone");
    sf_headers_free(&h);
    free(text);
}

static void test_headers(void)
{
    sf_headers_t h;
    const char *text = "# headers\n"
                       "/*\n"
                       "  X-Frame-Options: DENY\n"
                       "  Link: </a.css>; rel=preload\n"
                       "/app/*\n"
                       "  ! X-Frame-Options\n"
                       "  Cache-Control: no-cache\n"
                       "/movies/:title\n"
                       "  X-Movie: watching :title\n"
                       "  Content-Length: 5\n"  /* 10: gatling's */
                       "  ! Date\n"             /* 11: gatling's */
                       "  bad field\n"          /* 12 */
                       "stray words here\n"     /* 13 */
                       "  X-After: skipped\n"   /* with its refused path: not told again */
                       "/app/*\n"
                       "  X-Second: yes\n";
    bad_lines[0] = 0, nbad = 0;
    if (sf_headers_parse(&h, text, strlen(text), bad, NULL) < 0)
        abort();
    is_str(bad_lines, "10,11,12,13", "the bad lines");
    is_int((int)h.nb, 4, "four blocks");
    uint32_t idx[8];
    unsigned k = sf_headers_match(&h, "/app/x", 6, idx, 8);
    is_int((int)k, 3, "/app/x: three blocks");
    ok(k == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 3, "... in the file's order");
    ok(h.f[h.b[1].first].detach && !strcmp(h.f[h.b[1].first].name, "X-Frame-Options"),
       "a detach line");
    k = sf_headers_match(&h, "/movies/up", 10, idx, 8);
    is_int((int)k, 2, "/movies/up: /* and its own");
    sf_caps_t c;
    char v[64];
    ok(sf_pat_match(&h.b[2].pat, "/movies/up", 10, &c) &&
           sf_subst(v, sizeof v, h.f[h.b[2].first].value, strlen(h.f[h.b[2].first].value), &c) > 0,
       "the placeholder bound");
    is_str(v, "watching up", "... into the value");
    ok(sf_field_owned("transfer-encoding") && sf_field_owned("Content-Encoding") &&
           !sf_field_owned("Cache-Control"),
       "gatling's own fields");
    sf_headers_free(&h);

    /* the same path in two static blocks: both, in order */
    text = "/a\n  X-1: 1\n/b\n  X-2: 2\n/a/\n  X-3: 3\n";
    if (sf_headers_parse(&h, text, strlen(text), NULL, NULL) < 0)
        abort();
    k = sf_headers_match(&h, "/a", 2, idx, 8);
    ok(k == 2 && idx[0] == 0 && idx[1] == 2, "two blocks of one path, in order");
    sf_headers_free(&h);
}

static void test_headers_refused(void)
{
    sf_headers_t h;
    char text[8192];
    int n = snprintf(text, sizeof text,
                     "  X-Early: 1\n"          /* 1: before any path */
                     "/a\n"
                     "  ! X-One X-Two\n"       /* 3: detach names one */
                     "  X-Tab: v \t \n"       /* trailing blanks trimmed */
                     "  X-Ctl: a\001b\n"      /* 5: a control byte */
                     "  : novalue\n"           /* 6: no name */
                     "/b/x:y/:p\n"             /* a ':' inside a segment is literal */
                     "  X-Lit: 1\n"
                     "/%s\n", "");
    for (int i = 0; i < 33; i++) /* 10..42; the 33rd: over 32 in a block */
        n += snprintf(text + n, sizeof text - (size_t)n, "  X-F%d: %d\n", i, i);
    n += snprintf(text + n, sizeof text - (size_t)n, "/");
    memset(text + n, 'y', 1001);
    n += 1001;
    n += snprintf(text + n, sizeof text - (size_t)n, "\n");
    bad_lines[0] = 0, nbad = 0;
    if (sf_headers_parse(&h, text, (size_t)n, bad, NULL) < 0)
        abort();
    is_str(bad_lines, "1,3,5,6,42,43", "each bad line by its number");
    ok(h.nb == 3 && h.b[0].n == 1 && !strcmp(h.f[h.b[0].first].value, "v"),
       "trailing blanks trimmed from a value");
    uint32_t idx[4];
    ok(sf_headers_match(&h, "/b/x:y/q", 8, idx, 4) == 1 && idx[0] == 1,
       "':' inside a segment is a literal byte");
    sf_headers_free(&h);

    sf_redirects_t t;
    parse_r(&t, "/:a/:b/:c/:d/:e/:f/:g/:h/:i /x\n");
    is_str(bad_lines, "1", "more than 8 placeholders");
    ok(t.n == 0, "... refused");
    sf_redirects_free(&t);
    parse_r(&t, "/:a/:b/:c/:d/:e/:f/:g/:h /:h\n");
    is_str(go(&t, "/1/2/3/4/5/6/7/8"), "301 /8", "eight placeholders bound");
    is_str(go(&t, "/1/2/3/4/5/6/7/"), "-", "an empty segment binds none");
    sf_redirects_free(&t);
}

/* Issue 92: a NUL in a line of either file is a bad line (the line is not
   what an editor shows); Basic-Auth's words counted, never a field; a
   _headers placeholder's , ; = encoded (no attribute added from a URL). */
static void test_nul_and_auth(void)
{
    static const char r[] = "/a /b\n/c\0x /d\n/e /f\n";
    sf_redirects_t t;
    bad_lines[0] = 0, nbad = 0;
    if (sf_redirects_parse(&t, r, sizeof r - 1, bad, NULL) < 0)
        abort();
    is_str(bad_lines, "2", "_redirects: a NUL's line refused by its number");
    ok(t.n == 2, "... the others kept");
    sf_redirects_free(&t);

    static const char h[] = "/a\n  X-A: 1\0b\n/b\0\n  X-B: 2\n/c\n  X-C: 3\n"
                            "  # a note\0\n";
    sf_headers_t hh;
    bad_lines[0] = 0, nbad = 0;
    if (sf_headers_parse(&hh, h, sizeof h - 1, bad, NULL) < 0)
        abort();
    is_str(bad_lines, "2,3,7", "_headers: NUL lines refused, a path's fields with it");
    ok(hh.nb == 2 && hh.nf == 1, "... /a with no field, /b skipped, /c's field kept");
    sf_headers_free(&hh);

    char big[400];
    snprintf(big, sizeof big, "/p\n  Basic-Auth: u:%0250d\n", 0);
    const char *refused[] = {"/p\n  Basic-Auth: nocolon\n", "/p\n  Basic-Auth: :pw\n",
                             "/p\n  ! Basic-Auth\n", "/p\n  Basic-Auth: \n", big};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        bad_lines[0] = 0, nbad = 0;
        if (sf_headers_parse(&hh, refused[i], strlen(refused[i]), bad, NULL) < 0)
            abort();
        ok(nbad == 1 && hh.nauth == 0, "Basic-Auth refused: %.30s", refused[i] + 3);
        sf_headers_free(&hh);
    }
    static const char good[] = "/p/*\n  Basic-Auth: a:x b:y\n  X-K: 1\n";
    bad_lines[0] = 0, nbad = 0;
    if (sf_headers_parse(&hh, good, sizeof good - 1, bad, NULL) < 0)
        abort();
    ok(nbad == 0 && hh.nauth == 1 && hh.nf == 2 && hh.f[0].auth && !hh.f[1].auth,
       "Basic-Auth a:x b:y taken, marked, counted");
    sf_headers_free(&hh);

    sf_caps_t c = {0};
    c.splat = "x; Domain=evil,y", c.splatlen = 16;
    char out[64];
    long n = sf_subst_keep(out, sizeof out, "id=:splat", 9, &c, SF_FIELD_KEEP);
    ok(n > 0 && !strchr(out + 3, ';') && !strchr(out + 3, '=') && !strchr(out, ','),
       "a field's placeholder encodes ; = , (%s)", n > 0 ? out : "-");
}

int main(void)
{
    test_forms();
    test_order();
    test_refused();
    test_refused_bound();
    test_subst();
    test_headers();
    test_headers_many();
    test_headers_refused();
    test_nul_and_auth();
    return tap_done();
}
