/* Compression dictionaries: the index, the deltas and their jobs: see dict.h. */
#include "dict.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* A delta in the cache (or the verdict that one is useless: len 0). */
typedef struct delta {
    struct delta *older, *newer;
    uint8_t hash[DCZ_HASH_LEN]; /* the dictionary's */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    size_t len;
    uint8_t data[];
} delta_t;

enum { JOB_HASH, JOB_DELTA, JOB_SCAN };

/* A dictionary a scan found and hashed. */
typedef struct found {
    uint8_t hash[DCZ_HASH_LEN];
    struct stat st;
    char *rel, *match;
} found_t;

/* A directory version scanned for a scope (the scope by its hash). */
typedef struct scanned {
    dev_t dev;
    ino_t ino;
    struct timespec mtime;
    uint64_t scope;
} scanned_t;

struct dict_job {
    dict_t *d;
    struct dict_job *next;
    int kind;
    int fd, dfd;                /* the file; the dictionary (JOB_DELTA), or -1 */
    struct stat st, dst;        /* their versions */
    uint8_t hash[DCZ_HASH_LEN]; /* JOB_DELTA: the dictionary's; JOB_HASH: the result */
    char *scope, *match, *rel;  /* JOB_HASH */
    uint8_t *out;               /* JOB_DELTA: the dcz body, outlen bytes */
    size_t outlen, bytes;
    int err;           /* the thread's: 0, or what failed (ECANCELED: never ran) */
    char *text, *path; /* JOB_SCAN: the .dictionary, the path to fit; rel, scope */
    size_t textlen;
    found_t *found; /* JOB_SCAN: the thread's, nfound of DICT_SCAN_FILES */
    size_t nfound;
};

struct dict {
    dict_entry_t *dold, *dnew; /* the index, least recently used first */
    size_t ndicts;
    delta_t *old, *new; /* the deltas, likewise */
    size_t bytes, ndeltas, max_bytes;
    dict_job_t *inflight;
    size_t inflight_bytes;
    dict_counters_t counters;
    scanned_t scanned[DICT_SCANNED]; /* a ring: the last directory versions scanned */
    size_t nscanned;
};

/* The two LRU lists share their shape: a macro each way, not two copies. */
#define LRU_UNLINK(head, tail, e) \
    do { \
        *((e)->older ? &(e)->older->newer : &(head)) = (e)->newer; \
        *((e)->newer ? &(e)->newer->older : &(tail)) = (e)->older; \
        (e)->older = (e)->newer = NULL; \
    } while (0)
#define LRU_PUSH(head, tail, e) \
    do { \
        (e)->older = (tail); \
        (e)->newer = NULL; \
        *((tail) ? &(tail)->newer : &(head)) = (e); \
        (tail) = (e); \
    } while (0)

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

dict_t *dict_new(size_t max_bytes)
{
    dict_t *d = calloc(1, sizeof *d);
    if (d)
        d->max_bytes = max_bytes ? max_bytes : DICT_CACHE_DEFAULT;
    return d;
}

static void entry_drop(dict_t *d, dict_entry_t *e)
{
    LRU_UNLINK(d->dold, d->dnew, e);
    d->ndicts--;
    free(e->rel);
    free(e->scope);
    free(e->match);
    free(e);
}

static void delta_drop(dict_t *d, delta_t *x)
{
    LRU_UNLINK(d->old, d->new, x);
    d->ndeltas--;
    d->bytes -= sizeof *x + x->len;
    free(x);
}

void dict_free(dict_t *d)
{
    if (!d)
        return;
    while (d->dold)
        entry_drop(d, d->dold);
    while (d->old)
        delta_drop(d, d->old);
    free(d);
}

dict_counters_t *dict_counters(dict_t *d)
{
    return &d->counters;
}

int dict_indexed(dict_t *d, const struct stat *st, const char *scope)
{
    for (dict_entry_t *e = d->dnew; e; e = e->older)
        if (same_file(&e->st, st) && !strcmp(e->scope, scope))
            return 1;
    return 0;
}

