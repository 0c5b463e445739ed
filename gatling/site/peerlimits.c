/*
 * Per-address limits: see peerlimits.h.  Entries live in one array; a hash
 * table of chains (indices) finds them; entries without open connections
 * sit on an LRU list (oldest first), from which a new address takes the
 * oldest when the free list is empty.
 */
#include "peerlimits.h"
#include "peerboard.h"
#include "siphash.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 6          /* requests are counted in 6 slots ... */
#define SLOT_MS 10000    /* ... of 10 seconds: the last minute */
#define MINUTE_MS 60000
#define FORGIVE_MS 600000 /* failed logins are forgotten after 10 quiet minutes */
#define CRED_SLOTS 4096   /* recently failed credentials remembered */
#define CRED_MS 60000
#define NONE UINT32_MAX

typedef struct entry {
    uint8_t key[16];
    uint32_t hnext;              /* hash chain */
    uint32_t older, newer;       /* LRU list, while conns == 0 */
    uint32_t conns;              /* open connections */
    uint32_t slot[SLOTS];        /* requests per 10-second slot */
    int64_t slot_at;             /* the slot number (now / SLOT_MS) of the newest slot */
    int64_t last_req;            /* ms of the last request, for the caught minute */
    int64_t auth_at, auth_until; /* last failed login; no check before auth_until */
    int64_t forgiven_at;         /* the last success that forgave failures */
    int64_t offence_at;          /* the last offence, or the last step down since */
    uint32_t auth_fails;
    uint8_t used, caught;
    uint8_t offences; /* the level: see peer_offence */
} entry_t;

typedef struct cred {
    uint64_t tag;
    int64_t until;
} cred_t;

struct limits {
    limits_cfg_t cfg;
    uint8_t key[16]; /* SipHash key */
    entry_t *e;
    uint32_t cap, nused; /* entries [0, nused) have been used */
    uint32_t *bucket, mask;
    uint32_t oldest, newest; /* LRU of entries without connections */
    cred_t cred[CRED_SLOTS];
    peer_board_t *board; /* -W: the offences the workers share, or NULL */
};

static uint64_t siphash(const limits_t *l, const void *data, size_t n)
{
    return siphash24(l->key, data, n);
}

/* The client's key: IPv4 (also mapped) as ::ffff:a.b.c.d, IPv6 as its /64. */
static int key_of(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family != AF_INET6)
        return -1;
    const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memcpy(key, a, memcmp(a, mapped, 12) ? 8 : 16);
    return 0;
}

limits_t *limits_new(const limits_cfg_t *cfg, size_t capacity)
{
    if (capacity < 16)
        capacity = 16;
    if (capacity > (1u << 26))
        capacity = 1u << 26;
    limits_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cfg = *cfg;
    siphash_key(l->key);
    l->cap = (uint32_t)capacity;
    uint32_t nb = 1;
    while (nb < l->cap)
        nb <<= 1;
    l->mask = nb - 1;
    /* calloc'd: untouched entries cost no memory until used */
    l->e = calloc(l->cap, sizeof *l->e);
    l->bucket = malloc(nb * sizeof *l->bucket);
    if (!l->e || !l->bucket) {
        limits_free(l);
        return NULL;
    }
    memset(l->bucket, 0xff, nb * sizeof *l->bucket); /* NONE */
    l->oldest = l->newest = NONE;
    return l;
}

void limits_free(limits_t *l)
{
    if (!l)
        return;
    free(l->e);
    free(l->bucket);
    free(l);
}

static void lru_unlink(limits_t *l, uint32_t i)
{
    entry_t *e = &l->e[i];
    if (e->older != NONE)
        l->e[e->older].newer = e->newer;
    else
        l->oldest = e->newer;
    if (e->newer != NONE)
        l->e[e->newer].older = e->older;
    else
        l->newest = e->older;
    e->older = e->newer = NONE;
}

static void lru_push(limits_t *l, uint32_t i)
{
    entry_t *e = &l->e[i];
    e->older = l->newest, e->newer = NONE;
    if (l->newest != NONE)
        l->e[l->newest].newer = i;
    else
        l->oldest = i;
    l->newest = i;
}

/* Was this entry active (on the LRU list) just now: move it to the new end. */
static void touch(limits_t *l, uint32_t i)
{
    if (l->e[i].conns == 0) {
        lru_unlink(l, i);
        lru_push(l, i);
    }
}

static uint32_t *chain_of(limits_t *l, const uint8_t key[16])
{
    return &l->bucket[siphash(l, key, 16) & l->mask];
}

