/* Precompressed siblings, the gzip cache and ETags (Accept-Encoding: accept.c): see encoding.h. */
#include "encoding.h"
#include "zcoder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---- Precompressed siblings --------------------------------------------- */

static int sibling_path(char *buf, size_t cap, const char *relpath, int enc)
{
    const char *suf = enc_suffix(enc);
    /* An absolute path would make openat ignore dirfd: never leave the root. */
    if (!suf || !relpath || !*relpath || relpath[0] == '/') {
        errno = EINVAL;
        return -1;
    }
    int r = snprintf(buf, cap, "%s%s", relpath, suf);
    if (r < 0 || (size_t)r >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static int mtime_ge(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* 0 if the sibling with stat st may be served for orig, else the errno why not. */
static int sibling_check(const struct stat *st, const struct stat *orig)
{
    /* Only its owner's: a sibling an FTP upload (or any other user with write
       access to the directory) made must not replace the page (issue 52). */
    if (!S_ISREG(st->st_mode) || !(st->st_mode & S_IROTH) || st->st_uid != orig->st_uid)
        return EACCES;
    /* An empty file is no valid br, zstd or gzip stream; an older one is stale. */
    if (st->st_size == 0 || !mtime_ge(&st->st_mtim, &orig->st_mtim))
        return ESTALE;
    return 0;
}

unsigned enc_siblings(int dirfd, const char *relpath, const struct stat *orig, unsigned want)
{
    static const int order[] = {ENC_BR, ENC_ZSTD, ENC_GZIP};
    char path[PATH_MAX];
    unsigned mask = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        struct stat st;
        if (!(want & order[k]))
            continue;
        if (sibling_path(path, sizeof path, relpath, order[k]) < 0)
            return 0;
        if (!fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) && !sibling_check(&st, orig))
            mask |= order[k];
    }
    return mask;
}

int enc_open_sibling(int dirfd, const char *relpath, const struct stat *orig, int enc,
                     struct stat *st)
{
    char path[PATH_MAX];
    if (sibling_path(path, sizeof path, relpath, enc) < 0)
        return -1;
    int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    int err = fstat(fd, st) < 0 ? errno : sibling_check(st, orig);
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* ---- The gzip cache ----------------------------------------------------- */

/* A compression running on a worker thread (enc_gzip_begin). */
struct enc_gzjob {
    enc_cache_t *cache;
    struct enc_gzjob *next; /* the cache's list of compressions in flight */
    int fd;                 /* a dup: the caller's may be closed meanwhile */
    struct stat st;
    int enc;           /* the coding (ENC_GZIP, ENC_BR, ENC_ZSTD) */
    enc_gz_t *result;  /* the thread's, handed to the cache by enc_gzip_end */
    uint64_t paced_ns; /* the thread's: time it slept to yield the CPU (pace()) */
};

struct enc_cache {
    enc_gz_t **bucket;
    size_t nbucket; /* a power of two */
    size_t nentries;
    enc_gz_t *oldest, *newest;
    size_t bytes; /* of the entries in the table */
    size_t max_bytes, max_file;
    enc_gzjob_t *inflight; /* compressions running, at most ENC_GZIP_INFLIGHT bytes of input */
    size_t inflight_bytes;
    unsigned njobs, max_jobs; /* compressions in flight, and the most allowed (0: any) */
    enc_gz_counters_t counters;
};

/* deflate's avail_out is a 32-bit uInt: keep every buffer well below that. */
#define ENC_GZIP_MAX_FILE_CAP (1u << 30)

/* Versions of one file (dev, ino) share a chain, so a new one can drop the old. */
static size_t gz_hash(dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15u ^ (uint64_t)dev;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9u;
    return (size_t)(h ^ (h >> 29));
}

static enc_gz_t **chain(enc_cache_t *c, dev_t dev, ino_t ino)
{
    return &c->bucket[gz_hash(dev, ino) & (c->nbucket - 1)];
}

static size_t entry_bytes(const enc_gz_t *e)
{
    return sizeof *e + e->len;
}

static int same_version(const enc_gz_t *e, const struct stat *st)
{
    return e->size == st->st_size && e->mtime.tv_sec == st->st_mtim.tv_sec &&
           e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static void lru_unlink(enc_cache_t *c, enc_gz_t *e)
{
    *(e->older ? &e->older->newer : &c->oldest) = e->newer;
    *(e->newer ? &e->newer->older : &c->newest) = e->older;
    e->older = e->newer = NULL;
}

static void lru_push(enc_cache_t *c, enc_gz_t *e)
{
    e->older = c->newest;
    e->newer = NULL;
    *(c->newest ? &c->newest->newer : &c->oldest) = e;
    c->newest = e;
}

/* Take e out of the table; a response still sending it frees it on release. */
static void evict(enc_cache_t *c, enc_gz_t *e)
{
    enc_gz_t **pp = chain(c, e->dev, e->ino);
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    e->hnext = NULL;
    lru_unlink(c, e);
    c->bytes -= entry_bytes(e);
    c->nentries--;
    e->in_table = 0;
    if (e->refs == 0)
        free(e);
}

/* Double the buckets when chains grow long; on ENOMEM they just stay long. */
static void maybe_grow(enc_cache_t *c)
{
    if (c->nentries < c->nbucket)
        return;
    size_t nb = c->nbucket * 2;
    enc_gz_t **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < c->nbucket; i++) {
        for (enc_gz_t *e = c->bucket[i], *next; e; e = next) {
            next = e->hnext;
            size_t h = gz_hash(e->dev, e->ino) & (nb - 1);
            e->hnext = b[h];
            b[h] = e;
        }
    }
    free(c->bucket);
    c->bucket = b;
    c->nbucket = nb;
}

/* Enter e (not yet in the table), evicting the oldest entries to make room. */
static void insert(enc_cache_t *c, enc_gz_t *e)
{
    size_t need = entry_bytes(e);
    if (need > c->max_bytes)
        return; /* in_table stays 0: freed when its user releases it */
    /* e was compressed from the file as it is now: other versions are dead
       (this version's other codings live on). */
    for (enc_gz_t *o = *chain(c, e->dev, e->ino), *next; o; o = next) {
        next = o->hnext;
        if (o->dev == e->dev && o->ino == e->ino &&
            (o->size != e->size || o->mtime.tv_sec != e->mtime.tv_sec ||
             o->mtime.tv_nsec != e->mtime.tv_nsec || o->enc == e->enc))
            evict(c, o);
    }
    while (c->oldest && c->bytes + need > c->max_bytes)
        evict(c, c->oldest);
    maybe_grow(c);
    enc_gz_t **pp = chain(c, e->dev, e->ino);
    e->hnext = *pp;
    *pp = e;
    lru_push(c, e);
    c->bytes += need;
    c->nentries++;
    e->in_table = 1;
}

enc_cache_t *enc_cache_new(size_t max_bytes, size_t max_file)
{
    enc_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nbucket = 64;
    c->bucket = calloc(c->nbucket, sizeof *c->bucket);
    if (!c->bucket) {
        free(c);
        return NULL;
    }
    c->max_bytes = max_bytes ? max_bytes : ENC_CACHE_DEFAULT;
    c->max_file = max_file ? max_file : ENC_GZIP_MAX_FILE;
    if (c->max_file > ENC_GZIP_MAX_FILE_CAP)
        c->max_file = ENC_GZIP_MAX_FILE_CAP;
    return c;
}

void enc_cache_free(enc_cache_t *c)
{
    if (!c)
        return;
    for (enc_gz_t *e = c->oldest, *next; e; e = next) {
        next = e->newer;
        e->in_table = 0;
        if (e->refs == 0)
            free(e);
    }
    free(c->bucket);
    free(c);
}

void enc_cache_stats(const enc_cache_t *c, size_t *bytes, size_t *entries)
{
    if (bytes)
        *bytes = c->bytes;
    if (entries)
        *entries = c->nentries;
}

int enc_gzip_eligible(const enc_cache_t *c, const char *ctype, const struct stat *st)
{
    return c && S_ISREG(st->st_mode) && st->st_size >= ENC_GZIP_MIN &&
           (uint64_t)st->st_size <= c->max_file && enc_compressible(ctype);
}

/* Make room in e for at least one more output byte, keeping what zs wrote. */
static enc_gz_t *gz_grow(enc_gz_t *e, size_t *cap, z_stream *zs)
{
    size_t done = *cap - zs->avail_out, ncap = *cap + *cap / 2 + 4096;
    enc_gz_t *n = realloc(e, sizeof *n + ncap);
    if (!n)
        return NULL;
    zs->next_out = n->buf + done;
    zs->avail_out = (uInt)(ncap - done);
    *cap = ncap;
    return n;
}

/*
 * Pacing of a compression on a worker thread (enc_gzip_run).  The pool's
 * threads run at SCHED_IDLE, so the event loop's CPU comes first; yet on a
 * saturated machine what they take still counts: for other processes, for
 * the other guests of a virtual machine, for the caches (issue 23 item 5 saw
 * 20 keep-alive clients lose half their req/s to two clients of uncached
 * 1 MiB files).  A thread that waits for a CPU longer than it runs is the
 * sign of that saturation (a cold disk read looks the same, and is paced
 * too): then the compression sleeps 19 times the CPU time it just used, so
 * it holds about 5% of a CPU while the machine is busy and runs at full
 * speed when it is not.  Its client waits longer for the gzip, up to a
 * second more: past 1 s of sleep a compression finishes unpaced, so that it
 * stays well within the head deadline (-s) and a shutdown is not held up.
 * Password checks, one crypt(3) call each, are never paced.
 * bench/compress-load: the threads' CPU under that load fell from 0.17-0.26
 * to 0.06-0.09 of a CPU (no change in wrk's numbers could be told from the
 * shared machine's noise).
 */
#define ENC_PACE_SLICE_NS 2000000ll     /* judge over at least 2 ms of CPU */
#define ENC_PACE_SLEEP_MAX 100000000ll  /* never sleep more than 0.1 s at once */
#define ENC_PACE_TOTAL_MAX 1000000000ll /* nor more than about 1 s in all */
#define ENC_PACE_FACTOR 19              /* sleep 19x the CPU used: a 5% share */

typedef struct pace {
    struct timespec wall, cpu; /* at the start of the slice */
    uint64_t slept_ns;
} pace_t;

static long long ts_ns(const struct timespec *t)
{
    return (long long)t->tv_sec * 1000000000ll + t->tv_nsec;
}

static void pace_start(pace_t *p)
{
    clock_gettime(CLOCK_MONOTONIC, &p->wall);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &p->cpu);
}

static void pace(pace_t *p)
{
    struct timespec w, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    long long cpu = ts_ns(&t) - ts_ns(&p->cpu);
    if (cpu < ENC_PACE_SLICE_NS || p->slept_ns >= (uint64_t)ENC_PACE_TOTAL_MAX)
        return;
    clock_gettime(CLOCK_MONOTONIC, &w);
    if (ts_ns(&w) - ts_ns(&p->wall) > 2 * cpu) { /* runnable, not running: CPUs are busy */
        long long ns = cpu * ENC_PACE_FACTOR;
        if (ns > ENC_PACE_SLEEP_MAX)
            ns = ENC_PACE_SLEEP_MAX;
        struct timespec d = {(time_t)(ns / 1000000000ll), (long)(ns % 1000000000ll)};
        while (nanosleep(&d, &d) < 0 && errno == EINTR)
            ;
        p->slept_ns += (uint64_t)ns;
    }
    pace_start(p);
}

/* The file's next piece at off (at most cap bytes, none past size): its
   length, or 0 with *err set (a read's errno, or ESTALE: a file that shrank
   under us is no longer the one its stat described). */
static size_t read_piece(int fd, unsigned char *in, size_t cap, off_t off, off_t size, int *err)
{
    size_t want = (uint64_t)(size - off) < cap ? (size_t)(size - off) : cap;
    ssize_t r;
    while ((r = pread(fd, in, want, off)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        *err = r < 0 ? errno : ESTALE;
    return r > 0 ? (size_t)r : 0;
}

/*
 * Deflate size bytes of fd into e->buf (capacity *cap, grown as needed).
 * Returns e (perhaps moved) with e->len set, or NULL with errno; e is freed.
 */
static enc_gz_t *gz_deflate(enc_gz_t *e, size_t *cap, int fd, off_t size, pace_t *p)
{
    unsigned char in[32768];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* windowBits 15 + 16: a gzip wrapper (RFC 1952) around the deflate data. */
    if (deflateInit2(&zs, ENC_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(e);
        errno = ENOMEM;
        return NULL;
    }
    zs.next_out = e->buf;
    zs.avail_out = (uInt)*cap;
    off_t off = 0;
    int zr = Z_OK, err = 0;
    while (zr != Z_STREAM_END && !err) {
        if (zs.avail_in == 0 && off < size) {
            size_t r = read_piece(fd, in, sizeof in, off, size, &err);
            if (!r)
                break;
            zs.next_in = in;
            zs.avail_in = (uInt)r;
            off += r;
            if (p)
                pace(p);
        }
        enc_gz_t *n = zs.avail_out ? e : gz_grow(e, cap, &zs);
        if (!n) {
            err = ENOMEM;
            break;
        }
        e = n;
        zr = deflate(&zs, off == size ? Z_FINISH : Z_NO_FLUSH);
        if (zr == Z_STREAM_ERROR || (zr == Z_BUF_ERROR && zs.avail_out && !zs.avail_in))
            err = EIO; /* cannot happen with a sane zlib; never spin */
    }
    e->len = zs.total_out;
    deflateEnd(&zs);
    if (err) {
        free(e);
        errno = err;
        return NULL;
    }
    return e;
}

/* zc_run's sink for zc_code: the bytes appended to the entry, grown. */
typedef struct zc_fill {
    enc_gz_t *e;
    size_t cap;
} zc_fill_t;

static int zc_append(void *arg, char *p, size_t n)
{
    zc_fill_t *f = arg;
    if (f->e->len + n > f->cap) {
        size_t ncap = f->cap + f->cap / 2 + n;
        enc_gz_t *m = realloc(f->e, sizeof *m + ncap);
        if (!m) {
            free(p);
            return -1;
        }
        f->e = m, f->cap = ncap;
    }
    memcpy(f->e->buf + f->e->len, p, n);
    f->e->len += n;
    free(p);
    return 0;
}

/* zstd or brotli of size bytes of fd into e (site/zcoder.h's levels, a
   budget of the job's own): as gz_deflate. */
static enc_gz_t *zc_code(enc_gz_t *e, size_t cap, int fd, off_t size, pace_t *p, int enc)
{
    unsigned char in[32768];
    zc_budget_t b = {0};
    zc_fill_t f = {e, cap};
    zc_t *z = zc_new(enc, (uint64_t)size, &b);
    int err = z ? 0 : ENOMEM;
    for (off_t off = 0; !err && off < size;) {
        size_t r = read_piece(fd, in, sizeof in, off, size, &err);
        if (!r)
            break;
        off += (off_t)r;
        if (zc_run(z, in, r, off == size ? ZC_END : ZC_MORE, zc_append, &f) < 0)
            err = errno ? errno : EIO;
        if (p)
            pace(p);
    }
    zc_free(z);
    if (err) {
        free(f.e);
        errno = err;
        return NULL;
    }
    return f.e;
}

_Static_assert((int)ZC_GZIP == ENC_GZIP && (int)ZC_BR == ENC_BR && (int)ZC_ZSTD == ENC_ZSTD,
               "zcoder.h's codings are encoding.h's bits");

/* A new, unreferenced, untabled entry holding fd's contents coded in enc
   (gzip, zstd, br); paced if p. */
static enc_gz_t *gz_compress(int fd, const struct stat *st, pace_t *p, int enc)
{
    /* Room for incompressible input too (stored blocks add ~0.03% and the
       gzip wrapper 18 bytes), so gz_grow is a rare path; shrunk below. */
    size_t cap = (size_t)st->st_size + (size_t)st->st_size / 1000 + 64;
    enc_gz_t *e = malloc(sizeof *e + cap);
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    if (enc == ENC_GZIP)
        e = gz_deflate(e, &cap, fd, st->st_size, p);
    else
        e = zc_code(e, cap, fd, st->st_size, p, enc);
    if (!e)
        return NULL;
    e->enc = enc;
    /* Written to since the caller's fstat?  Then the bytes belong to no ETag
       the caller could send: refuse rather than cache a mix. */
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    e->size = st->st_size;
    e->mtime = st->st_mtim;
    struct stat now;
    int err = fstat(fd, &now) < 0 ? errno : 0;
    if (!err && (now.st_dev != e->dev || now.st_ino != e->ino || !same_version(e, &now)))
        err = ESTALE;
    if (err) {
        free(e);
        errno = err;
        return NULL;
    }
    e->useless = e->len >= (size_t)st->st_size;
    if (e->useless)
        e->len = 0; /* remember the verdict, not the bytes */
    enc_gz_t *n = realloc(e, sizeof *e + e->len);
    if (n)
        e = n;
    e->data = e->useless ? NULL : e->buf;
    return e;
}

/* The table's entry for this version of the file, or NULL. */
static enc_gz_t *find(enc_cache_t *c, const struct stat *st, int enc)
{
    for (enc_gz_t *e = *chain(c, st->st_dev, st->st_ino); e; e = e->hnext)
        if (e->dev == st->st_dev && e->ino == st->st_ino && same_version(e, st) && e->enc == enc)
            return e;
    return NULL;
}

enc_gz_t *enc_gzip_get(enc_cache_t *c, int fd, const struct stat *st)
{
    if (!c || !st || !S_ISREG(st->st_mode)) {
        errno = EINVAL;
        return NULL;
    }
    if (st->st_size < ENC_GZIP_MIN || (uint64_t)st->st_size > c->max_file) {
        errno = st->st_size < ENC_GZIP_MIN ? ERANGE : EFBIG;
        return NULL;
    }
    enc_gz_t *e = find(c, st, ENC_GZIP);
    if (e) {
        lru_unlink(c, e);
        lru_push(c, e);
    } else {
        if (!(e = gz_compress(fd, st, NULL, ENC_GZIP)))
            return NULL;
        insert(c, e);
    }
    if (e->useless) {
        if (!e->in_table)
            free(e);
        errno = ERANGE;
        return NULL;
    }
    e->refs++;
    return e;
}


enc_gz_t *enc_gzip_lookup(enc_cache_t *c, const struct stat *st)
{
    return enc_coded_lookup(c, st, ENC_GZIP);
}

enc_gz_t *enc_coded_lookup(enc_cache_t *c, const struct stat *st, int enc)
{
    if (!c || !st || !S_ISREG(st->st_mode)) {
        errno = EINVAL;
        return NULL;
    }
    enc_gz_t *e = find(c, st, enc);
    if (!e) {
        errno = ENOENT;
        return NULL;
    }
    lru_unlink(c, e);
    lru_push(c, e);
    if (e->useless) {
        errno = ERANGE;
        return NULL;
    }
    e->refs++;
    return e;
}

enc_gzjob_t *enc_gzip_begin(enc_cache_t *c, int fd, const struct stat *st)
{
    return enc_coded_begin(c, fd, st, ENC_GZIP);
}

enc_gzjob_t *enc_coded_begin(enc_cache_t *c, int fd, const struct stat *st, int enc)
{
    if (!c || !st || !S_ISREG(st->st_mode) || st->st_size < ENC_GZIP_MIN ||
        (uint64_t)st->st_size > c->max_file || !(enc & ENC_ALL) || find(c, st, enc))
        return NULL;
    for (enc_gzjob_t *g = c->inflight; g; g = g->next)
        if (g->enc == enc && g->st.st_dev == st->st_dev && g->st.st_ino == st->st_ino &&
            g->st.st_size == st->st_size && g->st.st_mtim.tv_sec == st->st_mtim.tv_sec &&
            g->st.st_mtim.tv_nsec == st->st_mtim.tv_nsec)
            return NULL; /* already being compressed: one job per file version */
    if (c->inflight_bytes + (size_t)st->st_size > ENC_GZIP_INFLIGHT ||
        (c->max_jobs && c->njobs >= c->max_jobs)) {
        c->counters.skipped_busy++;
        return NULL;
    }
    enc_gzjob_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if ((g->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(g);
        return NULL;
    }
    g->cache = c;
    g->st = *st;
    g->enc = enc;
    g->next = c->inflight;
    c->inflight = g;
    c->inflight_bytes += (size_t)st->st_size;
    c->njobs++;
    return g;
}

void enc_gzip_run(enc_gzjob_t *g)
{
    pace_t p = {0};
    pace_start(&p);
    g->result = gz_compress(g->fd, &g->st, &p, g->enc);
    g->paced_ns = p.slept_ns;
}

void enc_gzip_end(enc_gzjob_t *g)
{
    enc_cache_t *c = g->cache;
    for (enc_gzjob_t **p = &c->inflight; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    c->inflight_bytes -= (size_t)g->st.st_size;
    c->njobs--;
    c->counters.paced += g->paced_ns != 0;
    c->counters.paced_ms += g->paced_ns / 1000000;
    if (g->result && !find(c, &g->st, g->enc))
        insert(c, g->result);
    else
        free(g->result); /* not run, failed (ESTALE, ENOMEM), or raced */
    close(g->fd);
    free(g);
}

void enc_gzip_limit(enc_cache_t *c, unsigned jobs)
{
    c->max_jobs = jobs;
}

enc_gz_counters_t enc_gzip_counters(const enc_cache_t *c)
{
    return c->counters;
}

void enc_gzip_release(enc_gz_t *e)
{
    if (e && --e->refs == 0 && !e->in_table)
        free(e);
}

/* ---- ETags ---------------------------------------------------------------- */

size_t enc_etag(char *buf, const struct stat *st, int enc)
{
    const char *suf = enc_suffix(enc);
    int r = snprintf(buf, ENC_ETAG_MAX, "\"%llx-%llx-%llx%s%s\"", (unsigned long long)st->st_ino,
                     (unsigned long long)st->st_size, (unsigned long long)st->st_mtim.tv_sec,
                     suf ? "-" : "", suf ? suf + 1 : "");
    return r < 0 ? 0 : (size_t)r;
}