const dict_entry_t *dict_find(dict_t *d, const uint8_t hash[DCZ_HASH_LEN])
{
    dict_entry_t *e = d->dnew;
    while (e && memcmp(e->hash, hash, DCZ_HASH_LEN))
        e = e->older;
    if (!e) {
        d->counters.unknown++;
        return NULL;
    }
    LRU_UNLINK(d->dold, d->dnew, e);
    LRU_PUSH(d->dold, d->dnew, e);
    return e;
}

void dict_forget(dict_t *d, const dict_entry_t *e)
{
    d->counters.stale++;
    entry_drop(d, (dict_entry_t *)e);
}

static delta_t *delta_find(dict_t *d, const uint8_t hash[DCZ_HASH_LEN], const struct stat *st)
{
    for (delta_t *x = d->new; x; x = x->older)
        if (x->dev == st->st_dev && x->ino == st->st_ino && x->size == st->st_size &&
            x->mtime.tv_sec == st->st_mtim.tv_sec && x->mtime.tv_nsec == st->st_mtim.tv_nsec &&
            !memcmp(x->hash, hash, DCZ_HASH_LEN))
            return x;
    return NULL;
}

uint8_t *dict_delta_copy(dict_t *d, const uint8_t hash[DCZ_HASH_LEN], const struct stat *st,
                         size_t *len)
{
    delta_t *x = delta_find(d, hash, st);
    if (!x || !x->len) {
        errno = x ? ERANGE : ENOENT;
        return NULL;
    }
    LRU_UNLINK(d->old, d->new, x);
    LRU_PUSH(d->old, d->new, x);
    uint8_t *p = malloc(x->len);
    if (!p)
        return NULL;
    memcpy(p, x->data, x->len);
    *len = x->len;
    return p;
}

/* ---- the work, on a pool thread ---------------------------------------- */

int dict_sha256(int fd, uint64_t size, uint8_t hash[DCZ_HASH_LEN])
{
    unsigned char buf[65536];
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int err = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 ? 0 : ENOMEM;
    for (uint64_t off = 0; !err && off < size;) {
        size_t want = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
        ssize_t r = pread(fd, buf, want, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            err = r < 0 ? errno : ESTALE;
        else if (EVP_DigestUpdate(c, buf, (size_t)r) != 1)
            err = EIO;
        off += r > 0 ? (uint64_t)r : 0;
    }
    unsigned n = 0;
    if (!err && (EVP_DigestFinal_ex(c, hash, &n) != 1 || n != DCZ_HASH_LEN))
        err = EIO;
    EVP_MD_CTX_free(c);
    errno = err;
    return err ? -1 : 0;
}

/* The window: the dictionary and the file in reach, within RFC 9842's
   bound for decoders, max(8 MB, 1.25 x the dictionary). */
static int window_log(size_t dn, size_t tn)
{
    uint64_t cap = (uint64_t)dn + dn / 4, want = (uint64_t)dn + tn;
    if (cap < DICT_WINDOW_FLOOR)
        cap = DICT_WINDOW_FLOOR;
    int wlog = 10; /* ZSTD_WINDOWLOG_MIN, behind ZSTD_STATIC_LINKING_ONLY */
    while (wlog < 30 && (1ull << wlog) < want && (1ull << (wlog + 1)) <= cap)
        wlog++;
    return wlog;
}

uint8_t *dict_dcz(const uint8_t *dict, size_t dn, const uint8_t hash[DCZ_HASH_LEN],
                  const uint8_t *target, size_t tn, int level, size_t *len)
{
    size_t cap = DCZ_HEADER_LEN + ZSTD_compressBound(tn);
    uint8_t *out = malloc(cap);
    ZSTD_CCtx *z = ZSTD_createCCtx();
    size_t r = 0;
    if (!out || !z || ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_windowLog, window_log(dn, tn))) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_refPrefix(z, dict, dn)) ||
        ZSTD_isError(
            r = ZSTD_compress2(z, out + DCZ_HEADER_LEN, cap - DCZ_HEADER_LEN, target, tn))) {
        ZSTD_freeCCtx(z);
        free(out);
        errno = ENOMEM;
        return NULL;
    }
    ZSTD_freeCCtx(z);
    dcz_header(out, hash);
    *len = DCZ_HEADER_LEN + r;
    uint8_t *n = realloc(out, *len);
    return n ? n : out;
}

