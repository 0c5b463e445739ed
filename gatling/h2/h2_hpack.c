/* The HPACK encoder of responses: see h2_hpack.h. */
#include "h2_hpack.h"

#include <string.h>

/* RFC 7541 Appendix A: the static table's names, index 1 first. */
static const char static_names[][28] = {
    ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status",
    ":status", ":status", ":status", ":status", ":status", ":status", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "accept",
    "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
    "content-disposition", "content-encoding", "content-language", "content-length",
    "content-location", "content-range", "content-type", "cookie", "date", "etag", "expect",
    "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
    "if-unmodified-since", "last-modified", "link", "location", "max-forwards",
    "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
    "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent",
    "vary", "via", "www-authenticate"};
#define STATIC_N (sizeof static_names / sizeof *static_names)
#define IDX_STATUS 8
#define IDX_CONTENT_LENGTH 28

/* ":status" values with an entry of their own (indexes 8-14). */
static const char status_codes[][4] = {"200", "204", "206", "304", "400", "404", "500"};

void h2e_init(h2e_t *e, uint32_t peer)
{
    memset(e, 0, offsetof(h2e_t, slot)); /* the hints too: 0 is none */
    e->max = H2E_DEFAULT;
    e->want = e->low = peer < H2E_TABLE ? peer : H2E_TABLE;
}

void h2e_peer_table(h2e_t *e, uint32_t peer)
{
    e->want = peer < H2E_TABLE ? peer : H2E_TABLE;
    if (e->want < e->low)
        e->low = e->want;
}

size_t h2e_bound(const h2_field_t *f, size_t n)
{
    size_t b = 2 * 5; /* two size updates */
    for (size_t i = 0; i < n; i++)
        b += 12 + f[i].nlen + f[i].vlen; /* a byte, two integers of 5, the strings */
    return b;
}

/* An integer of prefix bits after the high bits in first (5.1). */
static uint8_t *put_int(uint8_t *p, uint8_t first, unsigned prefix, size_t v)
{
    size_t lim = ((size_t)1 << prefix) - 1;
    if (v < lim) {
        *p++ = (uint8_t)(first | v);
        return p;
    }
    *p++ = (uint8_t)(first | lim);
    for (v -= lim; v >= 128; v >>= 7)
        *p++ = (uint8_t)(0x80 | (v & 0x7f));
    *p++ = (uint8_t)v;
    return p;
}

/* A string literal, not Huffman coded (5.2). */
static uint8_t *put_str(uint8_t *p, const char *s, size_t n)
{
    p = put_int(p, 0, 7, n);
    memcpy(p, s, n);
    return p + n;
}

static unsigned static_name(const char *name, size_t nlen)
{
    /* rows of 28 bytes (the longest name is 27): in bounds up to [nlen], and
       no strlen() of each of the 61 for every literal */
    if (!nlen || nlen >= sizeof *static_names)
        return 0;
    for (unsigned i = 0; i < STATIC_N; i++)
        if (static_names[i][0] == name[0] && static_names[i][nlen - 1] && !static_names[i][nlen] &&
            !memcmp(static_names[i], name, nlen))
            return i + 1;
    return 0;
}

/* f's 8-bit hash: from its lengths and a few of its bytes, so that the same
   field always hashes the same (the Date of each second too).  Its low bits
   pick f's two hints, all of them its count of live entries. */
static unsigned mix(const h2_field_t *f)
{
    if (!f->nlen)
        return 0;
    uint32_t h = (uint32_t)f->nlen << 24 ^ (uint32_t)f->vlen << 12 ^
                 (uint32_t)(uint8_t)f->name[0] << 8 ^ (uint8_t)f->name[f->nlen - 1];
    if (f->vlen)
        h ^= (uint32_t)(uint8_t)f->value[0] << 16 ^ (uint32_t)(uint8_t)f->value[f->vlen - 1] << 4;
    return h * 0x9e3779b1u >> 24;
}

