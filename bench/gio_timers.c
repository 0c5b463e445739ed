/*
 * gio_timers — what a deadline costs the IO layer as descriptors grow.
 *
 *   build/<backend>/gio_timers [n] [per_ms]
 *
 * Registers n eventfds (default 19000; the descriptor limit must allow
 * it), gives them deadlines per_ms per millisecond apart (default 1), runs
 * the loop until every one has expired, then moves every deadline 20 times.
 * Prints the CPU per expiry (which includes the wait per millisecond) and
 * per move.  With a structure whose cost grows with n (a scan of the
 * descriptor table per expiry) the first figure grows with n; with the heap
 * it stays flat.
 */
#include "gio.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 19000, per = argc > 2 ? atoi(argv[2]) : 1;
    if (n < 1 || per < 1) {
        fprintf(stderr, "usage: gio_timers [n] [per_ms]\n");
        return 2;
    }
    gio_loop_t *l = gio_loop_new();
    int *fd = malloc((size_t)n * sizeof *fd);
    if (!l || !fd) {
        perror("gio_timers");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if ((fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 || gio_add(l, fd[i], fd) < 0) {
            fprintf(stderr, "gio_timers: descriptor %d of %d: ", i, n);
            perror(NULL); /* EMFILE: raise the limit or ask for fewer */
            return 1;
        }
    gio_wait(l, 0);
    int64_t t0 = gio_now(l);
    for (int i = 0; i < n; i++)
        gio_set_deadline(l, fd[i], t0 + 50 + i / per);
    clock_t c0 = clock();
    for (int got = 0; got < n;) {
        gio_wait(l, -1);
        while (gio_next_timeout(l) >= 0)
            got++;
    }
    clock_t c1 = clock();
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < n; i++)
            gio_set_deadline(l, fd[i], t0 + 100000 + (i * 7919 + r * 104729) % 50000);
    clock_t c2 = clock();
    printf("%d descriptors, %d expiries/ms: %.1f us CPU per expiry, %.3f us per move (%s)\n", n,
           per, (double)(c1 - c0) * 1e6 / CLOCKS_PER_SEC / n,
           (double)(c2 - c1) * 1e6 / CLOCKS_PER_SEC / (20.0 * n), gio_backend_name());
    return 0;
}
