/*
 * The job pool: see jobs.h.  One mutex guards two FIFO lists (waiting and
 * finished); idle threads sleep on a condition variable.  A thread that
 * finishes a job writes one byte to a pipe only when the finished list was
 * empty, so a burst of completions costs the loop one wake-up, and the loop
 * never misses one: it empties the pipe before it takes the list.
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
#include <unistd.h>

#define JOBS_MAX_THREADS 64

struct jobs {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *wait_head, *wait_tail; /* submitted, not started */
    job_t *done_head, *done_tail; /* finished, done() not run yet */
    size_t nwait, max_wait, running;
    uint64_t submitted, completed, rejected;
    int stopping;
    int pipe[2]; /* threads write, the loop reads */
    int nthreads;
    pthread_t tid[JOBS_MAX_THREADS];
};

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
#ifdef SCHED_IDLE
    /* the event loop comes first: a thread hashing a password runs only on
       CPU time the loop does not want, also when both share one core */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
#endif
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->wait_head && !j->stopping)
            pthread_cond_wait(&j->cv, &j->mu);
        if (j->stopping)
            break;
        job_t *job = j->wait_head;
        j->wait_head = job->next;
        if (!j->wait_head)
            j->wait_tail = NULL;
        j->nwait--;
        j->running++;
        pthread_mutex_unlock(&j->mu);
        job->work(job);
        pthread_mutex_lock(&j->mu);
        j->running--;
        int wake = !j->done_head;
        push(&j->done_head, &j->done_tail, job);
        if (wake) /* the pipe holds at most one byte per burst: it never fills */
            (void)!write(j->pipe[1], "", 1);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
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
    j->pipe[0] = j->pipe[1] = -1;
    if (pthread_mutex_init(&j->mu, NULL) || pthread_cond_init(&j->cv, NULL) ||
        pipe2(j->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        int e = errno;
        free(j);
        errno = e;
        return NULL;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the loop thread */
    for (; j->nthreads < nthreads; j->nthreads++)
        if (pthread_create(&j->tid[j->nthreads], NULL, worker, j) != 0)
            break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (j->nthreads == 0) {
        jobs_free(j);
        errno = EAGAIN;
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
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
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
    pthread_mutex_lock(&j->mu);
    j->stopping = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < j->nthreads; i++)
        pthread_join(j->tid[i], NULL);
    jobs_complete(j); /* what finished */
    for (job_t *job = j->wait_head, *next; job; job = next) {
        next = job->next;
        job->cancelled = 1;
        job->done(job);
    }
    close(j->pipe[0]);
    close(j->pipe[1]);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
