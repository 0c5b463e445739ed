/*
 * The job pool: see jobs.h.  One mutex guards two FIFO lists (waiting and
 * finished).  A thread that finishes a job writes one byte to a pipe only when
 * the finished list was empty, so a burst of completions costs the loop one
 * wake-up, and the loop never misses one: it empties the pipe before it takes
 * the list.
 *
 * No thread sleeps idle: jobs_submit starts one (up to nthreads) when the jobs
 * waiting outnumber the threads that have not taken one yet, and a thread
 * leaves once it finds the list empty.  A job runs under SCHED_IDLE, which a
 * busy CPU starves, and an idle thread would have to be scheduled to end: at
 * jobs_free, and again at the process's exit, which cannot complete before
 * every thread has run its own end.  Measured with idle threads that slept: a
 * server's exit held 3 s beside twelve busy processes on its CPU (bench/ab's
 * HTTP/3 round under make check missed its 10 s), jobs_free 2.9 s beside six
 * (t_jobs).  A thread starts at the loop's priority and lowers itself when it
 * takes its first job, so one that a shutdown finds unstarted ends at once.
 *
 * A running job is not waited for past JOBS_END_WAIT_MS at jobs_free: a busy
 * CPU can starve it for minutes (a password hash of half a CPU-second held a
 * SIGTERM past 60 s beside two busy loops), and its result is of no use to a
 * process that ends.  The pool is then left to its threads: they touch only
 * it and their job (jobs.h), and the process's exit ends them.  An exit ends
 * only when each thread has run once more, so jobs_free first raises them
 * back to the loop's priority (after -u, RLIMIT_NICE lets it: listeners.c).
 */
#define _GNU_SOURCE /* pipe2 */
#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOBS_MAX_THREADS 64
#define JOBS_END_WAIT_MS 200 /* jobs_free's wait for the running jobs */

struct jobs {
    pthread_mutex_t mu;
    pthread_cond_t gone; /* jobs_free waits on it for the last thread to leave */
    job_t *wait_head, *wait_tail; /* submitted, not started */
    job_t *done_head, *done_tail; /* finished, done() not run yet */
    size_t nwait, max_wait, running;
    uint64_t submitted, completed, rejected;
    int stopping;
    int pipe[2]; /* threads write, the loop reads */
    int max_threads, threads; /* threads: started and not yet left (running included) */
    pid_t tid[JOBS_MAX_THREADS]; /* the threads there (0: a free slot), for jobs_free to raise */
    struct jobs *left_next;      /* on `left` */
};

/* The pools jobs_free left to their running threads: reachable, not leaked */
static jobs_t *left;

