/* On-the-fly gzip on a worker thread: see gzip.h. */
#include "gzip.h"
#include "hstate.h"
#include "site/encoding.h"
#include "site/jobs.h"
#include "site/site.h"

#include <stdlib.h>

typedef struct gzip_job {
    ex_job_t xj; /* first: codec/codec.c's job_back frees the whole struct */
    enc_gzjob_t *g;
} gzip_job_t;

static void gzip_work(job_t *j)
{
    enc_gzip_run(((gzip_job_t *)j)->g);
}

static void gzip_finish(ex_job_t *xj, exchange_t *ex)
{
    (void)ex; /* the request finds the result in the cache when it is dispatched again */
    enc_gzip_end(((gzip_job_t *)xj)->g);
}

int gzip_wait(exchange_t *ex, fcache_entry_t *f, int enc)
{
    if (hslot_req(ex, HSLOT_GZIP)) /* it waited once already */
        return 0;
    gzip_job_t *z = calloc(1, sizeof *z);
    if (!z)
        return 0;
    if (!(z->g = enc_coded_begin(ex->site->gzcache, f->fd, &f->st, enc))) {
        free(z);
        return 0;
    }
    z->xj.job.work = gzip_work;
    z->xj.finish = gzip_finish;
    ex->job = &z->xj;
    hslot_req_set(ex, HSLOT_GZIP, 1);
    return 1;
}
