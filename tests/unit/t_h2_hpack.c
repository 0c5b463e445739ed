/*
 * t_h2_hpack — the response encoder (gatling/h2/h2_hpack.c): its bytes
 * for a first and a repeated block, and thousands of blocks of random
 * fields, table size changes and evictions decoded by libnghttp2's HPACK
 * decoder (what curl and nghttp use), which must give back every field in
 * order from a table it keeps itself.
 */
#include "h2_hpack.h"
#include "tap.h"

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F(n, v) ((h2_field_t){(n), (v), strlen(n), strlen(v)})

/* Decode block b[0..len) with inf: 0 if it gives f[0..n) back. */
static int decodes_to(nghttp2_hd_inflater *inf, const uint8_t *b, size_t len,
                      const h2_field_t *f, size_t n)
{
    size_t got = 0;
    for (;;) {
        nghttp2_nv nv;
        int fl = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &fl, b, len, 1);
        if (r < 0)
            return printf("#   inflate: %zd\n", r), -1;
        b += r, len -= (size_t)r;
        if (fl & NGHTTP2_HD_INFLATE_EMIT) {
            if (got == n || nv.namelen != f[got].nlen || nv.valuelen != f[got].vlen ||
                memcmp(nv.name, f[got].name, nv.namelen) ||
                memcmp(nv.value, f[got].value, nv.valuelen))
                return printf("#   field %zu differs\n", got), -1;
            got++;
        }
        if (fl & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            return got == n ? 0 : -1;
        }
        if (!(fl & NGHTTP2_HD_INFLATE_EMIT) && !len)
            return -1;
    }
}

static void test_bytes(void)
{
    static h2e_t e;
    uint8_t b[256];
    h2_field_t f[] = {F(":status", "200"), F("server", "g/1"), F("content-length", "1024"),
                      F("x-a", "b")};
    h2e_init(&e, 1000);
    long n = h2e_encode(&e, b, sizeof b, f, 1);
    static const uint8_t small[] = {0x3f, 0xc9, 0x07, 0x88};
    ok(n == sizeof small && !memcmp(b, small, sizeof small),
       "a client's table of 1000: announced in the first block");
    h2e_init(&e, 4096);
    n = h2e_encode(&e, b, sizeof b, f, 4);
    static const uint8_t first[] = {0x88, 0x76, 3, 'g', '/', '1', 0x0f, 0x0d,
                                    4, '1', '0', '2', '4', 0x40, 3, 'x', '-', 'a', 1, 'b'};
    ok(n == sizeof first && !memcmp(b, first, sizeof first),
       "first block: :status 200 static, literals indexed, "
       "content-length not");
    n = h2e_encode(&e, b, sizeof b, f, 4);
    static const uint8_t again[] = {0x88, 0xbf, 0x0f, 0x0d, 4, '1', '0', '2', '4', 0xbe};
    ok(n == sizeof again && !memcmp(b, again, sizeof again), "again: one byte per entry");
    h2_field_t s[] = {F(":status", "302"), F("set-cookie", "a=b")};
    n = h2e_encode(&e, b, sizeof b, s, 2);
    static const uint8_t other[] = {0x08, 3, '3', '0', '2', 0x0f, 40, 3, 'a', '=', 'b'};
    ok(n == sizeof other && !memcmp(b, other, sizeof other),
       "302 and set-cookie: literals without indexing");
    ok(h2e_encode(&e, b, h2e_bound(f, 4) - 1, f, 4) == -1, "a buffer below the bound: -1");
    h2e_peer_table(&e, 0);
    h2e_peer_table(&e, 100);
    n = h2e_encode(&e, b, sizeof b, f, 1);
    static const uint8_t upd[] = {0x20, 0x3f, 0x45, 0x88};
    ok(n == sizeof upd && !memcmp(b, upd, sizeof upd), "0 then 100: both updates (4.2)");
}

