/*
 * The PROXY protocol header parser, fed whole and byte by byte, with the
 * input placed against a guard page so that any read past the end faults;
 * and the trusted networks of -Y.
 */
#include "proxyproto.h"
#include "nets.h"
#include "tap.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

static char *guard_base;
static size_t page;

/* Copy s to the very end of a readable page followed by an unmapped one. */
static const char *guarded(const void *s, size_t n)
{
    char *p = guard_base + page - n;
    memcpy(p, s, n);
    return p;
}

static long parse(const void *s, size_t n, proxy_hdr_t *h)
{
    return proxy_parse(guarded(s, n), n, h);
}

/* Every proper prefix incomplete (or, for a malformed one, incomplete then
   malformed), the whole giving want. */
static void bytewise(const void *s, size_t n, long want, const char *name)
{
    proxy_hdr_t h;
    int bad = 0, malformed = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        long got = parse(s, i, &h);
        malformed |= got == PROXY_MALFORMED;
        if (got != PROXY_INCOMPLETE && !(want == PROXY_MALFORMED && got == PROXY_MALFORMED))
            bad = 1;
        if (malformed && got != PROXY_MALFORMED)
            bad = 1;
    }
    ok(!bad, "%s: every prefix incomplete", name);
    is_int(parse(s, n, &h), want, "%s: whole", name);
}

#define SIG "\r\n\r\n\0\r\nQUIT\n"

static size_t v2(unsigned char *out, int cmd, int fam, const void *addr, size_t alen,
                 const void *tlvs, size_t tlen)
{
    memcpy(out, SIG, 12);
    out[12] = (unsigned char)(0x20 | cmd);
    out[13] = (unsigned char)fam;
    out[14] = (unsigned char)((alen + tlen) >> 8);
    out[15] = (unsigned char)(alen + tlen);
    memcpy(out + 16, addr, alen);
    memcpy(out + 16 + alen, tlvs, tlen);
    return 16 + alen + tlen;
}

static void test_v1(void)
{
    proxy_hdr_t h;
    const char *t4 = "PROXY TCP4 192.0.2.7 192.0.2.1 40000 80\r\nGET / HTTP/1.1\r\n";
    long n = parse(t4, strlen(t4), &h);
    is_int(n, 41, "v1 TCP4: the header's length, not the request's");
    ok(!h.local && h.src.sa.sa_family == AF_INET && h.src.in4.sin_port == htons(40000),
       "v1 TCP4: family and port");
    char a[INET6_ADDRSTRLEN];
    is_str(inet_ntop(AF_INET, &h.src.in4.sin_addr, a, sizeof a), "192.0.2.7", "v1 TCP4: address");
    const char *t6 = "PROXY TCP6 2001:db8::5 ::1 1 65535\r\n";
    is_int(parse(t6, strlen(t6), &h), (long)strlen(t6), "v1 TCP6");
    is_str(inet_ntop(AF_INET6, &h.src.in6.sin6_addr, a, sizeof a), "2001:db8::5", "v1 TCP6: addr");
    is_int(parse("PROXY UNKNOWN\r\n", 15, &h), 15, "v1 UNKNOWN");
    ok(h.local, "v1 UNKNOWN keeps the proxy's address");
    bytewise(t4, 41, 41, "v1 TCP4");
    bytewise(t6, strlen(t6), (long)strlen(t6), "v1 TCP6");
    /* the longest legal line (the spec's worst case): 107 bytes */
    const char *longest = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                          "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    is_int(strlen(longest), PROXY_V1_MAX, "the longest v1 line is PROXY_V1_MAX");
    bytewise(longest, strlen(longest), PROXY_V1_MAX, "v1 longest");
    static const char *const bad[] = {"GET / HTTP/1.1\r\n",
                                      "PROXY TCP4 192.0.2.7 192.0.2.1 1\r\n",
                                      "PROXY TCP4 192.0.2.7 192.0.2.1 1 2 \r\n",
                                      "PROXY TCP4 ::1 ::1 1 2\r\n",
                                      "PROXY TCP6 1.2.3.4 1.2.3.4 1 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 01 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 1 99999\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n",
                                      "PROXY tcp4 1.2.3.4 1.2.3.4 1 2\r\n",
                                      "PROXY \r\n",
                                      "PROXY UNKNOWNX\r\n",
                                      "proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 1 +2\r\n",
                                      /* each field's own fault (issue 55's branches) */
                                      "PROXY TCP6 2001:db8:0:0:0:0:0:0:0:0:0:0:0:0:0:0:5 ::1 1 2\r\n",
                                      "PROXY TCP4  1.2.3.4 1 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.x 1 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 1x 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 123456 2\r\n",
                                      "PROXY TCP4 1.2.3.4 1.2.3.4 1 2 3\r\n",
                                      "PROXY TCP4 1.2.3.4\r\n",
                                      "PROXY TCP4\r\n",
                                      "PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n",
                                      "PROXY \n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad v1 line %zu", i);
        bytewise(bad[i], strlen(bad[i]), PROXY_MALFORMED, name);
    }
    char over[PROXY_V1_MAX + 8] = "PROXY UNKNOWN ";
    memset(over + 14, 'x', sizeof over - 14);
    is_int(parse(over, PROXY_V1_MAX, &h), PROXY_MALFORMED, "v1: no CRLF in 107 bytes");
    is_int(parse(over, PROXY_V1_MAX - 1, &h), PROXY_INCOMPLETE, "v1: 106 bytes may still end");
}

