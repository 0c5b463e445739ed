/* The PROXY protocol header (v1, v2) and -Y's networks: verdicts, bounds, the
   promise that an incomplete header's bytes are all header, and the same
   verdict for every prefix as for the whole. */
#include "fuzz.h"
#include "conn/proxyproto.h"
#include "site/nets.h"

#include <netinet/in.h>

/* A complete header's length never depends on what follows it. */
static void check_complete(const char *buf, size_t size, long n, const proxy_hdr_t *h)
{
    CHECK((size_t)n <= size && n <= PROXY_MAX);
    CHECK(h->version == 1 || h->version == 2);
    if (h->version == 1)
        CHECK(n <= PROXY_V1_MAX);
    if (!h->local) {
        CHECK((h->src.sa.sa_family == AF_INET && h->srclen == sizeof(struct sockaddr_in)) ||
              (h->src.sa.sa_family == AF_INET6 && h->srclen == sizeof(struct sockaddr_in6)));
    }
    proxy_hdr_t h2;
    char *exact = fuzz_copy((const uint8_t *)buf, (size_t)n); /* the header alone, guarded */
    CHECK(proxy_parse(exact, (size_t)n, &h2) == n);
    CHECK(h2.local == h->local && h2.srclen == h->srclen);
    CHECK(!memcmp(&h2.src, &h->src, sizeof h->src));
    free(exact);
}

/* Growing prefixes: incomplete until the whole's verdict, then that verdict. */
static void check_prefixes(const char *buf, size_t size, long n)
{
    proxy_hdr_t h;
    size_t step = size > 64 ? size / 32 : 1;
    for (size_t k = 0; k < size; k += step) {
        char *pre = fuzz_copy((const uint8_t *)buf, k);
        long m = proxy_parse(pre, k, &h);
        free(pre);
        if (n > 0)
            CHECK(k < (size_t)n ? m == PROXY_INCOMPLETE : m == n);
        else if (n == PROXY_INCOMPLETE)
            CHECK(m == PROXY_INCOMPLETE);
        else
            CHECK(m == PROXY_INCOMPLETE || m == PROXY_MALFORMED);
    }
}

/* -Y: an address or network that parses contains its own address. */
static void check_net(const uint8_t *data, size_t size)
{
    char s[64];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    config_net_t net;
    if (net_parse(s, &net) < 0)
        return;
    CHECK(net.bits >= 0 && net.bits <= 128);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    memcpy(&a.sin6_addr, net.addr, 16);
    CHECK(net_contains(&net, 1, (struct sockaddr *)&a));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    proxy_hdr_t h;
    long n = proxy_parse(buf, size, &h);
    CHECK(n == PROXY_INCOMPLETE || n == PROXY_MALFORMED || n > 0);
    if (n == PROXY_INCOMPLETE) /* a reader never needs more than PROXY_MAX bytes */
        CHECK(size < PROXY_MAX);
    if (n > 0)
        check_complete(buf, size, n, &h);
    check_prefixes(buf, size, n);
    check_net(data, size);
    free(buf);
    return 0;
}
