/*
 * site/zcoder: each coding, given text a chunk at a time and flushed after
 * each, hands out bytes that the library's own decoder turns back into
 * exactly the chunks given so far (what a client of a streamed answer
 * sees), and into the whole text once ended; its memory is counted in the
 * budget while it lives and is all given back when it is freed.
 */
#include "site/encoding.h"
#include "site/zcoder.h"
#include "tap.h"

#include <brotli/decode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define TEXT_MAX (256 * 1024)

/* What came out so far, in order. */
typedef struct sink {
    char *p;
    size_t n, blocks;
} sink_t;

static int collect(void *arg, char *p, size_t n)
{
    sink_t *s = arg;
    s->p = realloc(s->p, s->n + n + 1);
    memcpy(s->p + s->n, p, n);
    s->n += n;
    s->blocks++;
    free(p);
    return 0;
}

/* Decode in[0..n) (a stream maybe not ended) into out: bytes, or -1. */
static long decode(int enc, const char *in, size_t n, char *out, size_t cap)
{
    if (enc == ENC_ZSTD) {
        ZSTD_DStream *d = ZSTD_createDStream();
        ZSTD_inBuffer ib = {in, n, 0};
        ZSTD_outBuffer ob = {out, cap, 0};
        while (ib.pos < ib.size)
            if (ZSTD_isError(ZSTD_decompressStream(d, &ob, &ib)))
                return ZSTD_freeDStream(d), -1;
        ZSTD_freeDStream(d);
        return (long)ob.pos;
    }
    if (enc == ENC_BR) {
        BrotliDecoderState *d = BrotliDecoderCreateInstance(NULL, NULL, NULL);
        size_t ai = n, ao = cap;
        const uint8_t *ni = (const uint8_t *)in;
        uint8_t *no = (uint8_t *)out;
        BrotliDecoderResult r = BrotliDecoderDecompressStream(d, &ai, &ni, &ao, &no, NULL);
        BrotliDecoderDestroyInstance(d);
        return r == BROTLI_DECODER_RESULT_ERROR ? -1 : (long)(cap - ao);
    }
    z_stream z = {0};
    inflateInit2(&z, 15 + 16);
    z.next_in = (Bytef *)in, z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out, z.avail_out = (uInt)cap;
    int r = inflate(&z, Z_SYNC_FLUSH);
    long got = (long)(cap - z.avail_out);
    inflateEnd(&z);
    return r == Z_OK || r == Z_STREAM_END || r == Z_BUF_ERROR ? got : -1;
}

static char *text(size_t n)
{
    char *t = malloc(n);
    size_t k = 0;
    for (unsigned i = 0; k < n; i++) {
        char line[128];
        int m = snprintf(line, sizeof line,
                         "<tr><td class=\"n\">%u</td><td>item %u of the list</td></tr>\n", i,
                         i * 7919 % 1000);
        for (int j = 0; j < m && k < n; j++)
            t[k++] = line[j];
    }
    return t;
}

static void one(int enc, const char *name)
{
    zc_budget_t b = {0};
    size_t n = 50 * 1024, chunk = 4096;
    char *t = text(n), *out = malloc(TEXT_MAX);
    sink_t s = {0};
    zc_t *z = zc_new(enc, 0, &b);
    ok(z && b.streams == 1, "%s: a coder, counted", name);
    int streamed = 1;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        if (zc_run(z, t + off, k, ZC_FLUSH, collect, &s) < 0)
            streamed = 0;
        long d = decode(enc, s.p, s.n, out, TEXT_MAX);
        if (d != (long)(off + k) || memcmp(out, t, off + k))
            streamed = 0;
    }
    ok(streamed, "%s: after each flush the client decodes every byte given so far", name);
    ok(b.bytes > 0, "%s: %zu bytes of memory counted while coding (peak %zu)", name, b.bytes,
       b.peak);
    is_int(zc_run(z, NULL, 0, ZC_END, collect, &s), 0, "%s: ended", name);
    long d = decode(enc, s.p, s.n, out, TEXT_MAX);
    ok(d == (long)n && !memcmp(out, t, n), "%s: the whole text back (%zu -> %zu bytes)", name, n,
       s.n);
    ok(zc_run(z, "x", 1, ZC_FLUSH, collect, &s) < 0, "%s: nothing taken after the end", name);
    uint64_t in, outn;
    zc_counts(z, &in, &outn);
    ok(in == n && outn == s.n, "%s: counts of bytes in and out", name);
    zc_free(z);
    ok(b.bytes == 0 && b.streams == 0, "%s: freed, the budget is back to 0", name);
    free(s.p);
    /* one call with the whole text and END: what a known length does */
    s = (sink_t){0};
    z = zc_new(enc, n, &b);
    zc_run(z, t, n, ZC_MORE, collect, &s);
    zc_run(z, NULL, 0, ZC_END, collect, &s);
    d = decode(enc, s.p, s.n, out, TEXT_MAX);
    ok(d == (long)n && !memcmp(out, t, n), "%s: in one piece, %zu bytes, peak memory %zu", name,
       s.n, b.peak);
    zc_free(z);
    free(s.p);
    free(out);
    free(t);
}

/* A budget that keeps freed large blocks: the next coder of the same kind
   takes them (no more are kept than one coder freed), each coder's output
   decodes, and zc_budget_clear gives them all back. */
