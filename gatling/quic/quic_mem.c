/*
 * quic_mem.c — large blocks paged in as used (see quic_mem.h).
 */
#ifdef HAVE_H3
#include "quic_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* The whole pages strictly inside [p, p + n) go back to the kernel: 0 with them
   in [*a, *b), or -1 (none, or madvise failed: advice, it only costs memory). */
static int page_out(void *p, size_t n, uintptr_t *a, uintptr_t *b)
{
    size_t page = page_size();
    *a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    *b = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    return *b > *a && madvise((void *)*a, *b - *a, MADV_DONTNEED) == 0 ? 0 : -1;
}

/* Which library a block is for: the allocators' user pointers. */
static char tag_ngtcp2, tag_nghttp3;
#define QUIC_MEM_NGTCP2 (&tag_ngtcp2)
#define QUIC_MEM_NGHTTP3 (&tag_nghttp3)

#ifdef QUIC_MEM_STATS
/* QUIC_MEM_STATS, a measuring build (not for production):
       CFLAGS="-O2 -g -DQUIC_MEM_STATS" make IO=epoll B=build/memstats build/memstats/gatling
   Every block the libraries hold is counted by library and by size, with its
   bytes in resident pages (mincore), how many of them are nonzero (blocks are
   handed out zeroed, so: at least what the library wrote) and up to where, and
   SIGWINCH writes the table to stderr (bench/h3idle --memstats), then the heap's
   free bytes and what malloc_trim gives back.  Each block carries a 32-byte
   header that links it into one list; the handler walks it, so send the signal
   while the server is idle. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

typedef struct mem_hdr {
    size_t n;
    const char *lib;
    struct mem_hdr *prev, *next;
} mem_hdr_t;

static mem_hdr_t mem_all = {0, NULL, &mem_all, &mem_all};
static size_t mem_allocs[2], mem_frees[2];

static int lib_of(const void *user)
{
    return user == QUIC_MEM_NGHTTP3;
}

static void *stat_malloc(size_t n, void *user)
{
    if (n > SIZE_MAX - sizeof(mem_hdr_t))
        return NULL;
    mem_hdr_t *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->n = n, h->lib = user;
    h->next = mem_all.next, h->prev = &mem_all;
    mem_all.next->prev = h, mem_all.next = h;
    mem_allocs[lib_of(user)]++;
    memset(h + 1, 0, n); /* so that the dump can tell written bytes: nonzero ones */
    return h + 1;
}

static void stat_free(void *p, void *user)
{
    if (!p)
        return;
    mem_hdr_t *h = (mem_hdr_t *)p - 1;
    h->prev->next = h->next, h->next->prev = h->prev;
    mem_frees[lib_of(user)]++;
    free(h);
}

static void *stat_calloc(size_t k, size_t n, void *user)
{
    void *p = stat_malloc(k * n, user); /* k * n checked by lazy_calloc */
    if (p)
        memset(p, 0, k * n);
    return p;
}

static void *stat_realloc(void *p, size_t n, void *user)
{
    if (!p)
        return stat_malloc(n, user);
    mem_hdr_t *h = (mem_hdr_t *)p - 1;
    void *q = stat_malloc(n, user);
    if (q) {
        memcpy(q, p, h->n < n ? h->n : n);
        stat_free(p, user);
    }
    return q;
}

/* The bytes of [p, p + n) in resident pages; *set: how many of them are nonzero,
   *ext: the offset past the last nonzero one (what the block would need). */
static size_t resident(const void *p, size_t n, size_t *set, size_t *ext)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), got = 0;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + n;
    for (; a < end; a += page) {
        unsigned char v = 0;
        if (mincore((void *)a, page, &v) == 0 && (v & 1)) {
            uintptr_t lo = a > (uintptr_t)p ? a : (uintptr_t)p;
            uintptr_t hi = a + page < end ? a + page : end;
            got += hi - lo;
            for (const unsigned char *c = (const void *)lo; c < (const unsigned char *)hi; c++)
                if (*c) {
                    (*set)++;
                    *ext = (size_t)(c + 1 - (const unsigned char *)p);
                }
        }
    }
    return got;
}

typedef struct {
    size_t n, count, bytes, res, set, ext;
    int lib;
} mem_row_t;

#define MEM_ROWS 1024

static int row_cmp(const void *x, const void *y)
{
    const mem_row_t *a = x, *b = y;
    return a->res < b->res ? 1 : a->res > b->res ? -1 : 0;
}

