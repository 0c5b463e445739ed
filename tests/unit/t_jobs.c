/* jobs: the thread pool that keeps slow work off the event loop. */
#define _GNU_SOURCE /* sched_setaffinity */
#include "gio.h"
#include "jobs.h"
#include "tap.h"

#include <errno.h>
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A full queue refuses; shutting down cancels what waits and finishes the rest. */
static void test_full_and_shutdown(void)
{
    static tjob_t t[10];
    memset(t, 0, sizeof t);
    ndone = 0;
    jobs_t *j = jobs_new(1, 4);
    int accepted = 0, refused = 0, worked0 = atomic_load(&worked);
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
    int each = 1, cancelled = 0, left = 0;
    for (int i = 0; i < 10; i++) {
        int submitted = i < accepted;
        left += submitted && !t[i].done; /* still running past jobs_free's wait */
        each &= t[i].done <= submitted; /* once, or (left) not yet; never unsubmitted */
        cancelled += t[i].cancelled;
        each &= !t[i].cancelled || !t[i].ran;
    }
    ok(each && left <= 1, "after jobs_free every accepted job completed exactly once, but for "
       "%d left running (a loaded CPU)", left);
    ok(cancelled >= 1, "queued jobs were cancelled, not run (%d)", cancelled);
    for (int i = 0; i < 500 && left && atomic_load(&worked) - worked0 < accepted - cancelled; i++)
        usleep(10000); /* the left one ends on a pool jobs_free kept */
}

static int gate[2];
static atomic_int holding;

static void held(job_t *j)
{
    char c;
    atomic_store(&holding, 1);
    while (read(gate[0], &c, 1) < 0 && errno == EINTR)
        ;
    work(j);
}

/* A job still running is not waited for past 200 ms (a busy CPU starves its SCHED_IDLE thread
   for minutes: a SIGTERM waited on a password hash past 60 s): jobs_free leaves it and the
   pool to the thread, which finishes on memory still there (ASan would say). */
static void test_a_running_job_is_left(void)
{
    static tjob_t t[2];
    memset(t, 0, sizeof t);
    ndone = 0;
    jobs_t *j = jobs_new(1, 4);
    ok(j && pipe(gate) == 0, "pool and gate");
    t[0] = (tjob_t){.job = {.work = held, .done = done}, .id = 1};
    t[1] = (tjob_t){.job = {.work = work, .done = done}, .id = 2};
    int before = atomic_load(&worked);
    ok(jobs_submit(j, &t[0].job) == 0 && jobs_submit(j, &t[1].job) == 0, "two jobs submitted");
    for (int i = 0; i < 1000 && !atomic_load(&holding); i++)
        usleep(10000); /* its thread has taken it */
    double t0 = now_s();
    jobs_free(j);
    double took = now_s() - t0;
    ok(took >= 0.15 && took < 1.0, "jobs_free waited %.3f s for the held job, then left it", took);
    ok(!t[0].done && t[1].done && t[1].cancelled && !t[1].ran,
       "the held job is not completed; the queued one is cancelled, not run");
    ok(write(gate[1], "x", 1) == 1, "the held job let go");
    for (int i = 0; i < 500 && atomic_load(&worked) == before; i++)
        usleep(10000);
    usleep(50000); /* its thread pushes it to the pool's finished list and leaves */
    ok(t[0].ran == 1 && !t[0].done, "it ran on, and its done() never runs");
    close(gate[0]);
    close(gate[1]);
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
    test_a_running_job_is_left();
    jobs_free(NULL);
    return tap_done();
}
