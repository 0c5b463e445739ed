/*
 * The request parser, fed whole and byte by byte, with the input placed
 * against a guard page so that any read past the end faults.
 */
#include "http_parse.h"
#include "hbuf.h"
#include "tap.h"

#include <sys/mman.h>
#include <unistd.h>

static char *guard_base;
static size_t page;

/* Copy s to the very end of a readable page followed by an unmapped one. */
static const char *guarded(const char *s, size_t n)
{
    char *p = guard_base + page - n;
    memcpy(p, s, n);
    return p;
}

static long parse_n(const char *s, size_t n, http_request_t *r, int *st)
{
    return http_parse_request(guarded(s, n), n, r, st);
}

static long parse(const char *s, http_request_t *r, int *st)
{
    return parse_n(s, strlen(s), r, st);
}

/* Every proper prefix must be incomplete, the whole must give `want`. */
static void bytewise(const char *s, long want, const char *name)
{
    http_request_t r;
    int st, bad = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        long got = parse_n(s, i, &r, &st);
        if (got != HTTP_INCOMPLETE && !(want == HTTP_MALFORMED && got == HTTP_MALFORMED))
            bad++;
    }
    ok(bad == 0 && parse_n(s, n, &r, &st) == want, "byte by byte: %s", name);
}

static int str_is(http_str_t s, const char *want)
{
    return s.n == strlen(want) && !memcmp(s.p, want, s.n);
}

static void test_good(void)
{
    http_request_t r;
    int st = 0;
    const char *req = "GET /index.html?x=1 HTTP/1.1\r\nHost: example.org\r\n"
                      "User-Agent:  curl/8  \r\nAccept: */*\r\n\r\nNEXT";
    long n = parse(req, &r, &st);
    is_int(n, (long)strlen(req) - 4, "a full head: consumed up to the empty line");
    ok(str_is(r.method, "GET"), "method");
    ok(str_is(r.target, "/index.html?x=1"), "target");
    is_int(r.version, 11, "version 1.1");
    is_int(r.nheaders, 3, "three headers");
    ok(str_is(r.headers[1].value, "curl/8"), "value trimmed of OWS");
    ok(http_header(&r, "user-agent") && str_is(*http_header(&r, "USER-AGENT"), "curl/8"),
       "header lookup is case-insensitive");
    ok(http_header(&r, "Cookie") == NULL, "absent header is NULL");
    ok(str_is(r.line, "GET /index.html?x=1 HTTP/1.1"), "request line kept for the log");
    char head[256];
    snprintf(head, sizeof head, "%.*s", (int)n, req);
    bytewise(head, n, "full request");

    n = parse("HEAD / HTTP/1.0\n\n", &r, &st);
    is_int(n, 17, "bare LF line ends are accepted");
    is_int(r.version, 10, "version 1.0");
    n = parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", &r, &st);
    is_int(n, 31, "leading empty lines are skipped");
    n = parse("GET / HTTP/1.1\r\nX-Empty:\r\nHost: a\r\n\r\n", &r, &st);
    ok(n > 0 && r.headers[0].value.n == 0, "an empty header value is fine");
}

static void expect_bad(const char *req, int status, const char *name)
{
    http_request_t r;
    int st = 0;
    long n = parse_n(req, strlen(req), &r, &st);
    ok(n == HTTP_MALFORMED && st == status, "%s -> %d", name, status);
    if (n != HTTP_MALFORMED || st != status)
        printf("#   got n=%ld status=%d\n", n, st);
}

