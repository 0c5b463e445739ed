/*
 * t_fcache — the open-file cache's expiry on the loop's timer (fcache_clock):
 * an entry's descriptor is closed at its time with nothing but the loop
 * running (no owner calling fcache_expire), and the timer follows the
 * oldest entry while any is left.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fcache.h"
#include "gio.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* Enter key with a fresh descriptor of /dev/null; its fd. */
static int put(fcache_t *fc, gio_loop_t *l, const char *key)
{
    fcache_entry_t tmpl;
    memset(&tmpl, 0, sizeof tmpl);
    tmpl.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fstat(tmpl.fd, &tmpl.st);
    fcache_entry_t *e = fcache_put(fc, key, strlen(key), &tmpl, gio_now(l));
    if (!e)
        return -1;
    fcache_release(e); /* the table's now, until it expires */
    return tmpl.fd;
}

/* Run the loop until fd closes or limit_ms passes; ms it took. */
static int64_t run_until_closed(gio_loop_t *l, int fd, int limit_ms)
{
    int64_t t0 = now_ms();
    while (is_open(fd) && now_ms() - t0 < limit_ms) {
        gio_wait(l, -1);
        gio_timers_run(l);
    }
    return now_ms() - t0;
}

int main(void)
{
    gio_loop_t *l = gio_loop_new();
    fcache_t *fc = fcache_new(6, 0, 0);
    ok(l && fc, "a loop and a cache");
    if (!l || !fc)
        return tap_done();
    fcache_clock(fc, l);

    int a = put(fc, l, "/a");
    ok(a >= 0 && is_open(a), "an entry holds its descriptor");
    int64_t dt = run_until_closed(l, a, 5000);
    ok(!is_open(a), "closed by the loop's timer alone, after %lld ms", (long long)dt);
    ok(dt >= FCACHE_TTL_MS - 200 && dt < FCACHE_TTL_MS + 4000, "at its time (TTL %d ms)",
       FCACHE_TTL_MS);
    fcache_entry_t *e = fcache_get(fc, "/a", 2, gio_now(l));
    ok(e == NULL, "and gone from the table");

    /* two entries half a TTL apart: the timer follows the oldest, then the next */
    int b = put(fc, l, "/b");
    int64_t t0 = now_ms();
    while (now_ms() - t0 < FCACHE_TTL_MS / 2) {
        gio_wait(l, FCACHE_TTL_MS / 2);
        gio_timers_run(l);
    }
    int c = put(fc, l, "/c");
    int64_t tc = now_ms();
    run_until_closed(l, b, 5000);
    /* a machine that stalled this loop for the rest of c's TTL (a loaded CI's
       2 cores) lets both expire at one timer run: that proves nothing here */
    int stalled = now_ms() - tc >= FCACHE_TTL_MS - 50;
    ok(!is_open(b) && (is_open(c) || stalled), "the older entry closes first, the newer stays%s",
       stalled ? " (the loop stalled past the newer's TTL: not judged)" : "");
    dt = run_until_closed(l, c, 5000);
    ok(!is_open(c), "then the newer, %lld ms later", (long long)dt);

    /* freed with an entry in it and the timer armed: stopped, nothing left behind */
    int d = put(fc, l, "/d");
    fcache_free(fc);
    ok(!is_open(d), "fcache_free closes what it holds");
    is_int(gio_wait(l, 50), 0, "and its timer is stopped");
    is_int(gio_timers_run(l), 0, "nothing runs");
    gio_loop_free(l);
    return tap_done();
}