static const char *const names[] = {"server", "date", "content-type", "last-modified",
                                    "cache-control", "vary", "x-long-name-of-a-field",
                                    ":status", "content-length", "set-cookie", "etag"};

/* A random field (its value in v, of up to 700 bytes, some larger than an
   entry may be), from few enough kinds that many repeat. */
static h2_field_t random_field(char *v, unsigned *seed)
{
    const char *name = names[rand_r(seed) % (sizeof names / sizeof *names)];
    unsigned key = (unsigned)rand_r(seed) % 12;
    size_t len = rand_r(seed) % 8 ? key % 5 * 10 : (size_t)(rand_r(seed) % 700);
    for (size_t i = 0; i < len; i++)
        v[i] = (char)('a' + (i * 7 + key) % 26);
    v[len] = 0;
    return F(name, v);
}

static void test_random(void)
{
    static h2e_t e;
    static char vals[12][704];
    static uint8_t b[16384];
    unsigned seed = 33, bad = 0, peer = 4096;
    long total = 0;
    nghttp2_hd_inflater *inf;
    nghttp2_hd_inflate_new(&inf);
    h2e_init(&e, peer);
    for (int round = 0; round < 20000 && !bad; round++) {
        /* the client's SETTINGS_HEADER_TABLE_SIZE, at times twice between blocks */
        for (int k = rand_r(&seed) % 50 ? 0 : 1 + rand_r(&seed) % 2; k > 0; k--) {
            static const uint32_t sizes[] = {0, 64, 100, 1000, 2048, 4096, 65536};
            peer = sizes[rand_r(&seed) % 7];
            nghttp2_hd_inflate_change_table_size(inf, peer);
            h2e_peer_table(&e, peer);
        }
        h2_field_t f[12];
        size_t n = 1 + (size_t)rand_r(&seed) % 12;
        for (size_t i = 0; i < n; i++)
            f[i] = random_field(vals[i], &seed);
        long r = h2e_encode(&e, b, sizeof b, f, n);
        bad += r < 0 || (size_t)r > h2e_bound(f, n) || decodes_to(inf, b, (size_t)r, f, n) < 0;
        total += r;
        bad += e.size > e.max || e.max > H2E_TABLE;
    }
    is_int(bad, 0, "20000 random blocks decode to their fields (libnghttp2's decoder)");
    printf("# %ld bytes\n", total);
    nghttp2_hd_inflate_del(inf);
}

/* A steady stream of the same response: after the first, a few bytes each. */
static void test_steady(void)
{
    static h2e_t e;
    uint8_t b[512];
    nghttp2_hd_inflater *inf;
    nghttp2_hd_inflate_new(&inf);
    h2e_init(&e, 4096);
    h2_field_t f[] = {F(":status", "200"), F("server", "gatling/0.16"),
                      F("date", "Wed, 25 Nov 2026 17:51:14 GMT"), F("content-type", "text/html"),
                      F("content-length", "1024"),
                      F("last-modified", "Wed, 25 Nov 2026 10:00:00 GMT")};
    long n = 0;
    int bad = 0;
    for (int i = 0; i < 1000; i++) {
        char d[32];
        snprintf(d, sizeof d, "Wed, 25 Nov 2026 17:%02d:%02d GMT", i / 600, i / 10 % 60);
        f[2] = F("date", d);
        n = h2e_encode(&e, b, sizeof b, f, 6);
        bad += n < 0 || decodes_to(inf, b, (size_t)n, f, 6) < 0;
    }
    is_int(bad, 0, "1000 responses, a new date every 10: decoded");
    is_int(n, 12, "the last: 12 bytes (5 indexed, content-length's 7)");
    nghttp2_hd_inflate_del(inf);
}

/* Fields never inserted, each for its own reason (issue 55's branches): a
   name past 255 bytes, a field past H2E_ENTRY_MAX, one past the peer's
   table; each a literal without indexing, decoded, and sent as one again. */
