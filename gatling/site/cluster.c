/* cluster — see cluster.h. */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define READ_TRIES 8

typedef struct purge {
    uint64_t seq; /* which purge this slot holds (1, 2, ...) */
    uint32_t len;
    char key[CLUSTER_PURGE_MAX];
} purge_t;

struct cluster_view {
    _Atomic uint64_t seq; /* odd while the side process writes */
    int nmaster;
    uint64_t generation;
    unsigned char master[2][CLUSTER_MASTER_LEN];
    _Atomic int64_t synced;
    _Atomic int64_t purge_rev; /* the etcd revision of purges given to the ring */
    _Atomic int acme_count;
    struct {
        char name[CLUSTER_ACME_NAME_MAX];
        _Atomic int want, held;
    } acme[CLUSTER_ACME_NAMES];
    _Atomic uint64_t acme_published;
    _Atomic uint64_t npurges; /* written so far: the next is npurges + 1 */
    purge_t purge[CLUSTER_PURGES];
};

cluster_view_t *cluster_view_new(void)
{
    void *p = mmap(NULL, sizeof(cluster_view_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, sizeof(cluster_view_t), MADV_DONTDUMP);
    return p; /* zero: no masters, no purges */
}

void cluster_view_free(cluster_view_t *v)
{
    if (v)
        munmap(v, sizeof *v);
}

static void write_begin(cluster_view_t *v)
{
    atomic_fetch_add_explicit(&v->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void write_end(cluster_view_t *v)
{
    atomic_fetch_add_explicit(&v->seq, 1, memory_order_release);
}

int cluster_tickets(const cluster_view_t *v, unsigned char *master)
{
    cluster_view_t *w = (cluster_view_t *)v;
    for (int i = 0; v && i < READ_TRIES; i++) {
        uint64_t s = atomic_load_explicit(&w->seq, memory_order_acquire);
        if (s & 1)
            continue;
        int n = v->nmaster;
        memcpy(master, v->master, sizeof v->master);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&w->seq, memory_order_relaxed) == s)
            return n >= 0 && n <= 2 ? n : 0;
    }
    return 0;
}

int64_t cluster_synced(const cluster_view_t *v, uint64_t *generation)
{
    cluster_view_t *w = (cluster_view_t *)v;
    *generation = 0;
    if (!v)
        return 0;
    for (int i = 0; i < READ_TRIES; i++) {
        uint64_t s = atomic_load_explicit(&w->seq, memory_order_acquire);
        uint64_t g = v->generation;
        atomic_thread_fence(memory_order_acquire);
        if (!(s & 1) && atomic_load_explicit(&w->seq, memory_order_relaxed) == s) {
            *generation = g;
            break;
        }
    }
    return atomic_load_explicit(&w->synced, memory_order_relaxed);
}

void cluster_set_tickets(cluster_view_t *v, const unsigned char *cur, const unsigned char *prev,
                         uint64_t generation)
{
    write_begin(v);
    memcpy(v->master[0], cur, CLUSTER_MASTER_LEN);
    if (prev)
        memcpy(v->master[1], prev, CLUSTER_MASTER_LEN);
    else
        memset(v->master[1], 0, CLUSTER_MASTER_LEN);
    v->nmaster = prev ? 2 : 1;
    v->generation = generation;
    write_end(v);
}

void cluster_set_synced(cluster_view_t *v, int64_t now)
{
    atomic_store_explicit(&v->synced, now, memory_order_relaxed);
}

int64_t cluster_purge_rev(const cluster_view_t *v)
{
    return atomic_load_explicit(&((cluster_view_t *)v)->purge_rev, memory_order_relaxed);
}

void cluster_set_purge_rev(cluster_view_t *v, int64_t rev)
{
    atomic_store_explicit(&v->purge_rev, rev, memory_order_relaxed);
}

void cluster_acme_names(cluster_view_t *v, const char *const *names, int n)
{
    n = n < CLUSTER_ACME_NAMES ? n : CLUSTER_ACME_NAMES;
    /* a client started again lists the same names: the side process may
       read a name while it is written, and reads it again next round */
    for (int i = 0; i < n; i++)
        snprintf(v->acme[i].name, CLUSTER_ACME_NAME_MAX, "%s", names[i]);
    atomic_store_explicit(&v->acme_count, n, memory_order_release);
}

int cluster_acme_count(const cluster_view_t *v)
{
    /* written by the client's process: within the table, whatever it holds */
    int n = atomic_load_explicit(&((cluster_view_t *)v)->acme_count, memory_order_acquire);
    return n < 0 ? 0 : n > CLUSTER_ACME_NAMES ? CLUSTER_ACME_NAMES : n;
}

size_t cluster_acme_name(const cluster_view_t *v, int i, char out[CLUSTER_ACME_NAME_MAX])
{
    const char *name = v->acme[i].name;
    size_t len = strnlen(name, CLUSTER_ACME_NAME_MAX - 1);
    memcpy(out, name, len);
    out[len] = 0;
    return len;
}

int cluster_acme_wanted(const cluster_view_t *v, int i)
{
    return atomic_load_explicit(&((cluster_view_t *)v)->acme[i].want, memory_order_acquire);
}

void cluster_acme_want(cluster_view_t *v, int i, int want)
{
    if (i >= 0 && i < CLUSTER_ACME_NAMES)
        atomic_store_explicit(&v->acme[i].want, want, memory_order_release);
}

int cluster_acme_held(const cluster_view_t *v, int i)
{
    return i >= 0 && i < CLUSTER_ACME_NAMES &&
           atomic_load_explicit(&((cluster_view_t *)v)->acme[i].held, memory_order_acquire);
}

void cluster_set_acme_held(cluster_view_t *v, int i, int held)
{
    for (int k = i < 0 ? 0 : i; k < CLUSTER_ACME_NAMES && (i < 0 || k == i); k++)
        atomic_store_explicit(&v->acme[k].held, held, memory_order_release);
}

uint64_t cluster_acme_published(const cluster_view_t *v)
{
    return atomic_load_explicit(&((cluster_view_t *)v)->acme_published, memory_order_acquire);
}

void cluster_note_published(cluster_view_t *v)
{
    atomic_fetch_add_explicit(&v->acme_published, 1, memory_order_release);
}

void cluster_add_purge(cluster_view_t *v, const void *key, size_t len)
{
    if (len > CLUSTER_PURGE_MAX)
        return;
    uint64_t n = atomic_load_explicit(&v->npurges, memory_order_relaxed) + 1;
    purge_t *p = &v->purge[n % CLUSTER_PURGES];
    write_begin(v);
    p->seq = n;
    p->len = (uint32_t)len;
    memcpy(p->key, key, len);
    write_end(v);
    atomic_store_explicit(&v->npurges, n, memory_order_release);
}

/* Slot n's key into key (CLUSTER_PURGE_MAX): its length, or -1 if the
   slot holds another purge by now (or is being written). */
static int read_purge(cluster_view_t *v, uint64_t n, char *key)
{
    const purge_t *p = &v->purge[n % CLUSTER_PURGES];
    for (int i = 0; i < READ_TRIES; i++) {
        uint64_t s = atomic_load_explicit(&v->seq, memory_order_acquire);
        if (s & 1)
            continue;
        uint64_t seq = p->seq;
        uint32_t len = p->len;
        if (len <= CLUSTER_PURGE_MAX)
            memcpy(key, p->key, len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&v->seq, memory_order_relaxed) != s)
            continue;
        return seq == n && len <= CLUSTER_PURGE_MAX ? (int)len : -1;
    }
    return -1;
}

