/* The ClientHellos that carried early data, shared by the workers: see replay.h. */
#include "replay.h"
#include "siphash.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>

#define WAYS 8   /* values per bucket */
#define SPINS 64 /* tries for a bucket's lock before refusing */

typedef struct slot {
    uint64_t tag;  /* 0: empty */
    int64_t until; /* ms (CLOCK_MONOTONIC): kept until then */
} slot_t;

typedef struct bucket {
    uint32_t lock;
    slot_t s[WAYS];
} bucket_t;

struct replay {
    size_t bytes;      /* the mapping's size */
    uint32_t nbuckets;
    int64_t born;      /* ms: the table refuses until born + REPLAY_WINDOW_MS */
    uint8_t key[16];   /* SipHash key, made before the fork: the same in every worker */
    bucket_t b[];
};

int64_t replay_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

replay_t *replay_new(unsigned entries, int64_t now_ms)
{
    if (!entries || entries > (1u << 24)) {
        errno = EINVAL;
        return NULL;
    }
    uint32_t nb = (entries + WAYS - 1) / WAYS;
    size_t bytes = sizeof(replay_t) + (size_t)nb * sizeof(bucket_t);
    replay_t *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
    t->bytes = bytes; /* the rest is zero: every slot empty, every lock free */
    t->nbuckets = nb;
    t->born = now_ms;
    siphash_key(t->key);
    return t;
}

void replay_free(replay_t *t)
{
    if (t)
        munmap(t, t->bytes);
}

unsigned replay_size(const replay_t *t)
{
    return t->nbuckets * WAYS;
}

int replay_record(replay_t *t, const void *key, size_t len, int64_t now_ms)
{
    if (now_ms < t->born + REPLAY_WINDOW_MS)
        return REPLAY_YOUNG;
    uint64_t tag = siphash24(t->key, key, len);
    tag = tag ? tag : 1; /* 0 marks an empty slot */
    bucket_t *k = &t->b[(tag >> 32) % t->nbuckets];
    int locked = 0;
    for (int i = 0; i < SPINS && !locked; i++)
        locked = !__atomic_exchange_n(&k->lock, 1, __ATOMIC_ACQUIRE);
    if (!locked) /* another worker holds it, or died holding it: fail closed */
        return REPLAY_FULL;
    slot_t *free_slot = NULL;
    int r = REPLAY_FULL;
    for (int i = 0; i < WAYS; i++) {
        slot_t *s = &k->s[i];
        if (s->tag == tag && s->until > now_ms) {
            r = REPLAY_SEEN;
            break;
        }
        if (!free_slot && (!s->tag || s->until <= now_ms))
            free_slot = s;
    }
    if (r != REPLAY_SEEN && free_slot) {
        free_slot->tag = tag;
        free_slot->until = now_ms + REPLAY_WINDOW_MS;
        r = REPLAY_NEW;
    }
    __atomic_store_n(&k->lock, 0, __ATOMIC_RELEASE);
    return r;
}
