/*
 * lg_selftest — unit tests of the load generators' pure parts: the response
 * parser (fed whole, byte by byte and split at every offset, each piece
 * placed against a guard page so that an over-read faults), the histogram,
 * URL / source address parsing, and the HTTP/2 session (lg_h2: the fields a
 * request goes out with, decoded with nghttp2's own HPACK decoder, and what
 * responses, resets, GOAWAY and an HTTP/1.x answer to the preface make of
 * the streams), and the FTP client (lg_ftp: the reply parser fed like the
 * response parser, EPSV/PASV ports, the action for each reply in each phase
 * of a session, the RETR command).  TAP output; exit status 1 on failure.
 * Run by tests/integration/bench/test_loadgen.py.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "lg.h"
#include "lg_ftp.h"
#include "lg_h2.h"
#include "lg_hist.h"
#include "lg_http.h"
#include "lg_net.h"

static int ntests, nfailed;

static void check(int cond, const char *what, const char *detail)
{
    ntests++;
    printf("%s %d - %s\n", cond ? "ok" : "not ok", ntests, what);
    if (!cond) {
        nfailed++;
        if (detail)
            printf("#   %s\n", detail);
    }
}

/* ---- parser ---- */

static char *guard_page; /* a readable page followed by an unreadable one */
static size_t page;

/* Parse p[0..n) placed right before the guard page. */
static int parse_guarded(lg_resp_t *r, const char *p, size_t n, size_t *used)
{
    if (n > page)
        return lg_resp_parse(r, p, n, used);
    char *dst = guard_page + page - n;
    memcpy(dst, p, n);
    return lg_resp_parse(r, dst, n, used);
}

typedef struct outcome {
    int rc;      /* the last result, or LG_HTTP_DONE after an EOF that completed it */
    size_t used; /* bytes consumed up to DONE */
    unsigned status;
    uint64_t body;
    int keepalive;
} outcome_t;

/* Feed s in pieces of `step` bytes (0: all at once; else the first `split` bytes, then rest). */
static outcome_t run(const char *s, size_t n, size_t split, int step, int head, int eof)
{
    lg_resp_t r;
    outcome_t o = {LG_HTTP_MORE, 0, 0, 0, 0};
    lg_resp_start(&r, head);
    size_t off = 0;
    while (off < n) {
        size_t len = n - off;
        if (step)
            len = 1;
        else if (split && off < split)
            len = split - off;
        size_t used = 0;
        o.rc = parse_guarded(&r, s + off, len, &used);
        off += used;
        if (o.rc != LG_HTTP_MORE)
            break;
        if (used != len) {
            o.rc = -99; /* MORE must consume everything */
            break;
        }
    }
    if (o.rc == LG_HTTP_MORE && eof)
        o.rc = lg_resp_eof(&r) == LG_HTTP_DONE ? LG_HTTP_DONE : -2;
    o.used = off;
    o.status = r.status;
    o.body = r.body;
    o.keepalive = o.rc == LG_HTTP_DONE ? lg_resp_keepalive(&r) : -1;
    return o;
}

typedef struct pcase {
    const char *name;
    const char *in;
    int head, eof;
    int rc; /* expected */
    unsigned status;
    uint64_t body;
    int keepalive;
    size_t used; /* expected bytes consumed (0: all) */
} pcase_t;

