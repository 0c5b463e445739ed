/*
 * encoding — content codings for static files.
 *
 *   - Accept-Encoding negotiation (RFC 9110 12.5.3): which coding to serve
 *     (accept.h, included here).
 *   - Precompressed siblings: name.br, name.zst, name.gz next to name.
 *   - On-the-fly gzip, zstd or brotli of compressible types (the last two
 *     through zcoder.h), with a bounded LRU cache of the compressed bytes
 *     keyed by (device, inode, size, mtime, coding).
 *   - Strong ETags for each variant, and matching of If-None-Match, If-Match
 *     and If-Range lists (RFC 9110 8.8.3, 13.1).
 *
 * Depends on zlib (-lz), zcoder.h (libzstd, libbrotlienc) and libc only;
 * no I/O besides the files it is pointed at, no globals.  The cache is for
 * one event loop (one process): it is not thread-safe.
 */
#ifndef GATLING_ENCODING_H
#define GATLING_ENCODING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "accept.h"

/*
 * Which precompressed siblings of relpath exist, among the codings in want:
 * relpath.br (ENC_BR), relpath.zst (ENC_ZSTD), relpath.gz (ENC_GZIP), looked
 * up with fstatat relative to dirfd without following a symlink as the last
 * component.  A sibling counts if it is a non-empty regular file, world
 * readable (S_IROTH, as for any published file: it lies in relpath's
 * directory, so the way to it is relpath's, which fs_public vetted) and
 * not older than orig
 * (st_mtim >= orig's, nanoseconds included: `gzip -k`, `brotli -k` and
 * `zstd` copy the original's time exactly).  relpath is relative (no
 * leading '/'), normalised, without "..": the caller's job.  One fstatat per
 * bit of want; returns the mask (0 on any error, e.g. a name too long).
 */
unsigned enc_siblings(int dirfd, const char *relpath, const struct stat *orig, unsigned want);

/*
 * Open the sibling of relpath for enc (one of ENC_GZIP/BR/ZSTD) with openat
 * relative to dirfd: read-only, non-blocking (a FIFO cannot hang us),
 * close-on-exec, O_NOFOLLOW on the last component, and check it again as
 * enc_siblings does (it may have changed since).  Returns the fd with *st
 * filled, or -1 with errno: ENOENT (missing), ELOOP (a symlink), EACCES (not
 * a world-readable regular file), ESTALE (empty or older than orig), EINVAL,
 * ENAMETOOLONG, EMFILE...  The fd is the caller's to close.
 */
int enc_open_sibling(int dirfd, const char *relpath, const struct stat *orig, int enc,
                     struct stat *st);

/*
 * On-the-fly gzip: files in [ENC_GZIP_MIN, max_file] bytes; smaller ones gain
 * nothing, bigger ones are served identity (or precompressed).  Compression
 * runs inside the event loop, once per file version: ~40 ms per MiB of text at
 * level 6 on this machine, so a miss on an 8 MiB file stalls the loop ~0.3 s
 * (pass a smaller max_file to enc_cache_new to bound that).
 */
#define ENC_GZIP_MIN 256
#define ENC_GZIP_MAX_FILE (8u << 20)
#define ENC_CACHE_DEFAULT (16u << 20)
#define ENC_GZIP_LEVEL 6

/*
 * A cached gzip body.  Users read data and len only; the rest is the cache's.
 * The entry stays valid, data included, until its user calls enc_gzip_release,
 * even if the cache evicts it or is freed meanwhile.
 */
typedef struct enc_gz {
    const unsigned char *data; /* the gzip member (RFC 1952), len bytes */
    size_t len;
    struct enc_gz *hnext;         /* hash chain */
    struct enc_gz *older, *newer; /* LRU list: oldest first */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int refs;
    int in_table; /* 0 once evicted: the last release frees it */
    int useless;  /* compressing did not shrink it: serve identity */
    int enc;      /* its coding: ENC_GZIP, ENC_BR or ENC_ZSTD (enc_coded_*) */
    unsigned char buf[];
} enc_gz_t;

typedef struct enc_cache enc_cache_t;

/*
 * A cache holding at most max_bytes (0: ENC_CACHE_DEFAULT) of entries,
 * compressing files of at most max_file bytes (0: ENC_GZIP_MAX_FILE).
 * Entries still referenced when evicted are outside the bound until released,
 * so the memory in use is max_bytes plus what responses in flight pin.
 * NULL on ENOMEM.
 */
enc_cache_t *enc_cache_new(size_t max_bytes, size_t max_file);

/* Free the cache and its idle entries; referenced ones are freed on release. */
void enc_cache_free(enc_cache_t *c);

/* Bytes (entries' data and headers) and entries in the table now. */
void enc_cache_stats(const enc_cache_t *c, size_t *bytes, size_t *entries);

