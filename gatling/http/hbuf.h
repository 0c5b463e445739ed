/*
 * hbuf — the one way response bytes are assembled into a fixed buffer.
 *
 * An appender that knows its end (nginx's ngx_slprintf against `last`,
 * lighttpd's buffer that refuses rather than overruns): every append checks
 * the room left; what does not fit is dropped and `over` is set, and every
 * later append is dropped too, so a caller writes a whole head and checks
 * once, at the end, whether it fits.  A head that does not fit is never sent
 * truncated: the caller answers 500 (response.c) or refuses the request.
 */
#ifndef GATLING_HBUF_H
#define GATLING_HBUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct hbuf {
    char *start, *p, *end; /* bytes go to [p, end); start for the length */
    int over;              /* something did not fit: the contents are unusable */
} hbuf_t;

/* An empty appender over buf[0..cap). */
static inline hbuf_t hb_init(char *buf, size_t cap)
{
    return (hbuf_t){.start = buf, .p = buf, .end = buf + cap};
}

/* Bytes appended so far. */
static inline size_t hb_len(const hbuf_t *b)
{
    return (size_t)(b->p - b->start);
}

/* Append s[0..n), or set over if it does not fit.  Inline: a head is
   some twenty of these. */
static inline void hb_put(hbuf_t *b, const void *s, size_t n)
{
    if (b->over || n > (size_t)(b->end - b->p)) {
        b->over = 1;
        return;
    }
    if (n) /* an absent field is {NULL, 0}: memcpy from NULL is undefined even for 0 */
        memcpy(b->p, s, n);
    b->p += n;
}

/* Append the NUL-terminated s (without the NUL).  Inline, so that the
   length of a string literal (most calls) is known at compile time. */
static inline void hb_puts(hbuf_t *b, const char *s)
{
    hb_put(b, s, strlen(s));
}

/* Append v in decimal. */
void hb_num(hbuf_t *b, uint64_t v);

/* Append t as an IMF-fixdate HTTP-date (RFC 9110 5.6.7). */
void hb_date(hbuf_t *b, time_t t);

/* Append src[0..n) percent-encoded; letters, digits and keep stay literal. */
void hb_encode(hbuf_t *b, const char *src, size_t n, const char *keep);

/*
 * NUL-terminate the contents (the NUL is not counted in hb_len).  Returns
 * the string, or NULL if anything did not fit, the NUL included.
 */
const char *hb_str(hbuf_t *b);

/*
 * The one way a heap buffer grows: room for `need` elements of `elem` bytes
 * in p, whose capacity is *cap elements, doubling from `first` so that n
 * appends cost O(n).  Returns the (maybe moved) block, or NULL (ENOMEM, also
 * when the size would overflow) with p still valid and *cap unchanged.
 */
void *hb_grow(void *p, size_t *cap, size_t need, size_t elem, size_t first);

#endif