/* All size bytes of fd, malloc'd; NULL with errno (ESTALE: shorter). */
static uint8_t *slurp(int fd, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    for (size_t off = 0; p && off < size;) {
        ssize_t r = pread(fd, p + off, size - off, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int err = r < 0 ? errno : ESTALE;
            free(p);
            errno = err;
            return NULL;
        }
        off += (size_t)r;
    }
    return p;
}

/* Hash the file name in job j's directory if it is a dictionary whose match
   fits j's path, within the bounds; *bytes counts what was read. */
static void scan_one(dict_job_t *j, const char *name, size_t *bytes)
{
    char url[DCZ_PATTERN_MAX], value[3 * DCZ_PATTERN_MAX];
    size_t pn, rl = strlen(j->rel);
    if (name[0] == '.' || rl + 2 > sizeof url)
        return;
    url[0] = '/';
    memcpy(url + 1, j->rel, rl + 1);
    const char *m = dcz_rule_for(j->text, j->textlen, name, url, value, sizeof value)
                        ? dcz_use_match(value, &pn)
                        : NULL;
    if (!m || !dcz_match(m, pn, j->path, strlen(j->path)))
        return;
    int fd = openat(j->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st, after;
    found_t *f = &j->found[j->nfound];
    if (fd < 0)
        return;
    /* published as any file is in a directory that was served from: a
       world-readable regular file; and within the bounds */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) && st.st_size > 0 &&
        (uint64_t)st.st_size <= DICT_MAX && *bytes + (size_t)st.st_size <= DICT_SCAN_BYTES &&
        dict_sha256(fd, (uint64_t)st.st_size, f->hash) == 0 && fstat(fd, &after) == 0 &&
        same_file(&st, &after)) {
        *bytes += (size_t)st.st_size;
        f->st = st;
        f->match = strndup(m, pn);
        f->rel = malloc(rl + strlen(name) + 1);
        if (f->rel)
            strcat(strcpy(f->rel, j->rel), name);
        j->nfound++;
    }
    close(fd);
}

static void scan_run(dict_job_t *j)
{
    int fd = fcntl(j->fd, F_DUPFD_CLOEXEC, 0);
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    if (!dir) {
        if (fd >= 0)
            close(fd);
        j->err = errno;
        return;
    }
    size_t bytes = 0;
    struct dirent *de;
    while (j->nfound < DICT_SCAN_FILES && (de = readdir(dir)))
        scan_one(j, de->d_name, &bytes);
    closedir(dir);
    j->err = 0;
}

void dict_run(dict_job_t *j)
{
    if (j->kind == JOB_SCAN) {
        scan_run(j);
        return;
    }
    if (j->kind == JOB_HASH) {
        j->err = dict_sha256(j->fd, (uint64_t)j->st.st_size, j->hash) < 0 ? errno : 0;
        return;
    }
    uint8_t *dict = slurp(j->dfd, (size_t)j->dst.st_size);
    uint8_t *file = dict ? slurp(j->fd, (size_t)j->st.st_size) : NULL;
    if (file)
        j->out = dict_dcz(dict, (size_t)j->dst.st_size, j->hash, file, (size_t)j->st.st_size,
                          DICT_LEVEL, &j->outlen);
    j->err = j->out ? 0 : errno ? errno : ENOMEM;
    free(dict);
    free(file);
}

/* ---- jobs, on the loop -------------------------------------------------- */