static void test_bad(void)
{
    expect_bad("GET\r\n\r\n", 400, "no target");
    expect_bad("GET /\r\n\r\n", 400, "no version (HTTP/0.9 style)");
    expect_bad("GET  / HTTP/1.1\r\n\r\n", 400, "two spaces");
    expect_bad("GET / HTTP/1.1 \r\n\r\n", 400, "trailing space");
    expect_bad("GET / http/1.1\r\n\r\n", 400, "lower-case version");
    expect_bad("GET / HTTP/1.10\r\n\r\n", 400, "three-digit version");
    expect_bad("GET / HTTP/2.0\r\n\r\n", 505, "HTTP/2.0");
    expect_bad("GET / HTTP/3.1\r\n\r\n", 505, "HTTP/3.1");
    expect_bad("G(T / HTTP/1.1\r\n\r\n", 400, "non-token method");
    expect_bad("GET / HTTP/1.1\r\nHost a\r\n\r\n", 400, "header without colon");
    expect_bad("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "space before colon");
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400, "obs-fold");
    expect_bad("GET / HTTP/1.1\r\n: a\r\n\r\n", 400, "empty header name");
    expect_bad("GET / HTTP/1.1\rHost: a\r\n\r\n", 400, "lone CR");
    expect_bad("GET /\x01 HTTP/1.1\r\n\r\n", 400, "control in target");
    char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
    http_request_t r;
    int st = 0;
    ok(parse_n(nul, sizeof nul - 1, &r, &st) == HTTP_MALFORMED && st == 400,
       "NUL in a header value");
    bytewise("GET / HTTP/1.1\r\nHost a\r\n\r\n", HTTP_MALFORMED, "malformed, incremental");
}