/* The field entry q holds. */
static h2_field_t slot_field(const h2e_t *e, uint32_t q)
{
    const h2e_slot_t *s = &e->slot[q % H2E_SLOTS];
    return (h2_field_t){.name = e->buf + s->off, .nlen = s->nlen,
                        .value = e->buf + s->off + s->nlen, .vlen = s->vlen};
}

/* The oldest entry leaves the table (4.4). */
static void evict(h2e_t *e)
{
    const h2e_slot_t *s = &e->slot[e->first % H2E_SLOTS];
    h2_field_t f = slot_field(e, e->first);
    e->live[mix(&f)]--;
    e->size -= 32u + s->nlen + s->vlen;
    if (++e->first == e->ins)
        e->tail = 0;
}

/* The size updates owed, first the least the size was meant to be, then
   what it is to be (4.2), the table evicting as the decoder's does. */
static uint8_t *put_update(h2e_t *e, uint8_t *p, uint32_t max)
{
    e->max = max;
    while (e->size > e->max)
        evict(e);
    return put_int(p, 0x20, 5, max);
}

static uint8_t *put_updates(h2e_t *e, uint8_t *p)
{
    if (e->low != e->max)
        p = put_update(e, p, e->low);
    if (e->want != e->max)
        p = put_update(e, p, e->want);
    e->low = e->max;
    return p;
}

/* The first of f's two hints: from its lengths and a few of its bytes, so
   that the same field always hashes the same (the Date of each second too:
   its newest entry is the one hinted). */
static unsigned hash(unsigned m)
{
    return m % (H2E_HINTS / 2) * 2;
}

/* Entry q is now the newest of f's two hints h, h + 1 (the other kept). */
static void hint(h2e_t *e, unsigned h, uint32_t q)
{
    e->hint[h + 1] = e->hint[h], e->hint[h] = q + 1; /* never q already: a new entry, or
                                                           one the hints missed (find) */
}

/* 8 (or 4) bytes at p, as a word to compare. */
static uint64_t load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t load4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The bytes 0, n/2 and n-1 of p (n from 1 to 3: every byte) as one word,
   so that a short string is compared in one test. */
static uint32_t small3(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    return u[0] | (uint32_t)u[n / 2] << 8 | (uint32_t)u[n - 1] << 16;
}

/* a[0..n) == b[0..n)?  Inline, 8 bytes a step: the strings are short, and
   memcmp's call was most of a lookup's cost.  The last word is the last 8
   bytes, overlapping the one before (no byte loop for the tail); under 8,
   two 4-byte words or three bytes overlap the same way. */
static int same(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load8(a + i) != load8(b + i))
                return 0;
        return load8(a + n - 8) == load8(b + n - 8);
    }
    if (n >= 4)
        return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    return !n || small3(a, n) == small3(b, n);
}

static int holds(const h2e_t *e, uint32_t q, const h2_field_t *f)
{
    const h2e_slot_t *s = &e->slot[q % H2E_SLOTS];
    return s->vlen == f->vlen && s->nlen == f->nlen &&
           same(e->buf + s->off + s->nlen, f->value, f->vlen) &&
           same(e->buf + s->off, f->name, f->nlen);
}

/* The index of the entry holding f, or 0: the hinted entry if it is live
   and holds f (a response's fields, after the first), else a search from
   the newest (the hint then names what was found). */
static size_t find(h2e_t *e, const h2_field_t *f, unsigned m, unsigned h)
{
    if (!e->live[m])
        return 0; /* no live entry hashes as f does: a new field, no search */
    for (unsigned w = h; w < h + 2; w++) {
        uint32_t q = e->hint[w] - 1;
        if (e->hint[w] && e->ins - 1 - q < e->ins - e->first && holds(e, q, f))
            return 62 + (size_t)(e->ins - 1 - q);
    }
    for (uint32_t q = e->ins; q-- != e->first;)
        if (holds(e, q, f)) {
            hint(e, h, q);
            return 62 + (size_t)(e->ins - 1 - q);
        }
    return 0;
}

