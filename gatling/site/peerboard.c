/* The workers' shared offence board: see peerboard.h. */
#include "peerboard.h"
#include "siphash.h"

#include <sys/mman.h>

#define WAYS 4   /* addresses per bucket */
#define SPINS 64 /* tries for a bucket's lock before giving up */

typedef struct post {
    uint64_t tag; /* 0: empty */
    int64_t at;   /* ms (CLOCK_MONOTONIC: the same clock in every process) */
    uint32_t level;
} post_t;

typedef struct bucket {
    uint32_t lock;
    post_t p[WAYS];
} bucket_t;

struct peer_board {
    uint8_t key[16]; /* SipHash key, made before the fork: the same in every worker */
    bucket_t b[PEER_BOARD_BUCKETS];
};

peer_board_t *peer_board_new(void)
{
    peer_board_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return NULL;
    siphash_key(b->key);
    return b;
}

void peer_board_free(peer_board_t *b)
{
    if (b)
        munmap(b, sizeof *b);
}

static uint64_t tag_of(const peer_board_t *b, const uint8_t key[16])
{
    uint64_t t = siphash24(b->key, key, 16);
    return t ? t : 1; /* 0 marks an empty post */
}

static bucket_t *lock_bucket(peer_board_t *b, uint64_t tag)
{
    bucket_t *k = &b->b[(tag >> 32) % PEER_BOARD_BUCKETS];
    for (int i = 0; i < SPINS; i++)
        if (!__atomic_exchange_n(&k->lock, 1, __ATOMIC_ACQUIRE))
            return k;
    return NULL; /* another worker holds it (or died holding it): do without */
}

static void unlock_bucket(bucket_t *k)
{
    __atomic_store_n(&k->lock, 0, __ATOMIC_RELEASE);
}

int peer_board_get(peer_board_t *b, const uint8_t key[16], unsigned *level, int64_t *at_ms)
{
    uint64_t tag = tag_of(b, key);
    bucket_t *k = lock_bucket(b, tag);
    if (!k)
        return -1;
    int found = -1;
    for (int i = 0; i < WAYS; i++)
        if (k->p[i].tag == tag) {
            *level = k->p[i].level, *at_ms = k->p[i].at;
            found = 0;
            break;
        }
    unlock_bucket(k);
    return found;
}

void peer_board_post(peer_board_t *b, const uint8_t key[16], unsigned level, int64_t at_ms)
{
    uint64_t tag = tag_of(b, key);
    bucket_t *k = lock_bucket(b, tag);
    if (!k)
        return;
    post_t *p = &k->p[0]; /* its own post, else an empty one, else the oldest */
    for (int i = 0; i < WAYS; i++) {
        if (k->p[i].tag == tag) {
            p = &k->p[i];
            break;
        }
        if (!k->p[i].tag ? p->tag != 0 : p->tag && k->p[i].at < p->at)
            p = &k->p[i];
    }
    p->tag = tag, p->at = at_ms, p->level = level;
    unlock_bucket(k);
}
