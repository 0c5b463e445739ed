/*
 * kb-stream -R: a TCP relay, Linux's answer to OpenBSD's socket splicing.
 * Each accepted connection gets one to the target and two threads, one per
 * direction, that copy with read/write (copy) or move the data with
 * splice(2) through a pipe without copying it to user space (splice), and
 * pass a half close on.  It ends after -n connections or -t seconds and
 * prints the bytes each way and its CPU share.  See kb_stream_relay.h.
 */
#define _GNU_SOURCE
#include "kb_stream_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct {
    int from, to, splice, joined;
    uint64_t bytes;
    pthread_t th;
} pump_t;

typedef struct {
    int a, b;          /* accepted, connected */
    pump_t up, down;
} pair_t;

static void *pump(void *arg)
{
    pump_t *p = arg;
    if (p->splice) {
        int pf[2];
        if (pipe2(pf, 0) < 0)
            goto out;
        fcntl(pf[1], F_SETPIPE_SZ, 1 << 20);
        ssize_t n;
        while ((n = splice(p->from, NULL, pf[1], NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_MORE))
               > 0) {
            p->bytes += (uint64_t)n;
            while (n > 0) {
                ssize_t m = splice(pf[0], NULL, p->to, NULL, (size_t)n,
                                   SPLICE_F_MOVE | SPLICE_F_MORE);
                if (m <= 0)
                    break;
                n -= m;
            }
            if (n > 0)
                break;
        }
        close(pf[0]), close(pf[1]);
        goto out;
    }
    static __thread char buf[128 * 1024] __attribute__((aligned(4096))); /* KS_ALIGN */
    ssize_t n;
    while ((n = read(p->from, buf, sizeof buf)) > 0) {
        p->bytes += (uint64_t)n;
        for (ssize_t off = 0, m; off < n; off += m)
            if ((m = write(p->to, buf + off, (size_t)(n - off))) <= 0)
                goto out;
    }
out:
    shutdown(p->to, SHUT_WR);
    return NULL;
}

static int start_pair(const ks_opts_t *o, pair_t *pp, int fd)
{
    *pp = (pair_t){.a = fd, .b = socket(o->family, SOCK_STREAM, 0)};
    ks_sockbuf(o, fd);
    if (pp->b < 0 || (ks_sockbuf(o, pp->b), 0) || ks_congestion(o, pp->b) < 0 ||
        connect(pp->b, (const struct sockaddr *)&o->addr, o->alen) < 0) {
        fprintf(stderr, "kb-stream: relay: connect to the target: %s\n", strerror(errno));
        close(fd);
        if (pp->b >= 0)
            close(pp->b);
        return -1;
    }
    pp->up = (pump_t){.from = fd, .to = pp->b, .splice = o->splice};
    pp->down = (pump_t){.from = pp->b, .to = fd, .splice = o->splice};
    pthread_create(&pp->up.th, NULL, pump, &pp->up);
    pthread_create(&pp->down.th, NULL, pump, &pp->down);
    return 0;
}

int ks_relay(const ks_opts_t *o, int lfd)
{
    pair_t *pairs = calloc((size_t)o->n, sizeof *pairs);
    int k = 0, failed = 0;
    if (!pairs) {
        fprintf(stderr, "kb-stream: -n %ld connections: out of memory\n", o->n);
        return 1;
    }
    double t0 = ks_now(), end = t0 + o->secs;
    fflush(stdout);
    while (k < o->n && !ks_stop && ks_now() < end) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        int fd = accept(lfd, NULL, NULL);
        if (k == 0 && fd >= 0)
            t0 = ks_now(); /* its CPU share from the first connection on */
        if (fd >= 0 && start_pair(o, &pairs[k], fd) == 0)
            k++;
        else
            failed++;
    }
    /* every connection accepted: wait for both directions' ends, until -t */
    int unfinished = k < o->n;
    for (int i = 0; i < 2 * k; i++) {
        pump_t *p = i % 2 ? &pairs[i / 2].down : &pairs[i / 2].up;
        while (!ks_stop && ks_now() < end && !(p->joined = !pthread_tryjoin_np(p->th, NULL)))
            poll(NULL, 0, 20);
    }
    for (int i = 0; i < k; i++) {
        shutdown(pairs[i].a, SHUT_RDWR), shutdown(pairs[i].b, SHUT_RDWR);
        unfinished += !pairs[i].up.joined || !pairs[i].down.joined;
        if (!pairs[i].up.joined)
            pthread_join(pairs[i].up.th, NULL);
        if (!pairs[i].down.joined)
            pthread_join(pairs[i].down.th, NULL);
        close(pairs[i].a), close(pairs[i].b);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double usr = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    double sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, wall = ks_now() - t0;
    uint64_t up = 0, down = 0;
    for (int i = 0; i < k; i++)
        up += pairs[i].up.bytes, down += pairs[i].down.bytes;
    printf("total role=relay mode=%s conns=%d failed=%d bytes=%llu back=%llu secs=%.3f "
           "usr=%.3f sys=%.3f cpu=%.2f cpu_bound=%s\n", o->splice ? "splice" : "copy", k,
           failed, (unsigned long long)up, (unsigned long long)down, wall, usr, sys,
           (usr + sys) / wall, (usr + sys) / wall >= 0.9 ? "yes" : "no");
    free(pairs);
    return failed || unfinished ? 3 : 0;
}