/* f enters the table as the decoder's entry will (4.4): the oldest go
   until it fits; its bytes go after the others' (moved to the front of buf
   when they would pass its end: the live bytes take at most max - 32 per
   entry, so they always fit). */
static void insert(h2e_t *e, const h2_field_t *f)
{
    uint32_t need = 32u + (uint32_t)(f->nlen + f->vlen);
    while (e->size + need > e->max)
        evict(e);
    size_t len = f->nlen + f->vlen;
    if (e->tail + len > H2E_TABLE) {
        uint32_t from = e->slot[e->first % H2E_SLOTS].off;
        memmove(e->buf, e->buf + from, e->tail - from);
        for (uint32_t q = e->first; q != e->ins; q++)
            e->slot[q % H2E_SLOTS].off = (uint16_t)(e->slot[q % H2E_SLOTS].off - from);
        e->tail -= from;
    }
    h2e_slot_t *s = &e->slot[e->ins++ % H2E_SLOTS];
    *s = (h2e_slot_t){(uint16_t)e->tail, (uint16_t)f->vlen, (uint8_t)f->nlen};
    memcpy(e->buf + e->tail, f->name, f->nlen);
    memcpy(e->buf + e->tail + f->nlen, f->value, f->vlen);
    e->tail += (uint32_t)len;
    e->size += need;
    e->live[mix(f)]++;
}

/* A literal (6.2): first is its kind's pattern, prefix its index's bits. */
static uint8_t *put_literal(uint8_t *p, uint8_t first, unsigned prefix, const h2_field_t *f)
{
    unsigned si = static_name(f->name, f->nlen);
    if (si)
        p = put_int(p, first, prefix, si);
    else
        *p++ = first, p = put_str(p, f->name, f->nlen);
    return put_str(p, f->value, f->vlen);
}

static int is(const h2_field_t *f, const char *name, size_t n)
{
    return f->nlen == n && !memcmp(f->name, name, n);
}

/* One field: indexed if the table has it, else a literal, added to the
   table if it is worth keeping (6.1, 6.2). */
static uint8_t *put_field(h2e_t *e, uint8_t *p, const h2_field_t *f)
{
    if (is(f, ":status", 7)) {
        for (unsigned i = 0; i < sizeof status_codes / sizeof *status_codes; i++)
            if (f->vlen == 3 && !memcmp(f->value, status_codes[i], 3))
                return put_int(p, 0x80, 7, IDX_STATUS + i);
        return put_str(put_int(p, 0, 4, IDX_STATUS), f->value, f->vlen);
    }
    if (is(f, "content-length", 14))
        return put_str(put_int(p, 0, 4, IDX_CONTENT_LENGTH), f->value, f->vlen);
    size_t need = 32 + f->nlen + f->vlen; /* (an entry larger than max is not in the table) */
    if (need > H2E_ENTRY_MAX || need > e->max || f->nlen > 255 || is(f, "set-cookie", 10))
        return put_literal(p, 0, 4, f); /* without indexing */
    unsigned m = mix(f), h = hash(m);
    size_t idx = find(e, f, m, h);
    if (idx)
        return put_int(p, 0x80, 7, idx);
    p = put_literal(p, 0x40, 6, f);
    insert(e, f);
    hint(e, h, e->ins - 1);
    return p;
}

long h2e_encode(h2e_t *e, uint8_t *out, size_t cap, const h2_field_t *f, size_t n)
{
    if (cap < h2e_bound(f, n))
        return -1;
    uint8_t *p = put_updates(e, out);
    for (size_t i = 0; i < n; i++)
        p = put_field(e, p, &f[i]);
    return (long)(p - out);
}
