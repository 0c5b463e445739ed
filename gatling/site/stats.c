/* Counters: see stats.h. */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

const uint32_t stats_bounds_us[STATS_BOUNDS] = {500,     1000,    2500,    5000,    10000,
                                                25000,   50000,   100000,  250000,  500000,
                                                1000000, 2500000, 5000000, 10000000};

/* Where a row's value is in a snapshot, by its where (counters.h). */
#define ROW_AT_C(f) offsetof(stats_snap_t, c.f)
#define ROW_AT_E(f) offsetof(stats_snap_t, c.f)
#define ROW_AT_M(f) offsetof(stats_snap_t, more.f)
#define ROW_AT_G(f) offsetof(stats_snap_t, g.f)
#define ROW_AT_A(f) offsetof(stats_snap_t, side.f)
#define ROW_AT_O(f) offsetof(stats_snap_t, side.f)
#define ROW_SIDE_C STATS_SIDE_NONE
#define ROW_SIDE_E STATS_SIDE_NONE
#define ROW_SIDE_M STATS_SIDE_NONE
#define ROW_SIDE_G STATS_SIDE_NONE
#define ROW_SIDE_A STATS_SIDE_ACME
#define ROW_SIDE_O STATS_SIDE_ONDEMAND
#define ROW(w, f, type, metric, lkey, lval, help, skey, slabel) \
    {ROW_AT_##w(f), STATS_##type, metric, lkey, lval, help, skey, slabel, ROW_SIDE_##w},

const stats_row_t stats_rows[] = {STATS_COUNTERS(ROW)};
const size_t stats_nrows = sizeof stats_rows / sizeof stats_rows[0];

int stats_shown(const stats_snap_t *snap, const stats_row_t *r)
{
    return snap->side.has >= (uint64_t)r->side;
}

uint64_t stats_value(const stats_snap_t *snap, const stats_row_t *r)
{
    uint64_t v;
    memcpy(&v, (const char *)snap + r->off, sizeof v);
    return v;
}

void stats_roll(status_counters_t *st, int64_t now)
{
    if (now == st->second)
        return;
    /* a new second: the one that ended gives the rate (0 after a quiet gap) */
    int quiet = now - st->second > 1;
    st->rps = quiet ? 0 : st->requests - st->last_requests;
    st->bps = quiet ? 0 : st->bytes - st->last_bytes;
    st->last_requests = st->requests;
    st->last_bytes = st->bytes;
    st->second = now;
}

void status_count(status_counters_t *st, int64_t now, int proto, unsigned status, uint64_t bytes,
                  int64_t took_us)
{
    stats_roll(st, now);
    st->requests++;
    st->responses_4xx += status >= 400 && status < 500;
    st->responses_5xx += status >= 500 && status < 600;
    st->bytes += bytes;
    st->proto_requests[proto]++;
    st->proto_bytes[proto] += bytes;
    uint64_t d = took_us > 0 ? (uint64_t)took_us : 0; /* the loop's clock: no read here */
    int b = 0;
    while (b < STATS_BOUNDS && d > stats_bounds_us[b])
        b++;
    st->duration[proto][b]++;
    st->duration_us[proto] += d;
}

/* One slot: a snapshot and its sequence counter, odd while it is written. */
typedef struct stats_slot {
    uint64_t seq;
    uint64_t w[STATS_SNAP_WORDS];
    uint64_t pid; /* the worker's, for the status page; never read by the supervisor */
} stats_slot_t;

/* The shared mapping: every worker (running as -u) can write all of it. */
typedef struct stats_table {
    uint64_t gen; /* odd while the supervisor moves a dead worker's counters */
    stats_slot_t slot[];
} stats_table_t;

/* The handle, in each process's private memory (made before the fork): the
   mapping's size and the slots' count are never read from the mapping, so
   that a worker that writes nonsense there cannot steer the root supervisor's
   indexes or its munmap (issue 52). */
struct stats_shm {
    stats_table_t *tab;
    size_t size; /* of the mapping */
    int workers; /* slot[workers] holds what the dead counted */
};

/* Where a field is among a snapshot's words. */
#define WORD_OF(field) (offsetof(stats_snap_t, field) / sizeof(uint64_t))
#define GAUGES_AT WORD_OF(g)

stats_shm_t *stats_shm_new(int workers)
{
    if (workers < 1) {
        errno = EINVAL;
        return NULL;
    }
    stats_shm_t *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    t->size = sizeof(stats_table_t) + (size_t)(workers + 1) * sizeof(stats_slot_t);
    t->workers = workers;
    t->tab = mmap(NULL, t->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t->tab == MAP_FAILED) { /* else all zero: empty slots, sequence 0 */
        free(t);
        return NULL;
    }
    return t;
}

void stats_shm_free(stats_shm_t *t)
{
    if (!t)
        return;
    munmap(t->tab, t->size);
    free(t);
}

/* The seqlock's writer: the counter goes odd, the words, the counter even. */
static void slot_write(stats_slot_t *s, const uint64_t *w)
{
    uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) | 1;
    __atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (size_t k = 0; k < STATS_SNAP_WORDS; k++)
        __atomic_store_n(&s->w[k], w[k], __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
}

/* The reader: copy until the counter was even and the same before and after.
   A worker killed in the middle of a write leaves it odd until it is reaped:
   after that many tries the copy is taken as it is. */
static void slot_read(const stats_slot_t *s, uint64_t *w)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t a = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        for (size_t k = 0; k < STATS_SNAP_WORDS; k++)
            w[k] = __atomic_load_n(&s->w[k], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(a & 1) && __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == a)
            return;
    }
}

