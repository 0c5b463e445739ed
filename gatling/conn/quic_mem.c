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

/* The whole pages strictly inside [p, p + n) go back to the kernel: 0 with them
   in [*a, *b), or -1 (none, or madvise failed: advice, it only costs memory). */
static int page_out(void *p, size_t n, uintptr_t *a, uintptr_t *b)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    *a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    *b = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    return *b > *a && madvise((void *)*a, *b - *a, MADV_DONTNEED) == 0 ? 0 : -1;
}

static void *lazy_malloc(size_t n, void *user)
{
    (void)user;
    uintptr_t a, b;
    void *p = malloc(n);
    if (p && n >= QUIC_MEM_LAZY)
        (void)page_out(p, n, &a, &b);
    return p;
}

static void lazy_free(void *p, void *user)
{
    (void)user;
    free(p);
}

/* Zeroed: the pages given back read as zeros, so only the edges are cleared. */
static void *lazy_calloc(size_t k, size_t n, void *user)
{
    (void)user;
    if (n && k > SIZE_MAX / n)
        return NULL;
    size_t len = k * n;
    if (len < QUIC_MEM_LAZY)
        return calloc(k, n);
    uintptr_t a, b;
    char *p = malloc(len);
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
    (void)user;
    return realloc(p, n);
}

const ngtcp2_mem *quic_mem_ngtcp2(void)
{
    static const ngtcp2_mem m = {NULL, lazy_malloc, lazy_free, lazy_calloc, lazy_realloc};
    return &m;
}

const nghttp3_mem *quic_mem_nghttp3(void)
{
    static const nghttp3_mem m = {NULL, lazy_malloc, lazy_free, lazy_calloc, lazy_realloc};
    return &m;
}
#endif
