/*
 * dict — compression dictionaries (RFC 9842) for static files: the index
 * from a dictionary's SHA-256 to the file version it was made from, the
 * deltas made against them (the dcz coding: a file compressed with zstd,
 * the dictionary as its raw prefix), and the jobs that make both off the
 * loop (site/jobs.h runs them; handlers/dictionary.c decides what to ask).
 *
 *   - The index holds at most DICT_INDEX_MAX dictionaries: hash, file
 *     version, its path, scope and match pattern, no descriptor and no
 *     bytes.  A delta is made from the file opened again, and only if it is
 *     still the version hashed (dev, inode, size, mtime, checked before and
 *     after reading): a dictionary changed or replaced since is stale and
 *     forgotten (a delta already made stays right: it was made from bytes
 *     with that hash).  The least recently used entry goes first.
 *   - A dictionary is at most DICT_MAX bytes, a file to delta at most
 *     DICT_TARGET_MAX: larger ones are served without.
 *   - Deltas live in an LRU cache of at most max_bytes, keyed by the target
 *     file's version (dev, inode, size, mtime) and the dictionary's hash.  A
 *     delta no smaller than the file is remembered as useless.
 *
 * Memory of a job: the dictionary and the file read whole, the output, and
 * zstd's level-19 tables (ZSTD_estimateCCtxSize: 33 MB for a 1 MiB pair,
 * about 80 MB for the largest, 16 MiB + 8 MiB); DICT_INFLIGHT bounds the
 * input in flight and -j the jobs running at once.
 *
 * For one event loop: not thread-safe, but dict_run, which a pool thread
 * runs, touches only its job.  Depends on libzstd and OpenSSL's libcrypto.
 */
#ifndef GATLING_DICT_H
#define GATLING_DICT_H

#include "http/dcz.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define DICT_INDEX_MAX 64
#define DICT_MAX (16u << 20)       /* Chromium takes up to 100 MiB; the memory of a job is ours */
#define DICT_TARGET_MAX (8u << 20) /* as on-the-fly gzip (ENC_GZIP_MAX_FILE) */
#define DICT_CACHE_DEFAULT (16u << 20)
#define DICT_INFLIGHT (32u << 20)    /* bytes of input (dictionary + file) in jobs at once */
#define DICT_LEVEL 19                /* zstd level: made once per pair (bench/compare-dict) */
#define DICT_WINDOW_FLOOR (8u << 20) /* RFC 9842 5.2: windows up to max(8 MB, 1.25 x dict) */

typedef struct dict dict_t;
typedef struct dict_job dict_job_t;

typedef struct dict_counters {
    uint64_t hits;         /* dcz responses sent */
    uint64_t bytes_saved;  /* their files' sizes less their dcz bodies */
    uint64_t unknown;      /* Available-Dictionary with a hash not in the index */
    uint64_t stale;        /* ... in the index, but its file changed since */
    uint64_t made;         /* deltas made */
    uint64_t useless;      /* ... no smaller than their file: served as before */
    uint64_t hashed;       /* dictionaries hashed into the index */
    uint64_t skipped_busy; /* a job was declined: DICT_INFLIGHT in flight */
} dict_counters_t;

/* An indexed dictionary, as dict_find returns it (valid until the next call
   into the index). */
typedef struct dict_entry {
    uint8_t hash[DCZ_HASH_LEN];
    struct stat st;
    char *scope; /* the directory serving it (vhost_dir(): "": the root) */
    char *match; /* its match pattern */
    char *rel;   /* its path below the virtual host's directory */
    struct dict_entry *older, *newer;
} dict_entry_t;

/* A new index and delta cache holding at most max_bytes of deltas (0:
   DICT_CACHE_DEFAULT).  NULL on ENOMEM. */
dict_t *dict_new(size_t max_bytes);

/* Free it all; every job must have ended. */
void dict_free(dict_t *d);

dict_counters_t *dict_counters(dict_t *d);

/* Is the file version st, served for scope, an indexed dictionary?  1 or 0. */
int dict_indexed(dict_t *d, const struct stat *st, const char *scope);

/* The dictionary with this hash, or NULL (counted as unknown). */
const dict_entry_t *dict_find(dict_t *d, const uint8_t hash[DCZ_HASH_LEN]);

/* e, from dict_find, is no longer what was hashed: forget it (counted as stale). */
void dict_forget(dict_t *d, const dict_entry_t *e);

/*
 * The delta of the file version st against the dictionary hash: a malloc'd
 * copy of its dcz body (header and frame) with *len set, the caller's to
 * free; NULL with errno ENOENT (not made yet), ERANGE (useless: serve as
 * before) or ENOMEM.
 */
uint8_t *dict_delta_copy(dict_t *d, const uint8_t hash[DCZ_HASH_LEN], const struct stat *st,
                         size_t *len);

/*
 * Jobs.  dict_hash_begin (loop) registers the hashing of the file open on fd
 * (version st, at most DICT_MAX bytes, at rel) to index it for scope with
 * the match pattern match; dict_delta_begin the delta of the file on fd
 * (version st) against the dictionary e, open on dfd (the caller checked
 * that its version is e's).  Descriptors are duplicated: the caller's may
 * close.  Both decline (NULL) when the same work is in flight, when
 * DICT_INFLIGHT bytes are (skipped_busy), when a size is out of bounds, or
 * on ENOMEM.  dict_run (any thread) does the work; dict_end (loop; also
 * when dict_run never ran) enters the result and frees the job.
 */
dict_job_t *dict_hash_begin(dict_t *d, int fd, const struct stat *st, const char *rel,
                            const char *scope, const char *match, size_t match_len);
dict_job_t *dict_delta_begin(dict_t *d, const dict_entry_t *e, int dfd, int fd,
                             const struct stat *st);

/*
 * dict_scan_begin: the hashing of the files in the directory open on dirfd
 * (version dst, at rel with its '/', "" for the top) that the .dictionary
 * text[0..n) names with a match that fits path, for scope: at most
 * DICT_SCAN_FILES files, DICT_SCAN_BYTES bytes, each a world-readable
 * regular file of at most DICT_MAX bytes (the way to it is the directory's,
 * which was served from).  Declined (NULL), besides as above, when this
 * directory version was scanned for scope already (the last DICT_SCANNED
 * are remembered): a client's unknown hashes do not make it hash again.
 */
#define DICT_SCAN_FILES 16
#define DICT_SCAN_BYTES (32u << 20)
#define DICT_SCANNED 32
dict_job_t *dict_scan_begin(dict_t *d, int dirfd, const struct stat *dst, const char *rel,
                            const char *scope, const char *text, size_t n, const char *path);
void dict_run(dict_job_t *j);
void dict_end(dict_job_t *j);

/*
 * The work itself, for dict_run and the unit tests: the SHA-256 of the
 * size bytes of fd (0, or -1 with errno; ESTALE if it is shorter), and the
 * dcz body of target[0..tn) against dictionary dict[0..dn) whose hash is
 * hash: malloc'd, *len set, NULL with errno on failure.
 */
int dict_sha256(int fd, uint64_t size, uint8_t hash[DCZ_HASH_LEN]);
uint8_t *dict_dcz(const uint8_t *dict, size_t dn, const uint8_t hash[DCZ_HASH_LEN],
                  const uint8_t *target, size_t tn, int level, size_t *len);

#endif
