/*
 * t_gio_timer — timers of no descriptor (gio_timer_set, gio_timer_stop,
 * gio_timers_run) on whichever backend io/ was built with: the wait must
 * wake for them with nothing else to wake it, on every backend.  Only
 * POSIX calls, so it also links for the BSDs and macOS (make cross).
 *
 * Each block names the bug it is there to catch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio.h"
#include "tap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NMANY 2000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What a callback saw. */
typedef struct shot {
    gio_timer_t t;
    int fired;
    int64_t at; /* gio_now() when it fired */
    int again;  /* times it re-arms itself */
    int64_t every;
    gio_timer_t *victim; /* stopped by this one's callback */
} shot_t;

static void on_shot(gio_loop_t *l, void *arg)
{
    shot_t *s = arg;
    s->fired++;
    s->at = gio_now(l);
    if (s->victim)
        gio_timer_stop(l, s->victim);
    if (s->again > 0) {
        s->again--;
        gio_timer_set(l, &s->t, gio_now(l) + s->every, on_shot, s);
    }
}

/* Wait and run until done() or limit_ms passed; the rounds it took. */
static int spin(gio_loop_t *l, const int *done, int limit_ms)
{
    int64_t end = now_ms() + limit_ms;
    int rounds = 0;
    while (!*done && now_ms() < end) {
        gio_wait(l, 1000);
        gio_timers_run(l);
        rounds++;
    }
    return rounds;
}

/*
 * One timer, no descriptor at all: gio_wait(-1) must sleep until it and not
 * forever (a backend whose timeout ignores timers hangs here: the test
 * program is then killed after 60 s), and not wake before it and spin.
 */
static void test_once(gio_loop_t *l)
{
    shot_t s = {.t = GIO_TIMER_INIT};
    ok(!gio_timer_armed(&s.t), "a zeroed timer is stopped");
    int64_t t0 = now_ms(), when = gio_now(l) + 60;
    ok(gio_timer_set(l, &s.t, when, on_shot, &s) == 0 && gio_timer_armed(&s.t),
       "gio_timer_set arms it");
    int rounds = 0;
    while (!s.fired && rounds < 100) {
        gio_wait(l, -1);
        gio_timers_run(l);
        rounds++;
    }
    int64_t dt = now_ms() - t0;
    ok(s.fired == 1 && s.at >= when, "fired once, at gio_now %lld >= %lld",
       (long long)s.at, (long long)when);
    /* the loop's clock is the last wait's, a little behind the real one: the
       firing time is checked on it (above), the sleep here only roughly */
    ok(dt >= 40 && dt < 5000, "gio_wait(-1) with no descriptor slept until it: %lld ms",
       (long long)dt);
    ok(rounds <= 3, "in %d waits (no spinning before it)", rounds);
    ok(!gio_timer_armed(&s.t), "stopped once fired");
    is_int(gio_wait(l, 40), 0, "a later wait: nothing");
    is_int(gio_timers_run(l), 0, "and no second firing");
    is_int(s.fired, 1, "still fired once");
}

/* A timer bounds a wait asked for longer, and a descriptor that is
   registered and wanted but not ready does not keep it asleep. */
static void test_bounds_wait(gio_loop_t *l)
{
    int p[2];
    if (pipe(p) < 0)
        return;
    gio_nonblock(p[0]);
    gio_add(l, p[0], NULL);
    gio_want(l, p[0], GIO_READ);
    shot_t s = {.t = GIO_TIMER_INIT};
    gio_timer_set(l, &s.t, gio_now(l) + 50, on_shot, &s);
    int64_t t0 = now_ms();
    int n = gio_wait(l, 10000);
    int64_t dt = now_ms() - t0;
    ok(n == 0 && dt >= 30 && dt < 5000, "gio_wait(10000) with an idle pipe: 0 after %lld ms",
       (long long)dt);
    is_int(gio_timers_run(l), 1, "the timer runs then");
    /* a deadline later than the timer does not hide it, nor the other way */
    gio_set_deadline(l, p[0], gio_now(l) + 300);
    gio_timer_set(l, &s.t, gio_now(l) + 40, on_shot, &s);
    t0 = now_ms();
    gio_wait(l, -1);
    dt = now_ms() - t0;
    ok(dt < 250 && gio_timers_run(l) == 1 && gio_next_timeout(l) < 0,
       "the earlier timer wakes the wait before the deadline (%lld ms)", (long long)dt);
    gio_set_deadline(l, p[0], gio_now(l) + 30);
    gio_timer_set(l, &s.t, gio_now(l) + 400, on_shot, &s);
    t0 = now_ms();
    gio_wait(l, -1);
    dt = now_ms() - t0;
    ok(dt < 350 && gio_next_timeout(l) == p[0] && gio_timers_run(l) == 0,
       "the earlier deadline wakes it before the timer (%lld ms)", (long long)dt);
    gio_timer_stop(l, &s.t);
    gio_close(l, p[0]);
    close(p[1]);
}