/* Is the same work in flight?  One job per file version (and dictionary). */
static int in_flight(const dict_t *d, int kind, const struct stat *st, const uint8_t *hash)
{
    for (const dict_job_t *j = d->inflight; j; j = j->next)
        if (j->kind == kind && same_file(&j->st, st) &&
            (!hash || !memcmp(j->hash, hash, DCZ_HASH_LEN)))
            return 1;
    return 0;
}

/* A new job for fd (version st) of bytes of input, entered in flight; NULL
   when declined. */
static dict_job_t *job_new(dict_t *d, int kind, int fd, const struct stat *st, size_t bytes)
{
    if (d->inflight_bytes + bytes > DICT_INFLIGHT) {
        d->counters.skipped_busy++;
        return NULL;
    }
    dict_job_t *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->dfd = -1;
    j->err = ECANCELED; /* until dict_run has run */
    if ((j->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(j);
        return NULL;
    }
    j->d = d;
    j->kind = kind;
    j->st = *st;
    j->bytes = bytes;
    j->next = d->inflight;
    d->inflight = j;
    d->inflight_bytes += bytes;
    return j;
}

dict_job_t *dict_hash_begin(dict_t *d, int fd, const struct stat *st, const char *rel,
                            const char *scope, const char *match, size_t match_len)
{
    if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size > DICT_MAX ||
        in_flight(d, JOB_HASH, st, NULL))
        return NULL;
    char *sc = strdup(scope), *m = strndup(match, match_len), *r = strdup(rel);
    dict_job_t *j = sc && m && r ? job_new(d, JOB_HASH, fd, st, (size_t)st->st_size) : NULL;
    if (!j) {
        free(sc), free(m), free(r);
        return NULL;
    }
    j->scope = sc;
    j->match = m;
    j->rel = r;
    return j;
}

/* FNV-1a of a scope name, for the memory of scans. */
static uint64_t scope_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 0x100000001b3u;
    return h;
}

dict_job_t *dict_scan_begin(dict_t *d, int dirfd, const struct stat *dst, const char *rel,
                            const char *scope, const char *text, size_t n, const char *path)
{
    scanned_t me = {dst->st_dev, dst->st_ino, dst->st_mtim, scope_hash(scope)};
    for (size_t i = 0; i < DICT_SCANNED && i < d->nscanned; i++) {
        const scanned_t *x = &d->scanned[i];
        if (x->dev == me.dev && x->ino == me.ino && x->scope == me.scope &&
            x->mtime.tv_sec == me.mtime.tv_sec && x->mtime.tv_nsec == me.mtime.tv_nsec)
            return NULL; /* this version of the directory was scanned already */
    }
    for (const dict_job_t *o = d->inflight; o; o = o->next)
        if (o->kind == JOB_SCAN)
            return NULL; /* one at a time */
    dict_job_t *j = job_new(d, JOB_SCAN, dirfd, dst, 0);
    if (!j)
        return NULL;
    j->rel = strdup(rel);
    j->scope = strdup(scope);
    j->path = strdup(path);
    j->text = malloc(n ? n : 1);
    j->found = calloc(DICT_SCAN_FILES, sizeof *j->found);
    if (!j->rel || !j->scope || !j->path || !j->text || !j->found) {
        dict_end(j);
        return NULL;
    }
    memcpy(j->text, text, n);
    j->textlen = n;
    d->scanned[d->nscanned++ % DICT_SCANNED] = me;
    return j;
}

dict_job_t *dict_delta_begin(dict_t *d, const dict_entry_t *e, int dfd, int fd,
                             const struct stat *st)
{
    if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size > DICT_TARGET_MAX ||
        in_flight(d, JOB_DELTA, st, e->hash))
        return NULL;
    dict_job_t *j = job_new(d, JOB_DELTA, fd, st, (size_t)(st->st_size + e->st.st_size));
    if (!j)
        return NULL;
    memcpy(j->hash, e->hash, DCZ_HASH_LEN);
    j->dst = e->st;
    if ((j->dfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        dict_end(j);
        return NULL;
    }
    return j;
}