static void push(job_t **head, job_t **tail, job_t *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

static void *worker(void *arg)
{
    jobs_t *j = arg;
    int lowered = 0, slot = 0;
    pthread_mutex_lock(&j->mu);
    while (slot < JOBS_MAX_THREADS - 1 && j->tid[slot]) /* threads <= JOBS_MAX_THREADS */
        slot++;
    j->tid[slot] = gettid();
    while (j->wait_head && !j->stopping) {
        job_t *job = j->wait_head;
        j->wait_head = job->next;
        if (!j->wait_head)
            j->wait_tail = NULL;
        j->nwait--;
        j->running++;
#ifdef SCHED_IDLE
        /* the event loop comes first: a thread hashing a password runs only on
           CPU time the loop does not want, also when both share one core.
           Under the lock: jobs_free, which raises it again, comes before or after */
        if (!lowered) {
            struct sched_param sp = {0};
            pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
        }
#endif
        lowered = 1;
        pthread_mutex_unlock(&j->mu);
        job->work(job);
        pthread_mutex_lock(&j->mu);
        j->running--;
        int wake = !j->done_head;
        push(&j->done_head, &j->done_tail, job);
        if (wake) /* the pipe holds at most one byte per burst: it never fills */
            (void)!write(j->pipe[1], "", 1);
    }
    j->tid[slot] = 0;
    if (--j->threads == 0 && j->stopping)
        pthread_cond_signal(&j->gone);
    pthread_mutex_unlock(&j->mu); /* the last touch of j: jobs_free may free it now */
    return NULL;
}

/* Start a detached thread (signals blocked: they stay with the loop thread).  0 or
   pthread_create's error. */
static int start_thread(jobs_t *j)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t tid;
    int rc = pthread_create(&tid, NULL, worker, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_detach(tid);
    return rc;
}

jobs_t *jobs_new(int nthreads, size_t max_queued)
{
    if (nthreads < 1 || nthreads > JOBS_MAX_THREADS) {
        errno = EINVAL;
        return NULL;
    }
    jobs_t *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->max_wait = max_queued;
    j->max_threads = nthreads;
    j->pipe[0] = j->pipe[1] = -1;
    pthread_condattr_t ca; /* jobs_free's bounded wait: not moved by the clock's setting */
    int bad = pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
              pthread_mutex_init(&j->mu, NULL) || pthread_cond_init(&j->gone, &ca) ||
              pipe2(j->pipe, O_NONBLOCK | O_CLOEXEC) < 0;
    pthread_condattr_destroy(&ca);
    if (bad) {
        int e = errno;
        free(j);
        errno = e;
        return NULL;
    }
    /* a thread can be started now (it finds no job and leaves): else the first job
       would be the one to find out */
    j->threads = 1; /* no thread yet: pthread_create orders this before the new one */
    int rc = start_thread(j);
    if (rc != 0) {
        j->threads = 0;
        jobs_free(j);
        errno = rc;
        return NULL;
    }
    return j;
}

int jobs_fd(const jobs_t *j)
{
    return j->pipe[0];
}

int jobs_submit(jobs_t *j, job_t *job)
{
    pthread_mutex_lock(&j->mu);
    if (j->nwait >= j->max_wait || j->stopping) {
        j->rejected++;
        pthread_mutex_unlock(&j->mu);
        return -1;
    }
    job->cancelled = 0;
    push(&j->wait_head, &j->wait_tail, job);
    j->nwait++;
    j->submitted++;
    /* threads that have not taken a job yet will take the first waiting ones */
    int start = j->threads < j->max_threads && (size_t)(j->threads - (int)j->running) < j->nwait;
    j->threads += start;
    pthread_mutex_unlock(&j->mu);
    if (!start || start_thread(j) == 0)
        return 0;
    /* no new thread (EAGAIN: a process limit): the job waits for one that runs, or,
       when none is left to take it, is refused as a full queue is */
    pthread_mutex_lock(&j->mu);
    j->threads--;
    int refused = 0;
    job_t **p = &j->wait_head, *prev = NULL;
    while (j->threads == 0 && *p && *p != job)
        prev = *p, p = &(*p)->next;
    if (j->threads == 0 && *p == job) { /* still there (else a leaving thread took it) */
        *p = job->next;
        if (j->wait_tail == job)
            j->wait_tail = prev;
        j->nwait--;
        j->submitted--;
        j->rejected++;
        refused = 1;
    }
    pthread_mutex_unlock(&j->mu);
    return refused ? -1 : 0;
}

size_t jobs_complete(jobs_t *j)
{
    char buf[64];
    while (read(j->pipe[0], buf, sizeof buf) > 0) /* first: a later byte means a later job */
        ;
    pthread_mutex_lock(&j->mu);
    job_t *job = j->done_head;
    j->done_head = j->done_tail = NULL;
    pthread_mutex_unlock(&j->mu);
    size_t n = 0;
    while (job) {
        job_t *next = job->next; /* done() may free job */
        job->done(job);
        job = next;
        n++;
    }
    pthread_mutex_lock(&j->mu);
    j->completed += n;
    pthread_mutex_unlock(&j->mu);
    return n;
}

jobs_stats_t jobs_stats(jobs_t *j)
{
    pthread_mutex_lock(&j->mu);
    jobs_stats_t st = {j->submitted, j->completed, j->rejected, j->nwait, j->running};
    pthread_mutex_unlock(&j->mu);
    return st;
}

void jobs_free(jobs_t *j)
{
    if (!j)
        return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += JOBS_END_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&j->mu);
    j->stopping = 1; /* threads end after the job they run; the waiting ones stay */
#ifdef SCHED_IDLE
    for (int i = 0; i < JOBS_MAX_THREADS; i++) /* a slot is cleared under the lock: tid is alive */
        if (j->tid[i]) {
            struct sched_param sp = {0};
            sched_setscheduler(j->tid[i], SCHED_OTHER, &sp);
        }
#endif
    while (j->threads && pthread_cond_timedwait(&j->gone, &j->mu, &until) != ETIMEDOUT)
        ;
    int running = j->threads;
    job_t *waiting = j->wait_head; /* no thread takes one now: stopping */
    j->wait_head = j->wait_tail = NULL;
    j->nwait = 0;
    pthread_mutex_unlock(&j->mu);
    jobs_complete(j); /* what finished */
    for (job_t *job = waiting, *next; job; job = next) {
        next = job->next;
        job->cancelled = 1;
        job->done(job);
    }
    if (running) { /* left to its threads, the pipe open: the process's exit ends them */
        j->left_next = left;
        left = j;
        return;
    }
    close(j->pipe[0]);
    close(j->pipe[1]);
    pthread_cond_destroy(&j->gone);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
