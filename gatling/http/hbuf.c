/* The bounded appender: see hbuf.h. */
#include "hbuf.h"
#include "owfat.h"
#include "path.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void hb_num(hbuf_t *b, uint64_t v)
{
    char d[FMT_ULONG + 4]; /* fmt_ulonglong writes at most 20 digits */
    hb_put(b, d, fmt_ulonglong(d, (unsigned long long)v));
}

void hb_date(hbuf_t *b, time_t t)
{
    char d[40]; /* fmt_httpdate writes 29 bytes */
    hb_put(b, d, fmt_httpdate(d, t));
}

void hb_encode(hbuf_t *b, const char *src, size_t n, const char *keep)
{
    char chunk[3 * 64]; /* path_encode writes at most 3 bytes per input byte */
    for (size_t i = 0; i < n && !b->over; i += 64) {
        size_t k = n - i < 64 ? n - i : 64;
        hb_put(b, chunk, path_encode(chunk, src + i, k, keep));
    }
}

const char *hb_str(hbuf_t *b)
{
    hb_put(b, "", 1);
    if (b->over)
        return NULL;
    b->p--; /* the NUL is not part of the contents */
    return b->start;
}

void *hb_grow(void *p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : first ? first : 1;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) {
            errno = ENOMEM;
            return NULL;
        }
        c *= 2;
    }
    void *q = realloc(p, c * elem);
    if (q)
        *cap = c;
    return q;
}