static void test_limits(void)
{
    static char big[HTTP_MAX_HEAD * 2];
    http_request_t r;
    int st = 0;
    /* a target just at the limit is fine, one more byte is 414 */
    char *p = big;
    p += sprintf(p, "GET /");
    memset(p, 'a', HTTP_MAX_TARGET - 1), p += HTTP_MAX_TARGET - 1;
    p += sprintf(p, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ok(parse_n(big, p - big, &r, &st) > 0, "target of exactly %d bytes", HTTP_MAX_TARGET);
    p = big + sprintf(big, "GET /");
    memset(p, 'a', HTTP_MAX_TARGET), p += HTTP_MAX_TARGET;
    p += sprintf(p, " HTTP/1.1\r\nHost: a\r\n\r\n");
    expect_bad(big, 414, "target one byte over");
    /* reported before the line ends */
    size_t n = 5 + HTTP_MAX_TARGET + 10;
    memcpy(big, "GET /", 5);
    memset(big + 5, 'a', n - 5);
    ok(parse_n(big, n, &r, &st) == HTTP_MALFORMED && st == 414, "414 before the line ends");
    /* the head */
    p = big + sprintf(big, "GET / HTTP/1.1\r\nX: ");
    memset(p, 'v', HTTP_MAX_HEAD), p += HTTP_MAX_HEAD;
    p += sprintf(p, "\r\n\r\n");
    *p = 0;
    expect_bad(big, 431, "head over the limit");
    ok(parse_n(big, HTTP_MAX_HEAD + 1, &r, &st) == HTTP_MALFORMED && st == 431,
       "431 before the head ends");
    p = big + sprintf(big, "GET / HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
        p += sprintf(p, "X-%d: v\r\n", i);
    p += sprintf(p, "\r\n");
    expect_bad(big, 431, "too many header fields");
}

static void test_lists(void)
{
    http_str_t v = {"keep-alive, Upgrade ,close", 26};
    ok(http_list_has(v, "close"), "list: last token");
    ok(http_list_has(v, "upgrade"), "list: token with spaces, case-insensitive");
    ok(!http_list_has(v, "keep"), "list: no prefix match");
}

/* Feed body in pieces of `step` bytes; return consumed total or -1. */
static long chunked(const char *body, size_t step, int *done)
{
    http_chunked_t st = {0};
    size_t n = strlen(body), off = 0, used;
    *done = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step;
        int r = http_chunked_skip(&st, body + off, k, &used);
        if (r == HTTP_MALFORMED)
            return -1;
        off += used;
        if (r == HTTP_CHUNKED_DONE) {
            *done = 1;
            return (long)off;
        }
    }
    return (long)off;
}

/*
 * The resumable parser, fed one byte more each call as a dripping client
 * sends it: the same verdict and length as the whole at once, and no byte
 * searched twice (the progress never falls behind what was seen).
 */
static void resumable(const char *s, const char *name)
{
    size_t n = strlen(s);
    http_request_t whole, r;
    int st_whole = 0, st = 0;
    long want = parse_n(s, n, &whole, &st_whole), got = HTTP_INCOMPLETE;
    http_progress_t pr = {0};
    size_t k = 0;
    int monotonic = 1;
    for (k = 1; k <= n; k++) {
        size_t seen = pr.seen;
        got = http_parse_request_more(s, k, &r, &st, &pr);
        if (got != HTTP_INCOMPLETE)
            break;
        monotonic &= pr.seen >= seen && pr.seen <= k && pr.line <= k;
    }
    ok(got == want && (got != HTTP_MALFORMED || st == st_whole) && monotonic,
       "%s: fed a byte at a time, %ld (whole: %ld), each byte searched once", name, got, want);
    if (got > 0 && want > 0)
        ok(r.nheaders == whole.nheaders && str_is(r.target, "/x"),
           "%s: the same request", name);
}

static void test_resumable(void)
{
    resumable("GET /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\r\n", "CRLF head");
    resumable("\r\n\nGET /x HTTP/1.1\nHost: a\n\n", "leading empty lines, bare LF");
    resumable("GET /x HTTP/1.1\r\nBad Header: 1\r\n\r\n", "malformed header");
    resumable("GET /x HTTP/1.1\r\nHost: a\r\n", "unfinished head");
    static char big[HTTP_MAX_HEAD + 100];
    size_t n = (size_t)sprintf(big, "GET /x HTTP/1.1\r\n");
    while (n + 20 < HTTP_MAX_HEAD + 50)
        n += (size_t)sprintf(big + n, "X-Long: aaaaaaaaaa\r\n");
    resumable(big, "a head growing past 16 KiB: 431");
    memset(big, 'a', HTTP_MAX_TARGET + 40);
    memcpy(big, "GET /", 5);
    big[HTTP_MAX_TARGET + 40] = 0;
    resumable(big, "an unfinished target past 4 KiB: 414");
}

static void test_chunked(void)
{
    const char *b = "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n"
                    "Trailer: x\r\n\r\nNEXT";
    int done;
    for (size_t step = 1; step <= 64; step *= 2)
        ok(chunked(b, step, &done) == (long)strlen(b) - 4 && done,
           "chunked body skipped exactly, %zu bytes at a time", step);
    ok(chunked("0\r\n\r\n", 1, &done) == 5 && done, "empty chunked body");
    ok(chunked("3\nabc\n0\n\n", 3, &done) == 9 && done, "bare LF framing");
    ok(chunked("5\r\nhel", 100, &done) == 6 && !done, "partial body wants more");
    ok(chunked("zz\r\n", 1, &done) == -1, "bad chunk size");
    ok(chunked("5\r\nhelloXX", 1, &done) == -1, "missing CRLF after data");
    ok(chunked("fffffffffffffffff\r\n", 1, &done) == -1, "chunk size overflow");
}

/* RFC 9112 7.1, strictly: the same verdict whole and split at every byte. */
static void chunk_verdict(const char *b, int good, const char *name)
{
    int done, all = 1;
    for (size_t step = 1; step <= strlen(b); step++) {
        long r = chunked(b, step, &done);
        all &= good ? r == (long)strlen(b) && done : r == -1;
    }
    ok(all, "%s: %s at every split", name, good ? "accepted" : "refused");
}

static void test_chunk_lines(void)
{
    chunk_verdict("0x3d\r\n\r\n", 0, "0x3d is no size");
    chunk_verdict("5 x\r\nhello\r\n0\r\n\r\n", 0, "a word after the size");
    chunk_verdict("5\r\nhello\r\n0\r\nno colon\r\n\r\n", 0, "a trailer without a colon");
    chunk_verdict("5\r\nhello\r\n0\r\nX : y\r\n\r\n", 0, "space before a trailer's colon");
    chunk_verdict("5\r\nhello\r\n0\r\nX: a\x01b\r\n\r\n", 0, "a control byte in a trailer");
    chunk_verdict(";x\r\n", 0, "an extension without a size");
    chunk_verdict("5;\r\nhello\r\n0\r\n\r\n", 0, "';' without a name");
    chunk_verdict("5;a=\r\nhello\r\n0\r\n\r\n", 0, "'=' without a value");
    chunk_verdict("5;a=\"x\r\nhello\r\n0\r\n\r\n", 0, "an unterminated quoted value");
    chunk_verdict("5\rhello\r\n0\r\n\r\n", 0, "a CR that is no line end");
    chunk_verdict("5;a\r\nhello\r\n0\r\n\r\n", 1, "an extension name");
    chunk_verdict("5 ; a = b ;c=\"q\\\"t\"\r\nhello\r\n0\r\n\r\n", 1, "extensions with BWS");
    chunk_verdict("5\r\nhello\r\n0\r\nA: 1\r\nB:\r\n\r\n", 1, "trailer fields");
    chunk_verdict("A\r\n0123456789\r\n0\r\n\r\n", 1, "upper-case hex");
    /* endless trailers or extensions: each line short, the sum bounded */
    static char many[40000];
    size_t n = (size_t)sprintf(many, "0\r\n");
    while (n < sizeof many - 100)
        n += (size_t)sprintf(many + n, "X-Trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    sprintf(many + n, "\r\n");
    int done;
    ok(chunked(many, 4096, &done) == -1, "40 KB of trailer lines: refused");
    n = 0;
    while (n < sizeof many - 100)
        n += (size_t)sprintf(many + n, "1;ext=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nx\r\n");
    sprintf(many + n, "0\r\n\r\n");
    ok(chunked(many, 4096, &done) == -1, "40 KB of chunk extensions: refused");
}

/* Transfer-Encoding lists (RFC 9112 6.1, 9110 10.1.4). */
static void te_is(const char *values, int want)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "POST / HTTP/1.1\r\nHost: x\r\n%s\r\n", values);
    char name[256];
    size_t k = 0;
    for (const char *v = values; *v && k + 2 < sizeof name; v++) /* one line of TAP */
        name[k++] = *v == '\r' ? '|' : *v == '\n' ? ' ' : *v;
    name[k] = 0;
    http_request_t r;
    int st;
    ok(n > 0 && (size_t)n < sizeof buf && parse_n(buf, (size_t)n, &r, &st) == n,
       "request with %s parses", name);
    is_int(http_transfer_coding(&r), want, "%s", name);
}

