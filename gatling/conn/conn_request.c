/*
 * A request on the connection: its block from the loop's small pool (no
 * malloc per request) and back, the exchange the block holds begun with the
 * connection's facts (conn_facts.c) and ended with its file and gzip entry,
 * and the request's access-log line.
 */
#include "conn_int.h"
#include "site/encoding.h"
#include "site/fcache.h"

#include <stdlib.h>

/* Request blocks come from a small per-loop pool: no malloc per request. */
conn_block_t *conn_block_get(conn_set_t *set)
{
    return set->nspare > 0 ? set->spare[--set->nspare] : malloc(sizeof(conn_block_t));
}

void conn_block_put(conn_set_t *set, conn_block_t *b)
{
    if (b && set->nspare < CONN_SPARE_BLOCKS)
        set->spare[set->nspare++] = b;
    else
        free(b);
}

/* A fresh exchange for the next request, with this connection's facts. */
void conn_new_exchange(conn_t *c)
{
    codec_conn_t f = conn_facts(c);
    h1_init(&c->blk->h1, &f);
}

/* The request's own state goes with it: its file, its gzip entry, what the
   exchange owns (after the batch that may point into them). */
void conn_end_exchange(exchange_t *ex)
{
    if (ex->file)
        fcache_release(ex->file);
    ex->file = NULL;
    enc_gzip_release(ex->gz);
    ex->gz = NULL;
    ex_end(ex);
}

/* Log the request that just ended (also one cut short). */
void conn_log_request(conn_t *c)
{
    const h1_t *h = &c->blk->h1; /* a request is logged while its block is held */
    const exchange_t *ex = &h->ex;
    uint64_t sent = c->out.bytes_sent > h->head_len ? c->out.bytes_sent - h->head_len : 0;
    if (sent > ex->body_len)
        sent = ex->body_len;
    const char *vhost = NULL;
    if (c->site->cfg->log_vhost)
        vhost = c->reqlen ? ex->vhost : "";
    alog_facts_t facts, *fp = NULL; /* only the JSON log's */
    if (c->site->log.json)
        codec_log_facts(fp = &facts, ex, c->ssl, "h1");
    alog_request(&c->site->log, gio_wallclock(c->site->loop), vhost, &c->peer.sa,
                 c->reqlen ? &c->blk->req : NULL, ex->status, ex->head_only ? 0 : sent,
                 (c->ssl != NULL ? ALOG_TLS : 0) | (ex->log_notes & EX_LOG_DCZ ? ALOG_DCZ : 0),
                 fp);
}
