/*
 * A deterministic mutation fuzzer over the pure parsers: request heads,
 * targets, chunked bodies, Range, Accept-Encoding, Host.  Inputs sit against
 * a guard page, so a read past the end faults; under `make SAN=1` ASan and
 * UBSan watch the rest.  It checks the invariants each parser promises.
 */
#include "byterange.h"
#include "encoding.h"
#include "http_parse.h"
#include "path.h"
#include "tap.h"
#include "vhost.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define ROUNDS 400000
#define MAXLEN 2048

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
    return (uint32_t)(rng >> 11);
}

static const char *const seeds[] = {
    "GET /index.html?x=1 HTTP/1.1\r\nHost: example.org:8000\r\nRange: bytes=0-9,20-\r\n"
    "Accept-Encoding: gzip;q=0.5, br\r\nIf-None-Match: W/\"a\", \"b\"\r\n\r\n",
    "HEAD /%2e%2e/a%20b/../c HTTP/1.0\n\n",
    "POST /x HTTP/1.1\r\nHost: [::1]:80\r\nTransfer-Encoding: "
    "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "GET http://h/p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "bytes=0-99, 200-299,-50, 900-",
    "Example.ORG:8080",
};
static const char alphabet[] = "\r\n :;,=-/%.?#\"*0123456789abcdefxyzGETHP\t\x7f\x80\xff";

/* Mutate seed into buf: flips, insertions from a small alphabet, cuts. */
static size_t mutate(char *buf, const char *seed)
{
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    for (int k = rnd() % 8; k >= 0; k--) {
        size_t at = n ? rnd() % n : 0;
        switch (rnd() % 4) {
        case 0: buf[at] ^= (char)(1 << (rnd() % 8)); break;
        case 1:
            if (n < MAXLEN - 1) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = alphabet[rnd() % (sizeof alphabet - 1)];
                n++;
            }
            break;
        case 2: n = at; break;
        default: buf[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
        }
    }
    return n;
}

/* Does normalised path p still contain an empty, "." or ".." segment? */
static int dot_segment(const char *p)
{
    for (const char *s = p + 1;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if ((n == 0 && e) || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 1;
        if (!e)
            return 0;
        s = e + 1;
    }
}

static int inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && p + n <= buf + len;
}

int main(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), area = 2 * page;
    char *base =
        mmap(NULL, area + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(base + area, page, PROT_NONE);
    char tmp[MAXLEN], out[MAXLEN + 2], vh[VHOST_NAME_MAX];
    int bad_req = 0, bad_path = 0, bad_range = 0, bad_chunk = 0, bad_enc = 0, bad_host = 0;
    static http_request_t req;
    int complete = 0, ranges = 0, hosts = 0;
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = mutate(tmp, seeds[rnd() % (sizeof seeds / sizeof seeds[0])]);
        char *buf = base + area - n; /* the input ends at the guard page */
        memcpy(buf, tmp, n);
        int st = 0;
        long r = http_parse_request(buf, n, &req, &st);
        if (r > (long)n || r == 0 || r < -2 || (r == HTTP_MALFORMED && !st))
            bad_req++;
        if (r > 0) {
            complete++;
            if (!inside(req.method.p, req.method.n, buf, n) ||
                !inside(req.target.p, req.target.n, buf, n) || req.nheaders > HTTP_MAX_HEADERS)
                bad_req++;
            for (size_t h = 0; h < req.nheaders; h++)
                if (!inside(req.headers[h].value.p, req.headers[h].value.n, buf, n))
                    bad_req++;
            path_t p;
            if (path_from_target(req.target.p, req.target.n, out, sizeof out, &p) == 0 &&
                (p.path[0] != '/' || dot_segment(p.path) || strlen(p.path) != p.len))
                bad_path++;
        }
        /* the same bytes as header values of every other parser */
        byterange_t br[BYTERANGE_MAX];
        int k = byterange_parse(buf, n, 1000, br, BYTERANGE_MAX);
        ranges += k > 0;
        for (int j = 0; j < k; j++)
            if (br[j].first > br[j].last || br[j].last >= 1000)
                bad_range++;
        if (k > BYTERANGE_MAX || k < -1)
            bad_range++;
        http_chunked_t ch = {0};
        size_t used = 0;
        int c = http_chunked_skip(&ch, buf, n, &used);
        if (c != HTTP_MALFORMED && used > n)
            bad_chunk++;
        if (enc_accepted(buf, n, NULL, NULL) & ~(unsigned)(ENC_ALL | ENC_NO_IDENTITY))
            bad_enc++;
        http_str_t host = {buf, n > 255 ? 255 : n};
        int v = vhost_name(&host, 8000, rnd() & 1, vh);
        hosts += v > 0;
        if (v > 0 && (strchr(vh, '/') || strstr(vh, "..") || (size_t)v != strlen(vh)))
            bad_host++;
    }
    printf("# %d complete heads, %d satisfiable Range values, %d usable Hosts\n", complete, ranges,
           hosts);
    ok(complete > ROUNDS / 20, "the mutations still reach the parsers' deep paths");
    is_int(bad_req, 0, "request parser: results and pointers stay in the input (%d rounds)",
           ROUNDS);
    is_int(bad_path, 0, "path_from_target: always absolute, no empty, . or .. segment left");
    is_int(bad_range, 0, "byterange_parse: ranges ordered and inside the file");
    is_int(bad_chunk, 0, "http_chunked_skip: never consumes more than given");
    is_int(bad_enc, 0, "enc_accepted: only known bits");
    is_int(bad_host, 0, "vhost_name: never a path, never '..'");
    return tap_done();
}