/* Index a hashed dictionary: the entry takes scope, match and rel (malloc'd;
   freed here when it cannot be made). */
static void index_put(dict_t *d, const uint8_t *hash, const struct stat *st, char *scope,
                      char *match, char *rel)
{
    for (dict_entry_t *e = d->dold, *next; e; e = next) {
        next = e->newer; /* the same hash, or an older version of the same file */
        if (!memcmp(e->hash, hash, DCZ_HASH_LEN) ||
            (e->st.st_dev == st->st_dev && e->st.st_ino == st->st_ino))
            entry_drop(d, e);
    }
    dict_entry_t *e = scope && match && rel ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        free(scope), free(match), free(rel);
        return;
    }
    while (d->ndicts >= DICT_INDEX_MAX)
        entry_drop(d, d->dold);
    memcpy(e->hash, hash, DCZ_HASH_LEN);
    e->st = *st;
    e->scope = scope;
    e->match = match;
    e->rel = rel;
    LRU_PUSH(d->dold, d->dnew, e);
    d->ndicts++;
    d->counters.hashed++;
}

/* Index what scan job j found. */
static void scan_put(dict_t *d, dict_job_t *j)
{
    for (size_t i = 0; i < j->nfound; i++) {
        found_t *f = &j->found[i];
        index_put(d, f->hash, &f->st, strdup(j->scope), f->match, f->rel);
        f->match = f->rel = NULL;
    }
}

/* Cache the delta of job j (or that it is useless). */
static void delta_put(dict_t *d, dict_job_t *j)
{
    int useless = j->outlen >= (size_t)j->st.st_size;
    size_t len = useless ? 0 : j->outlen;
    if (sizeof(delta_t) + len > d->max_bytes || delta_find(d, j->hash, &j->st))
        return;
    delta_t *x = malloc(sizeof *x + len);
    if (!x)
        return;
    memcpy(x->hash, j->hash, DCZ_HASH_LEN);
    x->dev = j->st.st_dev, x->ino = j->st.st_ino, x->size = j->st.st_size;
    x->mtime = j->st.st_mtim;
    x->len = len;
    memcpy(x->data, j->out, len);
    while (d->old && d->bytes + sizeof *x + len > d->max_bytes)
        delta_drop(d, d->old);
    LRU_PUSH(d->old, d->new, x);
    d->ndeltas++;
    d->bytes += sizeof *x + len;
    d->counters.made++;
    d->counters.useless += useless;
}

void dict_end(dict_job_t *j)
{
    dict_t *d = j->d;
    for (dict_job_t **p = &d->inflight; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            break;
        }
    d->inflight_bytes -= j->bytes;
    struct stat now; /* the file changed while the job ran: its result is no version's */
    int fresh = j->kind == JOB_SCAN || (fstat(j->fd, &now) == 0 && same_file(&now, &j->st));
    if (j->kind == JOB_DELTA && j->dfd >= 0)
        fresh = fresh && fstat(j->dfd, &now) == 0 && same_file(&now, &j->dst);
    if (fresh && !j->err && j->kind == JOB_HASH) {
        index_put(d, j->hash, &j->st, j->scope, j->match, j->rel);
        j->scope = j->match = j->rel = NULL;
    } else if (!j->err && j->kind == JOB_SCAN) {
        scan_put(d, j);
    } else if (fresh && !j->err && j->out) {
        delta_put(d, j);
    }
    if (j->fd >= 0)
        close(j->fd);
    if (j->dfd >= 0)
        close(j->dfd);
    for (size_t i = 0; j->found && i < j->nfound; i++)
        free(j->found[i].match), free(j->found[i].rel);
    free(j->found);
    free(j->scope), free(j->match), free(j->rel);
    free(j->text), free(j->path);
    free(j->out);
    free(j);
}