static void unchain(limits_t *l, uint32_t i)
{
    for (uint32_t *p = chain_of(l, l->e[i].key); *p != NONE; p = &l->e[*p].hnext)
        if (*p == i) {
            *p = l->e[i].hnext;
            return;
        }
}

/* The entry for key; created (evicting the oldest idle one if need be) if create. */
static uint32_t find(limits_t *l, const uint8_t key[16], int create)
{
    uint32_t *head = chain_of(l, key);
    for (uint32_t i = *head; i != NONE; i = l->e[i].hnext)
        if (!memcmp(l->e[i].key, key, 16))
            return i;
    if (!create)
        return NONE;
    uint32_t i;
    if (l->nused < l->cap) {
        i = l->nused++;
    } else if (l->oldest != NONE) {
        i = l->oldest; /* the least recently active address with no connection */
        lru_unlink(l, i);
        unchain(l, i);
        head = chain_of(l, key);
    } else {
        return NONE;
    }
    entry_t *e = &l->e[i];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, 16);
    e->used = 1;
    e->hnext = *head;
    *head = i;
    e->older = e->newer = NONE;
    lru_push(l, i);
    return i;
}

static uint32_t entry_for(limits_t *l, const struct sockaddr *sa, int create)
{
    uint8_t key[16];
    return key_of(sa, key) < 0 ? NONE : find(l, key, create);
}

static unsigned level_all(const limits_t *l, entry_t *e, int64_t now_ms);

int limits_conn_open(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    uint32_t i = entry_for(l, sa, 1);
    if (i == NONE)
        return LIMIT_FULL;
    entry_t *e = &l->e[i];
    if (level_all(l, e, now_ms) >= PEER_REFUSE) {
        touch(l, i); /* an offender who keeps knocking stays remembered */
        return LIMIT_OFFENDER;
    }
    if (l->cfg.conns_per_addr && e->conns >= l->cfg.conns_per_addr) {
        touch(l, i);
        return LIMIT_CONNS;
    }
    if (e->conns++ == 0)
        lru_unlink(l, i); /* not evictable while it has connections */
    return LIMIT_OK;
}

void limits_conn_close(limits_t *l, const struct sockaddr *sa)
{
    uint32_t i = entry_for(l, sa, 0);
    if (i == NONE || l->e[i].conns == 0)
        return;
    if (--l->e[i].conns == 0)
        lru_push(l, i);
}

/* Move e's slots on to now's slot, dropping what is older than a minute. */
static void roll(entry_t *e, int64_t now_ms)
{
    int64_t now = now_ms / SLOT_MS;
    int64_t gap = now - e->slot_at;
    if (gap <= 0)
        return;
    if (gap >= SLOTS) {
        memset(e->slot, 0, sizeof e->slot);
    } else {
        memmove(e->slot, e->slot + gap, (size_t)(SLOTS - gap) * sizeof e->slot[0]);
        memset(e->slot + SLOTS - gap, 0, (size_t)gap * sizeof e->slot[0]);
    }
    e->slot_at = now;
}

int limits_request(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    if (!l->cfg.rpm)
        return LIMIT_OK;
    uint32_t i = entry_for(l, sa, 1);
    if (i == NONE)
        return LIMIT_OK; /* cannot track it: do not punish it */
    entry_t *e = &l->e[i];
    touch(l, i);
    if (e->caught && now_ms - e->last_req >= MINUTE_MS) { /* a whole quiet minute */
        e->caught = 0;
        memset(e->slot, 0, sizeof e->slot);
    }
    if (e->caught) {
        e->last_req = now_ms;
        return LIMIT_RATE;
    }
    roll(e, now_ms);
    uint64_t n = 0;
    for (int k = 0; k < SLOTS; k++)
        n += e->slot[k];
    e->last_req = now_ms;
    if (n + 1 > l->cfg.rpm) {
        e->caught = 1;
        return LIMIT_RATE;
    }
    e->slot[SLOTS - 1]++;
    return LIMIT_OK;
}

unsigned limits_auth_wait(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    uint32_t i = entry_for(l, sa, 0);
    if (i == NONE)
        return 0;
    entry_t *e = &l->e[i];
    if (e->auth_fails && now_ms - e->auth_at >= FORGIVE_MS)
        e->auth_fails = 0, e->auth_until = 0;
    if (now_ms >= e->auth_until)
        return 0;
    return (unsigned)((e->auth_until - now_ms + 999) / 1000);
}

