/* Counters: see stats.h. */
#include "stats.h"

void stats_roll(status_counters_t *st, int64_t now)
{
    if (now == st->second)
        return;
    /* a new second: the one that ended gives the rate (0 after a quiet gap) */
    int quiet = now - st->second > 1;
    st->rps = quiet ? 0 : st->requests - st->last_requests;
    st->bps = quiet ? 0 : st->bytes - st->last_bytes;
    st->last_requests = st->requests;
    st->last_bytes = st->bytes;
    st->second = now;
}

void status_count(status_counters_t *st, int64_t now, uint64_t bytes)
{
    stats_roll(st, now);
    st->requests++;
    st->bytes += bytes;
}
