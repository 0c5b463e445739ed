/*
 * jobs — work that must not stall the event loop (a password hash, a file
 * to compress) runs on a small pool of threads; its result comes back to the
 * loop through a descriptor the loop watches, where the owner resumes.  One
 * mechanism for every such job (STYLE, "Nothing blocks the loop").
 *
 *   job->work(job)   runs on a pool thread: it may only touch the job
 *   job->done(job)   runs on the loop thread, from jobs_complete()
 *
 * Ownership: the job's memory belongs to the pool from jobs_submit() until
 * done() has run; done() (or the owner afterwards) frees it.  An owner that
 * goes away meanwhile must not free the job: it tells the job instead (a
 * pointer in the job set to NULL), and done() sees that.
 */
#ifndef GATLING_JOBS_H
#define GATLING_JOBS_H

#include <stddef.h>
#include <stdint.h>

typedef struct job {
    void (*work)(struct job *);
    void (*done)(struct job *);
    struct job *next; /* the pool's */
    int cancelled;    /* set when the pool shut down before work ran */
} job_t;

struct exchange;

/*
 * Work a handler sends off the loop for an exchange.  The handler mallocs a
 * struct that starts with this, sets job.work (runs on a pool thread) and
 * finish (runs on the loop), puts it in ex->job and returns; the codec
 * submits it (codec/codec.h's codec_job_send) and, when it is done, calls
 * finish, frees the struct and hands the exchange back to its owner.  finish always runs, also when the
 * exchange went first (its connection closed: then ex is NULL) or the pool
 * shut down before work ran (job.cancelled), so that it can release what
 * the job holds.
 */
typedef struct ex_job {
    job_t job;
    struct exchange *ex; /* the codec's: NULL once the exchange is gone */
    void (*finish)(struct ex_job *xj, struct exchange *ex);
    void (*back)(struct exchange *ex, int cancelled); /* codec_job_send's: the owner resumes */
} ex_job_t;

typedef struct jobs_stats {
    uint64_t submitted, completed, rejected; /* rejected: the queue was full */
    size_t queued, running;
} jobs_stats_t;

typedef struct jobs jobs_t;

/*
 * A pool of up to nthreads threads (1..64) with a queue of at most max_queued
 * jobs waiting.  NULL with errno set on failure (one thread is started and
 * ends, to know threads can be).  Threads start when jobs wait and end when
 * none does; they block every signal.
 */
jobs_t *jobs_new(int nthreads, size_t max_queued);

/* The descriptor that becomes readable when jobs have finished (register it
   with the loop for reading; call jobs_complete() when it is). */
int jobs_fd(const jobs_t *j);

/* Queue job.  0, or -1 when the queue is full or no thread can be started for it
   (the caller degrades: 503). */
int jobs_submit(jobs_t *j, job_t *job);

/* On the loop: run done() for every finished job.  Returns how many. */
size_t jobs_complete(jobs_t *j);

/* The counters, for /server-status. */
jobs_stats_t jobs_stats(jobs_t *j);

/*
 * Stop, as the process ends: jobs still queued are not run (cancelled = 1),
 * running ones are waited for up to 200 ms (no idle thread is: there is
 * none); done() runs for every job finished or cancelled, and everything is
 * freed.  A job still running then is left to its thread (its done() never
 * runs) and the pool with it, until the process's exit.  NULL is a no-op.
 */
void jobs_free(jobs_t *j);

#endif
