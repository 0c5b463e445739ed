/*
 * gio_timers — what a deadline costs the IO layer as descriptors grow.
 *
 *   build/<backend>/gio_timers [n] [per_ms] [expiring]
 *
 * Registers n descriptors (unbound unix datagram sockets without interest,
 * which every backend accepts; default 19000; the descriptor limit must
 * allow it), all with deadlines an hour away, and measures the CPU per
 * expiry and per move of a deadline.
 *
 * per_ms > 0 (default 1): the first `expiring` descriptors (default n) get
 * deadlines per_ms per millisecond apart, and the loop runs until they have
 * expired; the figure includes the wait per millisecond, as a server's would.
 *
 * per_ms = 0: `expiring` expiries back to back (any number; descriptors taken
 * in turn): a deadline is set just past, one wait that does not sleep
 * collects it, and the descriptor gets its far deadline back.  No sleep, so
 * the figure is the structure's own cost plus a wait's system call, steady
 * on a busy machine.  With a structure whose cost grows with n (a scan of
 * the descriptor table per expiry) it grows with n; with the heap it stays
 * nearly flat (tests/integration/http/test_hardening.py compares 1,000 and
 * 19,000 descriptors).
 *
 * Then every deadline is moved 20 times.
 */
#include "gio.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FAR_MS 3600000 /* the deadline of a descriptor that does not expire */

/* Timed deadlines, per per ms, on the first k descriptors; returns the waits. */
static long expire_timed(gio_loop_t *l, const int *fd, int k, int per)
{
    int64_t t0 = gio_now(l);
    long waits = 0;
    for (int i = 0; i < k; i++)
        gio_set_deadline(l, fd[i], t0 + 50 + i / per);
    for (int got = 0; got < k; waits++) {
        gio_wait(l, -1);
        while (gio_next_timeout(l) >= 0)
            got++;
    }
    return waits;
}

/* k expiries one after another, each found by its own wait; -1 if one is
   not reported. */
static long expire_back_to_back(gio_loop_t *l, const int *fd, int n, int k)
{
    for (int i = 0; i < k; i++) {
        int f = fd[i % n];
        gio_set_deadline(l, f, gio_now(l) - 1); /* gio_now() is far above 1 */
        gio_wait(l, 0);
        if (gio_next_timeout(l) != f)
            return -1;
        gio_set_deadline(l, f, gio_now(l) + FAR_MS);
    }
    return k;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 19000, per = argc > 2 ? atoi(argv[2]) : 1;
    int k = argc > 3 ? atoi(argv[3]) : n;
    if (n < 1 || per < 0 || k < 1 || (per > 0 && k > n)) {
        fprintf(stderr, "usage: gio_timers [n] [per_ms] [expiring (<= n unless per_ms is 0)]\n");
        return 2;
    }
    gio_loop_t *l = gio_loop_new();
    int *fd = malloc((size_t)n * sizeof *fd);
    if (!l || !fd) {
        perror("gio_timers");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        /* not an eventfd: the sigio backend refuses descriptors without SIGIO */
        fd[i] = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd[i] < 0 || gio_add(l, fd[i], fd) < 0) {
            fprintf(stderr, "gio_timers: descriptor %d of %d: ", i, n);
            perror(NULL); /* EMFILE: raise the limit or ask for fewer */
            return 1;
        }
    }
    gio_wait(l, 0);
    int64_t t0 = gio_now(l);
    for (int i = 0; i < n; i++)
        gio_set_deadline(l, fd[i], t0 + FAR_MS + i);
    clock_t c0 = clock();
    long waits = per ? expire_timed(l, fd, k, per) : expire_back_to_back(l, fd, n, k);
    clock_t c1 = clock();
    if (waits < 0) {
        fprintf(stderr, "gio_timers: an expiry was not reported\n");
        return 1;
    }
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < n; i++)
            gio_set_deadline(l, fd[i], t0 + 100000 + (i * 7919 + r * 104729) % 50000);
    clock_t c2 = clock();
    printf("%d descriptors, %d expiries, %d per ms (0: back to back): %.2f us CPU per expiry, "
           "%ld waits, %.3f us per move (%s)\n",
           n, k, per, (double)(c1 - c0) * 1e6 / CLOCKS_PER_SEC / k, waits,
           (double)(c2 - c1) * 1e6 / CLOCKS_PER_SEC / (20.0 * n), gio_backend_name());
    for (int i = 0; i < n; i++)
        gio_close(l, fd[i]);
    gio_loop_free(l);
    free(fd);
    return 0;
}
