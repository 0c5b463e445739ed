/* The open-file cache: see fcache.h. */
#include "fcache.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fcache {
    fcache_entry_t *oldest, *newest;
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

fcache_t *fcache_new(unsigned order)
{
    size_t n = (size_t)1 << order;
    fcache_t *fc = calloc(1, sizeof *fc + n * sizeof fc->slot[0]);
    if (fc)
        fc->mask = n - 1;
    return fc;
}

static void destroy(fcache_entry_t *e)
{
    close(e->fd);
    free(e->rel);
    free(e->auth);
    free(e->granted);
    free(e->key);
    free(e);
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
    for (size_t i = 0; i <= fc->mask; i++)
        if (fc->slot[i])
            evict(fc, i);
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
