/*
 * What handlers/proxy.c parses from a backend: an HTTP/1.1 response head
 * (http_parse_response), a chunked body decoded in place
 * (http_chunked_decode) and FastCGI records (fcgi_next), fed whole and
 * byte by byte, the input placed against a guard page so that any read past
 * its end faults; and the FastCGI records written (fcgi_begin, fcgi_pair).
 */
#include "fcgi.h"
#include "http_parse.h"
#include "tap.h"

#include <sys/mman.h>
#include <unistd.h>

static char *guard_base;
static size_t page;

/* Copy s to the very end of a readable page followed by an unmapped one. */
static char *guarded(const void *s, size_t n)
{
    char *p = guard_base + page - n;
    memcpy(p, s, n);
    return p;
}

static long resp(const char *s, http_response_t *r)
{
    size_t n = strlen(s);
    return http_parse_response(guarded(s, n), n, r);
}

static void test_response(void)
{
    http_response_t r;
    const char *h = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A:  b \r\n\r\nbody";
    is_int(resp(h, &r), (long)strlen(h) - 4, "a head: its length, not the body");
    is_int(r.status, 200, "status");
    is_int(r.version, 11, "version");
    is_int((long)r.nheaders, 2, "two fields");
    ok(r.headers[1].value.n == 1 && r.headers[1].value.p[0] == 'b', "value trimmed");
    int bad = 0;
    for (size_t i = 0; i < strlen(h) - 4; i++)
        bad |= resp("", &r) != HTTP_INCOMPLETE ||
               http_parse_response(guarded(h, i), i, &r) != HTTP_INCOMPLETE;
    ok(!bad, "every prefix incomplete");
    is_int(resp("HTTP/1.0 404\n\n", &r), 14, "bare LF, no reason");
    is_int(r.status, 404, "404");
    is_int(r.version, 10, "HTTP/1.0");
    is_int(resp("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", &r), 56, "101");
    is_int(resp("HTTP/2 200 OK\r\n\r\n", &r), HTTP_MALFORMED, "not HTTP/1.x");
    is_int(resp("HTTP/1.1 20 OK\r\n\r\n", &r), HTTP_MALFORMED, "two digits");
    is_int(resp("HTTP/1.1 099 OK\r\n\r\n", &r), HTTP_MALFORMED, "below 100");
    is_int(resp("HTTP/1.1 200OK\r\n\r\n", &r), HTTP_MALFORMED, "no space before the reason");
    is_int(resp("HTTP/1.1 200 OK\r\nA b: c\r\n\r\n", &r), HTTP_MALFORMED, "space in a name");
    is_int(resp("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", &r), HTTP_MALFORMED, "obs-fold");
    is_int(resp("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", &r), HTTP_MALFORMED, "bare CR");
    is_int(resp("HTTP/1.1 200 OK\r\nA: \001\r\n\r\n", &r), HTTP_MALFORMED, "a control");
    is_int(resp("<html>", &r), HTTP_MALFORMED, "HTTP/0.9 garbage at once");
    is_int(resp("HTT", &r), HTTP_INCOMPLETE, "a prefix of HTTP/1.");
    char many[8192], *p = many;
    p += sprintf(p, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
        p += sprintf(p, "X-%d: v\r\n", i);
    sprintf(p, "\r\n");
    is_int(resp(many, &r), HTTP_MALFORMED, "more than HTTP_MAX_HEADERS fields");
}

/* Decode s whole, then in pieces of step bytes; the data must be want. */
static void dechunk(const char *s, const char *want, int want_r, const char *name)
{
    for (size_t step = 1; step <= strlen(s); step = step < 4 ? step + 1 : strlen(s)) {
        http_chunked_t st = {0};
        char data[4096];
        size_t dn = 0, off = 0, n = strlen(s);
        int r = HTTP_CHUNKED_MORE;
        while (off < n && r == HTTP_CHUNKED_MORE) {
            size_t k = n - off < step ? n - off : step, used, out;
            char *b = guarded(s + off, k);
            r = http_chunked_decode(&st, b, k, &used, &out);
            ok(out <= used && used <= k, "%s: out <= used <= len", name);
            memcpy(data + dn, b, out);
            dn += out, off += used;
        }
        data[dn] = 0;
        is_int(r, want_r, "%s (step %zu): result", name, step);
        if (want_r != HTTP_MALFORMED)
            is_str(data, want, "%s (step %zu): data", name, step);
        if (step == strlen(s))
            break;
    }
}

static void test_chunked(void)
{
    dechunk("5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n", "hello 0123456789",
            HTTP_CHUNKED_DONE, "chunks, an extension, hex size");
    dechunk("3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", "abc", HTTP_CHUNKED_DONE, "a trailer");
    dechunk("3\r\nabc\r\n", "abc", HTTP_CHUNKED_MORE, "not ended");
    dechunk("3\r\nabcd\r\n0\r\n\r\n", "", HTTP_MALFORMED, "longer than its size");
    dechunk("g\r\n", "", HTTP_MALFORMED, "not hex");
    /* *used on a malformed body too (it was left as it was: the decoder then added an
       indeterminate count, which only the ThreadSanitizer build's stack showed) */
    const char *bad[] = {"g\r\n", "3\r\nabcd", "3\r\nabc\rx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_chunked_t st = {0};
        size_t len = strlen(bad[i]), used = (size_t)-1, at, n;
        int r = HTTP_CHUNKED_MORE;
        for (size_t off = 0; off < len && r == HTTP_CHUNKED_MORE; off += used) {
            used = (size_t)-1;
            r = http_chunked_data(&st, bad[i] + off, len - off, &used, &at, &n);
        }
        ok(r == HTTP_MALFORMED && used <= len, "malformed %zu: *used set (%zu)", i, used);
    }
}

/* Parse recs[0..n) in pieces of step: STDOUT joined, STDERR joined, END seen. */
static int records(const char *recs, size_t n, size_t step, char *out, char *err, int *end)
{
    fcgi_parser_t st = {0};
    size_t on = 0, en = 0, off = 0;
    *end = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step;
        const char *b = guarded(recs + off, k);
        size_t used = 0;
        while (used < k) {
            fcgi_piece_t pc;
            long r = fcgi_next(&st, b + used, k - used, &pc);
            if (r <= 0)
                return -1;
            used += (size_t)r;
            if (pc.type == FCGI_STDOUT)
                memcpy(out + on, pc.p, pc.n), on += pc.n;
            if (pc.type == FCGI_STDERR)
                memcpy(err + en, pc.p, pc.n), en += pc.n;
            if (pc.type == FCGI_END_REQUEST)
                *end = 1 + (int)pc.app_status;
        }
        off += k;
    }
    out[on] = err[en] = 0;
    return 0;
}

