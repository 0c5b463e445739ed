/* The status page's samples: see status_ring.h. */
#include "status_ring.h"

#include <stdlib.h>
#include <string.h>

const char *const ring_key[RING_COUNTS] = {
    "requests_http1", "requests_h2",   "requests_ftp", "requests_h3", "bytes",
    "responses_4xx",  "responses_5xx", "refused",      "timeouts",    "cache_hits",
    "cache_misses",   "floods",        "busy",         "idle_closed"};

/* The cumulative numbers the next sample is the difference from. */
typedef struct ring_last {
    uint64_t n[RING_COUNTS];
    uint64_t dur[STATS_BOUNDS + 1]; /* requests by duration bucket, FTP left out */
    uint64_t be_req[RING_BACKENDS], be_fail[RING_BACKENDS];
} ring_last_t;

/* A ring of samples: the one-second samples, or the ten-second ones. */
typedef struct tier {
    int head;  /* the slot the next sample goes to */
    int count; /* samples held */
    int slots;
    ring_sample_t *s;
} tier_t;

struct status_ring {
    ring_last_t last;
    tier_t fine, coarse;
    ring_sample_t acc;   /* the ten seconds being summed (acc.t: their first) */
    int64_t acc_period; /* t / RING_COARSE_SECS of what acc holds (0: nothing) */
    ring_sample_t s[RING_SLOTS], c[RING_COARSE_SLOTS];
};

/* snap's cumulative numbers, as a sample counts them. */
static void cumulative(const stats_snap_t *snap, ring_last_t *l)
{
    const status_counters_t *c = &snap->c;
    memset(l, 0, sizeof *l);
    for (int p = 0; p < STATS_PROTOS; p++)
        l->n[RING_REQ_HTTP1 + p] = c->proto_requests[p];
    l->n[RING_BYTES] = c->bytes;
    l->n[RING_4XX] = c->responses_4xx;
    l->n[RING_5XX] = c->responses_5xx;
    l->n[RING_REFUSED] =
        c->refused_cap + c->refused_addr + c->refused_fds + c->refused_offender + c->h3_refused;
    l->n[RING_TIMEOUTS] = c->timeout_head + c->timeout_body + c->timeout_drain +
                          c->timeout_handshake + c->proxy_timeout;
    l->n[RING_HITS] = c->cache_hits + c->cache_stale + c->cache_stale_errors;
    l->n[RING_MISSES] = c->cache_misses;
    l->n[RING_FLOODS] = c->offences;
    l->n[RING_BUSY] = c->busy;
    l->n[RING_IDLE_CLOSED] = c->idle_closed;
    for (int p = 0; p < STATS_PROTOS; p++)
        for (int b = 0; p != STATS_FTP && b <= STATS_BOUNDS; b++)
            l->dur[b] += c->duration[p][b];
    for (int i = 0; i < RING_BACKENDS; i++) {
        l->be_req[i] = c->backend[i][BACKEND_REQUESTS];
        l->be_fail[i] = c->backend[i][BACKEND_502] + c->backend[i][BACKEND_504];
    }
}

status_ring_t *ring_new(const stats_snap_t *snap)
{
    status_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    cumulative(snap, &r->last);
    r->fine = (tier_t){.slots = RING_SLOTS, .s = r->s};
    r->coarse = (tier_t){.slots = RING_COARSE_SLOTS, .s = r->c};
    return r;
}

void ring_free(status_ring_t *r)
{
    free(r);
}

static uint64_t grew(uint64_t now, uint64_t before)
{
    return now > before ? now - before : 0;
}