static void test_transfer_coding(void)
{
    http_request_t r;
    int st;
    ok(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r, &st) > 0 &&
           http_transfer_coding(&r) == HTTP_TE_NONE,
       "no Transfer-Encoding");
    te_is("Transfer-Encoding: chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: CHUNKED\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: gzip, chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: , chunked ,\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: gzip;level=1, chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: xchunked\r\n", 501);
    te_is("Transfer-Encoding: identity, chunked\r\n", 501);
    te_is("Transfer-Encoding: br, chunked\r\n", 501);
    te_is("Transfer-Encoding: foo chunked\r\n", 501);
    te_is("Transfer-Encoding: gzip chunked\r\n", 400);
    te_is("Transfer-Encoding: chunked, gzip\r\n", 400);
    te_is("Transfer-Encoding: chunked, chunked\r\n", 400);
    te_is("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400);
    te_is("Transfer-Encoding: gzip\r\n", 400);
    te_is("Transfer-Encoding: chunked;x=1\r\n", 400);
    te_is("Transfer-Encoding: \r\n", 400);
    te_is("Transfer-Encoding: \"chunked\"\r\n", 400);
    /* a coding's parameters, each fault by itself (issue 55's branches) */
    te_is("Transfer-Encoding: gzip ; q=\"a b\" ; r=s , chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: gzip;q=\"a\\\"b\", chunked\r\n", HTTP_TE_CHUNKED);
    te_is("Transfer-Encoding: gzip;q=\"abc, chunked\r\n", 400);
    te_is("Transfer-Encoding: gzip;q=\"a\\\r\n", 400);
    te_is("Transfer-Encoding: gzip;=1, chunked\r\n", 400);
    te_is("Transfer-Encoding: gzip;q, chunked\r\n", 400);
    te_is("Transfer-Encoding: gzip;q=, chunked\r\n", 400);
    te_is("Transfer-Encoding: gzip;q=\r\n", 400);
    te_is("Transfer-Encoding: gzip;q\r\n", 400);
    te_is("Transfer-Encoding: x-gzip, deflate, compress, x-compress, chunked\r\n",
          HTTP_TE_CHUNKED);
}

