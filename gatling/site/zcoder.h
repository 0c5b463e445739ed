/*
 * zcoder — one streaming compressor of a response body: zstd (libzstd),
 * brotli (libbrotlienc) or gzip (zlib), behind one small interface, its
 * memory counted through the libraries' allocator hooks into a budget the
 * caller owns (one per process: route/compress.c's).
 *
 * A chunk in, compressed bytes out: zc_run compresses what it is given and,
 * when asked, flushes (every byte given so far can be decoded from what came
 * out: a backend that pauses has its bytes at the client) or ends the
 * stream.  Output goes to the caller's sink in malloc'd blocks it then owns.
 * Nothing here does I/O or keeps globals; a coder is used by one thread.
 */
#ifndef GATLING_ZCODER_H
#define GATLING_ZCODER_H

#include <stddef.h>
#include <stdint.h>

/*
 * The levels, chosen for bytes per CPU on a 50 KiB HTML page (figures:
 * bench/doc/compress-load.md, "Levels"): zstd 3 is libzstd's default and
 * where its curve bends (15.2 KB in ~0.27 ms; level 5 saves 5% more for 2x
 * the CPU); brotli 4 makes fewer bytes than gzip 5 at about gzip's CPU
 * (14.3 KB in ~1.4 ms; brotli 5 saves 6% more for 40% more CPU); gzip 5 is
 * within 1% of gzip 6's bytes for 20-30% less CPU.  Windows are 64 KiB
 * (gzip's 32 KiB), so that a coder costs under 1 MiB (zstd ~0.73 MiB,
 * brotli ~0.8-1.3, gzip ~0.27: tests/unit/t_zcoder prints them) and a
 * 50 KiB page loses nothing to it (the same bytes as with 512 KiB).
 */
#define ZC_LEVEL_ZSTD 3
#define ZC_LEVEL_BR 4
#define ZC_LEVEL_GZIP 5
#define ZC_WINDOW_LOG 16

#define ZC_BLOCK (16 * 1024) /* an output block, at most */

/* The codings, the same bits as encoding.h's ENC_GZIP, ENC_BR, ENC_ZSTD
   (encoding.c checks), which callers pass. */
enum { ZC_GZIP = 1, ZC_BR = 2, ZC_ZSTD = 4 };

/*
 * The memory every coder of a budget holds, as the libraries allocated it.
 * With keep set, the budget also keeps up to ZC_SPARE of the large blocks
 * (ZC_SPARE_MIN or more) its coders freed, for the next coder that asks for
 * that size: brotli's and zstd's tables (0.25-0.5 MiB each) then cost no
 * fresh pages per response (glibc hands blocks that large back to the
 * kernel, and each new coder faulted them in again: bench/doc/compare-
 * cache.md, "With compression on").  At most ZC_SPARE blocks, idle, not in
 * bytes (a full set gives up one, in turn, for a newly freed one);
 * zc_budget_clear frees them.  A budget is used by one thread.
 */
#define ZC_SPARE 8
#define ZC_SPARE_MIN (32 * 1024)
typedef struct zc_budget {
    size_t bytes;     /* now */
    size_t peak;      /* the most at once */
    unsigned streams; /* coders alive */
    int keep;         /* keep freed large blocks (the caller sets it) */
    void *spare[ZC_SPARE];
    size_t spare_n[ZC_SPARE];
    unsigned spare_next; /* the slot a block takes when all are full */
} zc_budget_t;

/* Free the blocks b keeps (keep stays as it was). */
void zc_budget_clear(zc_budget_t *b);

typedef struct zc zc_t;

/* What zc_run does after compressing its input. */
enum { ZC_MORE, ZC_FLUSH, ZC_END };

/*
 * A coder for enc (ZC_GZIP, ZC_BR or ZC_ZSTD) at its
 * level above, counted in b; size: the whole input's length if known (it
 * lets zstd and brotli size their tables down), else 0.  NULL on ENOMEM or
 * an enc it does not know.
 */
zc_t *zc_new(int enc, uint64_t size, zc_budget_t *b);

/*
 * Where output goes: p[0..n) is malloc'd and the sink's from here on (also
 * when it fails).  0, or -1 to stop zc_run.
 */
typedef int (*zc_sink_t)(void *arg, char *p, size_t n);

/*
 * Compress in[0..n) (n may be 0), then ZC_MORE: keep what the library
 * holds; ZC_FLUSH: flush it out; ZC_END: end the stream (the coder takes no
 * more).  Full blocks of ZC_BLOCK go to sink as they fill; with FLUSH or
 * END the last one goes too, cut to its length.  0; or -1 when the sink
 * failed, the library did (errno EIO) or memory ran out (ENOMEM).
 */
int zc_run(zc_t *z, const void *in, size_t n, int mode, zc_sink_t sink, void *arg);

/*
 * Length-hiding padding (BREACH: "Heal the BREACH"), before any input: n
 * bytes (at most ZC_PAD_MAX) that every decoder skips, so that the coded
 * size does not tell how well a secret compressed beside a guess.  gzip: a
 * header comment (FCOMMENT) of n - 1 spaces and its NUL, n bytes; zstd: a
 * skippable frame (RFC 8878) of n bytes after its 8-byte header, n + 8,
 * after the data's frame (a decoder that stops there has the whole body).
 * Brotli has no room a decoder skips before its data (its metadata blocks
 * are the encoder's to write): -1 EINVAL, as for a coder that has begun.
 * 0; -1 ENOMEM.
 */
#define ZC_PAD_MAX 1024
int zc_pad(zc_t *z, size_t n);

/* Bytes given to z and bytes it gave out so far. */
void zc_counts(const zc_t *z, uint64_t *in, uint64_t *out);

/* Free z and its memory (its budget's count goes down); NULL: nothing. */
void zc_free(zc_t *z);

#endif
