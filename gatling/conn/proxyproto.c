/* The PROXY protocol header: see proxyproto.h. */
#include "proxyproto.h"

#include <arpa/inet.h>
#include <string.h>

static const unsigned char v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                         0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

#define V2_FIXED 16 /* signature, version and command, family, length */

/* A v1 field: the bytes up to the next space or the end, at most max. */
static size_t field(const char *s, const char *end, size_t max)
{
    size_t n = 0;
    while (s + n < end && s[n] != ' ' && n <= max)
        n++;
    return n;
}

/* A v1 port: 1 to 5 digits, no leading zero, at most 65535.  -1 if not. */
static long v1_port(const char *s, size_t n)
{
    long v = 0;
    if (n < 1 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= 65535 ? v : -1;
}

/* A v1 address of family af from s[0..n) into out (4 or 16 bytes).  0 or -1. */
static int v1_addr(int af, const char *s, size_t n, void *out)
{
    char tmp[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    return inet_pton(af, tmp, out) == 1 ? 0 : -1;
}

/* "TCP4 src dst sport dport" or the TCP6 one, from s to end (the CR). */
static int v1_tcp(const char *s, const char *end, proxy_hdr_t *h)
{
    int af = s[3] == '4' ? AF_INET : AF_INET6;
    unsigned char src[16], dst[16];
    const char *f[4];
    size_t n[4];
    s += 5;
    for (int i = 0; i < 4; i++) { /* single spaces between, none after */
        f[i] = s;
        n[i] = field(s, end, INET6_ADDRSTRLEN);
        s += n[i];
        if (i < 3 && (s >= end || *s++ != ' '))
            return -1;
    }
    long sport = v1_port(f[2], n[2]);
    if (s != end || v1_addr(af, f[0], n[0], src) < 0 || v1_addr(af, f[1], n[1], dst) < 0 ||
        sport < 0 || v1_port(f[3], n[3]) < 0)
        return -1;
    memset(&h->src, 0, sizeof h->src);
    if (af == AF_INET) {
        h->src.in4.sin_family = AF_INET;
        memcpy(&h->src.in4.sin_addr, src, 4);
        h->src.in4.sin_port = htons((uint16_t)sport);
        h->srclen = sizeof h->src.in4;
    } else {
        h->src.in6.sin6_family = AF_INET6;
        memcpy(&h->src.in6.sin6_addr, src, 16);
        h->src.in6.sin6_port = htons((uint16_t)sport);
        h->srclen = sizeof h->src.in6;
    }
    return 0;
}

/* "PROXY TCP4|TCP6|UNKNOWN ...\r\n", its first 6 bytes checked already. */
static long parse_v1(const char *p, size_t len, proxy_hdr_t *h)
{
    const char *nl = memchr(p, '\n', len < PROXY_V1_MAX ? len : PROXY_V1_MAX);
    if (!nl)
        return len >= PROXY_V1_MAX ? PROXY_MALFORMED : PROXY_INCOMPLETE;
    size_t n = (size_t)(nl - p); /* the LF's index; the CR before it ends the line */
    if (n < 7 || p[n - 1] != '\r')
        return PROXY_MALFORMED;
    const char *s = p + 6, *end = p + n - 1;
    size_t rest = (size_t)(end - s);
    h->version = 1;
    if (rest >= 7 && !memcmp(s, "UNKNOWN", 7) && (rest == 7 || s[7] == ' ')) {
        h->local = 1; /* whatever follows is to be ignored (the spec's words) */
        return (long)n + 1;
    }
    if (rest < 5 || (memcmp(s, "TCP4 ", 5) && memcmp(s, "TCP6 ", 5)) || v1_tcp(s, end, h) < 0)
        return PROXY_MALFORMED;
    return (long)n + 1;
}

/* The TLVs of a v2 header, t[0..n): each type, 2-byte length, value inside n. */
static int v2_tlvs(const unsigned char *t, size_t n)
{
    while (n > 0) {
        if (n < 3)
            return -1;
        size_t vlen = (size_t)t[1] << 8 | t[2];
        if (vlen > n - 3)
            return -1;
        t += 3 + vlen;
        n -= 3 + vlen;
    }
    return 0;
}

/* The address block of a PROXY (not LOCAL) command: a[0..n), family fam. */
static int v2_addresses(unsigned fam, const unsigned char *a, size_t n, proxy_hdr_t *h)
{
    size_t used;
    memset(&h->src, 0, sizeof h->src);
    switch (fam) {
    case 0x11: /* TCP over IPv4: src, dst, sport, dport */
        if ((used = 12) > n)
            return -1;
        h->src.in4.sin_family = AF_INET;
        memcpy(&h->src.in4.sin_addr, a, 4);
        memcpy(&h->src.in4.sin_port, a + 8, 2);
        h->srclen = sizeof h->src.in4;
        break;
    case 0x21: /* TCP over IPv6 */
        if ((used = 36) > n)
            return -1;
        h->src.in6.sin6_family = AF_INET6;
        memcpy(&h->src.in6.sin6_addr, a, 16);
        memcpy(&h->src.in6.sin6_port, a + 32, 2);
        h->srclen = sizeof h->src.in6;
        break;
    case 0x00: /* UNSPEC: the proxy does not know; the connection's own peer stays */
        used = 0, h->local = 1;
        break;
    case 0x31: /* a UNIX stream socket: no address of ours to use */
        if ((used = 216) > n)
            return -1;
        h->local = 1;
        break;
    default: return -1; /* datagrams, unknown families: not a TCP client */
    }
    return v2_tlvs(a + used, n - used);
}

static long parse_v2(const unsigned char *p, size_t len, proxy_hdr_t *h)
{
    if (len < V2_FIXED)
        return PROXY_INCOMPLETE;
    unsigned cmd = p[12] & 0x0f;
    size_t n = (size_t)p[14] << 8 | p[15];
    if (p[12] >> 4 != 2 || cmd > 1 || n > PROXY_MAX - V2_FIXED)
        return PROXY_MALFORMED;
    if (len < V2_FIXED + n)
        return PROXY_INCOMPLETE;
    h->version = 2;
    if (cmd == 0) { /* LOCAL: the proxy's own connection (a health check) */
        h->local = 1;
        return (long)(V2_FIXED + n);
    }
    if (v2_addresses(p[13], p + V2_FIXED, n, h) < 0)
        return PROXY_MALFORMED;
    return (long)(V2_FIXED + n);
}

long proxy_parse(const void *buf, size_t len, proxy_hdr_t *h)
{
    const unsigned char *p = buf;
    memset(h, 0, sizeof *h);
    if (len == 0)
        return PROXY_INCOMPLETE;
    /* the start decides the version, and a wrong start is wrong at once */
    if (p[0] == v2_sig[0]) {
        if (memcmp(p, v2_sig, len < sizeof v2_sig ? len : sizeof v2_sig))
            return PROXY_MALFORMED;
        return parse_v2(p, len, h);
    }
    if (memcmp(p, "PROXY ", len < 6 ? len : 6))
        return PROXY_MALFORMED;
    return len < 6 ? PROXY_INCOMPLETE : parse_v1(buf, len, h);
}
