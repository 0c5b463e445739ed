/* lg_hist: log-linear histogram, see lg_hist.h. */
#include "lg_hist.h"

#include <stdio.h>
#include <string.h>

void lg_hist_init(lg_hist_t *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

void lg_hist_merge(lg_hist_t *dst, const lg_hist_t *src)
{
    if (!src->count)
        return;
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t lg_hist_bucket_low(unsigned i)
{
    if (i < 2 * LG_HIST_SUB)
        return i;
    unsigned shift = i / LG_HIST_SUB - 1;
    return (uint64_t)(i - shift * LG_HIST_SUB) << shift;
}

uint64_t lg_hist_bucket_width(unsigned i)
{
    return i < 2 * LG_HIST_SUB ? 1 : (uint64_t)1 << (i / LG_HIST_SUB - 1);
}

uint64_t lg_hist_quantile(const lg_hist_t *h, double q)
{
    if (!h->count)
        return 0;
    if (q >= 1.0)
        return h->max;
    double want = q * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want) /* ceil() without libm */
        rank++;
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t hi = lg_hist_bucket_low(i) + lg_hist_bucket_width(i) - 1;
            if (hi > h->max)
                hi = h->max;
            return hi < h->min ? h->min : hi;
        }
    }
    return h->max;
}

double lg_hist_mean(const lg_hist_t *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}

double lg_hist_stdev(const lg_hist_t *h)
{
    if (h->count < 2)
        return 0.0;
    double mean = lg_hist_mean(h), acc = 0.0;
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++) {
        if (!h->b[i])
            continue;
        /* the middle of the bucket: within half a bucket (0.4 %) of each value */
        double v = (double)lg_hist_bucket_low(i) + ((double)lg_hist_bucket_width(i) - 1) / 2;
        acc += (double)h->b[i] * (v - mean) * (v - mean);
    }
    double var = acc / (double)(h->count - 1);
    /* square root by Newton's method: the tools link no libm */
    double x = var > 1 ? var : 1;
    for (int k = 0; k < 60 && var > 0; k++)
        x = (x + var / x) / 2;
    return var > 0 ? x : 0.0;
}

void lg_hist_json(FILE *f, const char *key, const lg_hist_t *h)
{
    fprintf(f, "\"%s\":{\"count\":%llu,\"sum\":%llu,\"min\":%llu,\"max\":%llu,\"buckets\":[",
            key, (unsigned long long)h->count, (unsigned long long)h->sum,
            (unsigned long long)(h->count ? h->min : 0), (unsigned long long)h->max);
    const char *sep = "";
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++) {
        if (!h->b[i])
            continue;
        fprintf(f, "%s[%llu,%llu]", sep,
                (unsigned long long)(lg_hist_bucket_low(i) + lg_hist_bucket_width(i) - 1),
                (unsigned long long)h->b[i]);
        sep = ",";
    }
    fprintf(f, "]}");
}
