/*
 * quic_cid.c — the connection ID table (see quic_cid.h).
 */
#include "quic_cid.h"
#include "site/siphash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    siphash_key(key);
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
    return (uint32_t)siphash24(t->key, cid, len);
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