static size_t rss_now(void)
{
    unsigned long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void mem_dump(int sig)
{
    (void)sig;
    static mem_row_t rows[MEM_ROWS];
    size_t nrows = 0, live[2] = {0}, bytes[2] = {0}, res[2] = {0}, set[2] = {0}, ext[2] = {0};
    memset(rows, 0, sizeof rows);
    for (mem_hdr_t *h = mem_all.next; h != &mem_all; h = h->next) {
        int lib = lib_of(h->lib);
        size_t w = 0, x = 0, r = resident(h + 1, h->n, &w, &x), i = 0;
        live[lib]++, bytes[lib] += h->n, res[lib] += r, set[lib] += w, ext[lib] += x;
        while (i < nrows && (rows[i].n != h->n || rows[i].lib != lib))
            i++;
        if (i == nrows && nrows < MEM_ROWS)
            rows[nrows++] = (mem_row_t){.n = h->n, .lib = lib};
        if (i < nrows)
            rows[i].count++, rows[i].bytes += h->n, rows[i].res += r, rows[i].set += w,
                rows[i].ext += x;
    }
    qsort(rows, nrows, sizeof *rows, row_cmp);
    static const char *names[2] = {"ngtcp2", "nghttp3"};
    for (int l = 0; l < 2; l++)
        fprintf(stderr, "memstats %s: %zu live blocks, %zu B, %zu B resident, %zu B nonzero "
                "up to %zu B; %zu allocs, %zu frees in all\n", names[l], live[l], bytes[l],
                res[l], set[l], ext[l], mem_allocs[l], mem_frees[l]);
    for (size_t i = 0; i < nrows && i < 40; i++)
        fprintf(stderr, "memstats size %s %zu: %zu blocks, %zu B, %zu B resident, %zu B nonzero "
                "up to %zu B\n", names[rows[i].lib], rows[i].n, rows[i].count, rows[i].bytes,
                rows[i].res, rows[i].set, rows[i].ext);
    struct mallinfo2 mi = mallinfo2();
    fprintf(stderr, "memstats malloc: arena %zu, in use %zu, free %zu, mmapped %zu\n",
            mi.arena, mi.uordblks, mi.fordblks, mi.hblkhd);
    struct timespec t0, t1;
    size_t rss0 = rss_now();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    malloc_trim(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "memstats malloc_trim: RSS %zu -> %zu B in %ld us\n", rss0, rss_now(),
            (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
    fprintf(stderr, "memstats end\n");
}

__attribute__((constructor)) static void mem_stats_init(void)
{
    signal(SIGWINCH, mem_dump);
}
#else
#define stat_malloc(n, user) ((void)(user), malloc(n))
#define stat_free(p, user) ((void)(user), free(p))
#define stat_realloc(p, n, user) ((void)(user), realloc(p, n))
#define stat_calloc(k, n, user) ((void)(user), calloc(k, n))
#endif

static void *lazy_malloc(size_t n, void *user)
{
    uintptr_t a, b;
    void *p = stat_malloc(n, user);
    if (p && n >= QUIC_MEM_LAZY)
        (void)page_out(p, n, &a, &b);
    return p;
}

static void lazy_free(void *p, void *user)
{
    stat_free(p, user);
}

/* Zeroed: the pages given back read as zeros, so only the edges are cleared. */
static void *lazy_calloc(size_t k, size_t n, void *user)
{
    if (n && k > SIZE_MAX / n)
        return NULL;
    size_t len = k * n;
    if (len < QUIC_MEM_LAZY)
        return stat_calloc(k, n, user);
    uintptr_t a, b;
    char *p = stat_malloc(len, user);
    if (p && page_out(p, len, &a, &b) == 0) {
        memset(p, 0, a - (uintptr_t)p);
        memset((char *)b, 0, (uintptr_t)p + len - b);
    } else if (p) {
        memset(p, 0, len);
    }
    return p;
}

static void *lazy_realloc(void *p, size_t n, void *user)
{
    return stat_realloc(p, n, user);
}

const ngtcp2_mem *quic_mem_ngtcp2(void)
{
    static const ngtcp2_mem m = {QUIC_MEM_NGTCP2, lazy_malloc, lazy_free, lazy_calloc,
                                 lazy_realloc};
    return &m;
}

const nghttp3_mem *quic_mem_nghttp3(void)
{
    static const nghttp3_mem m = {QUIC_MEM_NGHTTP3, lazy_malloc, lazy_free, lazy_calloc,
                                  lazy_realloc};
    return &m;
}
#endif