/* Re-arming from its own callback, and moving an armed timer. */
static void test_rearm(gio_loop_t *l)
{
    shot_t s = {.t = GIO_TIMER_INIT, .again = 4, .every = 10};
    gio_timer_set(l, &s.t, gio_now(l) + 10, on_shot, &s);
    int rounds = 0;
    while (s.fired < 5 && rounds++ < 200) {
        gio_wait(l, 1000);
        gio_timers_run(l);
    }
    is_int(s.fired, 5, "re-armed from its callback 4 times: fired 5 times");
    ok(!gio_timer_armed(&s.t), "then stopped");

    /* re-armed for now, inside the run: the next run, not this one (else it
       would hold the loop) */
    shot_t z = {.t = GIO_TIMER_INIT, .again = 1000000, .every = 0};
    gio_timer_set(l, &z.t, gio_now(l), on_shot, &z);
    gio_wait(l, 0);
    is_int(gio_timers_run(l), 1, "a timer re-armed for now in its callback fires once a run");
    gio_wait(l, 0);
    is_int(gio_timers_run(l), 1, "and again in the next");
    gio_timer_stop(l, &z.t);

    /* moved later, then earlier, while armed */
    shot_t m = {.t = GIO_TIMER_INIT};
    gio_timer_set(l, &m.t, gio_now(l) + 20, on_shot, &m);
    gio_timer_set(l, &m.t, gio_now(l) + 100000, on_shot, &m);
    gio_wait(l, 60);
    is_int(gio_timers_run(l), 0, "moved later: not at its first time");
    int64_t when = gio_now(l) + 15;
    gio_timer_set(l, &m.t, when, on_shot, &m);
    spin(l, &m.fired, 3000);
    ok(m.fired == 1 && m.at >= when, "moved earlier again: fired at its new time");
    /* a time already passed counts as now */
    gio_timer_set(l, &m.t, gio_now(l) - 5000, on_shot, &m);
    gio_wait(l, 0);
    is_int(gio_timers_run(l), 1, "a time already passed fires at the next run");
}

/* Stopping: before its time, from another's callback in the same run, and
   a stopped one not stopped again. */
static void test_stop(gio_loop_t *l)
{
    shot_t a = {.t = GIO_TIMER_INIT}, b = {.t = GIO_TIMER_INIT}, c = {.t = GIO_TIMER_INIT};
    int64_t when = gio_now(l) + 20;
    gio_timer_set(l, &a.t, when, on_shot, &a);
    gio_timer_set(l, &b.t, when, on_shot, &b);
    gio_timer_set(l, &c.t, when + 5, on_shot, &c);
    gio_timer_stop(l, &c.t);
    gio_timer_stop(l, &c.t); /* twice: nothing */
    a.victim = &b.t;          /* a fires first (set first), stops b */
    spin(l, &a.fired, 3000);
    gio_wait(l, 50);
    gio_timers_run(l);
    ok(a.fired == 1 && b.fired == 0 && c.fired == 0,
       "stopped timers never fire (one stopped by another's callback in the same run)");
    ok(!gio_timer_armed(&b.t) && !gio_timer_armed(&c.t), "and are not armed");
    shot_t d = {.t = GIO_TIMER_INIT};
    gio_timer_stop(l, &d.t);
    ok(!gio_timer_armed(&d.t), "stopping a timer never set does nothing");
}

static int64_t fired_when[NMANY];
static int nfired;
static int tie_order[8], ntie;

static void on_tie(gio_loop_t *l, void *arg)
{
    (void)l;
    if (ntie < 8)
        tie_order[ntie++] = (int)(intptr_t)arg;
}

static void on_many(gio_loop_t *l, void *arg)
{
    shot_t *s = arg;
    s->fired++;
    s->at = gio_now(l);
    if (nfired < NMANY)
        fired_when[nfired++] = s->t.when;
}

/*
 * Many timers, set in a shuffled order, some moved, some stopped, some sharing
 * a time: each fires once, none early, earliest first (catches a heap that
 * sifts wrongly, loses a slot on stop, or grows without moving them).
 */