/*
 * 1 if the file with Content-Type ctype and stat st would be gzipped on the
 * fly by cache c: c is not NULL (NULL: on-the-fly gzip off), st is a regular
 * file of ENC_GZIP_MIN..max_file bytes, and ctype is enc_compressible.
 */
int enc_gzip_eligible(const enc_cache_t *c, const char *ctype, const struct stat *st);

/*
 * The gzip body of the file open on fd whose stat the caller has in st, with a
 * reference taken: from the cache, or compressed now (zlib level
 * ENC_GZIP_LEVEL, read with pread, so fd's offset is untouched) and entered.
 * Compression happens in the caller's thread (see ENC_GZIP_MAX_FILE).
 * Returns NULL when the caller should serve identity, errno telling why (for
 * logs): EFBIG/ERANGE (outside the size range, or gzip would not be smaller:
 * remembered, so it is not tried again), ESTALE (the file is no longer what
 * st describes, e.g. rewritten since the caller's fstat: nothing is cached),
 * EINVAL (not a regular file), ENOMEM, or a pread error.
 */
enc_gz_t *enc_gzip_get(enc_cache_t *c, int fd, const struct stat *st);

/*
 * The event loop's way, where compressing must not happen on the loop:
 * enc_gzip_lookup only looks, taking a reference on a hit; NULL with errno
 * ENOENT when the file is not cached yet, ERANGE when gzip does not shrink
 * it.  On ENOENT, enc_gzip_begin (loop) registers a compression of the file
 * open on fd (duplicated: the caller's may close), enc_gzip_run (any thread)
 * compresses, touching nothing but the job, and enc_gzip_end (loop; also
 * when run never ran) enters the result in the cache and frees the job.
 * begin declines (NULL) when this file version is being compressed already,
 * when ENC_GZIP_INFLIGHT bytes of input are in flight or enc_gzip_limit's
 * count of compressions is (both counted as skipped_busy), or on ENOMEM:
 * serve identity then.  enc_gzip_run paces itself when the machine is
 * saturated: when its thread waits for a CPU longer than it runs, it sleeps
 * so as to use about 5% of a CPU, for 1 s at most (counted in paced,
 * paced_ms).
 * Every job must be ended before the cache is freed.
 */
#define ENC_GZIP_INFLIGHT (16u << 20)

typedef struct enc_gz_counters {
    uint64_t skipped_busy; /* misses served identity: enough compressions in flight */
    uint64_t paced;        /* compressions that slept to yield a saturated CPU */
    uint64_t paced_ms;     /* and how long they slept in all */
} enc_gz_counters_t;

typedef struct enc_gzjob enc_gzjob_t;
enc_gz_t *enc_gzip_lookup(enc_cache_t *c, const struct stat *st);
enc_gzjob_t *enc_gzip_begin(enc_cache_t *c, int fd, const struct stat *st);
void enc_gzip_run(enc_gzjob_t *g);
void enc_gzip_end(enc_gzjob_t *g);

/*
 * The same for each coding enc (ENC_GZIP, ENC_BR, ENC_ZSTD), each version of
 * a file keeping one entry per coding: zstd and brotli at site/zcoder.h's
 * levels, gzip at ENC_GZIP_LEVEL.  enc_gzip_lookup and enc_gzip_begin are
 * these with ENC_GZIP.
 */
enc_gz_t *enc_coded_lookup(enc_cache_t *c, const struct stat *st, int enc);
enc_gzjob_t *enc_coded_begin(enc_cache_t *c, int fd, const struct stat *st, int enc);

/* At most jobs compressions in flight (0, the default: no limit but the bytes). */
void enc_gzip_limit(enc_cache_t *c, unsigned jobs);

/* The counters above since the cache was made, for /server-status. */
enc_gz_counters_t enc_gzip_counters(const enc_cache_t *c);

/* Drop a reference taken by enc_gzip_get; NULL is a no-op. */
void enc_gzip_release(enc_gz_t *e);

/* Room for any ETag enc_etag writes, NUL included. */
#define ENC_ETAG_MAX 64

/*
 * Write the strong ETag of the file with stat st, served with coding enc,
 * into buf (ENC_ETAG_MAX bytes) and NUL-terminate it; returns its length.
 * Identity: "<hex inode>-<hex size>-<hex mtime seconds>", quotes included;
 * a coding adds "-gz", "-br" or "-zst" inside the quotes, so every variant
 * has its own strong ETag (http/conditional.h compares them).  For a
 * precompressed sibling pass the sibling's stat (its bytes are what the tag
 * must identify: a regenerated sibling, or a switch between sibling and
 * on-the-fly gzip, then changes the tag); for on-the-fly gzip pass the
 * original's.
 */
size_t enc_etag(char *buf, const struct stat *st, int enc);

#endif
