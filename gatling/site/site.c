/* The per-process site: see site.h. */
#include "site.h"
#include "dict.h"
#include "encoding.h"
#include "jobs.h"
#include "peerlimits.h"
#include "http/http_parse.h"
#include "http/owfat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SITE_JOBS_QUEUE 1024          /* jobs waiting for a thread; more get 503 */
#define SITE_MEM_HELD ((size_t)32 << 20) /* small files held in memory, in all (-F) */

int site_init(site_t *s, const config_t *cfg, const proc_t *proc, gio_loop_t *loop,
              mime_table_t *mime)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->proc = proc;
    s->loop = loop;
    s->mime = mime;
    s->rootfd = -1;
    alog_init(&s->log, proc->log_fd);
    s->log.json = cfg->log_json;
    elog_init(&s->elog, proc->error_fd, cfg->error_log);
    s->stats.started = s->stats.second = time(NULL);
    /* gzip on the fly up to 1 MiB files, compressed off the loop (jobs.h) */
    if ((cfg->gzip && !(s->gzcache = enc_cache_new(0, 1 << 20))) ||
        (cfg->gzip && !(s->dict = dict_new(0))) ||
        !(s->fcache = fcache_new(12, (size_t)cfg->mem_file_max, SITE_MEM_HELD))) {
        fprintf(stderr, "gatling: out of memory\n");
        return -1;
    }
    fcache_clock(s->fcache, loop); /* its entries close at their time */
    if (!(s->jobs = jobs_new(cfg->threads, SITE_JOBS_QUEUE))) {
        fprintf(stderr, "gatling: cannot start %d worker threads: %s\n", cfg->threads,
                strerror(errno));
        return -1;
    }
    /* a miss never queues behind other compressions: identity is sooner (encoding.h) */
    if (s->gzcache)
        enc_gzip_limit(s->gzcache, (unsigned)cfg->threads);
    s->rootfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    s->root_real = realpath(".", NULL);
    if (s->rootfd < 0 || !s->root_real) {
        fprintf(stderr, "gatling: cannot open the document root: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

void site_free(site_t *s)
{
    jobs_free(s->jobs); /* first: finished compressions still enter the gzip cache */
    limits_free(s->limits);
    alog_free(&s->log);
    if (s->loop)
        gio_timer_stop(s->loop, &s->stats_timer);
    fcache_free(s->fcache);
    enc_cache_free(s->gzcache);
    dict_free(s->dict);
    if (s->rootfd >= 0)
        close(s->rootfd);
    free(s->root_real);
}

void site_error(site_t *s, const char *call, int err, const struct sockaddr *peer,
                const char *detail)
{
    elog_error(&s->elog, gio_wallclock(s->loop), call, err, peer, detail);
}

void site_event(site_t *s, const char *what, const struct sockaddr *peer, const char *detail)
{
    elog_event(&s->elog, gio_wallclock(s->loop), what, peer, detail);
}

const char *site_date(site_t *s)
{
    int64_t now = gio_wallclock(s->loop);
    if (now != s->date_at) {
        s->date[fmt_httpdate(s->date, (time_t)now)] = 0;
        s->date_at = now;
    }
    return s->date;
}

const char *site_httpdate(site_t *s, time_t t)
{
    int64_t key = (int64_t)t + 1;
    char *d = s->mdate[(uint64_t)key & (SITE_MDATES - 1)].s;
    int64_t *at = &s->mdate[(uint64_t)key & (SITE_MDATES - 1)].key;
    if (*at != key) {
        d[fmt_httpdate(d, t)] = 0;
        *at = key;
    }
    return d;
}
