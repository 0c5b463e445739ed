/* A streaming compressor of a response body: see zcoder.h. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createCCtx_advanced: the allocator hooks */
#include "zcoder.h"

#include <brotli/encode.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

struct zc {
    int enc;
    zc_budget_t *b;
    size_t mine; /* bytes of b's that are this coder's */
    uint64_t in, out;
    char *blk; /* the output block being filled (ZC_BLOCK), or NULL */
    size_t pos;
    int ended;
    gz_header gzh; /* gzip's, with padding (zc_pad): its comment */
    char *padp;    /* that comment, or NULL */
    size_t padn;   /* zstd's: the skippable frame's bytes, still to write */
    int zdone;     /* zstd's data frame has ended */
    union {
        ZSTD_CCtx *zstd;
        BrotliEncoderState *br;
        z_stream gz;
    } u;
};

/* ---- the libraries' memory, counted ---- */

/* Each block carries its size in front, so that freeing counts it back. */
#define HDR 16

/* A kept block of exactly n bytes from b, or NULL. */
static char *spare_take(zc_budget_t *b, size_t n)
{
    for (int i = 0; b->keep && n >= ZC_SPARE_MIN && i < ZC_SPARE; i++)
        if (b->spare[i] && b->spare_n[i] == n) {
            char *p = b->spare[i];
            b->spare[i] = NULL;
            return p;
        }
    return NULL;
}

/* Keep p (a block of n bytes) in b: 1; else 0.  With no slot free, it
   takes the place of one of them, in turn (freed): sizes that no coder
   asks for again do not hold the slots for good. */
static int spare_put(zc_budget_t *b, char *p, size_t n)
{
    if (!b->keep || n < ZC_SPARE_MIN)
        return 0;
    int i = 0;
    while (i < ZC_SPARE && b->spare[i])
        i++;
    if (i == ZC_SPARE) {
        i = (int)(b->spare_next++ % ZC_SPARE);
        free(b->spare[i]);
    }
    b->spare[i] = p, b->spare_n[i] = n;
    return 1;
}

void zc_budget_clear(zc_budget_t *b)
{
    for (int i = 0; i < ZC_SPARE; i++) {
        free(b->spare[i]);
        b->spare[i] = NULL;
    }
}

static void *counted_alloc(void *opaque, size_t n)
{
    zc_t *z = opaque;
    char *p = spare_take(z->b, n);
    if (!p)
        p = malloc(HDR + n);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    z->mine += n;
    z->b->bytes += n;
    if (z->b->bytes > z->b->peak)
        z->b->peak = z->b->bytes;
    return p + HDR;
}

static void counted_free(void *opaque, void *q)
{
    zc_t *z = opaque;
    if (!q)
        return;
    char *p = (char *)q - HDR;
    size_t n;
    memcpy(&n, p, sizeof n);
    z->mine -= n;
    z->b->bytes -= n;
    if (!spare_put(z->b, p, n))
        free(p);
}

static voidpf gz_alloc(voidpf opaque, uInt items, uInt size)
{
    return counted_alloc(opaque, (size_t)items * size);
}

static void gz_free(voidpf opaque, voidpf p)
{
    counted_free(opaque, p);
}

/* ---- making one ---- */

static int make_zstd(zc_t *z, uint64_t size)
{
    ZSTD_customMem m = {counted_alloc, counted_free, z};
    if (!(z->u.zstd = ZSTD_createCCtx_advanced(m)))
        return -1;
    ZSTD_CCtx_setParameter(z->u.zstd, ZSTD_c_compressionLevel, ZC_LEVEL_ZSTD);
    ZSTD_CCtx_setParameter(z->u.zstd, ZSTD_c_windowLog, ZC_WINDOW_LOG);
    /* level 3's tables are sized for 2 MiB windows: these fit 128 KiB */
    ZSTD_CCtx_setParameter(z->u.zstd, ZSTD_c_hashLog, ZC_WINDOW_LOG - 1);
    ZSTD_CCtx_setParameter(z->u.zstd, ZSTD_c_chainLog, ZC_WINDOW_LOG - 1);
    if (size)
        ZSTD_CCtx_setPledgedSrcSize(z->u.zstd, size);
    return 0;
}

