/*
 * status_ring — the last 15 minutes of a loop's numbers, one sample a
 * second, and the last hour in ten-second sums, for /server-status's graphs (-S).  status.c's once-a-second timer
 * hands it a snapshot (site/stats.h's stats_snap_t: with -W the workers'
 * sum, as /metrics adds them) and it keeps what changed in that second:
 * requests by protocol, bytes, 4xx and 5xx answers, refusals, timeouts,
 * cache hits and misses, floods ended, 503s of a full job pool, latency
 * percentiles from the duration histogram, per backend its requests and
 * failures; and the open connections then.  900 slots of 256 bytes, and
 * 360 of ten-second sums: 315 KiB per loop, made only with -S.  No I/O, no clock of its own: pure but for
 * its memory.
 */
#ifndef GATLING_STATUS_RING_H
#define GATLING_STATUS_RING_H

#include "http/hbuf.h"
#include "site/stats.h"

#include <stdint.h>

#define RING_SLOTS 900   /* one-second samples kept: 15 minutes */
#define RING_COARSE_SECS 10    /* ... and ten-second sums of them */
#define RING_COARSE_SLOTS 360 /* kept for an hour */
#define RING_BACKENDS 16 /* backend slots with a series (the first 16) */

/* The counters a sample is the difference of. */
enum {
    RING_REQ_HTTP1, /* requests by protocol: STATS_* + RING_REQ_HTTP1 */
    RING_REQ_H2,
    RING_REQ_FTP,
    RING_REQ_H3,
    RING_BYTES,
    RING_4XX,
    RING_5XX,
    RING_REFUSED,  /* connections refused: -N, -K, descriptors, offenders, HTTP/3 */
    RING_TIMEOUTS, /* deadlines but keep-alive idle: head, body, drain, handshake, PROXY */
    RING_HITS,     /* cache hits, stale ones included */
    RING_MISSES,
    RING_FLOODS, /* connections a flood defence ended */
    RING_BUSY,   /* 503: the job pool's queue was full */
    RING_IDLE_CLOSED, /* connections that never sent a byte, closed at -s: no timeout */
    RING_COUNTS
};

/* Each counter's JSON key (?json's window and series). */
extern const char *const ring_key[RING_COUNTS];

/* Latency percentiles kept (upper bounds of the histogram's buckets, us). */
enum { RING_P50, RING_P90, RING_P99, RING_PCTS };

typedef struct ring_sample {
    int64_t t;                     /* the wall-clock second it was taken at */
    uint64_t n[RING_COUNTS];       /* what each counter grew by since the last */
    uint32_t conns;                /* open connections then */
    uint32_t pct[RING_PCTS];       /* of the requests that ended since (0: none) */
    uint32_t be_req[RING_BACKENDS], be_fail[RING_BACKENDS];
} ring_sample_t;

typedef struct status_ring status_ring_t;

/* A ring whose first sample will count from snap (the numbers at start).
   NULL on ENOMEM. */
status_ring_t *ring_new(const stats_snap_t *snap);
void ring_free(status_ring_t *r);

/* Take a sample at wall-clock second t: what grew since the last (a
   counter that went down, a worker's gone from the sum, counts 0). */
void ring_add(status_ring_t *r, int64_t t, const stats_snap_t *snap);

/* Samples held (0..RING_SLOTS). */
int ring_count(const status_ring_t *r);

/* The i-th newest sample (0: the newest), i < ring_count. */
const ring_sample_t *ring_at(const status_ring_t *r, int i);

/* Counter k summed over the samples of the last `secs` seconds before
   now (the seconds they cover: *covered, at least 1). */
uint64_t ring_sum(const status_ring_t *r, int k, int64_t now, int secs, int *covered);

/* A backend slot's failures over the last secs seconds (slot <
   RING_BACKENDS; else 0). */
uint64_t ring_be_failures(const status_ring_t *r, int slot, int64_t now, int secs);

/*
 * Append the samples newer than second `since` as JSON: an object of
 * arrays, oldest first ("t", "requests" by protocol, "bytes", ...,
 * "backends": one entry per slot in used[], the backends there); coarse:
 * the ten-second samples (each t the end of its ten seconds; counts summed
 * over them, connections and percentiles their most).  The bytes it takes
 * at most: ring_json_max.
 */
void ring_json(hbuf_t *b, const status_ring_t *r, int coarse, int64_t since, const int *used,
               int nused);
size_t ring_json_max(int nused);

#endif
