/*
 * rstore — the response cache's store (route/cache.c decides what goes
 * in and what comes out; http/cachectl.c holds the HTTP rules).  Entries
 * are found by their primary key (scheme, host, target) in a hash table,
 * several per key when the response varies (Vary) or while one is being
 * fetched; all of them sit on one LRU list.  The store holds at most
 * max_bytes of entries (heads and bodies together) and at most max_entries;
 * past either, the least recently used entry that no response is reading
 * goes (an entry being read is unlinked, and freed by its last reader).
 * An entry nobody asked for in idle_ms goes too (rs_sweep).
 *
 * One loop owns a store: no locks.  Nothing here knows HTTP beyond the
 * fields it keeps for the handler.
 */
#ifndef GATLING_RSTORE_H
#define GATLING_RSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define RS_KEY_MAX 4608 /* scheme + host + target: longer ones are not cached */
#define RS_CODED 3      /* bodies of an entry in another coding (route/cache_coded.c) */

enum {
    RS_FILLING, /* its response is coming (a fetch fills it) */
    RS_READY,   /* complete: hits are served from it */
    RS_PASS,    /* "hit for pass": the last response was not storable */
    RS_GONE     /* unlinked: freed when its last reader lets go */
};

/* A piece of a stored body. */
typedef struct rs_part {
    char *p;
    size_t n;
} rs_part_t;

struct cfetch;

typedef struct rs_entry {
    struct rs_entry *hnext;         /* the next entry in its bucket */
    struct rs_entry *lprev, *lnext; /* LRU: most recent first */
    uint32_t hash;
    uint32_t klen;
    uint8_t state; /* RS_* */
    unsigned refs; /* readers holding it (rs_hold) */
    int64_t used;  /* gio_now() ms of its last use: the idle timeout */
    size_t bytes;  /* memory it holds, counted in the store */
    /* the response, as route/cache.c keeps it */
    int status;
    char *head; /* its fields as "name\0value\0" * nfields, malloc'd */
    size_t headlen;
    unsigned nfields;
    const char *ctype; /* Content-Type (into head), or NULL */
    const char *etag;  /* ETag (into head), or NULL */
    time_t mtime;      /* Last-Modified, or -1 */
    char date[32];     /* its Date, as sent on every hit */
    char *vary;        /* Vary's names and the request's values: "name\0value\0" ... */
    size_t varylen;    /* ... (a value "\x01" stands for an absent field) */
    int64_t request_time, response_time; /* seconds: when fetched */
    int64_t stored_ms;                   /* gio_now() when its response came */
    int64_t initial_age, lifetime;       /* seconds (cachectl) */
    int64_t swr, sie;                    /* stale-while-revalidate, -if-error: seconds */
    int64_t pass_until;                  /* RS_PASS: seconds */
    uint8_t must_revalidate;             /* never served stale */
    uint8_t micro;                       /* its lifetime is the operator's ttl */
    uint64_t len; /* the body's length as announced, or UINT64_MAX: not known */
    rs_part_t *parts;
    unsigned nparts, partcap;
    uint64_t body_len;    /* bytes in parts */
    rs_part_t coded[RS_CODED]; /* the body in other codings, whole (the handler's
                                  index), each counted in bytes; {NULL, 0}: none */
    struct cfetch *fetch; /* the fetch filling or revalidating it, or NULL */
    void *readers;        /* the handler's list of responses waiting on it */
    char key[];
} rs_entry_t;

typedef struct rstore {
    rs_entry_t **bucket; /* nbuckets, a power of two; NULL until the first entry */
    size_t nbuckets;
    rs_entry_t *lru, *lru_last;
    size_t bytes;   /* held now, linked or not (readers may hold unlinked ones) */
    size_t entries; /* linked: what a lookup can find */
    size_t max_bytes, max_entries, max_object;
    int64_t idle_ms;
    uint64_t evictions; /* entries that went for room or for being idle */
} rstore_t;

/* An empty store with these caps (nothing is allocated yet). */
void rs_init(rstore_t *s, size_t max_bytes, size_t max_object, int64_t idle_ms);

/* Free every entry, read or not (the loop is going). */
void rs_free(rstore_t *s);

/* The key's hash, for rs_first and rs_new. */
uint32_t rs_hash(const char *key, size_t klen);

/* The first linked entry with this key, or NULL; rs_next the one after e. */
rs_entry_t *rs_first(const rstore_t *s, uint32_t h, const char *key, size_t klen);
rs_entry_t *rs_next(const rs_entry_t *e);

/* A new entry (RS_FILLING, no response yet) linked under key, most
   recently used; room is made for it.  NULL: ENOMEM, or the key is over
   RS_KEY_MAX. */
rs_entry_t *rs_new(rstore_t *s, uint32_t h, const char *key, size_t klen, int64_t now_ms);

/* e was used now: first on the LRU list. */
void rs_touch(rstore_t *s, rs_entry_t *e, int64_t now_ms);

/*
 * e holds n more bytes (a head, a part of its body): counted, and room made
 * by evicting others (never e).  0, or -1 if e would then be over
 * max_object (nothing counted: the caller gives the entry up).
 */
int rs_charge(rstore_t *s, rs_entry_t *e, size_t n);

/* Append the malloc'd p[0..n) to e's body: 0, and the entry owns p from
   here; or -1 (ENOMEM, or over max_object), and p is still the caller's. */
int rs_append(rstore_t *s, rs_entry_t *e, char *p, size_t n);

/* Take e out of the table (RS_GONE); freed now if no one reads it. */
void rs_unlink(rstore_t *s, rs_entry_t *e);

/* A reader holds e / lets it go (the last one frees an unlinked entry). */
static inline void rs_hold(rs_entry_t *e)
{
    e->refs++;
}
void rs_release(rstore_t *s, rs_entry_t *e);

/* Unlink the entries unused since idle_ms before now (oldest first, those
   being read or filled kept).  Returns how many went. */
size_t rs_sweep(rstore_t *s, int64_t now_ms);

/* Call fn for every linked entry whose key begins with prefix[0..n)
   (fn may unlink it).  Returns how many there were. */
size_t rs_each_prefix(rstore_t *s, const char *prefix, size_t n,
                      void (*fn)(rstore_t *s, rs_entry_t *e, void *arg), void *arg);

#endif