static int make_br(zc_t *z, uint64_t size)
{
    if (!(z->u.br = BrotliEncoderCreateInstance(counted_alloc, counted_free, z)))
        return -1;
    BrotliEncoderSetParameter(z->u.br, BROTLI_PARAM_QUALITY, ZC_LEVEL_BR);
    BrotliEncoderSetParameter(z->u.br, BROTLI_PARAM_LGWIN, ZC_WINDOW_LOG);
    BrotliEncoderSetParameter(z->u.br, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
    if (size && size < (1u << 30))
        BrotliEncoderSetParameter(z->u.br, BROTLI_PARAM_SIZE_HINT, (uint32_t)size);
    return 0;
}

static int make_gz(zc_t *z)
{
    z->u.gz.zalloc = gz_alloc;
    z->u.gz.zfree = gz_free;
    z->u.gz.opaque = z;
    /* 15 + 16: a gzip wrapper (RFC 1952), as Content-Encoding: gzip means */
    return deflateInit2(&z->u.gz, ZC_LEVEL_GZIP, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK
               ? 0
               : -1;
}

zc_t *zc_new(int enc, uint64_t size, zc_budget_t *b)
{
    zc_t *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    z->enc = enc;
    z->b = b;
    int r = enc == ZC_ZSTD ? make_zstd(z, size)
            : enc == ZC_BR ? make_br(z, size)
            : enc == ZC_GZIP ? make_gz(z)
                              : -1;
    if (r < 0) {
        b->bytes -= z->mine;
        free(z);
        errno = ENOMEM;
        return NULL;
    }
    b->streams++;
    return z;
}

void zc_free(zc_t *z)
{
    if (!z)
        return;
    if (z->enc == ZC_ZSTD)
        ZSTD_freeCCtx(z->u.zstd);
    else if (z->enc == ZC_BR)
        BrotliEncoderDestroyInstance(z->u.br);
    else
        deflateEnd(&z->u.gz);
    if (z->blk)
        counted_free(z, z->blk);
    free(z->padp);
    z->b->streams--;
    free(z);
}

void zc_counts(const zc_t *z, uint64_t *in, uint64_t *out)
{
    *in = z->in;
    *out = z->out;
}

/* ---- padding ---- */

/* gzip: a header comment (FCOMMENT) of n - 1 bytes and its NUL; deflate
   writes it with the header, at its first call. */
static int pad_gz(zc_t *z, size_t n)
{
    if (!(z->padp = malloc(n)))
        return -1;
    memset(z->padp, ' ', n - 1);
    z->padp[n - 1] = '\0';
    z->gzh.comment = (Bytef *)z->padp;
    z->gzh.os = 255; /* unknown, as zlib's own header says */
    return deflateSetHeader(&z->u.gz, &z->gzh) == Z_OK ? 0 : -1;
}

/* zstd: a skippable frame (RFC 8878 3.1.2: magic 0x184D2A50, its length,
   that many bytes) after the data's frame, at the end (pump_zstd): a decoder
   that stops at the first frame's end (python-zstandard's does) still has
   the whole body.  1 once written (or none is due), 0 for want of room. */
static int pad_trail(zc_t *z)
{
    if (!z->padn)
        return 1;
    if (ZC_BLOCK - z->pos < z->padn + 8)
        return 0;
    uint32_t len = (uint32_t)z->padn;
    unsigned char h[8] = {0x50, 0x2A, 0x4D, 0x18, (unsigned char)len, (unsigned char)(len >> 8),
                          (unsigned char)(len >> 16), (unsigned char)(len >> 24)};
    memcpy(z->blk + z->pos, h, sizeof h);
    memset(z->blk + z->pos + sizeof h, 0, len);
    z->pos += len + sizeof h;
    z->padn = 0;
    return 1;
}

int zc_pad(zc_t *z, size_t n)
{
    if (z->in || z->out || z->pos || z->padp || z->padn || n > ZC_PAD_MAX || z->enc == ZC_BR) {
        errno = EINVAL;
        return -1;
    }
    if (n == 0)
        return 0;
    if (z->enc == ZC_ZSTD) {
        z->padn = n;
        return 0;
    }
    if (pad_gz(z, n) == 0)
        return 0;
    errno = ENOMEM;
    return -1;
}

/* ---- compressing ---- */

/*
 * Compress what is left of in[0..*n) into the block's room, doing mode:
 * 1 when mode is done (input taken; flushed or ended as asked), 0 when the
 * block is full, -1 on the library's error.
 */
static int pump_zstd(zc_t *z, const char **in, size_t *n, int mode)
{
    if (!z->zdone) { /* (called again after its end, zstd would begin a new frame) */
        ZSTD_inBuffer ib = {*in, *n, 0};
        ZSTD_outBuffer ob = {z->blk, ZC_BLOCK, z->pos};
        ZSTD_EndDirective d = mode == ZC_END     ? ZSTD_e_end
                              : mode == ZC_FLUSH ? ZSTD_e_flush
                                                 : ZSTD_e_continue;
        size_t left = ZSTD_compressStream2(z->u.zstd, &ob, &ib, d);
        *in += ib.pos, *n -= ib.pos;
        z->pos = ob.pos;
        if (ZSTD_isError(left))
            return -1;
        if (mode == ZC_MORE)
            return *n == 0 ? 1 : 0;
        if (left || mode != ZC_END)
            return left == 0 ? 1 : 0;
        z->zdone = 1;
    }
    return pad_trail(z);
}

static int pump_br(zc_t *z, const char **in, size_t *n, int mode)
{
    BrotliEncoderOperation op = mode == ZC_END     ? BROTLI_OPERATION_FINISH
                                : mode == ZC_FLUSH ? BROTLI_OPERATION_FLUSH
                                                   : BROTLI_OPERATION_PROCESS;
    const uint8_t *next_in = (const uint8_t *)*in;
    uint8_t *next_out = (uint8_t *)z->blk + z->pos;
    size_t avail_out = ZC_BLOCK - z->pos;
    if (!BrotliEncoderCompressStream(z->u.br, op, n, &next_in, &avail_out, &next_out, NULL))
        return -1;
    *in = (const char *)next_in;
    z->pos = ZC_BLOCK - avail_out;
    if (BrotliEncoderHasMoreOutput(z->u.br))
        return 0;
    if (mode == ZC_END)
        return BrotliEncoderIsFinished(z->u.br) ? 1 : 0;
    return *n == 0 ? 1 : 0;
}

static int pump_gz(zc_t *z, const char **in, size_t *n, int mode)
{
    z_stream *s = &z->u.gz;
    s->next_in = (Bytef *)*in;
    s->avail_in = (uInt)(*n > (1u << 30) ? 1u << 30 : *n);
    uInt given = s->avail_in;
    s->next_out = (Bytef *)z->blk + z->pos;
    s->avail_out = (uInt)(ZC_BLOCK - z->pos);
    int flush = mode == ZC_END ? Z_FINISH : mode == ZC_FLUSH ? Z_SYNC_FLUSH : Z_NO_FLUSH;
    int r = deflate(s, flush);
    *in += given - s->avail_in, *n -= given - s->avail_in;
    z->pos = ZC_BLOCK - s->avail_out;
    if (r == Z_STREAM_ERROR)
        return -1;
    if (mode == ZC_END)
        return r == Z_STREAM_END ? 1 : 0;
    /* room left after the call: zlib had no more to give for this flush */
    return *n == 0 && s->avail_out > 0 ? 1 : 0;
}

/* Hand the block (its first pos bytes) to sink; a new one comes at need. */
static int emit(zc_t *z, zc_sink_t sink, void *arg)
{
    char *blk = z->blk;
    size_t n = z->pos;
    z->blk = NULL;
    z->pos = 0;
    char *p = blk - HDR; /* out of the budget: the sink's memory from here on */
    size_t sz;
    memcpy(&sz, p, sizeof sz);
    z->mine -= sz;
    z->b->bytes -= sz;
    memmove(p, blk, n);
    char *q = n < sz / 2 ? realloc(p, n ? n : 1) : p;
    z->out += n;
    return sink(arg, q ? q : p, n);
}

int zc_run(zc_t *z, const void *in, size_t n, int mode, zc_sink_t sink, void *arg)
{
    const char *p = in;
    if (z->ended) {
        errno = EINVAL;
        return -1;
    }
    z->in += n;
    for (int idle = 0;;) {
        if (!z->blk && !(z->blk = counted_alloc(z, ZC_BLOCK))) {
            errno = ENOMEM;
            return -1;
        }
        int r = z->enc == ZC_ZSTD ? pump_zstd(z, &p, &n, mode)
                : z->enc == ZC_BR ? pump_br(z, &p, &n, mode)
                                   : pump_gz(z, &p, &n, mode);
        if (r < 0 || (r == 0 && !z->pos && ++idle > 4)) { /* no progress with room: a fault */
            errno = EIO;
            return -1;
        }
        if (r == 1 && (mode == ZC_MORE || !z->pos))
            break;
        if (z->pos && emit(z, sink, arg) < 0)
            return -1;
        if (r == 1)
            break;
    }
    if (mode == ZC_END)
        z->ended = 1;
    return 0;
}