static void test_v2(void)
{
    unsigned char buf[PROXY_MAX + 64], a4[12] = {192, 0, 2, 9, 192, 0, 2, 1, 0x9c, 0x41, 1, 187};
    unsigned char a6[36] = {0x20,     0x01,     0x0d,        0xb8,        [15] = 9, [16] = 0x20,
                            [17] = 1, [31] = 1, [32] = 0x9c, [33] = 0x41, [34] = 1, [35] = 187};
    proxy_hdr_t h;
    size_t n = v2(buf, 1, 0x11, a4, 12, "", 0);
    memcpy(buf + n, "GET / HTTP/1.1\r\n", 16);
    is_int(parse(buf, n + 16, &h), 28, "v2 TCP4: 16 + 12, not the request's bytes");
    ok(h.src.sa.sa_family == AF_INET && h.src.in4.sin_port == htons(40001), "v2 TCP4: port");
    bytewise(buf, n, (long)n, "v2 TCP4");
    n = v2(buf, 1, 0x21, a6, 36, "", 0);
    is_int(parse(buf, n, &h), 52, "v2 TCP6");
    char a[INET6_ADDRSTRLEN];
    is_str(inet_ntop(AF_INET6, &h.src.in6.sin6_addr, a, sizeof a), "2001:db8::9", "v2 TCP6: addr");
    n = v2(buf, 0, 0x00, "", 0, "", 0);
    is_int(parse(buf, n, &h), 16, "v2 LOCAL");
    ok(h.local, "v2 LOCAL keeps the proxy's address");
    n = v2(buf, 1, 0x00, "", 0, "", 0);
    ok(parse(buf, n, &h) == 16 && h.local, "v2 UNSPEC keeps the proxy's address");
    static const unsigned char tlvs[] = {1, 0, 2, 'h', '2', 4, 0, 0, 0x20, 0, 5, 1, 0, 0, 0, 0};
    n = v2(buf, 1, 0x11, a4, 12, tlvs, sizeof tlvs);
    is_int(parse(buf, n, &h), (long)n, "v2 with TLVs (an empty one among them)");
    bytewise(buf, n, (long)n, "v2 TLVs");
    n = v2(buf, 1, 0x11, a4, 12, tlvs, sizeof tlvs - 1);
    bytewise(buf, n, PROXY_MALFORMED, "v2: the last TLV past the length");
    n = v2(buf, 1, 0x11, a4, 12, "\x04\x00", 2);
    bytewise(buf, n, PROXY_MALFORMED, "v2: half a TLV header");
    n = v2(buf, 1, 0x21, a6, 20, "", 0);
    bytewise(buf, n, PROXY_MALFORMED, "v2: IPv6 addresses cut short");
    n = v2(buf, 1, 0x12, a4, 12, "", 0);
    bytewise(buf, n, PROXY_MALFORMED, "v2: UDP");
    n = v2(buf, 2, 0x11, a4, 12, "", 0);
    bytewise(buf, n, PROXY_MALFORMED, "v2: command 2");
    n = v2(buf, 1, 0x11, a4, 12, "", 0);
    buf[12] = 0x11;
    bytewise(buf, n, PROXY_MALFORMED, "v2: version 1");
    /* a UNIX stream socket: 216 bytes of paths, no address of ours to use */
    static unsigned char unix_paths[216];
    n = v2(buf, 1, 0x31, unix_paths, sizeof unix_paths, "", 0);
    ok(parse(buf, n, &h) == (long)n && h.local, "v2 UNIX: the proxy's address kept");
    n = v2(buf, 1, 0x31, unix_paths, 200, "", 0);
    bytewise(buf, n, PROXY_MALFORMED, "v2: UNIX paths cut short");
    is_int(parse("\r\n\r\nX", 5, &h), PROXY_MALFORMED, "v2: a wrong signature at its fifth byte");
    /* the largest: 520 bytes after the fixed part; one more is malformed */
    static unsigned char pad[PROXY_MAX];
    pad[0] = 4, pad[1] = (PROXY_MAX - 16 - 12 - 3) >> 8, pad[2] = (PROXY_MAX - 16 - 12 - 3) & 0xff;
    n = v2(buf, 1, 0x11, a4, 12, pad, PROXY_MAX - 16 - 12);
    is_int(n, PROXY_MAX, "the largest v2 header is PROXY_MAX");
    is_int(parse(buf, n, &h), PROXY_MAX, "v2 of PROXY_MAX bytes");
    pad[2]++;
    n = v2(buf, 1, 0x11, a4, 12, pad, PROXY_MAX - 16 - 12 + 1);
    is_int(parse(buf, 16, &h), PROXY_MALFORMED, "v2 past PROXY_MAX: malformed from its length");
}