/* Fields by name: any case, the first found, how many (issue 55's branches). */
static void test_fields_by_name(void)
{
    http_request_t r;
    int st;
    const char *req = "GET / HTTP/1.1\r\nHost: x\r\nAccept: a\r\nX-Accept: no\r\n"
                      "Accepts: no\r\nbccept: no\r\naccept: b\r\n\r\n";
    ok(parse(req, &r, &st) > 0, "a request with look-alike names");
    const http_str_t *v = http_header(&r, "ACCEPT");
    ok(v && str_is(*v, "a"), "the first Accept, in any case");
    is_int(http_header_count(&r, "Accept"), 2, "two Accept fields, not their look-alikes");
    is_int(http_header_count(&r, "Range"), 0, "no Range");
    ok(!http_header(&r, "Bccepts"), "a name of the same first letter and another length");
    /* tchars that differ in the case bit and are no letters: ^ and ~, _ and DEL's
       neighbour `, 5 and the control byte below it are other names */
    ok(parse("GET / HTTP/1.1\r\nX-^: a\r\nX-_: b\r\nX-5: c\r\n\r\n", &r, &st) > 0,
       "names of ^, _ and 5");
    ok(!http_header(&r, "X-~") && !http_header(&r, "X-`") && !http_header(&r, "X-\025"),
       "not found as ~, ` or the byte 0x15: only a letter's case is ignored");
    ok(http_header(&r, "x-^") && http_header_count(&r, "X-_") == 1, "found as they are");
}

/* RFC 9112 3.2.2: an absolute-form target's authority is the request's. */
static char many[64 + HTTP_MAX_HEADERS * 8];
static void test_authority(void)
{
    http_request_t r;
    int st;
    ok(parse("GET https://admin.example:8443/x?q HTTP/1.1\r\nHost: other.example\r\n\r\n",
             &r, &st) > 0, "an absolute-form target with a Host of its own");
    is_int(http_request_authority(&r), 0, "its authority taken");
    ok(str_is(*http_header(&r, "Host"), "admin.example:8443"), "Host is the target's authority");
    is_int((int)http_header_count(&r, "Host"), 1, "still one Host");
    ok(parse("GET HTTP://a.example HTTP/1.0\r\n\r\n", &r, &st) > 0, "HTTP/1.0, no Host");
    is_int(http_request_authority(&r), 0, "its authority taken");
    ok(str_is(*http_header(&r, "Host"), "a.example"), "a Host added, scheme in any case");
    ok(parse("GET /x HTTP/1.1\r\nHost: h.example\r\n\r\n", &r, &st) > 0, "origin-form");
    is_int(http_request_authority(&r), 0, "nothing to do");
    ok(str_is(*http_header(&r, "Host"), "h.example"), "Host as it was");
    ok(parse("GET ftp://f.example/x HTTP/1.1\r\nHost: h.example\r\n\r\n", &r, &st) > 0,
       "another scheme");
    is_int(http_request_authority(&r), 0, "not an authority of ours: Host stays");
    ok(str_is(*http_header(&r, "Host"), "h.example"), "Host as it was");
    const char *ends[] = {"GET http://q.example?x HTTP/1.1\r\nhost: h\r\n\r\n",
                          "GET http://q.example#f HTTP/1.1\r\nXost: 1\r\nHOST: h\r\n\r\n",
                          "GET http://q.example HTTP/1.1\r\nHost: h\r\n\r\n"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        ok(parse(ends[i], &r, &st) > 0, "an authority ended by ?, # or the target: %zu", i);
        is_int(http_request_authority(&r), 0, "taken");
        ok(str_is(*http_header(&r, "Host"), "q.example"), "Host is q.example");
    }
    hbuf_t b = hb_init(many, sizeof many);
    hb_puts(&b, "GET http://full.example/ HTTP/1.1\r\n");
    for (int i = 0; i < HTTP_MAX_HEADERS; i++)
        hb_puts(&b, "X-A: b\r\n");
    hb_puts(&b, "\r\n");
    ok(hb_str(&b) && parse(many, &r, &st) > 0, "every field used, none a Host");
    is_int(http_request_authority(&r), 400, "no room for Host: 400");
    const char *bad[] = {"GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n",
                         "GET https://u:p@a.example/ HTTP/1.1\r\nHost: h\r\n\r\n",
                         "GET http://a.example/ HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ok(parse(bad[i], &r, &st) > 0, "parsed: %zu", i);
        is_int(http_request_authority(&r), 400, "refused: empty, userinfo, two Hosts");
    }
}