static void test_many(gio_loop_t *l)
{
    static shot_t s[NMANY];
    unsigned seed = 4242;
    int64_t base = gio_now(l);
    memset(s, 0, sizeof s);
    nfired = 0;
    for (int i = 0; i < NMANY; i++) {
        seed = seed * 1103515245 + 12345;
        gio_timer_set(l, &s[i].t, base + 5 + (int64_t)((seed >> 8) % 120), on_many, &s[i]);
    }
    int stopped = 0;
    for (int i = 0; i < NMANY; i += 7) {
        seed = seed * 1103515245 + 12345;
        if ((seed >> 9) & 1) {
            gio_timer_stop(l, &s[i].t);
            s[i].again = -1; /* marks it stopped */
            stopped++;
        } else {
            gio_timer_set(l, &s[i].t, base + 5 + (int64_t)((seed >> 8) % 120), on_many, &s[i]);
        }
    }
    int64_t end = now_ms() + 5000;
    while (nfired < NMANY - stopped && now_ms() < end) {
        gio_wait(l, -1);
        gio_timers_run(l);
    }
    int once = 1, early = 0, order = 1;
    for (int i = 0; i < NMANY; i++) {
        if (s[i].fired != (s[i].again < 0 ? 0 : 1))
            once = 0;
        if (s[i].fired && s[i].at < s[i].t.when)
            early = 1;
    }
    for (int i = 1; i < nfired; i++)
        if (fired_when[i] < fired_when[i - 1])
            order = 0;
    is_int(nfired, NMANY - stopped, "%d timers (%d stopped): the others fired", NMANY, stopped);
    ok(once, "each once, the stopped ones never");
    ok(!early, "none before its time");
    ok(order, "earliest first");

    /* ties fire in the order they were set (not by address or heap place) */
    static const int set_order[8] = {3, 1, 7, 0, 6, 2, 5, 4};
    gio_timer_t t[8];
    int64_t when = gio_now(l) + 10;
    memset(t, 0, sizeof t);
    ntie = 0;
    for (int i = 0; i < 8; i++)
        gio_timer_set(l, &t[set_order[i]], when, on_tie, (void *)(intptr_t)set_order[i]);
    int64_t stop = now_ms() + 3000;
    while (ntie < 8 && now_ms() < stop) {
        gio_wait(l, 1000);
        gio_timers_run(l);
    }
    ok(ntie == 8 && !memcmp(tie_order, set_order, sizeof set_order),
       "8 timers due together fire in the order they were set");
}

/* A callback may free the memory its timer lives in (ASan), and a timer
   armed when its loop is freed is stopped, not left pointing at it. */
static void on_free(gio_loop_t *l, void *arg)
{
    (void)l;
    free(arg);
}

static void test_free(gio_loop_t *l)
{
    gio_timer_t *t = calloc(1, sizeof *t);
    gio_timer_set(l, t, gio_now(l), on_free, t);
    gio_wait(l, 0);
    is_int(gio_timers_run(l), 1, "a callback that frees its own timer");

    gio_loop_t *other = gio_loop_new();
    shot_t s = {.t = GIO_TIMER_INIT};
    gio_timer_set(other, &s.t, gio_now(other) + 100000, on_shot, &s);
    gio_loop_free(other);
    ok(!gio_timer_armed(&s.t), "gio_loop_free stops the timers still armed");
    gio_timer_set(l, &s.t, gio_now(l), on_shot, &s); /* usable with another loop */
    gio_wait(l, 0);
    ok(gio_timers_run(l) == 1 && s.fired == 1, "and it can be set on another loop then");
}

/* Reserving room: a bound that cannot be met is ENOMEM, one that can is
   there (armed timers up to it need no growth: ASan sees the heap's end). */
static void test_reserve(gio_loop_t *l)
{
    errno = 0;
    ok(gio_timer_reserve(l, SIZE_MAX) < 0 && errno == ENOMEM, "reserving SIZE_MAX: ENOMEM");
    ok(gio_timer_reserve(l, 500) == 0, "reserving 500");
    static gio_timer_t t[500 + GIO_TIMER_SPARE];
    int armed = 0;
    for (int i = 0; i < 500 + GIO_TIMER_SPARE; i++)
        armed += gio_timer_set(l, &t[i], gio_now(l) + 100000 + i, on_free, NULL) == 0;
    is_int(armed, 500 + GIO_TIMER_SPARE, "the reserved and the spare ones all armed");
    for (int i = 0; i < 500 + GIO_TIMER_SPARE; i++)
        gio_timer_stop(l, &t[i]);
    gio_wait(l, 0);
    is_int(gio_timers_run(l), 0, "stopped, none fires");
}

int main(void)
{
    gio_loop_t *l = gio_loop_new();
    ok(l != NULL, "gio_loop_new (%s)", gio_backend_name());
    if (!l)
        return tap_done();
    test_once(l);
    test_bounds_wait(l);
    test_rearm(l);
    test_stop(l);
    test_many(l);
    test_free(l);
    test_reserve(l);
    is_int(gio_count(l), 0, "nothing left registered");
    gio_loop_free(l);
    return tap_done();
}
