/* Addresses and networks: see nets.h. */
#include "nets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* sa as 16 bytes, IPv4 as ::ffff:a.b.c.d.  0, or -1 for another family. */
static const unsigned char as_v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int as_v6(const struct sockaddr *sa, unsigned char out[16])
{
    if (sa->sa_family == AF_INET) {
        memcpy(out, as_v4_prefix, 12);
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

int net_parse(const char *s, config_net_t *net)
{
    char tmp[INET6_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    struct sockaddr_in in4 = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    int v4 = inet_pton(AF_INET, tmp, &in4.sin_addr) == 1;
    if (!v4 && inet_pton(AF_INET6, tmp, &in6.sin6_addr) != 1)
        return -1;
    long bits = v4 ? 32 : 128, max = bits;
    if (slash) {
        const char *b = slash + 1;
        size_t k = strlen(b);
        if (k < 1 || k > 3 || (k > 1 && b[0] == '0'))
            return -1;
        bits = 0;
        for (size_t i = 0; i < k; i++) {
            if (b[i] < '0' || b[i] > '9')
                return -1;
            bits = bits * 10 + (b[i] - '0');
        }
        if (bits > max)
            return -1;
    }
    as_v6(v4 ? (const struct sockaddr *)&in4 : (const struct sockaddr *)&in6, net->addr);
    net->bits = (int)(v4 ? bits + 96 : bits);
    return 0;
}

int net_contains(const config_net_t *nets, int n, const struct sockaddr *sa)
{
    unsigned char a[16];
    if (as_v6(sa, a) < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        int full = nets[i].bits / 8, rest = nets[i].bits % 8;
        if (memcmp(a, nets[i].addr, (size_t)full))
            continue;
        unsigned char mask = (unsigned char)(0xff << (8 - rest));
        if (rest && (a[full] & mask) != (nets[i].addr[full] & mask))
            continue;
        return 1;
    }
    return 0;
}

int net_is_loopback(const struct sockaddr *sa)
{
    unsigned char a[16];
    static const unsigned char one[16] = {[15] = 1};
    if (as_v6(sa, a) < 0)
        return 0;
    return !memcmp(a, one, 16) || (!memcmp(a, as_v4_prefix, 12) && a[12] == 127);
}