/* The bytes chunked framing refuses inside a quoted extension and a trailer,
   and a trailer line past its cap. */
static void test_chunk_bytes(void)
{
    static const struct {
        const char *body, *name;
        int good;
    } cases[] = {
        {"5;a=\"x\001\"\r\nhello\r\n0\r\n\r\n", "a control byte in a quoted extension", 0},
        {"5;a=\"x\\\001\"\r\nhello\r\n0\r\n\r\n", "an escaped control byte", 0},
        {"5\r\nhello\r\n0\r\n:x\r\n\r\n", "a trailer without a name", 0},
        {"5\r\nhello\r\n0\r\nA: b\rc\r\n\r\n", "a bare CR in a trailer", 0},
        {"5\r\nhello\r\n0\r\nA: b\nB: c\n\n", "trailers ended by bare LFs", 1},
        {"5\r\nhello\r\n0\r\n\rx", "a CR after the trailers without its LF", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        chunk_verdict(cases[i].body, cases[i].good, cases[i].name);
    static char longer[2 * 4096 + 64];
    size_t n = (size_t)sprintf(longer, "0\r\n");
    memset(longer + n, 'N', 4100);
    sprintf(longer + n + 4100, ": v\r\n\r\n");
    chunk_verdict(longer, 0, "a trailer's name past 4096 bytes");
    n = (size_t)sprintf(longer, "0\r\nN: ");
    memset(longer + n, 'v', 4100);
    sprintf(longer + n + 4100, "\r\n\r\n");
    chunk_verdict(longer, 0, "a trailer's value past 4096 bytes");
}

/*
 * A request whole (its request line in one pass, its values eight bytes a
 * step) gets what the byte loop gives it dripped: every byte of a head
 * replaced by each of the bytes that decide, the verdict, status and length
 * the same.  And a value's byte is refused exactly when it is no VCHAR,
 * SP, HTAB or obs-text, wherever it sits in its word.
 */
static void test_one_pass(void)
{
    static const char base[] = "GET /a/b?c=d HTTP/1.1\r\nHost: example.org\r\n"
                               "User-Agent: a value of more than eight bytes\r\n\r\n";
    static const unsigned char subst[] = {0, '\t', '\r', '\n', ' ', 0x7f, 0x80, 0xff,
                                          ':', '/', 'H', '1', '2', '.', 'x'};
    char s[sizeof base];
    int differ = 0;
    for (size_t i = 0; i + 1 < sizeof base; i++)
        for (size_t j = 0; j < sizeof subst; j++) {
            memcpy(s, base, sizeof base);
            s[i] = (char)subst[j];
            http_request_t whole, r;
            int st_whole = 0, st = 0;
            long want = parse_n(s, sizeof base - 1, &whole, &st_whole), got = HTTP_INCOMPLETE;
            http_progress_t pr = {0};
            for (size_t k = 1; k < sizeof base && got == HTTP_INCOMPLETE; k++)
                got = http_parse_request_more(s, k, &r, &st, &pr);
            differ += got != want || (got == HTTP_MALFORMED && st != st_whole);
        }
    is_int(differ, 0, "whole and dripped: the same verdict for every byte changed");
    int wrong = 0;
    for (unsigned c = 0; c < 256; c++)
        for (size_t at = 0; at < 20; at++) {
            char v[] = "GET / HTTP/1.1\r\nX: abcdefghijklmnopqrst\r\n\r\n";
            if (c == '\n')
                continue; /* a line end, not a value's byte */
            v[strchr(v, 'a') - v + (long)at] = (char)c;
            http_request_t r;
            int st = 0, good = (c >= 0x20 && c != 0x7f) || c == '\t';
            wrong += (parse_n(v, sizeof v - 1, &r, &st) > 0) != good;
        }
    is_int(wrong, 0, "a value's byte refused exactly when it is not a field-value octet");
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = page * 8;
    guard_base = mmap(NULL, len + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(guard_base + len, page, PROT_NONE);
    page = len; /* inputs end exactly at the guard page */
    test_good();
    test_bad();
    test_limits();
    test_lists();
    test_resumable();
    test_chunked();
    test_chunk_lines();
    test_transfer_coding();
    test_fields_by_name();
    test_chunk_bytes();
    test_authority();
    test_one_pass();
    return tap_done();
}