static uint32_t small(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The percentiles of the requests in the histogram's difference d: each
   the upper bound of the bucket it falls in (above every bound: twice the
   last). */
static void percentiles(const uint64_t *d, uint32_t *pct)
{
    static const unsigned q[RING_PCTS] = {50, 90, 99};
    uint64_t total = 0;
    for (int b = 0; b <= STATS_BOUNDS; b++)
        total += d[b];
    for (int k = 0; k < RING_PCTS; k++) {
        uint64_t want = (total * q[k] + 99) / 100, seen = 0;
        int b = 0;
        while (b < STATS_BOUNDS && (seen += d[b]) < want)
            b++;
        pct[k] = !total                ? 0
                 : b < STATS_BOUNDS ? stats_bounds_us[b]
                                    : 2 * stats_bounds_us[STATS_BOUNDS - 1];
    }
}

/* The slot the next sample of tier goes to, emptied. */
static ring_sample_t *tier_next(tier_t *tr)
{
    ring_sample_t *s = &tr->s[tr->head];
    tr->head = (tr->head + 1) % tr->slots;
    if (tr->count < tr->slots)
        tr->count++;
    memset(s, 0, sizeof *s);
    return s;
}

static const ring_sample_t *tier_at(const tier_t *tr, int i)
{
    return &tr->s[(tr->head - 1 - i + 2 * tr->slots) % tr->slots];
}

/* s into the ten seconds being summed; a sample of the next ten seconds
   first moves the sum into the coarse tier (t: the end of its seconds).
   Counts add up; the open connections and the percentiles take the most. */
static void coarsen(status_ring_t *r, const ring_sample_t *s)
{
    int64_t period = s->t / RING_COARSE_SECS;
    if (r->acc_period && period != r->acc_period) {
        ring_sample_t *c = tier_next(&r->coarse);
        *c = r->acc;
        c->t = (r->acc_period + 1) * RING_COARSE_SECS;
        r->acc_period = 0;
    }
    if (!r->acc_period) {
        memset(&r->acc, 0, sizeof r->acc);
        r->acc_period = period;
    }
    ring_sample_t *a = &r->acc;
    for (int k = 0; k < RING_COUNTS; k++)
        a->n[k] += s->n[k];
    a->conns = s->conns > a->conns ? s->conns : a->conns;
    for (int k = 0; k < RING_PCTS; k++)
        a->pct[k] = s->pct[k] > a->pct[k] ? s->pct[k] : a->pct[k];
    for (int i = 0; i < RING_BACKENDS; i++) {
        a->be_req[i] = small((uint64_t)a->be_req[i] + s->be_req[i]);
        a->be_fail[i] = small((uint64_t)a->be_fail[i] + s->be_fail[i]);
    }
}

void ring_add(status_ring_t *r, int64_t t, const stats_snap_t *snap)
{
    ring_last_t now;
    uint64_t d[STATS_BOUNDS + 1];
    cumulative(snap, &now);
    ring_sample_t *s = tier_next(&r->fine);
    s->t = t;
    for (int k = 0; k < RING_COUNTS; k++)
        s->n[k] = grew(now.n[k], r->last.n[k]);
    for (int b = 0; b <= STATS_BOUNDS; b++)
        d[b] = grew(now.dur[b], r->last.dur[b]);
    percentiles(d, s->pct);
    s->conns = small(snap->g.conns);
    for (int i = 0; i < RING_BACKENDS; i++) {
        s->be_req[i] = small(grew(now.be_req[i], r->last.be_req[i]));
        s->be_fail[i] = small(grew(now.be_fail[i], r->last.be_fail[i]));
    }
    r->last = now;
    coarsen(r, s);
}

int ring_count(const status_ring_t *r)
{
    return r ? r->fine.count : 0;
}

const ring_sample_t *ring_at(const status_ring_t *r, int i)
{
    return tier_at(&r->fine, i);
}

uint64_t ring_sum(const status_ring_t *r, int k, int64_t now, int secs, int *covered)
{
    uint64_t sum = 0;
    int64_t oldest = now;
    for (int i = 0; i < ring_count(r); i++) {
        const ring_sample_t *s = ring_at(r, i);
        if (s->t <= now - secs)
            break;
        sum += s->n[k];
        oldest = s->t - 1; /* a sample counts the second before it */
    }
    *covered = now - oldest > 0 ? (int)(now - oldest) : 1;
    return sum;
}

uint64_t ring_be_failures(const status_ring_t *r, int slot, int64_t now, int secs)
{
    uint64_t sum = 0;
    for (int i = 0; slot >= 0 && slot < RING_BACKENDS && i < ring_count(r); i++) {
        const ring_sample_t *s = ring_at(r, i);
        if (s->t <= now - secs)
            break;
        sum += s->be_fail[slot];
    }
    return sum;
}

/* How many samples of tr (NULL: none) are newer than second since. */
static int newer(const tier_t *tr, int64_t since)
{
    int n = 0;
    while (tr && n < tr->count && tier_at(tr, n)->t > since)
        n++;
    return n;
}

/* "name":[v,...] over samples n-1 .. 0, v the word at off (a uint64_t, or
   a uint32_t if narrow) in each. */
static void series(hbuf_t *b, const tier_t *r, int n, const char *name, size_t off,
                   int narrow)
{
    hb_puts(b, "\"");
    hb_puts(b, name);
    hb_puts(b, "\":[");
    for (int i = n - 1; i >= 0; i--) {
        const char *p = (const char *)tier_at(r, i) + off;
        uint64_t v;
        if (narrow) {
            uint32_t w;
            memcpy(&w, p, sizeof w);
            v = w;
        } else {
            memcpy(&v, p, sizeof v);
        }
        hb_num(b, v);
        if (i)
            hb_puts(b, ",");
    }
    hb_puts(b, "]");
}

#define AT(f) offsetof(ring_sample_t, f)

void ring_json(hbuf_t *b, const status_ring_t *ring, int coarse, int64_t since, const int *used,
               int nused)
{
    static const char *const proto[STATS_PROTOS] = {"http1", "h2", "ftp", "h3"};
    const tier_t *r = ring ? (coarse ? &ring->coarse : &ring->fine) : NULL;
    int n = newer(r, since);
    hb_puts(b, coarse ? "{\"interval\":10,\"slots\":" : "{\"interval\":1,\"slots\":");
    hb_num(b, (uint64_t)(coarse ? RING_COARSE_SLOTS : RING_SLOTS));
    hb_puts(b, ",");
    series(b, r, n, "t", AT(t), 0);
    hb_puts(b, ",\"requests\":{");
    for (int p = 0; p < STATS_PROTOS; p++) {
        series(b, r, n, proto[p], AT(n) + (size_t)(RING_REQ_HTTP1 + p) * sizeof(uint64_t), 0);
        hb_puts(b, p + 1 < STATS_PROTOS ? "," : "}");
    }
    for (int k = RING_BYTES; k < RING_COUNTS; k++) {
        hb_puts(b, ",");
        series(b, r, n, ring_key[k], AT(n) + (size_t)k * sizeof(uint64_t), 0);
    }
    hb_puts(b, ",");
    series(b, r, n, "connections", AT(conns), 1);
    hb_puts(b, ",");
    series(b, r, n, "latency_p50_us", AT(pct) + RING_P50 * sizeof(uint32_t), 1);
    hb_puts(b, ",");
    series(b, r, n, "latency_p90_us", AT(pct) + RING_P90 * sizeof(uint32_t), 1);
    hb_puts(b, ",");
    series(b, r, n, "latency_p99_us", AT(pct) + RING_P99 * sizeof(uint32_t), 1);
    hb_puts(b, ",\"backends\":[");
    int first = 1;
    for (int j = 0; j < nused; j++) {
        int i = used[j];
        if (i < 0 || i >= RING_BACKENDS)
            continue;
        hb_puts(b, first ? "{\"slot\":" : ",{\"slot\":");
        first = 0;
        hb_num(b, (uint64_t)i);
        hb_puts(b, ",");
        series(b, r, n, "requests", AT(be_req) + (size_t)i * sizeof(uint32_t), 1);
        hb_puts(b, ",");
        series(b, r, n, "failures", AT(be_fail) + (size_t)i * sizeof(uint32_t), 1);
        hb_puts(b, "}");
    }
    hb_puts(b, "]}");
}

size_t ring_json_max(int nused)
{
    /* 20 series and two per backend, each value at most 20 digits and a comma */
    return 1024 + (size_t)(20 + 2 * nused) * (RING_SLOTS * 21 + 32) + (size_t)nused * 64;
}