void limits_auth_failed(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    uint32_t i = entry_for(l, sa, 1);
    if (i == NONE)
        return;
    entry_t *e = &l->e[i];
    touch(l, i);
    if (e->auth_fails && now_ms - e->auth_at >= FORGIVE_MS)
        e->auth_fails = 0;
    e->auth_at = now_ms;
    if (++e->auth_fails > l->cfg.free_fails) {
        unsigned k = e->auth_fails - l->cfg.free_fails - 1;
        uint64_t wait = k >= 16 ? UINT64_MAX : (uint64_t)1000 << k;
        uint64_t cap = (uint64_t)l->cfg.max_wait_s * 1000;
        e->auth_until = now_ms + (int64_t)(wait < cap ? wait : cap);
    }
}

void limits_auth_ok(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    uint32_t i = entry_for(l, sa, 0);
    if (i == NONE)
        return;
    entry_t *e = &l->e[i];
    /* once a minute at most: someone who knows one password must not be able
       to wipe the record of his guesses at others between each two of them */
    if (e->forgiven_at && now_ms - e->forgiven_at < MINUTE_MS)
        return;
    e->forgiven_at = now_ms;
    e->auth_fails = 0, e->auth_until = 0;
}

static cred_t *cred_slot(limits_t *l, const void *key, size_t n, uint64_t *tag)
{
    *tag = siphash(l, key, n) | 1; /* never 0: 0 is an empty slot */
    return &l->cred[*tag % CRED_SLOTS];
}

int limits_cred_failed(limits_t *l, const void *key, size_t n, int64_t now_ms)
{
    uint64_t tag;
    cred_t *c = cred_slot(l, key, n, &tag);
    return c->tag == tag && now_ms < c->until;
}

void limits_cred_note_failed(limits_t *l, const void *key, size_t n, int64_t now_ms)
{
    uint64_t tag;
    cred_t *c = cred_slot(l, key, n, &tag);
    c->tag = tag;
    c->until = now_ms + CRED_MS;
}

/* e's level at now: one step down per offence_ms since the last offence. */
static unsigned level_now(const limits_t *l, entry_t *e, int64_t now_ms)
{
    if (!e->offences || !l->cfg.offence_ms)
        return 0;
    int64_t steps = (now_ms - e->offence_at) / l->cfg.offence_ms;
    if (steps >= e->offences) {
        e->offences = 0;
    } else if (steps > 0) {
        e->offences = (uint8_t)(e->offences - steps);
        e->offence_at += steps * (int64_t)l->cfg.offence_ms;
    }
    return e->offences;
}

/* e's level, raised to what another worker posted for it on the board (-W). */
static unsigned level_all(const limits_t *l, entry_t *e, int64_t now_ms)
{
    unsigned lv = level_now(l, e, now_ms), blv;
    int64_t at;
    if (!l->board || !l->cfg.offence_ms || peer_board_get(l->board, e->key, &blv, &at) < 0)
        return lv;
    entry_t b = {.offences = (uint8_t)(blv < PEER_LEVEL_MAX ? blv : PEER_LEVEL_MAX),
                 .offence_at = at};
    if (level_now(l, &b, now_ms) > lv) { /* adopt it, and its time */
        e->offences = b.offences, e->offence_at = b.offence_at;
        lv = e->offences;
    }
    return lv;
}

void peer_offence(limits_t *l, const struct sockaddr *sa, int kind, int64_t now_ms)
{
    (void)kind; /* every kind weighs one level today */
    if (!l->cfg.offence_ms)
        return;
    uint32_t i = entry_for(l, sa, 1);
    if (i == NONE)
        return;
    entry_t *e = &l->e[i];
    touch(l, i);
    unsigned lv = level_all(l, e, now_ms);
    e->offences = (uint8_t)(lv < PEER_LEVEL_MAX ? lv + 1 : PEER_LEVEL_MAX);
    e->offence_at = now_ms; /* the level falls from the last offence on */
    if (l->board)
        peer_board_post(l->board, e->key, e->offences, now_ms);
}

unsigned peer_allowance(limits_t *l, const struct sockaddr *sa, int64_t now_ms)
{
    uint32_t i = entry_for(l, sa, l->board != NULL); /* -W: the board may know it */
    return i == NONE ? 0 : level_all(l, &l->e[i], now_ms);
}

void limits_share(limits_t *l, peer_board_t *board)
{
    l->board = board;
}

size_t limits_tracked(const limits_t *l)
{
    size_t n = 0;
    for (uint32_t i = 0; i < l->nused; i++)
        n += l->e[i].used;
    return n;
}
