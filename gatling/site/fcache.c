/* The open-file cache: see fcache.h. */
#include "fcache.h"
#include "gio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fcache {
    fcache_entry_t *oldest, *newest;
    size_t file_max, held_max;
    fcache_mem_t mem;
    size_t live; /* entries not yet destroyed, in the table or referenced */
    int freed;   /* fcache_free was called: the last destroy frees fc */
    gio_loop_t *loop;  /* fcache_clock's, or NULL */
    gio_timer_t clock; /* ... its timer: the oldest entry's expiry */
    size_t mask;
    fcache_entry_t *slot[];
};

static uint32_t hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

fcache_t *fcache_new(unsigned order, size_t file_max, size_t held_max)
{
    size_t n = (size_t)1 << order;
    fcache_t *fc = calloc(1, sizeof *fc + n * sizeof fc->slot[0]);
    if (fc) {
        fc->mask = n - 1;
        fc->file_max = file_max;
        fc->held_max = held_max;
    }
    return fc;
}

fcache_mem_t fcache_mem(const fcache_t *fc)
{
    return fc->mem;
}

/*
 * Read a small regular file whole into memory, within the budget.  A read
 * that does not give exactly st_size bytes (the file changed since fstat)
 * leaves it to be sent from its descriptor, which reports the change.
 */
static void hold(fcache_t *fc, fcache_entry_t *e)
{
    size_t size = (size_t)e->st.st_size;
    if (!S_ISREG(e->st.st_mode) || e->st.st_size <= 0 || (uint64_t)e->st.st_size > fc->file_max)
        return;
    if (size > fc->held_max - fc->mem.held) {
        fc->mem.skipped++;
        return;
    }
    char *d = malloc(size);
    if (!d)
        return;
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(e->fd, d + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got != size) {
        free(d);
        return;
    }
    e->data = d;
    fc->mem.held += size;
    fc->mem.files++;
}

static void destroy(fcache_entry_t *e)
{
    fcache_t *fc = e->fc;
    if (e->data) {
        fc->mem.held -= (uint64_t)e->st.st_size;
        fc->mem.files--;
        free(e->data);
    }
    close(e->fd);
    free(e->rel);
    free(e->auth);
    free(e->granted);
    free(e->hints);
    free(e->dict);
    free(e->key);
    free(e);
    if (--fc->live == 0 && fc->freed) /* the cache went first: its last entry frees it */
        free(fc);
}

static size_t slot_of(const fcache_t *fc, const char *key, size_t n)
{
    return hash(key, n) & fc->mask;
}

/* Take e out of the table; it lives on while referenced. */
static void evict(fcache_t *fc, size_t i)
{
    fcache_entry_t *e = fc->slot[i];
    fc->slot[i] = NULL;
    if (e->older)
        e->older->newer = e->newer;
    else
        fc->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        fc->newest = e->older;
    e->in_table = 0;
    if (e->refs == 0)
        destroy(e);
}

void fcache_free(fcache_t *fc)
{
    if (!fc)
        return;
    if (fc->loop)
        gio_timer_stop(fc->loop, &fc->clock);
    for (size_t i = 0; i <= fc->mask; i++)
        if (fc->slot[i])
            evict(fc, i);
    fc->freed = 1;
    if (fc->live == 0)
        free(fc);
}

fcache_entry_t *fcache_get(fcache_t *fc, const char *key, size_t n, int64_t now)
{
    size_t i = slot_of(fc, key, n);
    fcache_entry_t *e = fc->slot[i];
    if (!e || e->keylen != n || memcmp(e->key, key, n))
        return NULL;
    if (now >= e->expires) {
        evict(fc, i);
        return NULL;
    }
    e->refs++;
    return e;
}

void fcache_forget(fcache_t *fc, const char *key, size_t n)
{
    size_t i = slot_of(fc, key, n);
    fcache_entry_t *e = fc->slot[i];
    if (e && e->keylen == n && !memcmp(e->key, key, n))
        evict(fc, i);
}

/* The oldest entry's time came: evict what expired, wait for the next. */
static void on_clock(gio_loop_t *l, void *arg)
{
    fcache_t *fc = arg;
    fcache_expire(fc, gio_now(l));
    if (fc->oldest)
        gio_timer_set(l, &fc->clock, fc->oldest->expires, on_clock, fc);
}

void fcache_clock(fcache_t *fc, gio_loop_t *l)
{
    fc->loop = l;
}

fcache_entry_t *fcache_put(fcache_t *fc, const char *key, size_t n, const fcache_entry_t *tmpl,
                           int64_t now)
{
    fcache_entry_t *e = malloc(sizeof *e);
    char *k = malloc(n + 1);
    if (!e || !k) {
        free(e), free(k);
        return NULL;
    }
    memcpy(k, key, n);
    k[n] = 0;
    *e = *tmpl;
    e->older = e->newer = NULL;
    e->key = k, e->keylen = n;
    e->refs = 1, e->in_table = 1;
    e->fc = fc;
    e->data = NULL;
    fc->live++;
    e->expires = now + FCACHE_TTL_MS;
    size_t i = slot_of(fc, key, n);
    if (fc->slot[i])
        evict(fc, i);
    fc->slot[i] = e;
    e->older = fc->newest; /* same TTL for all: the newest expires last */
    if (fc->newest)
        fc->newest->newer = e;
    else
        fc->oldest = e;
    fc->newest = e;
    hold(fc, e); /* after the eviction above, whose bytes it may reuse */
    if (fc->loop && !gio_timer_armed(&fc->clock)) /* armed: for an older entry */
        gio_timer_set(fc->loop, &fc->clock, fc->oldest->expires, on_clock, fc);
    return e;
}

int64_t fcache_expire(fcache_t *fc, int64_t now)
{
    while (fc->oldest && fc->oldest->expires <= now)
        evict(fc, slot_of(fc, fc->oldest->key, fc->oldest->keylen));
    return fc->oldest ? fc->oldest->expires - now : -1;
}

void fcache_release(fcache_entry_t *e)
{
    if (--e->refs == 0 && !e->in_table)
        destroy(e);
}
