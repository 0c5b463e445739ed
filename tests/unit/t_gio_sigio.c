/*
 * t_gio_sigio — the sigio backend's overflow recovery (io/gio_sigio.c).
 *
 * A child lowers RLIMIT_SIGPENDING to a handful, registers 200 socketpairs,
 * and makes all of them readable at once: most realtime signals are dropped
 * and the kernel raises plain SIGIO instead.  Every descriptor must still be
 * reported (libowfat's recovery reports 7 of 50), in one round, and again in
 * the next round if it was not read (level-triggered).
 *
 * Linux only; with any other backend it prints a skip line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gio.h"
#include "tap.h"

#include <unistd.h>

#if defined(__linux__)
#include <errno.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define NPAIRS 200
#define SIGPENDING_LIMIT 16

static int sv[NPAIRS][2];

/* Ready fds of one round, as a bitmap over fds; returns how many. */
static int round_of(gio_loop_t *l, unsigned char *seen, int nseen)
{
    unsigned ev;
    int fd, n = 0;
    memset(seen, 0, nseen);
    if (gio_wait(l, 2000) < 0)
        return -1;
    while ((fd = gio_next(l, &ev)) >= 0) {
        if (fd < nseen && (ev & GIO_READ) && !seen[fd]) {
            seen[fd] = 1;
            n++;
        }
    }
    return n;
}

static int sigio_pending(void)
{
    sigset_t p;
    sigpending(&p);
    return sigismember(&p, SIGIO);
}

static void child(void)
{
    struct rlimit rl = {SIGPENDING_LIMIT, SIGPENDING_LIMIT};
    ok(setrlimit(RLIMIT_SIGPENDING, &rl) == 0, "RLIMIT_SIGPENDING lowered to %d", SIGPENDING_LIMIT);
    gio_loop_t *l = gio_loop_new();
    static unsigned char seen[4096];
    for (int i = 0; i < NPAIRS; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) < 0) {
            ok(0, "socketpair %d", i);
            return;
        }
        gio_nonblock(sv[i][0]);
        gio_add(l, sv[i][0], NULL);
        gio_want(l, sv[i][0], GIO_READ);
    }
    /* interest is known now and nothing is ready: from here on only the
       signals (or their overflow) can tell the backend anything */
    is_int(gio_wait(l, 0), 0, "%d registered, none ready", NPAIRS);

    for (int i = 0; i < NPAIRS; i++)
        write(sv[i][1], "s", 1);
    ok(sigio_pending(), "the signal queue overflowed (plain SIGIO pending)");
    is_int(round_of(l, seen, sizeof seen), NPAIRS, "all %d reported in one round", NPAIRS);
    is_int(round_of(l, seen, sizeof seen), NPAIRS, "not read: all reported again");

    char c;
    for (int i = 0; i < NPAIRS; i += 2)
        read(sv[i][0], &c, 1);
    int n = round_of(l, seen, sizeof seen), exact = 1;
    for (int i = 0; i < NPAIRS; i++)
        exact &= seen[sv[i][0]] == (i & 1);
    ok(n == NPAIRS / 2 && exact, "after reading the even ones: exactly the odd ones (%d)", n);

    /* drained, then made ready again: a second overflow is recovered too */
    for (int i = 1; i < NPAIRS; i += 2)
        read(sv[i][0], &c, 1);
    is_int(gio_wait(l, 0), 0, "all drained: none reported");
    for (int i = 0; i < NPAIRS; i++)
        write(sv[i][1], "t", 1);
    is_int(round_of(l, seen, sizeof seen), NPAIRS, "second overflow: all %d reported", NPAIRS);
    for (int i = 0; i < NPAIRS; i++) {
        gio_close(l, sv[i][0]);
        close(sv[i][1]);
    }

    /* an eventfd can raise no SIGIO: refused, rather than never reported */
    int efd = eventfd(0, EFD_NONBLOCK);
    errno = 0;
    ok(gio_add(l, efd, NULL) < 0 && errno == EINVAL, "eventfd refused with EINVAL");
    close(efd);
    gio_loop_free(l);
}

int main(void)
{
    if (strcmp(gio_backend_name(), "sigio") != 0) {
        printf("ok 1 # skip built with IO=%s, not sigio\n", gio_backend_name());
        tap_n = 1;
        return tap_done();
    }
    fflush(stdout);
    pid_t pid = fork(); /* the lowered limit and the flooded queue stay in the child */
    if (pid == 0) {
        child();
        _exit(tap_done()); /* the child prints the TAP lines and the plan */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        printf("not ok - the child was killed by signal %d\n", WTERMSIG(st));
        return 1;
    }
    return WEXITSTATUS(st);
}

#else

int main(void)
{
    printf("ok 1 # skip the sigio backend is Linux only\n");
    tap_n = 1;
    return tap_done();
}

#endif