uint64_t cluster_take_purges(const cluster_view_t *v, uint64_t *next,
                             void (*fn)(const char *key, size_t len, void *arg), void *arg)
{
    cluster_view_t *w = (cluster_view_t *)v;
    uint64_t last = atomic_load_explicit(&w->npurges, memory_order_acquire), lost = 0;
    char key[CLUSTER_PURGE_MAX];
    if (!*next)
        *next = 1;
    if (last >= CLUSTER_PURGES && *next <= last - CLUSTER_PURGES)
        lost = last - CLUSTER_PURGES + 1 - *next, *next = last - CLUSTER_PURGES + 1;
    for (; *next <= last; ++*next) {
        int len = read_purge(w, *next, key);
        if (len >= 0)
            fn(key, (size_t)len, arg);
        else
            lost++;
    }
    return lost;
}

uint64_t cluster_purges_next(const cluster_view_t *v)
{
    return atomic_load_explicit(&((cluster_view_t *)v)->npurges, memory_order_acquire) + 1;
}

int cluster_send_purge(int fd, const void *key, size_t len)
{
    /* one write of at most PIPE_BUF bytes: whole or not at all, whichever
       worker writes it */
    unsigned char msg[2 + CLUSTER_PURGE_MAX];
    if (fd < 0 || len > CLUSTER_PURGE_MAX)
        return -1;
    msg[0] = (unsigned char)(len >> 8), msg[1] = (unsigned char)len;
    memcpy(msg + 2, key, len);
    ssize_t w;
    do
        w = write(fd, msg, 2 + len);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)(2 + len) ? 0 : -1;
}
