/*
 * lg_hist — a log-linear latency histogram (the HdrHistogram idea) that costs
 * no allocation and a few instructions per recorded value.
 *
 * Values are unsigned integers (the tools record microseconds).  Values below
 * 2^LG_HIST_SUB_BITS have a bucket each; above that, every power of two is
 * split into 2^LG_HIST_SUB_BITS equal buckets, so a reported percentile is
 * within 1/128 (0.8 %) of the true value.  The struct is plain data: it can
 * live in shared memory, be copied through a pipe and be merged by adding.
 */
#ifndef LG_HIST_H
#define LG_HIST_H

#include <stdint.h>
#include <stdio.h>

#define LG_HIST_SUB_BITS 7
#define LG_HIST_SUB (1u << LG_HIST_SUB_BITS)
#define LG_HIST_MAX_BITS 40 /* 2^40 us is 12.7 days: larger values are clamped */
#define LG_HIST_BUCKETS ((LG_HIST_MAX_BITS - LG_HIST_SUB_BITS + 1) * LG_HIST_SUB)

typedef struct lg_hist {
    uint64_t count;
    uint64_t sum;
    uint64_t min; /* exact; UINT64_MAX while empty */
    uint64_t max; /* exact */
    uint64_t b[LG_HIST_BUCKETS];
} lg_hist_t;

/* Bucket index of v: exact below 2*SUB, then SUB buckets per power of two. */
static inline unsigned lg_hist_index(uint64_t v)
{
    if (v >= (uint64_t)1 << LG_HIST_MAX_BITS)
        v = ((uint64_t)1 << LG_HIST_MAX_BITS) - 1;
    if (v < LG_HIST_SUB)
        return (unsigned)v;
    unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - LG_HIST_SUB_BITS;
    return shift * LG_HIST_SUB + (unsigned)(v >> shift);
}

/* Record one value. */
static inline void lg_hist_add(lg_hist_t *h, uint64_t v)
{
    h->b[lg_hist_index(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

/* An empty histogram. */
void lg_hist_init(lg_hist_t *h);

/* dst += src (counts, sums, min and max). */
void lg_hist_merge(lg_hist_t *dst, const lg_hist_t *src);

/*
 * The value at quantile q (0 < q <= 1): the highest value of the bucket that
 * holds the ceil(q * count)-th smallest value, never above the exact max.
 * 0 for an empty histogram.
 */
uint64_t lg_hist_quantile(const lg_hist_t *h, double q);

/* Smallest value that lands in bucket i, and the bucket's width. */
uint64_t lg_hist_bucket_low(unsigned i);
uint64_t lg_hist_bucket_width(unsigned i);

/* Mean, 0 when empty. */
double lg_hist_mean(const lg_hist_t *h);

/* The standard deviation, from the buckets' middles (0.4 % of each value). */
double lg_hist_stdev(const lg_hist_t *h);

/*
 * The histogram as one JSON member, so that histograms from several processes or
 * hosts can be merged outside the tools (bench/benchkit/benchlib.py hist_merge/hist_quantile):
 * "KEY":{"count":N,"sum":S,"min":MIN,"max":MAX,"buckets":[[HI,N],...]}, where each
 * nonzero bucket is given by its highest value HI (the value lg_hist_quantile reports
 * for it) and its count, in ascending order.  No comma before or after.
 */
void lg_hist_json(FILE *f, const char *key, const lg_hist_t *h);

#endif