static void spares(int enc, const char *name)
{
    zc_budget_t b = {.keep = 1};
    size_t n = 1536;
    char *t = text(n), *out = malloc(TEXT_MAX);
    int good = 1;
    unsigned kept[3] = {0};
    for (int round = 0; round < 3; round++) {
        sink_t s = {0};
        zc_t *z = zc_new(enc, 0, &b);
        if (!z || zc_run(z, t, n, ZC_FLUSH, collect, &s) < 0 ||
            zc_run(z, NULL, 0, ZC_END, collect, &s) < 0)
            good = 0;
        zc_free(z);
        long d = decode(enc, s.p, s.n, out, TEXT_MAX);
        if (d != (long)n || memcmp(out, t, n))
            good = 0;
        free(s.p);
        for (int i = 0; i < ZC_SPARE; i++)
            kept[round] += b.spare[i] != NULL;
    }
    ok(good && b.bytes == 0 && b.streams == 0, "%s: three coders on one keeping budget", name);
    ok(kept[0] > 0 && kept[1] == kept[0] && kept[2] == kept[0],
       "%s: %u large blocks kept after the first, the same after the next two (reused)", name,
       kept[0]);
    zc_budget_clear(&b);
    int none = 1;
    for (int i = 0; i < ZC_SPARE; i++)
        none &= b.spare[i] == NULL;
    ok(none, "%s: zc_budget_clear frees them", name);
    free(out);
    free(t);
}

/* zc_pad: the coded bytes grow by the padding exactly (gzip n, zstd n + 8),
   decode to the same text (the library's decoders skip it), and a padded
   coder streams as any; brotli and a coder that has begun refuse. */
static void padded(int enc, const char *name, size_t n, size_t extra)
{
    zc_budget_t b = {0};
    size_t len = 20 * 1024;
    char *t = text(len), *out = malloc(TEXT_MAX);
    sink_t plain = {0}, s = {0};
    zc_t *z = zc_new(enc, len, &b);
    zc_run(z, t, len, ZC_END, collect, &plain);
    zc_free(z);
    z = zc_new(enc, len, &b);
    is_int(zc_pad(z, n), 0, "%s: padded with %zu bytes", name, n);
    ok(zc_pad(z, 1) < 0, "%s: once only", name);
    zc_run(z, t, len / 2, ZC_FLUSH, collect, &s);
    long d = decode(enc, s.p, s.n, out, TEXT_MAX);
    ok(d == (long)(len / 2) && !memcmp(out, t, len / 2), "%s: padded, it streams", name);
    zc_run(z, t + len / 2, len - len / 2, ZC_END, collect, &s);
    d = decode(enc, s.p, s.n, out, TEXT_MAX);
    ok(d == (long)len && !memcmp(out, t, len), "%s: padded, the whole text back", name);
    zc_free(z);
    free(s.p);
    /* the same size as without padding, plus the padding exactly */
    s = (sink_t){0};
    z = zc_new(enc, len, &b);
    zc_pad(z, n);
    zc_run(z, t, len, ZC_END, collect, &s);
    ok(s.n == plain.n + n + extra, "%s: %zu bytes padded, %zu plain: %zu of padding", name, s.n,
       plain.n, s.n - plain.n);
    zc_free(z);
    ok(b.bytes == 0 && b.streams == 0, "%s: a padded coder gives its memory back", name);
    free(s.p);
    free(plain.p);
    free(out);
    free(t);
}

static void not_padded(void)
{
    zc_budget_t b = {0};
    sink_t s = {0};
    zc_t *z = zc_new(ENC_BR, 0, &b);
    ok(zc_pad(z, 10) < 0, "br: no padding (no room a decoder skips)");
    zc_free(z);
    z = zc_new(ENC_GZIP, 0, &b);
    zc_run(z, "abc", 3, ZC_FLUSH, collect, &s);
    zc_t *y = zc_new(ENC_ZSTD, 0, &b);
    ok(zc_pad(z, 10) < 0 && zc_pad(y, ZC_PAD_MAX + 1) < 0,
       "no padding once begun, nor past ZC_PAD_MAX");
    zc_free(y);
    zc_free(z);
    free(s.p);
}

int main(void)
{
    padded(ENC_GZIP, "gzip", 1, 0);
    padded(ENC_GZIP, "gzip", 200, 0);
    padded(ENC_ZSTD, "zstd", 1, 8);
    padded(ENC_ZSTD, "zstd", ZC_PAD_MAX, 8);
    not_padded();
    one(ENC_ZSTD, "zstd");
    one(ENC_BR, "br");
    one(ENC_GZIP, "gzip");
    spares(ENC_ZSTD, "zstd");
    spares(ENC_BR, "br");
    spares(ENC_GZIP, "gzip");
    /* zstd's tables follow the length it is told: 12 sizes, then brotli */
    zc_budget_t kb = {.keep = 1};
    char *t = text(64 * 1024);
    int good = 1;
    for (int i = 0; i < 13; i++) {
        size_t n = i < 12 ? (size_t)1024 << (i % 6) : 1536; /* the text: 64 KiB */
        sink_t s = {0};
        zc_t *z = zc_new(i < 12 ? ENC_ZSTD : ENC_BR, i < 12 ? n + (size_t)i : 0, &kb);
        if (!z || zc_run(z, t, n + (i < 12 ? (size_t)i : 0), ZC_END, collect, &s) < 0)
            good = 0;
        zc_free(z);
        free(s.p);
    }
    unsigned kept = 0;
    for (int i = 0; i < ZC_SPARE; i++)
        kept += kb.spare[i] != NULL;
    ok(good && kept <= ZC_SPARE && kb.bytes == 0,
       "coders of many sizes: %u blocks kept (at most %d), the budget back to 0", kept, ZC_SPARE);
    zc_budget_clear(&kb);
    free(t);
    zc_budget_t b = {0};
    ok(!zc_new(ENC_IDENTITY, 0, &b) && b.bytes == 0 && b.streams == 0,
       "identity is no coder, and costs nothing");
    return tap_done();
}
