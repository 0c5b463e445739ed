/*
 * quic_cid.c — the connection ID table (see quic_cid.h).
 */
#include "quic_cid.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MIN_CAP 64 /* slots; a power of two */

typedef struct {
    void *owner; /* NULL: the slot is free */
    uint32_t hash;
    uint8_t len;
    uint8_t cid[QUIC_CID_MAX];
} slot_t;

struct quic_cid_table {
    uint8_t key[16];
    size_t cap, count; /* cap: a power of two; count <= cap / 2 */
    slot_t *slot;
};

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

uint64_t quic_siphash(const uint8_t key[16], const uint8_t *p, size_t n)
{
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

quic_cid_table_t *quic_cid_table_new_keyed(const uint8_t key[16])
{
    quic_cid_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    memcpy(t->key, key, sizeof t->key);
    t->cap = MIN_CAP;
    if (!(t->slot = calloc(t->cap, sizeof *t->slot))) {
        free(t);
        return NULL;
    }
    return t;
}

quic_cid_table_t *quic_cid_table_new(void)
{
    uint8_t key[16];
    size_t got = 0;
    while (got < sizeof key) {
        ssize_t r = getrandom(key + got, sizeof key - got, 0);
        if (r < 0 && errno != EINTR)
            return NULL;
        if (r > 0)
            got += (size_t)r;
    }
    return quic_cid_table_new_keyed(key);
}

void quic_cid_table_free(quic_cid_table_t *t)
{
    if (t) {
        free(t->slot);
        free(t);
    }
}

size_t quic_cid_count(const quic_cid_table_t *t)
{
    return t->count;
}

static uint32_t hash_of(const quic_cid_table_t *t, const uint8_t *cid, size_t len)
{
    return (uint32_t)quic_siphash(t->key, cid, len);
}

/* The slot holding cid, or the free slot where it would go. */
static size_t find(const quic_cid_table_t *t, uint32_t h, const uint8_t *cid, size_t len)
{
    size_t mask = t->cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        const slot_t *s = &t->slot[i];
        if (!s->owner || (s->hash == h && s->len == len && memcmp(s->cid, cid, len) == 0))
            return i;
    }
}

static int grow(quic_cid_table_t *t)
{
    size_t ncap = t->cap * 2;
    slot_t *old = t->slot, *ns = calloc(ncap, sizeof *ns);
    if (!ns || ncap < t->cap) {
        free(ns);
        errno = ENOMEM;
        return -1;
    }
    size_t ocap = t->cap;
    t->slot = ns;
    t->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].owner)
            t->slot[find(t, old[i].hash, old[i].cid, old[i].len)] = old[i];
    free(old);
    return 0;
}

int quic_cid_put(quic_cid_table_t *t, const uint8_t *cid, size_t len, void *owner)
{
    if (len > QUIC_CID_MAX || !owner) {
        errno = EINVAL;
        return -1;
    }
    uint32_t h = hash_of(t, cid, len);
    size_t i = find(t, h, cid, len);
    if (t->slot[i].owner) {
        errno = EEXIST;
        return -1;
    }
    if ((t->count + 1) * 2 > t->cap) {
        if (grow(t) < 0)
            return -1;
        i = find(t, h, cid, len);
    }
    slot_t *s = &t->slot[i];
    s->owner = owner;
    s->hash = h;
    s->len = (uint8_t)len;
    memcpy(s->cid, cid, len);
    t->count++;
    return 0;
}

void *quic_cid_get(const quic_cid_table_t *t, const uint8_t *cid, size_t len)
{
    if (len > QUIC_CID_MAX)
        return NULL;
    return t->slot[find(t, hash_of(t, cid, len), cid, len)].owner;
}

/*
 * Backward-shift deletion (Knuth 6.4, algorithm R): later members of the
 * probe run move into the hole when their home slot does not lie between
 * the hole and where they sit, so every run stays unbroken without
 * tombstones.
 */
int quic_cid_del(quic_cid_table_t *t, const uint8_t *cid, size_t len)
{
    if (len > QUIC_CID_MAX)
        return 0;
    size_t mask = t->cap - 1, hole = find(t, hash_of(t, cid, len), cid, len);
    if (!t->slot[hole].owner)
        return 0;
    for (size_t j = (hole + 1) & mask; t->slot[j].owner; j = (j + 1) & mask) {
        size_t home = t->slot[j].hash & mask;
        /* does home lie cyclically in (hole, j]?  then j stays */
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            t->slot[hole] = t->slot[j];
            hole = j;
        }
    }
    memset(&t->slot[hole], 0, sizeof t->slot[hole]);
    t->count--;
    return 1;
}