static const pcase_t cases[] = {
    {"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 1, 200, 5, 1, 0},
    {"two pipelined: first only",
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 404 No\r\nContent-Length: 0\r\n\r\n",
     0, 0, 1, 200, 2, 1, 40},
    {"chunked with extension and trailer",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n"
     "0\r\nTrailer: x\r\n\r\n",
     0, 0, 1, 200, 11, 1, 0},
    {"chunked, hex sizes, bare LF",
     "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nA\n0123456789\n0\n\n", 0, 0, 1, 200, 10, 1, 0},
    {"gzip, chunked is chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip ,Chunked \r\n\r\n1\r\nx\r\n0\r\n\r\n", 0, 0, 1,
     200, 1, 1, 0},
    {"chunked, gzip is delimited by close",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n1\r\nx\r\n0\r\n\r\n", 0, 1, 1, 200,
     11, 0, 0},
    {"HTTP/1.0 body until close", "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nabc", 0, 1, 1, 200, 3, 0, 0},
    {"HTTP/1.0 keep-alive",
     "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", 0, 0, 1, 200, 1, 1,
     0},
    {"HTTP/1.0 without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 0, 0, 1, 200,
     1, 0, 0},
    {"connection: close", "HTTP/1.1 200 OK\r\nconnection: foo, close\r\ncontent-length: 0\r\n\r\n",
     0, 0, 1, 200, 0, 0, 0},
    {"case-insensitive names", "HTTP/1.1 200 OK\r\nCONTENT-length:3\r\n\r\nabc", 0, 0, 1, 200, 3, 1,
     0},
    {"longer name is not content-length",
     "HTTP/1.1 200 OK\r\nContent-Lengthx: 5\r\nContent-Length: 1\r\n\r\nx", 0, 0, 1, 200, 1, 1, 0},
    {"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 0,
     0, 1, 200, 1, 1, 0},
    {"204 has no body", "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 0, 0, 1, 204, 0, 1,
     0},
    {"304 has no body", "HTTP/1.1 304 Not Modified\r\n\r\n", 0, 0, 1, 304, 0, 1, 0},
    {"HEAD has no body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 1, 0, 1, 200, 0, 1, 0},
    {"100 continue first",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 0, 0, 1,
     201, 2, 1, 0},
    {"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, 200, 0, 1, 0},
    {"obs-fold ignored", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, 200,
     0, 1, 0},
    {"500 status", "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", 0, 0, 1, 500, 0, 1, 0},
    {"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n", 0, 0, -1, 0, 0, -1, 0},
    {"HTTP/2 preface", "PRI * HTTP/2.0\r\n", 0, 0, -1, 0, 0, -1, 0},
    {"bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", 0, 0, -1, 200, 0, -1,
     0},
    {"empty content-length", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", 0, 0, -1, 200, 0, -1,
     0},
    {"two different lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
     0, 0, -1, 200, 0, -1, 0},
    {"bad status", "HTTP/1.1 20x OK\r\n\r\n", 0, 0, -1, 20, 0, -1, 0},
    {"status out of range", "HTTP/1.1 099 OK\r\n\r\n", 0, 0, -1, 99, 0, -1, 0},
    {"space in a name", "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", 0, 0, -1, 200, 0, -1, 0},
    {"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, 0, -1, 200,
     0, -1, 0},
    {"huge chunk size",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", 0, 0, -1, 200, 0,
     -1, 0},
    {"chunk without CRLF after data",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", 0, 0, -1, 200, 1, -1, 0},
    {"101 is not followed", "HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", 0, 0, -1, 101, 0, -1,
     0},
    {"short body at EOF", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 0, 1, -2, 200, 5,
     -1, 0},
    {"head cut at EOF", "HTTP/1.1 200 OK\r\nContent-Le", 0, 1, -2, 200, 0, -1, 0},
};

static void test_case(const pcase_t *c)
{
    size_t n = strlen(c->in);
    size_t used = c->used ? c->used : n;
    char what[200], detail[200];
    outcome_t want = {c->rc, used, c->status, c->body, c->keepalive};
    int all_ok = 1;
    for (size_t split = 0; split <= n + 1; split++) { /* n+1: byte by byte */
        outcome_t o = run(c->in, n, split == n + 1 ? 0 : split, split == n + 1, c->head, c->eof);
        int good = o.rc == want.rc && o.status == want.status && o.body == want.body &&
                   o.keepalive == want.keepalive && (o.rc != LG_HTTP_DONE || o.used == want.used);
        if (!good && all_ok) {
            snprintf(detail, sizeof detail,
                     "split %zu: rc %d status %u body %llu keepalive %d used %zu", split, o.rc,
                     o.status, (unsigned long long)o.body, o.keepalive, o.used);
            all_ok = 0;
        }
    }
    snprintf(what, sizeof what, "parse: %s (whole, split anywhere, byte by byte)", c->name);
    check(all_ok, what, detail);
}

static void test_parser(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    guard_page = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard_page == MAP_FAILED || mprotect(guard_page + page, page, PROT_NONE) < 0) {
        check(0, "guard page", "mmap/mprotect failed");
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_case(&cases[i]);

    /* a head longer than LG_HTTP_MAX_HEAD is refused, not buffered forever */
    size_t n = LG_HTTP_MAX_HEAD + 100;
    char *big = malloc(n);
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 21);
    memset(big + 21, 'a', n - 21);
    lg_resp_t r;
    size_t used;
    lg_resp_start(&r, 0);
    check(lg_resp_parse(&r, big, n, &used) == LG_HTTP_BAD, "parse: endless head is malformed",
          NULL);
    free(big);

    /* the EOF of a response that has not begun is not a broken response */
    lg_resp_start(&r, 0);
    check(lg_resp_eof(&r) == LG_HTTP_MORE && !lg_resp_begun(&r), "parse: EOF before any byte",
          NULL);

    char req[256];
    size_t l = lg_req_format(req, sizeof req, "GET", "h:1", "/x", 0, "A: b\r\n");
    check(l && !strcmp(req, "GET /x HTTP/1.1\r\nHost: h:1\r\nUser-Agent: gatling-bench\r\n"
                            "Connection: close\r\nA: b\r\n\r\n"),
          "request format", req);
    check(lg_req_format(req, 20, "GET", "h", "/x", 1, NULL) == 0, "request too long: 0", NULL);
    munmap(guard_page, 2 * page);
}

/* ---- histogram ---- */

static void test_hist(void)
{
    int contiguous = 1;
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++) {
        uint64_t lo = lg_hist_bucket_low(i), w = lg_hist_bucket_width(i);
        if (lg_hist_index(lo) != i || lg_hist_index(lo + w - 1) != i ||
            (i + 1 < LG_HIST_BUCKETS && lg_hist_bucket_low(i + 1) != lo + w))
            contiguous = 0;
    }
    check(contiguous, "hist: buckets are contiguous and invert lg_hist_index", NULL);
    check(lg_hist_index(UINT64_MAX) == LG_HIST_BUCKETS - 1, "hist: huge values clamp", NULL);

    lg_hist_t *h = malloc(sizeof *h), *g = malloc(sizeof *g);
    lg_hist_init(h);
    lg_hist_init(g);
    check(lg_hist_quantile(h, 0.5) == 0 && h->count == 0, "hist: empty", NULL);
    for (uint64_t v = 1; v <= 100000; v++)
        lg_hist_add(v % 2 ? h : g, v);
    lg_hist_merge(h, g);
    uint64_t p50 = lg_hist_quantile(h, 0.5), p99 = lg_hist_quantile(h, 0.99);
    uint64_t p999 = lg_hist_quantile(h, 0.999);
    char d[128];
    snprintf(d, sizeof d, "p50 %llu p99 %llu p99.9 %llu", (unsigned long long)p50,
             (unsigned long long)p99, (unsigned long long)p999);
    check(p50 >= 50000 && p50 <= 50000 * 1.008 && p99 >= 99000 && p99 <= 99000 * 1.008 &&
              p999 >= 99900 && p999 <= 100000,
          "hist: quantiles of 1..100000 within 0.8 %", d);
    check(h->count == 100000 && h->min == 1 && h->max == 100000 &&
              lg_hist_quantile(h, 1.0) == 100000 && lg_hist_mean(h) == 50000.5,
          "hist: merge keeps count, min, max, mean", NULL);
    lg_hist_init(g);
    lg_hist_add(g, 7);
    check(lg_hist_quantile(g, 0.5) == 7 && lg_hist_quantile(g, 0.999) == 7,
          "hist: one value is every quantile", NULL);
    free(h);
    free(g);
}

/* ---- URLs and source addresses ---- */

static void test_net(void)
{
    lg_url_t u;
    char err[256];
    int r = lg_url_parse("http://127.0.0.1:8080/a/b?c=d#frag", &u, err, sizeof err);
    check(r == 0 && u.port == 8080 && !strcmp(u.path, "/a/b?c=d") &&
              !strcmp(u.host, "127.0.0.1:8080") && u.addr.ss.ss_family == AF_INET,
          "url: IPv4, port, path and query", err);
    lg_url_free(&u);
    r = lg_url_parse("http://[::1]:81", &u, err, sizeof err);
    check(r == 0 && u.port == 81 && !strcmp(u.path, "/") && !strcmp(u.host, "[::1]:81") &&
              u.addr.ss.ss_family == AF_INET6,
          "url: IPv6 literal, no path", err);
    lg_url_free(&u);
    r = lg_url_parse("127.0.0.1/x", &u, err, sizeof err);
    check(r == 0 && u.port == 80 && !strcmp(u.path, "/x"), "url: no scheme, default port", err);
    lg_url_free(&u);
    const char *bad[] = {"http://127.0.0.1:0/",
                         "http://127.0.0.1:65536/",
                         "https://127.0.0.1:0/",
                         "http://[::1/",
                         "http:///x",
                         "ftps://127.0.0.1/x",
                         "gopher://127.0.0.1/x",
                         "http://127.0.0.1:80x/",
                         "http://127.0.0.1/a b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[128];
        snprintf(what, sizeof what, "url: '%s' refused", bad[i]);
        r = lg_url_parse(bad[i], &u, err, sizeof err);
        check(r < 0, what, NULL);
        lg_url_free(&u);
    }
    size_t n;
    lg_addr_t *a = lg_srcs_parse("127.0.0.2-127.0.0.9", AF_INET, &n, err, sizeof err);
    char s[64] = "";
    if (a)
        lg_addr_str(&a[7], s, sizeof s);
    check(a && n == 8 && !strcmp(s, "127.0.0.9"), "srcs: full range", s);
    free(a);
    a = lg_srcs_parse("127.0.0.2-9,127.0.1.1", AF_INET, &n, err, sizeof err);
    check(a && n == 9, "srcs: last-octet range and a list", err);
    free(a);
    a = lg_srcs_parse("127.0.0.255-127.0.1.1", AF_INET, &n, err, sizeof err);
    check(a && n == 3, "srcs: range across an octet", err);
    free(a);
    a = lg_srcs_parse("::1", AF_INET6, &n, err, sizeof err);
    check(a && n == 1, "srcs: IPv6 address", err);
    free(a);
    const char *badsrc[] = {"::1", "127.0.0.9-127.0.0.2", "127.0.0.1,,x", "",
                            "127.0.0.0-127.2.0.0"};
    for (size_t i = 0; i < sizeof badsrc / sizeof badsrc[0]; i++) {
        char what[128];
        snprintf(what, sizeof what, "srcs: '%s' refused for IPv4", badsrc[i]);
        a = lg_srcs_parse(badsrc[i], AF_INET, &n, err, sizeof err);
        check(!a, what, NULL);
        free(a);
    }
    uint64_t v;
    double t;
    check(lg_parse_u64("10k", 1 << 30, &v) == 0 && v == 10000 && lg_parse_u64("1x", 9, &v) < 0 &&
              lg_parse_u64("-1", 9, &v) < 0 && lg_parse_u64("10", 9, &v) < 0,
          "numbers: suffixes and limits", NULL);
    check(lg_parse_secs("1.5", &t) == 0 && t == 1.5 && lg_parse_secs("250ms", &t) == 0 &&
              t == 0.25 && lg_parse_secs("2m", &t) == 0 && t == 120 &&
              lg_parse_secs("5h", &t) < 0 && lg_parse_secs("", &t) < 0,
          "seconds: units", NULL);
}

/* ---- FTP (lg_ftp) ---- */

typedef struct fcase {
    const char *name;
    const char *in;
    int rc; /* expected: LG_FTP_DONE, LG_FTP_MORE or LG_FTP_BAD */
    unsigned code;
    const char *text; /* expected text of the last line (DONE) */
    size_t used;      /* expected bytes consumed on DONE (0: all) */
} fcase_t;

static const fcase_t fcases[] = {
    {"one line", "220 Welcome\r\n", LG_FTP_DONE, 220, "Welcome", 0},
    {"bare LF", "200 Switching to Binary mode.\n", LG_FTP_DONE, 200, "Switching to Binary mode.",
     0},
    {"code without text", "200\r\n", LG_FTP_DONE, 200, "", 0},
    {"multi-line: the last line's text",
     "220-Hello\r\n there\r\n220-still\r\n2201 not yet\r\n220 Ready\r\n", LG_FTP_DONE, 220, "Ready",
     0},
    {"multi-line: a line of another code does not end it",
     "211-Features:\r\n 211 x\r\n200 no\r\n211 End\r\n", LG_FTP_DONE, 211, "End", 0},
    {"two replies: the first only", "331 Please specify the password.\r\n230 ok\r\n", LG_FTP_DONE,
     331, "Please specify the password.", 34},
    {"EPSV", "229 Entering Extended Passive Mode (|||40001|)\r\n", LG_FTP_DONE, 229,
     "Entering Extended Passive Mode (|||40001|)", 0},
    {"incomplete", "220 Wel", LG_FTP_MORE, 0, NULL, 0},
    {"multi-line, incomplete", "220-a\r\n220", LG_FTP_MORE, 0, NULL, 0},
    {"HTTP is not FTP", "HTTP/1.1 400 Bad Request\r\n\r\n", LG_FTP_BAD, 0, NULL, 0},
    {"first digit 6", "600 x\r\n", LG_FTP_BAD, 0, NULL, 0},
    {"first digit 0", "099 x\r\n", LG_FTP_BAD, 0, NULL, 0},
    {"letter in the code", "22x ok\r\n", LG_FTP_BAD, 0, NULL, 0},
    {"no space after the code", "220x\r\n", LG_FTP_BAD, 0, NULL, 0},
};

/* Parse p[0..n) placed right before the guard page (as parse_guarded, for FTP). */
static int ftp_guarded(lg_ftp_reply_t *r, const char *p, size_t n, size_t *used)
{
    if (n > page)
        return lg_ftp_reply_parse(r, p, n, used);
    char *dst = guard_page + page - n;
    memcpy(dst, p, n);
    return lg_ftp_reply_parse(r, dst, n, used);
}

/* Feed c->in whole (split 0), in two pieces at split, or byte by byte (step). */
static int ftp_run(const fcase_t *c, size_t split, int step, lg_ftp_reply_t *r, size_t *off)
{
    size_t n = strlen(c->in);
    int rc = LG_FTP_MORE;
    lg_ftp_reply_start(r);
    *off = 0;
    while (*off < n) {
        size_t len = step ? 1 : split && *off < split ? split - *off : n - *off, used = 0;
        rc = ftp_guarded(r, c->in + *off, len, &used);
        *off += used;
        if (rc != LG_FTP_MORE)
            break;
        if (used != len)
            return -99; /* MORE must consume everything */
    }
    return rc;
}

static void test_ftp_case(const fcase_t *c)
{
    size_t n = strlen(c->in), want_used = c->used ? c->used : n;
    char what[200], detail[300] = "";
    int all_ok = 1;
    for (size_t split = 0; split <= n + 1; split++) { /* n+1: byte by byte */
        lg_ftp_reply_t r;
        size_t off;
        int rc = ftp_run(c, split == n + 1 ? 0 : split, split == n + 1, &r, &off);
        int good = rc == c->rc;
        if (good && rc == LG_FTP_DONE)
            good = r.code == c->code && off == want_used && r.tlen == strlen(c->text) &&
                   !memcmp(r.text, c->text, r.tlen);
        if (!good && all_ok) {
            snprintf(detail, sizeof detail, "split %zu: rc %d code %u used %zu text '%.*s'", split,
                     rc, r.code, off, (int)r.tlen, r.text);
            all_ok = 0;
        }
    }
    snprintf(what, sizeof what, "ftp reply: %s (whole, split anywhere, byte by byte)", c->name);
    check(all_ok, what, detail);
}

static void test_ftp_replies(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    guard_page = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard_page == MAP_FAILED || mprotect(guard_page + page, page, PROT_NONE) < 0) {
        check(0, "guard page", "mmap/mprotect failed");
        return;
    }
    for (size_t i = 0; i < sizeof fcases / sizeof fcases[0]; i++)
        test_ftp_case(&fcases[i]);
    munmap(guard_page, 2 * page);

    /* an endless multi-line reply is refused, not read forever */
    size_t n = LG_FTP_MAX_REPLY + 100;
    char *big = malloc(n);
    memcpy(big, "220-", 4);
    memset(big + 4, 'a', n - 4);
    lg_ftp_reply_t r;
    size_t used;
    lg_ftp_reply_start(&r);
    check(lg_ftp_reply_parse(&r, big, n, &used) == LG_FTP_BAD && used == LG_FTP_MAX_REPLY,
          "ftp reply: longer than LG_FTP_MAX_REPLY is malformed", NULL);
    /* a long line keeps the first LG_FTP_TEXT bytes of its text */
    memcpy(big, "227 ", 4);
    memcpy(big + 300, "\r\n", 2);
    lg_ftp_reply_start(&r);
    check(lg_ftp_reply_parse(&r, big, 302, &used) == LG_FTP_DONE && used == 302 &&
              r.tlen == LG_FTP_TEXT && r.text[LG_FTP_TEXT - 1] == 'a',
          "ftp reply: a long text is truncated, not overflowed", NULL);
    free(big);
}

static void test_ftp_ports(void)
{
    static const struct {
        const char *text;
        int epsv, pasv;
    } t[] = {
        {"Entering Extended Passive Mode (|||40001|)", 40001, -1},
        {"Extended Passive mode OK (!!!65535!)", 65535, -1},
        {"(|||1|)", 1, -1},
        {"(|||65536|)", -1, -1},
        {"(|||0|)", -1, -1},
        {"(||1|)", -1, -1},
        {"(|||123)", -1, -1},
        {"(|||123|", -1, -1},
        {"(11123|)", -1, -1},
        {"(|||123456|)", -1, -1},
        {"Entering Passive Mode (127,0,0,1,156,65).", -1, 40001},
        {"Entering Passive Mode 127,0,0,1,0,21", -1, 21},
        {"=10,1,2,3,255,255", -1, 65535},
        {"(256,0,0,1,1,1)", -1, -1},
        {"(1,2,3,4,5)", -1, -1},
        {"(1,2,3,4,0,0)", -1, -1},
        {"(1,2,3,4,5,6,7)", -1, -1},
        {"(1,2,3,4,1000,1)", -1, -1},
        {"", -1, -1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char what[160];
        size_t len = strlen(t[i].text);
        int e = lg_ftp_epsv_port(t[i].text, len), p = lg_ftp_pasv_port(t[i].text, len);
        snprintf(what, sizeof what, "ftp ports: '%s' -> EPSV %d, PASV %d", t[i].text, t[i].epsv,
                 t[i].pasv);
        check(e == t[i].epsv && p == t[i].pasv, what, NULL);
    }
}

static void test_ftp_session(void)
{
    static const struct {
        int phase;
        unsigned code;
        int act;
    } t[] = {
        {LG_FTP_GREET, 120, LG_FTP_A_WAIT},      {LG_FTP_GREET, 220, LG_FTP_A_USER},
        {LG_FTP_GREET, 421, LG_FTP_A_REFUSED},   {LG_FTP_GREET, 200, LG_FTP_A_UNEXPECTED},
        {LG_FTP_USER, 331, LG_FTP_A_PASS},       {LG_FTP_USER, 230, LG_FTP_A_TYPE},
        {LG_FTP_USER, 530, LG_FTP_A_REFUSED},    {LG_FTP_USER, 150, LG_FTP_A_UNEXPECTED},
        {LG_FTP_PASS, 230, LG_FTP_A_TYPE},       {LG_FTP_PASS, 202, LG_FTP_A_TYPE},
        {LG_FTP_PASS, 530, LG_FTP_A_REFUSED},    {LG_FTP_TYPE, 200, LG_FTP_A_READY},
        {LG_FTP_TYPE, 504, LG_FTP_A_REFUSED},    {LG_FTP_IDLE, 421, LG_FTP_A_CLOSING},
        {LG_FTP_IDLE, 226, LG_FTP_A_UNEXPECTED}, {LG_FTP_EPSV, 229, LG_FTP_A_CONNECT},
        {LG_FTP_EPSV, 500, LG_FTP_A_PASV},       {LG_FTP_EPSV, 502, LG_FTP_A_PASV},
        {LG_FTP_EPSV, 522, LG_FTP_A_PASV},       {LG_FTP_EPSV, 425, LG_FTP_A_REFUSED},
        {LG_FTP_EPSV, 530, LG_FTP_A_REFUSED},    {LG_FTP_EPSV, 227, LG_FTP_A_UNEXPECTED},
        {LG_FTP_PASV, 227, LG_FTP_A_CONNECT},    {LG_FTP_PASV, 502, LG_FTP_A_REFUSED},
        {LG_FTP_DATA, 425, LG_FTP_A_REFUSED},    {LG_FTP_DATA, 226, LG_FTP_A_UNEXPECTED},
        {LG_FTP_RETR, 150, LG_FTP_A_WAIT},       {LG_FTP_RETR, 125, LG_FTP_A_WAIT},
        {LG_FTP_RETR, 226, LG_FTP_A_DONE},       {LG_FTP_RETR, 250, LG_FTP_A_DONE},
        {LG_FTP_RETR, 550, LG_FTP_A_REFUSED},    {LG_FTP_RETR, 426, LG_FTP_A_REFUSED},
        {LG_FTP_RETR, 200, LG_FTP_A_UNEXPECTED},
    };
    int all_ok = 1;
    char detail[128] = "";
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int a = lg_ftp_next(t[i].phase, t[i].code);
        if (a != t[i].act && all_ok) {
            snprintf(detail, sizeof detail, "phase %d reply %u: action %d, not %d", t[i].phase,
                     t[i].code, a, t[i].act);
            all_ok = 0;
        }
    }
    check(all_ok, "ftp session: the action for each reply in each phase", detail);

    char buf[64];
    check(lg_ftp_retr_format(buf, sizeof buf, "/1k") == 9 && !strcmp(buf, "RETR 1k\r\n"),
          "ftp RETR: the path without its first /", buf);
    check(lg_ftp_retr_format(buf, sizeof buf, "//abs/f") == 13 && !strcmp(buf, "RETR /abs/f\r\n"),
          "ftp RETR: // names an absolute path", buf);
    check(!lg_ftp_retr_format(buf, sizeof buf, "/") && !lg_ftp_retr_format(buf, sizeof buf, "/d/"),
          "ftp RETR: no file named: 0", NULL);
    check(lg_ftp_retr_format(buf, 10, "/1k") == 9 && !lg_ftp_retr_format(buf, 9, "/1k") &&
              !lg_ftp_retr_format(buf, sizeof buf, "/a\r\nDELE b"),
          "ftp RETR: too long for the buffer, or CR LF in the path: 0", NULL);

    lg_url_t u;
    char err[256];
    int r = lg_url_parse("ftp://127.0.0.1/pub/1k", &u, err, sizeof err);
    check(r == 0 && u.ftp && !u.tls && u.port == 21 && !strcmp(u.path, "/pub/1k"),
          "url: ftp://, default port 21", err);
    lg_url_free(&u);
    r = lg_url_parse("ftp://[::1]:2121/f", &u, err, sizeof err);
    check(r == 0 && u.ftp && u.port == 2121 && u.addr.ss.ss_family == AF_INET6,
          "url: ftp:// with IPv6 and a port", err);
    lg_url_free(&u);
}

/* ---- HTTP/2 session ---- */

/* What the session has to send, copied out. */
static size_t h2_out(lg_h2_t *h, char *buf, size_t cap)
{
    gio_batch_t b;
    gio_batch_init(&b);
    size_t n = 0;
    while (lg_h2_fill(h, &b) > 0) {
        long k = gio_batch_copy(&b, buf + n, cap - n);
        if (k <= 0)
            break;
        gio_batch_consume(&b, (uint64_t)k);
        n += (size_t)k;
    }
    gio_batch_free(&b);
    return n;
}

/* The fields of the first HEADERS frame in p[0..n) (after the preface), as "name value\n". */
static void h2_fields(const char *p, size_t n, char *got, size_t cap)
{
    size_t off = 24, gl = 0;
    got[0] = 0;
    while (off + 9 <= n) {
        const uint8_t *f = (const uint8_t *)p + off;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (f[3] == NGHTTP2_HEADERS) {
            nghttp2_hd_inflater *inf;
            if (nghttp2_hd_inflate_new(&inf) != 0)
                return;
            const uint8_t *in = f + 9;
            size_t left = len;
            for (;;) {
                nghttp2_nv nv;
                int fl = 0;
                ssize_t k = nghttp2_hd_inflate_hd2(inf, &nv, &fl, in, left, 1);
                if (k < 0)
                    break;
                in += k;
                left -= (size_t)k;
                if (fl & NGHTTP2_HD_INFLATE_EMIT)
                    gl += (size_t)snprintf(got + gl, cap - gl, "%.*s %.*s\n", (int)nv.namelen,
                                           nv.name, (int)nv.valuelen, nv.value);
                if ((fl & NGHTTP2_HD_INFLATE_FINAL) || (!left && !(fl & NGHTTP2_HD_INFLATE_EMIT)))
                    break;
            }
            nghttp2_hd_inflate_del(inf);
            return;
        }
        off += 9 + len;
    }
}

#define FR(len, type, flags, sid) "\0\0" len type flags "\0\0\0" sid
static const char srv_settings[] = FR("\0", "\4", "\0", "\0");
static const char resp_200[] = FR("\1", "\1", "\5", "\1") "\x88"; /* :status 200, END_STREAM */
static const char resp_404[] = FR("\1", "\1", "\4", "\3") "\x8d" FR("\5", "\0", "\1", "\3") "hello";
static const char rst_5[] = FR("\4", "\3", "\0", "\5") "\0\0\0\2";
static const char goaway_3[] = FR("\x08", "\7", "\0", "\0") "\0\0\0\3\0\0\0\0";

static void test_h2_request(void)
{
    lg_h2_req_t *q = lg_h2_req_new("GET", 0, "example:80", "/x",
                                   "X-Foo:  bar \r\nConnection: close\r\nHost: other\r\n");
    lg_h2_t *h = lg_h2_new(4);
    static char out[65536], got[1024];
    check(q && h && lg_h2_submit(h, q, 1) == 0, "h2: a request is submitted", NULL);
    size_t n = h2_out(h, out, sizeof out);
    check(n > 24 && !memcmp(out, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24), "h2: the preface first",
          NULL);
    h2_fields(out, n, got, sizeof got);
    check(!strcmp(got, ":method GET\n:scheme http\n:authority other\n:path /x\n"
                       "user-agent gatling-bench\nx-foo bar\n"),
          "h2: fields in lower case, Host as :authority, no Connection", got);
    lg_h2_free(h);
    lg_h2_req_free(q);
}

static void test_h2_streams(void)
{
    lg_h2_req_t *q = lg_h2_req_new("GET", 1, "a", "/", NULL);
    lg_h2_t *h = lg_h2_new(4);
    static char out[65536];
    lg_h2_end_t e;
    for (int64_t t = 1; t <= 4; t++)
        lg_h2_submit(h, q, t); /* streams 1, 3, 5, 7 */
    h2_out(h, out, sizeof out);
    check(lg_h2_inflight(h) == 4 && lg_h2_room(h) == 0, "h2: four streams fill four slots", NULL);
    lg_h2_feed(h, srv_settings, sizeof srv_settings - 1);
    check(lg_h2_feed(h, resp_200, sizeof resp_200 - 1) == 0 && lg_h2_next(h, &e) && e.kind < 0 &&
              e.status == 200 && e.t == 1 && e.body == 0 && !lg_h2_next(h, &e),
          "h2: a response ends its stream", NULL);
    check(lg_h2_feed(h, resp_404, sizeof resp_404 - 1) == 0 && lg_h2_next(h, &e) && e.kind < 0 &&
              e.status == 404 && e.t == 2 && e.body == 5,
          "h2: HEADERS then DATA: status and body bytes", NULL);
    check(lg_h2_feed(h, rst_5, sizeof rst_5 - 1) == 0 && lg_h2_next(h, &e) && e.kind == LG_E_RST &&
              e.t == 3,
          "h2: RST_STREAM loses its stream as rst", NULL);
    uint32_t code = 1;
    check(lg_h2_room(h) == 3 && lg_h2_feed(h, goaway_3, sizeof goaway_3 - 1) == 0 &&
              lg_h2_next(h, &e) && e.kind == LG_E_GOAWAY && e.t == 4 && lg_h2_goaway(h, &code) &&
              code == 0 && lg_h2_room(h) == 0 && lg_h2_inflight(h) == 0,
          "h2: GOAWAY refuses the streams above its last id, and new ones", NULL);
    lg_h2_free(h);
    h = lg_h2_new(1);
    lg_h2_submit(h, q, 1);
    h2_out(h, out, sizeof out);
    check(lg_h2_feed(h, "HTT", 3) == LG_E_NOH2, "h2: an HTTP/1.x answer to the preface is noh2",
          NULL);
    lg_h2_free(h);
    lg_h2_req_free(q);
}

int main(void)
{
    test_parser();
    test_hist();
    test_net();
    test_h2_request();
    test_h2_streams();
    test_ftp_replies();
    test_ftp_ports();
    test_ftp_session();
    printf("1..%d\n", ntests);
    return nfailed ? 1 : 0;
}
