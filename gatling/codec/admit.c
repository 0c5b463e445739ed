/*
 * admit.c — what an HTTP/2 and an HTTP/3 stream's request goes through
 * before the router, and its log line after (admit.h); each codec's own
 * reaction comes through its sb_ops_t.
 */
#include "admit.h"
#include "codec.h"
#include "gio.h"
#include "route/router.h"
#include "http/http_parse.h"
#include "http/owfat.h"
#include "http/response.h"
#include "site/peerlimits.h"
#include "site/site.h"

#include <string.h>

void admit_refuse(sbody_t *b)
{
    if (b->refused)
        return;
    b->refused = 1;
    b->ops->turned_away(sb_ex(b), SB_NO_ROOM); /* the codec's counter */
    b->ops->reset(sb_ex(b), SB_REFUSED);
}

/* n bytes in the stream's blocks (sb_room), within the connection's cap. */
static char *room(sbody_t *b, size_t n)
{
    char *d = sb_room(b, n);
    if (!d)
        admit_refuse(b);
    return d;
}

const char *admit_keep(sbody_t *b, const uint8_t *p, size_t n)
{
    if (n + 1 > HTTP_MAX_HEAD - b->hdrlen) {
        b->bad = 1; /* over what an HTTP/1.1 head may hold: 431 */
        return NULL;
    }
    char *d = room(b, n + 1);
    if (!d)
        return NULL;
    memcpy(d, p, n);
    d[n] = 0;
    b->hdrlen += n + 1;
    return d;
}

int admit_body(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    const http_str_t *cl = http_header(ex->req, "Content-Length");
    unsigned long long len = 0;
    int known = cl && cl->n && scan_ulonglong(cl->p, &len) == cl->n;
    ex->req_len = known ? (int64_t)len : -1;
    if (!b->bad && !b->refused && router_streams(ex)) {
        b->early = 1;
        return ADMIT_EARLY;
    }
    return known && len > CODEC_BODY_MAX ? ADMIT_TOO_LARGE : ADMIT_DROP;
}

int admit_request(sbody_t *b, http_request_t *req)
{
    exchange_t *ex = sb_ex(b);
    site_t *site = ex->site;
    b->c->requests++;
    unsigned max = (unsigned)site->cfg->max_requests; /* -R: the connection's last request */
    if (max && b->c->requests >= max && b->ops->last(ex))
        site->stats.max_requests++;
    if (limits_request(site->limits, ex->peer, gio_now(site->loop)) != LIMIT_OK) {
        site->stats.rate_limited++; /* -A: HTTP/1.1 tarpits; each codec has its own end */
        b->ops->turned_away(ex, SB_RATE_LIMITED);
        return -1;
    }
    if (b->bad) {
        b->ops->turned_away(ex, SB_FIELDS_OVER);
        ex_error(ex, 431, NULL, NULL);
        return -1;
    }
    ex->head_only = req->method.n == 4 && !memcmp(req->method.p, "HEAD", 4);
    size_t n = sb_line_size(req); /* the access log's request field, as nginx writes it */
    char *line = room(b, n);
    if (!line)
        return -1; /* refused */
    sb_line(req, line, n, b->ops->version);
    return 0;
}

void admit_log(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    site_t *site = ex->site;
    int64_t now = gio_wallclock(site->loop);
    alog_facts_t facts, *fp = NULL; /* only the JSON log's */
    if (!b->ended && ex->producer && ex->producer->abandoned)
        ex->producer->abandoned(ex);
    if (site->log.json)
        b->ops->log_facts(ex, fp = &facts);
    unsigned notes = (ex->secure ? ALOG_TLS : 0) | (ex->log_notes & EX_LOG_DCZ ? ALOG_DCZ : 0);
    alog_request(&site->log, now, site->cfg->log_vhost ? ex->vhost : NULL, ex->peer, ex->req,
                 ex->status, b->body_sent, notes, fp);
    status_count(&site->stats, now, b->ops->stats_kind, ex->status, b->body_sent,
                 gio_now_us(site->loop) - ex->started_us);
}

int admit_continue(sbody_t *b)
{
    exchange_t *ex = sb_ex(b);
    const http_str_t *e = http_header(ex->req, "Expect");
    if (!e || e->n != 12 || !case_equalb(e->p, 12, "100-continue"))
        return 0;
    http_field_t f[] = {HTTP_FIELD(":status", "100")};
    return b->ops->info(ex, f, 1);
}

int admit_codec_hints(exchange_t *ex, const char *link)
{
    sbody_t *b = sb_of(ex);
    if (b->closed)
        return 0;
    http_field_t f[] = {HTTP_FIELD(":status", "103"), HTTP_FIELD("link", link)};
    return b->ops->info(ex, f, 2) < 0 ? -1 : 0;
}