static void test_not_indexed(void)
{
    static h2e_t e;
    static char name[257], value[1100];
    uint8_t b[4096];
    nghttp2_hd_inflater *inf;
    nghttp2_hd_inflate_new(&inf);
    memset(name, 'n', 256);
    memset(value, 'v', sizeof value - 1);
    h2_field_t f[] = {F(name, "v"), F("x-big", value), F("x-c", "0123456789012345678901234567890123456789")};
    h2e_init(&e, 4096);
    long n1 = h2e_encode(&e, b, sizeof b, f, 2);
    ok(n1 > 0 && decodes_to(inf, b, (size_t)n1, f, 2) == 0, "a 256-byte name, a 1 KiB value");
    long n2 = h2e_encode(&e, b, sizeof b, f, 2);
    is_int(n2, n1, "again the same length: neither was inserted");
    nghttp2_hd_inflate_del(inf);
    nghttp2_hd_inflate_new(&inf);
    nghttp2_hd_inflate_change_table_size(inf, 64);
    h2e_init(&e, 64);
    n1 = h2e_encode(&e, b, sizeof b, f + 2, 1);
    ok(n1 > 0 && decodes_to(inf, b, (size_t)n1, f + 2, 1) == 0, "a field past a 64-byte table");
    n2 = h2e_encode(&e, b, sizeof b, f + 2, 1);
    ok(n2 > 0 && n2 <= n1 && decodes_to(inf, b, (size_t)n2, f + 2, 1) == 0 && b[0] == 0x00,
       "again a literal without indexing");
    nghttp2_hd_inflate_del(inf);
}

/* Names near the static table's and ours: one of a static name's length and
   first byte that is not it, one of :status's length, an empty name (the
   hash reads no byte of it), each decoded as sent, and indexed the second
   time. */
static void test_near_names(void)
{
    static h2e_t e;
    uint8_t b[1024];
    nghttp2_hd_inflater *inf;
    nghttp2_hd_inflate_new(&inf);
    h2_field_t f[] = {F("accept-charsex", "v"), F("x-statu", "204"), F("", "empty name"),
                      F("content-lengtx", "1")};
    h2e_init(&e, 4096);
    long n1 = h2e_encode(&e, b, sizeof b, f, 4);
    ok(n1 > 0 && decodes_to(inf, b, (size_t)n1, f, 4) == 0,
       "names like a static one, like :status, and empty: decoded as sent");
    long n2 = h2e_encode(&e, b, sizeof b, f, 4);
    ok(n2 == 4 && decodes_to(inf, b, (size_t)n2, f, 4) == 0, "again: each one indexed byte");
    nghttp2_hd_inflate_del(inf);
}

/* Values that hash alike (the same length, first and last bytes) and
   differ in one byte, at every place of every length up to 40: the table's
   entry is compared byte for byte (words that overlap at the tail), so each
   is decoded as sent, never as the entry it is like. */
static void test_one_byte_apart(void)
{
    static h2e_t e;
    uint8_t b[1024];
    int bad = 0;
    nghttp2_hd_inflater *inf;
    nghttp2_hd_inflate_new(&inf);
    h2e_init(&e, 4096);
    for (size_t len = 1; len <= 40; len++)
        for (size_t at = 0; at < len; at++) {
            char v[41], w[41];
            memset(v, 'v', len), v[len] = 0;
            memcpy(w, v, len + 1);
            w[at] = 'w';
            h2_field_t f[] = {F("x-like", v), F("x-like", w)};
            long n = h2e_encode(&e, b, sizeof b, f, 2);
            bad += n < 0 || decodes_to(inf, b, (size_t)n, f, 2) < 0;
        }
    is_int(bad, 0, "one byte apart, every place of every length to 40: decoded as sent");
    nghttp2_hd_inflate_del(inf);
}

int main(void)
{
    test_bytes();
    test_steady();
    test_random();
    test_not_indexed();
    test_near_names();
    test_one_byte_apart();
    return tap_done();
}
