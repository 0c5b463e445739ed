/* jobs: the thread pool that keeps slow work off the event loop. */
#define _GNU_SOURCE /* sched_setaffinity */
#include "gio.h"
#include "jobs.h"
#include "tap.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct tjob {
    job_t job;
    int id, ran, done, cancelled;
    unsigned long sum;
} tjob_t;

static atomic_int worked;

static void work(job_t *j)
{
    tjob_t *t = (tjob_t *)j;
    for (int i = 0; i < 1000 + t->id % 100; i++) /* a little real work */
        t->sum += (unsigned long)i * (unsigned long)t->id;
    t->ran++;
    atomic_fetch_add(&worked, 1);
}

static void slow(job_t *j)
{
    usleep(20000);
    work(j);
}

static int ndone;

static void done(job_t *j)
{
    tjob_t *t = (tjob_t *)j;
    t->done++;
    t->cancelled = j->cancelled;
    ndone++;
}

/* Many jobs through a real gio loop: each runs once and completes once. */
static void test_many(int threads)
{
    enum { N = 5000 };
    static tjob_t t[N];
    memset(t, 0, sizeof t);
    ndone = 0;
    jobs_t *j = jobs_new(threads, N);
    gio_loop_t *l = gio_loop_new();
    ok(j && l && gio_add(l, jobs_fd(j), j) == 0, "pool of %d and loop", threads);
    gio_want(l, jobs_fd(j), GIO_READ);
    int submitted = 0;
    for (int i = 0; i < N; i++) {
        t[i] = (tjob_t){.job = {.work = work, .done = done}, .id = i};
        submitted += jobs_submit(j, &t[i].job) == 0;
    }
    is_int(submitted, N, "all %d submitted", N);
    for (int rounds = 0; ndone < N && rounds < 10000; rounds++) {
        gio_wait(l, 1000);
        unsigned ev;
        while (gio_next(l, &ev) >= 0)
            jobs_complete(j);
    }
    int once = 1, right = 1;
    for (int i = 0; i < N; i++) {
        once &= t[i].ran == 1 && t[i].done == 1 && !t[i].cancelled;
        unsigned long want = 0;
        for (int k = 0; k < 1000 + i % 100; k++)
            want += (unsigned long)k * (unsigned long)i;
        right &= t[i].sum == want;
    }
    ok(once, "every job worked once and completed once (%d threads)", threads);
    ok(right, "every job's result is intact");
    jobs_stats_t st = jobs_stats(j);
    ok(st.submitted == N && st.completed == N && st.queued == 0 && st.running == 0,
       "counters: %llu submitted, %llu completed", (unsigned long long)st.submitted,
       (unsigned long long)st.completed);
    gio_del(l, jobs_fd(j));
    gio_loop_free(l);
    jobs_free(j);
}

/* A full queue refuses; shutting down cancels what waits and finishes the rest. */
static void test_full_and_shutdown(void)
{
    static tjob_t t[10];
    memset(t, 0, sizeof t);
    ndone = 0;
    jobs_t *j = jobs_new(1, 4);
    int accepted = 0, refused = 0;
    for (int i = 0; i < 10; i++) {
        t[i] = (tjob_t){.job = {.work = slow, .done = done}, .id = i};
        if (jobs_submit(j, &t[i].job) == 0)
            accepted++;
        else
            refused++;
    }
    ok(accepted >= 4 && accepted <= 5 && refused == 10 - accepted,
       "queue of 4 (+1 running): %d accepted, %d refused", accepted, refused);
    is_int(jobs_stats(j).rejected, refused, "refusals counted");
    jobs_free(j);
    int each = 1, cancelled = 0;
    for (int i = 0; i < 10; i++) {
        int submitted = i < accepted;
        each &= t[i].done == submitted;
        cancelled += t[i].cancelled;
        each &= !t[i].cancelled || !t[i].ran;
    }
    ok(each, "after jobs_free every accepted job completed exactly once");
    ok(cancelled >= 1, "queued jobs were cancelled, not run (%d)", cancelled);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pool's threads run under SCHED_IDLE, which a busy CPU starves: shutting down must not
   wait for idle threads to be scheduled (it held a server's exit 3 s on a loaded machine,
   with nothing running).  Six busy processes share this one's CPU meanwhile. */
static void test_free_on_a_busy_cpu(void)
{
    cpu_set_t one, old;
    sched_getaffinity(0, sizeof old, &old);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
    jobs_t *j = jobs_new(4, 4); /* threads inherit the one CPU */
    pid_t busy[6];
    int nbusy = 0;
    for (int i = 0; i < 6; i++) {
        pid_t p = fork();
        if (p == 0)
            for (;;)
                ;
        if (p > 0)
            busy[nbusy++] = p;
    }
    usleep(200000);
    double t0 = now_s();
    jobs_free(j);
    double took = now_s() - t0;
    for (int i = 0; i < nbusy; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    sched_setaffinity(0, sizeof old, &old);
    ok(j && nbusy == 6 && took < 0.5, "jobs_free beside 6 busy processes on its CPU: %.3f s",
       took);
}

int main(void)
{
    test_many(1);
    test_many(4);
    test_full_and_shutdown();
    test_free_on_a_busy_cpu();
    jobs_free(NULL);
    return tap_done();
}