static size_t rec(char *p, int type, const char *content, size_t n, unsigned pad)
{
    fcgi_header((unsigned char *)p, type, 1, (unsigned)n, pad);
    memcpy(p + 8, content, n);
    memset(p + 8 + n, 'P', pad);
    return 8 + n + pad;
}

static void test_fcgi(void)
{
    char buf[512], out[512], err[512];
    size_t n = 0;
    n += rec(buf + n, FCGI_STDOUT, "Status: 200\r\n\r\nhel", 18, 5);
    n += rec(buf + n, FCGI_STDERR, "oops", 4, 0);
    n += rec(buf + n, 10, "xyz", 3, 1); /* a type we do not know: skipped */
    n += rec(buf + n, FCGI_STDOUT, "lo", 2, 0);
    n += rec(buf + n, FCGI_STDOUT, "", 0, 0);
    n += rec(buf + n, FCGI_END_REQUEST, "\0\0\0\7\0\0\0\0", 8, 0);
    for (size_t step = 1; step <= n; step++) {
        int end;
        int r = records(buf, n, step, out, err, &end);
        if (r || strcmp(out, "Status: 200\r\n\r\nhello") || strcmp(err, "oops") || end != 8) {
            ok(0, "records in pieces of %zu", step);
            return;
        }
    }
    ok(1, "records whole and in every piece size: STDOUT, STDERR, padding, END_REQUEST 7");
    int end;
    buf[0] = 2;
    is_int(records(buf, n, n, out, err, &end), -1, "version 2 is malformed");
    n = rec(buf, FCGI_END_REQUEST, "\0\0\0\0", 4, 0);
    is_int(records(buf, n, n, out, err, &end), -1, "END_REQUEST of 4 bytes is malformed");
    unsigned char b[16];
    fcgi_begin(b, 1, 1);
    ok(!memcmp(b, "\1\1\0\1\0\10\0\0\0\1\1\0\0\0\0\0", 16), "BEGIN_REQUEST responder, keep-conn");
    unsigned char pair[300];
    char v[200];
    memset(v, 'v', sizeof v);
    size_t k = fcgi_pair(pair, "AB", 2, v, sizeof v);
    is_int((long)k, (long)fcgi_pair_size(2, 200), "pair size");
    ok(pair[0] == 2 && pair[1] == 0x80 && pair[2] == 0 && pair[3] == 0 && pair[4] == 200 &&
           !memcmp(pair + 5, "AB", 2),
       "a short name, a long value (four bytes, top bit)");
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    guard_base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(guard_base + page, page, PROT_NONE);
    test_response();
    test_chunked();
    test_fcgi();
    return tap_done();
}
