/* route/status_ring.c: the status page's one-second samples. */
#include "status_ring.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* A snapshot with requests of HTTP/1.1, bytes, 4xx and a latency. */
static void count(stats_snap_t *s, int reqs, int slow)
{
    s->c.proto_requests[STATS_HTTP1] += (uint64_t)reqs;
    s->c.bytes += 100 * (uint64_t)reqs;
    s->c.responses_4xx += 1;
    s->c.duration[STATS_HTTP1][0] += (uint64_t)(reqs - slow); /* <= 0.5 ms */
    s->c.duration[STATS_HTTP1][5] += (uint64_t)slow;          /* <= 25 ms */
    s->c.backend[1][BACKEND_502] += 2;
    s->c.backend[1][BACKEND_REQUESTS] += 3;
}

int main(void)
{
    stats_snap_t *s = calloc(1, sizeof *s);
    s->c.proto_requests[STATS_HTTP1] = 50; /* before the ring: never counted */
    status_ring_t *r = ring_new(s);
    ok(r && ring_count(r) == 0, "a new ring is empty");
    ok(ring_sum(r, RING_REQ_HTTP1, 1000, 10, &(int){0}) == 0, "and sums to 0");

    /* 100 requests, 2 of them slow: p50 and p90 the first bucket, p99 the slow one */
    count(s, 100, 2);
    s->g.conns = 7;
    ring_add(r, 1000, s);
    const ring_sample_t *x = ring_at(r, 0);
    ok(x->t == 1000 && x->n[RING_REQ_HTTP1] == 100 && x->n[RING_BYTES] == 10000,
       "a sample is what grew since the start (%llu)", (unsigned long long)x->n[RING_REQ_HTTP1]);
    ok(x->n[RING_4XX] == 1 && x->conns == 7, "4xx and the open connections then");
    ok(x->pct[RING_P50] == 500 && x->pct[RING_P90] == 500 && x->pct[RING_P99] == 25000,
       "percentiles from the histogram's difference (%u %u %u)", x->pct[RING_P50],
       x->pct[RING_P90], x->pct[RING_P99]);
    ok(x->be_req[1] == 3 && x->be_fail[1] == 2 && x->be_req[0] == 0, "per backend");

    /* a quiet second: zeros, no latency; a counter that went down counts 0 */
    ring_add(r, 1001, s);
    ok(ring_at(r, 0)->n[RING_REQ_HTTP1] == 0 && ring_at(r, 0)->pct[RING_P50] == 0,
       "a quiet second counts 0");
    s->c.bytes = 0; /* a worker gone from -W's sum */
    ring_add(r, 1002, s);
    ok(ring_at(r, 0)->n[RING_BYTES] == 0, "a counter that went down counts 0, not 2^64");

    /* windows: the samples of the last secs seconds, and the seconds they cover */
    int covered = 0;
    ok(ring_sum(r, RING_REQ_HTTP1, 1002, 10, &covered) == 100 && covered == 3,
       "the last 10 s hold 3 samples' seconds (%d)", covered);
    ok(ring_sum(r, RING_REQ_HTTP1, 1002, 2, &covered) == 0 && covered == 2,
       "the last 2 s: 0 (%d)", covered);
    ok(ring_be_failures(r, 1, 1002, 60) == 2 && ring_be_failures(r, 99, 1002, 60) == 0,
       "a backend's failures lately; a slot out of range: 0");

    /* the ring wraps at RING_SLOTS, oldest out */
    for (int i = 0; i < RING_SLOTS + 5; i++) {
        count(s, 1, 0);
        ring_add(r, 2000 + i, s);
    }
    ok(ring_count(r) == RING_SLOTS && ring_at(r, 0)->t == 2000 + RING_SLOTS + 4 &&
           ring_at(r, RING_SLOTS - 1)->t == 2005,
       "the ring keeps the last %d samples", RING_SLOTS);

    /* JSON: since, the backends asked for, bounded by ring_json_max */
    int used[] = {1, RING_BACKENDS + 3};
    size_t cap = ring_json_max(2);
    char *buf = malloc(cap);
    hbuf_t b = hb_init(buf, cap);
    ring_json(&b, r, 0, 2000 + RING_SLOTS + 2, used, 2);
    const char *j = hb_str(&b);
    ok(j && strstr(j, "\"t\":[2903,2904]") && strstr(j, "\"http1\":[1,1]"),
       "?json&since=T: the samples after T (%.80s)", j ? j : "over");
    ok(j && strstr(j, "\"backends\":[{\"slot\":1,\"requests\":[3,3],\"failures\":[2,2]}]"),
       "one series per backend slot in range");
    b = hb_init(buf, cap);
    ring_json(&b, r, 0, 0, used, 2);
    ok(hb_str(&b) != NULL, "the whole ring fits ring_json_max (%zu of %zu)", hb_len(&b), cap);
    b = hb_init(buf, 64);
    ring_json(&b, r, 0, 0, used, 2);
    ok(b.over, "a short buffer is over, never overrun");
    b = hb_init(buf, cap);
    ring_json(&b, NULL, 0, 0, used, 0);
    ok(hb_str(&b) && strstr(buf, "\"t\":[]"), "no ring: empty series");
    /* the ten-second tier: sums of each ten seconds, t their end */
    b = hb_init(buf, cap);
    ring_json(&b, r, 1, 2000 + RING_SLOTS - 20, used, 2);
    j = hb_str(&b);
    ok(j && strstr(j, "\"interval\":10") && strstr(j, "\"t\":[2890,2900]") &&
           strstr(j, "\"http1\":[10,10]") && strstr(j, "\"failures\":[20,20]"),
       "ten-second sums (%.120s)", j ? j : "over");
    free(buf);
    ring_free(r);
    free(s);
    return tap_done();
}
