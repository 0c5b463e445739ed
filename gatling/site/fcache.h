/*
 * fcache — the open-file cache.  A file that was just served is kept open,
 * with its stat data and formatted Last-Modified, for FCACHE_TTL_MS; requests
 * for it within that time cost no open(), fstat() or close().  After that it
 * is opened again, so a replaced, removed or chmod'ed file is noticed within
 * a second (nginx's open_file_cache_valid, fixed at 1 s).
 *
 * Entries are reference-counted: a response holds its entry until sent, so an
 * entry evicted meanwhile is closed by its last user.  The table is direct
 * mapped: a new path evicts whatever hashed to the same slot.  Entries are
 * closed when they expire (fcache_expire, on the loop's timer: fcache_clock),
 * so a removed file's space is not held and the cache never sits on
 * descriptors it does not use.
 *
 * Small files are also held in memory (the fast path): a regular file of at
 * most file_max bytes is read once when it enters the cache, so that its
 * response leaves in one sendmsg (head and body together) instead of a
 * sendmsg and a sendfile.  The bytes held by all entries, referenced or not,
 * never pass held_max; past it, files are sent from their descriptor as
 * before.  The copy lives as long as the entry, so it is as fresh as the
 * descriptor the entry holds: a second at most.
 */
#ifndef GATLING_FCACHE_H
#define GATLING_FCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define FCACHE_TTL_MS 1000

typedef struct fcache fcache_t;

typedef struct fcache_entry {
    struct fcache_entry *older, *newer; /* in the table: oldest first */
    fcache_t *fc;                       /* its cache, for the memory count */
    char *key;
    size_t keylen;
    int fd;
    int refs;
    int in_table;    /* 0 once evicted: the last release frees it */
    int64_t expires; /* gio_now() ms */
    struct stat st;
    char *data; /* the whole file (st.st_size bytes), or NULL: send from fd */
    /* filled by the caller of fcache_put (the cache only frees rel): */
    const char *type;  /* Content-Type */
    char *rel;         /* the file's path below its vhost directory (malloc'd) */
    unsigned siblings; /* precompressed siblings that exist (ENC_* mask) */
    int protect;       /* an .htaccess governs it: check credentials each time */
    int vhost_dir;     /* VHOST_*: the directory it was found in, for the log */
    char *auth;        /* the path whose .htaccess governs it (malloc'd) */
    char *granted;     /* an Authorization value that passed it (malloc'd) */
    char *hints;       /* the Link value of its 103 Early Hints (malloc'd), or NULL */
    char *dict;        /* its Use-As-Dictionary value (malloc'd), or NULL: no dictionary */
    char etag[64];     /* its strong ETag, quotes included */
} fcache_entry_t;

/* Memory the cache holds file bytes in, for /server-status. */
typedef struct fcache_mem {
    uint64_t held;    /* bytes of file data held now */
    uint64_t files;   /* entries holding data now */
    uint64_t skipped; /* small files sent from their fd because held_max was reached */
} fcache_mem_t;

/*
 * A cache of 2^order slots that holds in memory regular files of at most
 * file_max bytes (0: none), and at most held_max bytes of them in all;
 * NULL on ENOMEM.
 */
fcache_t *fcache_new(unsigned order, size_t file_max, size_t held_max);

/* What the cache holds in memory now. */
fcache_mem_t fcache_mem(const fcache_t *fc);

/* Close and free everything (entries still referenced, and the count they
   update, are freed on their last release). */
void fcache_free(fcache_t *fc);

/* The fresh entry for key, with a reference taken; NULL if absent or stale. */
fcache_entry_t *fcache_get(fcache_t *fc, const char *key, size_t n, int64_t now);

/*
 * Enter tmpl (its fd and rel are taken over; key, links, counts and data
 * are filled in here: a small regular file is read into memory) under key;
 * returns the entry with a reference taken, or NULL on ENOMEM (fd and rel
 * are then still the caller's).
 */
fcache_entry_t *fcache_put(fcache_t *fc, const char *key, size_t n, const fcache_entry_t *tmpl,
                           int64_t now);

/* Evict key's entry now (a file just written: FTP's STOR, APPE), if cached. */
void fcache_forget(fcache_t *fc, const char *key, size_t n);

/*
 * Evict the entries that expired by now.  Returns the ms until the next
 * expiry, or -1 if the cache is empty.
 */
int64_t fcache_expire(fcache_t *fc, int64_t now);

/*
 * Expire by a timer of loop l's (gio_timer_set): while the cache holds
 * entries, the oldest one's expiry is armed, and fcache_expire runs then;
 * fcache_free stops it.  Without this call nothing expires but what
 * fcache_get finds stale, and fcache_expire is the caller's to call.
 */
struct gio_loop;
void fcache_clock(fcache_t *fc, struct gio_loop *l);

/* Drop a reference taken by get or put. */
void fcache_release(fcache_entry_t *e);

#endif
