/* The response cache's store: see rstore.h. */
#include "rstore.h"

#include <stdlib.h>
#include <string.h>

#define RS_BUCKETS_MIN 1024
#define RS_ENTRY_OVERHEAD 64 /* what malloc keeps beside an entry, roughly */

void rs_init(rstore_t *s, size_t max_bytes, size_t max_object, int64_t idle_ms)
{
    memset(s, 0, sizeof *s);
    s->max_bytes = max_bytes;
    s->max_object = max_object;
    /* a small response still costs a head and a struct: entries are capped too,
       so that many tiny ones cannot make the table and its chains long */
    s->max_entries = max_bytes / 512 + 16;
    s->idle_ms = idle_ms;
}

static void entry_free(rstore_t *s, rs_entry_t *e)
{
    for (unsigned i = 0; i < e->nparts; i++)
        free(e->parts[i].p);
    free(e->parts);
    for (unsigned i = 0; i < RS_CODED; i++)
        free(e->coded[i].p);
    free(e->head);
    free(e->vary);
    s->bytes -= e->bytes;
    if (e->state != RS_GONE) /* an unlinked one left the count at rs_unlink */
        s->entries--;
    free(e);
}

void rs_free(rstore_t *s)
{
    for (rs_entry_t *e = s->lru, *next; e; e = next) {
        next = e->lnext;
        entry_free(s, e);
    }
    free(s->bucket);
    s->bucket = NULL;
    s->lru = s->lru_last = NULL;
}

uint32_t rs_hash(const char *key, size_t klen)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    return h;
}

rs_entry_t *rs_first(const rstore_t *s, uint32_t h, const char *key, size_t klen)
{
    if (!s->bucket)
        return NULL;
    for (rs_entry_t *e = s->bucket[h & (s->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && e->klen == klen && !memcmp(e->key, key, klen))
            return e;
    return NULL;
}

rs_entry_t *rs_next(const rs_entry_t *e)
{
    for (rs_entry_t *o = e->hnext; o; o = o->hnext)
        if (o->hash == e->hash && o->klen == e->klen && !memcmp(o->key, e->key, e->klen))
            return o;
    return NULL;
}

static void lru_out(rstore_t *s, rs_entry_t *e)
{
    *(e->lprev ? &e->lprev->lnext : &s->lru) = e->lnext;
    *(e->lnext ? &e->lnext->lprev : &s->lru_last) = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void lru_in(rstore_t *s, rs_entry_t *e)
{
    e->lprev = NULL;
    e->lnext = s->lru;
    *(s->lru ? &s->lru->lprev : &s->lru_last) = e;
    s->lru = e;
}

void rs_touch(rstore_t *s, rs_entry_t *e, int64_t now_ms)
{
    e->used = now_ms;
    if (s->lru != e && e->state != RS_GONE) {
        lru_out(s, e);
        lru_in(s, e);
    }
}

void rs_unlink(rstore_t *s, rs_entry_t *e)
{
    if (e->state == RS_GONE)
        return;
    rs_entry_t **pp = &s->bucket[e->hash & (s->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_out(s, e);
    e->state = RS_GONE;
    s->entries--; /* entries counts what a lookup can find; bytes what is held */
    if (!e->refs)
        entry_free(s, e);
}

void rs_release(rstore_t *s, rs_entry_t *e)
{
    if (--e->refs == 0 && e->state == RS_GONE)
        entry_free(s, e);
}

/* Unlink least recently used entries until need more bytes and one more
   entry fit; keep is never one of them, nor one being filled or read. */
static void make_room(rstore_t *s, size_t need, int one_more, const rs_entry_t *keep)
{
    rs_entry_t *e = s->lru_last;
    while (e &&
           (s->bytes + need > s->max_bytes || s->entries + (size_t)one_more > s->max_entries)) {
        rs_entry_t *prev = e->lprev;
        if (e != keep && !e->refs && e->state != RS_FILLING) {
            rs_unlink(s, e);
            s->evictions++;
        }
        e = prev;
    }
}

/* The table doubles when it holds more entries than buckets. */
static int grow(rstore_t *s)
{
    size_t n = s->nbuckets ? s->nbuckets * 2 : RS_BUCKETS_MIN;
    rs_entry_t **b = calloc(n, sizeof *b);
    if (!b)
        return s->bucket ? 0 : -1; /* a full table still works, with longer chains */
    for (rs_entry_t *e = s->lru; e; e = e->lnext) {
        e->hnext = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(s->bucket);
    s->bucket = b;
    s->nbuckets = n;
    return 0;
}

rs_entry_t *rs_new(rstore_t *s, uint32_t h, const char *key, size_t klen, int64_t now_ms)
{
    if (klen > RS_KEY_MAX)
        return NULL;
    size_t size = sizeof(rs_entry_t) + klen + RS_ENTRY_OVERHEAD;
    make_room(s, size, 1, NULL);
    if ((s->entries >= s->nbuckets && grow(s) < 0))
        return NULL;
    rs_entry_t *e = calloc(1, sizeof *e + klen);
    if (!e)
        return NULL;
    memcpy(e->key, key, klen);
    e->klen = (uint32_t)klen;
    e->hash = h;
    e->state = RS_FILLING;
    e->mtime = -1;
    e->len = UINT64_MAX;
    e->bytes = size;
    e->used = now_ms;
    s->bytes += size;
    s->entries++;
    e->hnext = s->bucket[h & (s->nbuckets - 1)];
    s->bucket[h & (s->nbuckets - 1)] = e;
    lru_in(s, e);
    return e;
}

int rs_charge(rstore_t *s, rs_entry_t *e, size_t n)
{
    if (n > s->max_object || e->bytes > s->max_object - n)
        return -1;
    make_room(s, n, 0, e);
    e->bytes += n;
    s->bytes += n;
    return 0;
}

int rs_append(rstore_t *s, rs_entry_t *e, char *p, size_t n)
{
    if (e->nparts == e->partcap) {
        unsigned cap = e->partcap ? e->partcap * 2 : 4;
        rs_part_t *np = realloc(e->parts, cap * sizeof *np);
        if (!np)
            return -1;
        e->parts = np;
        e->partcap = cap;
    }
    if (rs_charge(s, e, n + sizeof(rs_part_t)) < 0)
        return -1;
    e->parts[e->nparts++] = (rs_part_t){p, n};
    e->body_len += n;
    return 0;
}

size_t rs_sweep(rstore_t *s, int64_t now_ms)
{
    size_t n = 0;
    rs_entry_t *e = s->lru_last;
    while (e && now_ms - e->used > s->idle_ms) {
        rs_entry_t *prev = e->lprev;
        if (!e->refs && e->state != RS_FILLING) {
            rs_unlink(s, e);
            s->evictions++;
            n++;
        }
        e = prev;
    }
    return n;
}

size_t rs_each_prefix(rstore_t *s, const char *prefix, size_t n,
                      void (*fn)(rstore_t *s, rs_entry_t *e, void *arg), void *arg)
{
    size_t k = 0;
    for (rs_entry_t *e = s->lru, *next; e; e = next) {
        next = e->lnext;
        if (e->klen >= n && !memcmp(e->key, prefix, n)) {
            k++;
            fn(s, e, arg);
        }
    }
    return k;
}
