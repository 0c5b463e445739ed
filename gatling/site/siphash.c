/* SipHash-2-4: see siphash.h (the reference's vectors are in t_quic_cid.c). */
#include "siphash.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND \
    do { \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
    } while (0)

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t siphash24(const uint8_t key[16], const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = le64(p + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t j = 0; i + j < n; j++)
        b |= (uint64_t)p[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

void siphash_key(uint8_t key[16])
{
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(key + got, 16 - got, GRND_NONBLOCK);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno != EINTR)
            break;
    }
    if (got == 16)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t a = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)key;
    uint64_t b = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)(uintptr_t)&ts;
    for (int i = 0; i < 8; i++) {
        key[i] ^= (uint8_t)(a >> (8 * i));
        key[8 + i] ^= (uint8_t)(b >> (8 * i));
    }
}
