/* The start of every codec's exchange, and its jobs' return: see codec.h. */
#include "codec.h"
#include "gio.h"
#include "route/router.h"
#include "route/sitefiles.h"
#include "site/jobs.h"

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void codec_exchange_init(exchange_t *ex, const codec_conn_t *f, const ex_codec_t *codec,
                         void *owner)
{
    /* the route's name, the path and vhost buffers are filled later */
    memset(ex, 0, offsetof(exchange_t, route.name));
    ex->vhost[0] = ex->log_cache[0] = ex->log_upstream[0] = ex->log_rule[0] = 0;
    ex->secure = f->secure;
    ex->local_port = f->local_port;
    ex->peer = f->peer;
    ex->client = f->client;
    ex->site = f->site;
    ex->ssl = f->ssl;
    ex->sni = f->sni;
    ex->snilen = f->snilen;
    ex->started_us = gio_now_us(f->site->loop);
    ex->codec = codec;
    ex->conn = owner;
}

/* A job is done (on the loop thread): finish it, then its owner resumes. */
static void job_back(job_t *j)
{
    ex_job_t *xj = (ex_job_t *)j;
    exchange_t *ex = xj->ex;
    void (*back)(exchange_t *, int) = xj->back;
    int cancelled = j->cancelled; /* j is xj's, freed here */
    if (ex) {
        ex->job = NULL;
        ex->nfields = 0; /* the answer starts afresh */
        ex->fields_over = 0;
    }
    xj->finish(xj, cancelled ? NULL : ex);
    free(xj);
    if (ex)
        back(ex, cancelled);
}

int codec_job_send(exchange_t *ex, void (*back)(exchange_t *ex, int cancelled))
{
    ex_job_t *xj = ex->job;
    xj->ex = ex;
    xj->back = back;
    xj->job.done = job_back;
    if (jobs_submit(ex->site->jobs, &xj->job) == 0)
        return 0;
    ex->job = NULL; /* the pool's queue is full: shed this request, not the loop */
    xj->job.cancelled = 1;
    xj->finish(xj, NULL);
    free(xj);
    ex->site->stats.busy++;
    return -1;
}

void codec_head_facts(head_t *h, const exchange_t *ex, int status, const char *ctype, uint64_t len,
                      time_t mtime)
{
    site_t *s = ex->site;
    *h = (head_t){
        .status = status,
        .server = "gatling/" GATLING_VERSION,
        .date = ex->date ? ex->date : site_date(s),
        .ctype = ctype,
        .len = len,
        .modified = mtime >= 0 ? site_httpdate(s, mtime) : NULL,
        .hsts = ex->secure && router_hsts(s, ex->req) ? s->cfg->hsts : -1,
        .fields = ex->fields,
        .nfields = ex->nfields,
    };
    sitefiles_head(h, ex); /* _headers: the site's fields for the path */
}

char *codec_error_page(exchange_t *ex, int status, size_t *n)
{
    return sitefiles_page(ex, status, n);
}

int codec_early_safe(const exchange_t *ex)
{
    if (!ex->early_data)
        return 1;
    const http_request_t *r = ex->req;
    int get = http_method_is(r, "GET") || http_method_is(r, "HEAD");
    return get && !ex->req_len && !http_header(r, "Authorization");
}

void codec_log_facts(alog_facts_t *out, const exchange_t *ex, const struct ssl_st *ssl,
                     const char *proto)
{
    *out = (alog_facts_t){.proto = proto, .ex = ex};
    if (ssl) {
        out->tls_version = SSL_get_version(ssl);
        out->tls_cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl));
    }
    out->duration_us = gio_now_us(ex->site->loop) - ex->started_us;
}
