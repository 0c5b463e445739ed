/*
 * bench_common — what bench's worker loops share (bench_run.c, bench_surge.c,
 * bench_h3.c) and what main() (bench.c) reads: flushing a connection's output,
 * the open loop's nap, the results struct.  It calls none of the loops, so
 * that they and main() depend on it and not on each other.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_common.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "gio.h"
#include "gio_batch.h"
#include "lg_tls.h"

int bench_flush(struct gio_loop *loop, lg_h2_t *h2, struct ssl_st *ssl, int fd, gio_batch_t *out,
                int *why)
{
    unsigned want = GIO_WRITE;
    for (;;) {
        if (h2 && lg_h2_fill(h2, out) < 0) {
            *why = LG_E_PARSE; /* the session failed (or memory ran out) */
            return -1;
        }
        if (gio_batch_done(out))
            break;
        long k = ssl ? gio_tls_send(ssl, out, 0, &want) : gio_batch_send(out, fd, 0);
        if (k == GIO_ERR) {
            *why = lg_err_io(errno);
            return -1;
        }
        if (!h2 || !gio_batch_done(out))
            break;
    }
    gio_want(loop, fd, gio_batch_done(out) ? GIO_READ : GIO_READ | want);
    return 0;
}

/*
 * Open loop (-R): the next request falls due within the millisecond that gio_wait() can time.
 * Polling gio_wait(0) until then kept bench always runnable, and a process that never sleeps
 * gets no wakeup preemption: a task sharing its CPU (slashdot's attackers at nice 19) kept the
 * CPU until the scheduler's tick (4 ms at HZ=250), and the requests due meanwhile were issued
 * that late (bench/doc/slashdot.md).  Sleep instead, at most NAP_NS at a time, so that bench wakes
 * when the request falls due; a response that arrives during a nap waits at most NAP_NS.
 */
#define NAP_NS 50000

void bench_nap_until(int64_t due)
{
    int64_t left = due - lg_now_ns();
    if (left <= 0)
        return;
    struct timespec ts = {0, left < NAP_NS ? (long)left : NAP_NS};
    nanosleep(&ts, NULL);
}

uint64_t bench_due_before(int64_t next_due, int64_t interval_ns, int64_t now, int64_t stop_at)
{
    int64_t end = now < stop_at ? now + 1 : stop_at; /* a signal ends it early */
    if (interval_ns <= 0 || next_due >= end)
        return 0;
    return (uint64_t)((end - 1 - next_due) / interval_ns) + 1;
}

uint64_t bench_unsent(int64_t next_due, int64_t interval_ns, int64_t now, int64_t stop_at,
                      uint64_t limit, uint64_t started)
{
    if (!stop_at || (limit && started >= limit))
        return 0;
    uint64_t n = bench_due_before(next_due, interval_ns, now, stop_at);
    return limit && n > limit - started ? limit - started : n;
}

void bench_stats_window(bench_stats_t *st, int64_t now_ns)
{
    st->win_responses = st->responses;
    st->win_bytes = st->bytes;
    st->win_connects = st->connects;
    st->win_ns = now_ns - st->start_ns;
    if (st->win_ns <= 0)
        st->win_ns = 1;
}

void bench_stats_init(bench_stats_t *st)
{
    memset(st, 0, sizeof *st);
    lg_hist_init(&st->lat);
    lg_hist_init(&st->conn);
    lg_hist_init(&st->hs);
}

void bench_stats_merge(bench_stats_t *d, const bench_stats_t *s)
{
    d->requests += s->requests;
    d->responses += s->responses;
    d->lost += s->lost;
    d->attempts += s->attempts;
    d->connects += s->connects;
    d->bytes += s->bytes;
    d->body += s->body;
    for (int i = 0; i < 6; i++)
        d->status[i] += s->status[i];
    for (int i = 0; i < LG_E_NUM; i++)
        d->err[i] += s->err[i];
    if (s->start_ns && (!d->start_ns || s->start_ns < d->start_ns))
        d->start_ns = s->start_ns;
    if (s->end_ns > d->end_ns)
        d->end_ns = s->end_ns;
    if (s->ramp_ns > d->ramp_ns)
        d->ramp_ns = s->ramp_ns;
    d->win_responses += s->win_responses;
    d->win_bytes += s->win_bytes;
    d->win_connects += s->win_connects;
    if (s->win_ns > d->win_ns)
        d->win_ns = s->win_ns;
    if (!d->fatal && s->fatal) {
        d->fatal = s->fatal;
        d->fatal_errno = s->fatal_errno;
    }
    lg_hist_merge(&d->lat, &s->lat);
    lg_hist_merge(&d->conn, &s->conn);
    lg_hist_merge(&d->hs, &s->hs);
    d->resumed += s->resumed;
    d->retried += s->retried;
    d->unsent += s->unsent;
    d->visitors += s->visitors;
    d->pages += s->pages;
    d->unstarted += s->unstarted;
    d->returning += s->returning;
    d->offered += s->offered;
    d->early_sent += s->early_sent;
    d->early_accepted += s->early_accepted;
    d->late += s->late;
    if (s->late_max_ns > d->late_max_ns)
        d->late_max_ns = s->late_max_ns;
}
