/*
 * kb-thread: pthread_create(); the thread writes one byte to a pipe and
 * waits; the creator reads it.  The latency of that (and of pthread_create()
 * returning) as live threads grow.  Stacks are 64 KiB, so that memory is not
 * the first limit; the threads end with the process.
 */
#include "kb.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

static int p[2], hold[2];

static void *body(void *arg)
{
    (void)arg;
    char b = 't';
    (void)!write(p[1], &b, 1);
    (void)!read(hold[0], &b, 1); /* never written: the thread waits */
    return NULL;
}

int main(int argc, char **argv)
{
    kb_opts_t o;
    kb_start(argc, argv, "kb-thread",
             "latency of pthread_create() until the thread has run, as live threads grow",
             "create+run\tcreate", 2000, 0, 0, &o);
    pthread_attr_t attr;
    if (pipe(p) < 0 || pipe(hold) < 0 || pthread_attr_init(&attr) ||
        pthread_attr_setstacksize(&attr, 64 << 10) ||
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED))
        return kb_end(0, kb_fail("set-up", errno, 0));
    int rc = KB_OK;
    long n;
    for (n = 1; n <= o.n && !kb_stop; n++) {
        pthread_t t;
        uint64_t t0 = kb_now();
        int err = pthread_create(&t, &attr, body, NULL);
        uint64_t t1 = kb_now();
        if (err) {
            rc = kb_fail("pthread_create()", err, n - 1);
            break;
        }
        char b;
        while (read(p[0], &b, 1) < 0 && errno == EINTR)
            ;
        uint64_t t2 = kb_now();
        uint64_t d[2] = {t2 - t0, t1 - t0};
        if (kb_due(n))
            kb_sample(n, 2, d);
    }
    return kb_end(n - 1, rc);
}