void stats_shm_publish(stats_shm_t *t, int i, const stats_snap_t *snap)
{
    uint64_t w[STATS_SNAP_WORDS];
    if (i < 0 || i >= t->workers)
        return;
    memcpy(w, snap, sizeof w);
    slot_write(&t->tab->slot[i], w);
}

/* a += b over words [0, n): sums, but the earliest start and the largest draining. */
static void words_add(uint64_t *a, const uint64_t *b, size_t n)
{
    size_t started = WORD_OF(c.started), draining = WORD_OF(g.draining);
    uint64_t first =
        !a[started] || (b[started] && b[started] < a[started]) ? b[started] : a[started];
    uint64_t most = n > draining && b[draining] > a[draining] ? b[draining] : a[draining];
    for (size_t k = 0; k < n; k++)
        a[k] += b[k];
    a[started] = first;
    if (n > draining)
        a[draining] = most;
}

void stats_shm_total(stats_shm_t *t, int self, const stats_snap_t *own, stats_snap_t *out)
{
    uint64_t sum[STATS_SNAP_WORDS], w[STATS_SNAP_WORDS];
    /* a dead worker's counters are in its slot or in the dead's, never both:
       read again if the supervisor moved some meanwhile */
    for (int tries = 0; tries < 100; tries++) {
        uint64_t gen = __atomic_load_n(&t->tab->gen, __ATOMIC_ACQUIRE);
        memcpy(sum, own, sizeof sum);
        for (int i = 0; i <= t->workers; i++) {
            if (i == self)
                continue;
            slot_read(&t->tab->slot[i], w);
            words_add(sum, w, STATS_SNAP_WORDS);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(gen & 1) && __atomic_load_n(&t->tab->gen, __ATOMIC_RELAXED) == gen)
            break;
    }
    memcpy(out, sum, sizeof sum);
}

int stats_shm_worker(stats_shm_t *t, int i, stats_snap_t *out)
{
    uint64_t w[STATS_SNAP_WORDS];
    if (!t || i < 0 || i >= t->workers)
        return -1;
    slot_read(&t->tab->slot[i], w);
    memcpy(out, w, sizeof w);
    return 0;
}

int stats_shm_workers(const stats_shm_t *t)
{
    return t ? t->workers : 0;
}

void stats_shm_retire(stats_shm_t *t, int i)
{
    uint64_t dead[STATS_SNAP_WORDS], gone[STATS_SNAP_WORDS];
    if (i < 0 || i >= t->workers)
        return;
    /* every value read below is a counter to add or a sequence to bump, never
       an index or a size: the supervisor's own copies (t) are those */
    stats_table_t *tab = t->tab;
    uint64_t gen = __atomic_load_n(&tab->gen, __ATOMIC_RELAXED);
    __atomic_store_n(&tab->gen, gen | 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    slot_read(&tab->slot[t->workers], dead);
    slot_read(&tab->slot[i], gone);
    words_add(dead, gone, GAUGES_AT);
    slot_write(&tab->slot[t->workers], dead);
    memset(gone, 0, sizeof gone);
    /* an even count again, whatever a write cut short left */
    uint64_t seq = __atomic_load_n(&tab->slot[i].seq, __ATOMIC_RELAXED);
    __atomic_store_n(&tab->slot[i].seq, seq & ~(uint64_t)1, __ATOMIC_RELAXED);
    slot_write(&tab->slot[i], gone);
    __atomic_store_n(&tab->slot[i].pid, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&tab->gen, (gen | 1) + 1, __ATOMIC_RELEASE);
}

void stats_shm_set_pid(stats_shm_t *t, int i, long pid)
{
    if (t && i >= 0 && i < t->workers)
        __atomic_store_n(&t->tab->slot[i].pid, (uint64_t)pid, __ATOMIC_RELAXED);
}

int stats_shm_pids(const stats_shm_t *t, long *pid, int max)
{
    int n = 0;
    for (int i = 0; t && i < t->workers && n < max; i++) {
        uint64_t p = __atomic_load_n(&t->tab->slot[i].pid, __ATOMIC_RELAXED);
        if (p > 0 && p <= 0x7fffffff) /* what a worker wrote: a number, no more */
            pid[n++] = (long)p;
    }
    return n;
}

long stats_shm_pid(const stats_shm_t *t, int i)
{
    if (!t || i < 0 || i >= t->workers)
        return 0;
    uint64_t p = __atomic_load_n(&t->tab->slot[i].pid, __ATOMIC_RELAXED);
    return p <= 0x7fffffff ? (long)p : 0; /* what a worker wrote: a number, no more */
}
