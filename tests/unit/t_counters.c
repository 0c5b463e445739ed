/* site/counters.h's table: what the pages need of it, and -W's sums. */
#include "stats.h"
#include "tap.h"

#include <string.h>

int main(void)
{
    /* a family's rows follow each other, its first gives the help; every
       row is on one page at least; keys and samples are each once */
    int contiguous = 1, helped = 1, shown = 1, unique = 1, labelled = 1;
    for (size_t i = 0; i < stats_nrows; i++) {
        const stats_row_t *r = &stats_rows[i];
        const char *prev = i ? stats_rows[i - 1].metric : NULL;
        int first = r->metric && (!prev || strcmp(prev, r->metric));
        shown &= r->metric || r->skey;
        helped &= !r->metric || (first ? r->help != NULL : r->help == NULL);
        labelled &= !r->lkey == !r->lval && (first || !r->metric || r->lkey);
        for (size_t j = 0; j < i; j++) {
            const stats_row_t *o = &stats_rows[j];
            if (r->skey && o->skey && !strcmp(r->skey, o->skey))
                unique = 0;
            if (first && o->metric && !strcmp(o->metric, r->metric))
                contiguous = 0;
            if (r->metric && o->metric && !strcmp(o->metric, r->metric) &&
                (!r->lval || !o->lval || !strcmp(r->lval, o->lval)))
                unique = 0;
            if (r->off == o->off)
                unique = 0;
        }
    }
    ok(stats_nrows > 100, "the table has its rows (%zu)", stats_nrows);
    ok(contiguous, "each /metrics family's rows follow each other");
    ok(helped, "a family's first row gives its help, the others none");
    ok(labelled, "the rows of a family of several are labelled");
    ok(shown, "every row is on a page");
    ok(unique, "keys, samples and fields are each once");

    /* a row reads its field; two workers' snapshots add up, draining the
       largest (stats_shm_total) */
    stats_snap_t a, b, sum;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.c.h2_flood[H2_FLOOD_PING] = 3, b.c.h2_flood[H2_FLOOD_PING] = 4;
    a.c.busy = 1, b.c.busy = 2;
    a.more.gz_paced_ms = 5, b.g.draining = 1, a.g.draining = 1;
    a.c.started = 200, b.c.started = 100;
    stats_shm_t *t = stats_shm_new(2);
    ok(t != NULL, "a shared table");
    stats_shm_publish(t, 1, &b);
    stats_shm_total(t, 0, &a, &sum);
    int seen = 0;
    for (size_t i = 0; i < stats_nrows; i++) {
        const stats_row_t *r = &stats_rows[i];
        uint64_t v = stats_value(&sum, r);
        if (r->skey && !strcmp(r->skey, "h2_flood_ping"))
            seen += v == 7;
        if (r->skey && !strcmp(r->skey, "busy"))
            seen += v == 3;
        if (r->skey && !strcmp(r->skey, "gzip_paced_ms"))
            seen += v == 5 && r->type == STATS_MS;
        if (r->skey && !strcmp(r->skey, "draining"))
            seen += v == 1;
    }
    is_int(seen, 4, "rows read the summed fields: an element, a counter, more, a gauge");
    is_int((long)sum.c.started, 100, "the earliest start");
    stats_shm_free(t);
    return tap_done();
}