static void test_nets(void)
{
    config_net_t n[3];
    ok(net_parse("10.0.0.0/8", &n[0]) == 0 && n[0].bits == 104, "10.0.0.0/8");
    ok(net_parse("2001:db8::/32", &n[1]) == 0 && n[1].bits == 32, "2001:db8::/32");
    ok(net_parse("127.0.0.2", &n[2]) == 0 && n[2].bits == 128, "127.0.0.2");
    static const char *const bad[] = {"",          "/8",          "10.0.0.0/",   "10.0.0.0/33",
                                      "::/129",    "10.0.0.0/08", "10.0.0.0/8x", "host",
                                      "1.2.3.4/-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(net_parse(bad[i], &n[0]) < 0, "bad network \"%s\"", bad[i]);
    net_parse("10.0.0.0/8", &n[0]);
    struct sockaddr_in in4 = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET, "10.200.3.4", &in4.sin_addr);
    ok(net_contains(n, 3, (struct sockaddr *)&in4), "10.200.3.4 in 10/8");
    inet_pton(AF_INET, "11.0.0.1", &in4.sin_addr);
    ok(!net_contains(n, 3, (struct sockaddr *)&in4), "11.0.0.1 in none");
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr);
    ok(net_contains(n, 3, (struct sockaddr *)&in6), "::ffff:10.1.2.3 (dual-stack) in 10/8");
    inet_pton(AF_INET6, "2001:db8:ffff::1", &in6.sin6_addr);
    ok(net_contains(n, 3, (struct sockaddr *)&in6), "2001:db8:ffff::1 in 2001:db8::/32");
    inet_pton(AF_INET6, "2001:db9::1", &in6.sin6_addr);
    ok(!net_contains(n, 3, (struct sockaddr *)&in6), "2001:db9::1 in none");
    inet_pton(AF_INET, "127.0.0.3", &in4.sin_addr);
    ok(!net_contains(n, 3, (struct sockaddr *)&in4), "127.0.0.3 is not 127.0.0.2");
    ok(net_parse("1.2.3.4/31", &n[0]) == 0, "1.2.3.4/31");
    inet_pton(AF_INET, "1.2.3.5", &in4.sin_addr);
    ok(net_contains(n, 1, (struct sockaddr *)&in4), "1.2.3.5 in 1.2.3.4/31");
    inet_pton(AF_INET, "1.2.3.6", &in4.sin_addr);
    ok(!net_contains(n, 1, (struct sockaddr *)&in4), "1.2.3.6 not in 1.2.3.4/31");
    ok(net_parse("0.0.0.0/0", &n[0]) == 0 && net_contains(n, 1, (struct sockaddr *)&in4),
       "0.0.0.0/0 takes every IPv4 client");
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    guard_base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(guard_base + page, page, PROT_NONE);
    test_v1();
    test_v2();
    test_nets();
    return tap_done();
}
