/*
 * The response cache's fetches and readers (cache_int.h): a fetch is an
 * exchange of the cache's own, with no client, that the proxy or CGI
 * answers through the fetch codec here; readers are the clients' requests
 * that wait for its head or are served from the entry while it fills; the
 * clock reaps finished fetches, times out locks and sweeps idle entries.
 * cache.c calls this; this calls cache_entry.c, never cache.c.
 */
#include "cache_int.h"
#include "router.h"
#include "http/conditional.h"
#include "http/hbuf.h"
#include "site/jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const ex_producer_t reader_producer;
static const ex_codec_t fetch_codec;

/* A hit answered at once: ex holds e until it ends. */
static void hit_end(exchange_t *ex, ex_slot_t *s)
{
    rs_entry_t *e = s->p;
    cache_t *c = hstate(ex->site, HSTATE_CACHE);
    s->p = NULL;
    if (e && c)
        rs_release(&c->store, e);
}

int cf_serve_hit(cache_t *c, exchange_t *ex, rs_entry_t *e, const char *cs)
{
    rs_hold(e);
    ex_slot_t *s = cslot(ex);
    s->p = e;
    s->end = hit_end;
    return ce_serve(ex, e, cs, now_ms(c));
}

/* ---- readers ---- */

void cf_list_add(reader_t **list, reader_t *r)
{
    r->list = list;
    r->prev = NULL;
    r->next = *list;
    if (*list)
        (*list)->prev = r;
    *list = r;
}

static void list_del(reader_t *r)
{
    if (!r->list)
        return;
    *(r->prev ? &r->prev->next : r->list) = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->list = NULL;
    r->prev = r->next = NULL;
}

static void reader_free(reader_t *r)
{
    list_del(r);
    if (r->f && r->f->owner == r)
        r->f->owner = NULL;
    if (r->e)
        rs_release(&r->c->store, r->e);
    free(r);
}

/* r's exchange goes to the router again, past the cache (bypass) or for
   another look (a Vary that did not match). */
static void reader_redispatch(reader_t *r, int bypass)
{
    exchange_t *ex = r->ex;
    ex->producer = NULL;
    ex->pctx = NULL;
    reader_free(r);
    if (bypass)
        cslot(ex)->n |= CS_PASS;
    else
        cslot(ex)->n &= ~(uintptr_t)CS_PASS;
    ex->date = NULL;
    ex->nfields = 0;
    ex->fields_over = 0;
    ex->codec->redispatch(ex);
}

static void reader_error(reader_t *r, int status, const exchange_t *from)
{
    r->done = 1;
    list_del(r);
    exchange_t *ex = r->ex;
    ex->nfields = 0, ex->fields_over = 0;
    ex->date = NULL;
    if (from && from->nfields == 1) /* Retry-After, Allow, ... */
        ex_field(ex, from->fields[0].name, from->fields[0].value);
    ex->codec->error(ex, status);
}

/* Send r the head of e (filling or complete) and what of its body is in. */
void cf_reader_start(reader_t *r, rs_entry_t *e, const char *cs, int64_t now)
{
    exchange_t *ex = r->ex;
    if (!r->e)
        rs_hold(e), r->e = e;
    list_del(r);
    if (e->state == RS_READY || e->state == RS_GONE) {
        r->done = 1;
        if (ce_serve(ex, e, cs, now) < 0 || ex_body_end(ex) < 0)
            ex_body_abort(ex);
        return;
    }
    if (http_header(ex->req, "Range") || http_header(ex->req, "If-None-Match") ||
        http_header(ex->req, "If-Modified-Since") || http_header(ex->req, "If-Match") ||
        http_header(ex->req, "If-Unmodified-Since")) {
        r->whole = 1; /* answered from the complete response */
        cf_list_add((reader_t **)&e->readers, r);
        return;
    }
    char age[24];
    hbuf_t ab = hb_init(age, sizeof age);
    hb_num(&ab, (uint64_t)ce_age(e, now) / 1000);
    hb_str(&ab);
    ce_put_fields(ex, e, age, cs, 0);
    if (cv_fill_reader(r, e)) { /* a coded body: made once, when e is complete */
        ex->nfields = 0, ex->fields_over = 0;
        ex->date = NULL;
        r->whole = 1;
        cf_list_add((reader_t **)&e->readers, r);
        return;
    }
    int h = ex_head(ex, e->status, e->ctype, e->len, -1);
    if (h) {
        r->done = 1;
        if (h < 0)
            ex_body_abort(ex);
        return;
    }
    r->head_sent = 1;
    cf_list_add((reader_t **)&e->readers, r);
    for (; r->part < e->nparts; r->part++)
        if (ex_body_buf(ex, e->parts[r->part].p, e->parts[r->part].n, 0) < 0) {
            list_del(r), r->done = 1;
            ex_body_abort(ex);
            return;
        }
}

/* The new parts of e to every reader streaming it; at the end, the end, and
   then the whole response to those that waited for it (after the streams:
   an owner's coded stream ends first and is kept for them, cv_fill_reader). */
static void readers_feed(cache_t *c, rs_entry_t *e, int end)
{
    int64_t now = now_ms(c);
    for (reader_t *r = e->readers, *next; r; r = next) {
        next = r->next;
        if (r->whole)
            continue;
        for (; r->part < e->nparts; r->part++)
            if (ex_body_buf(r->ex, e->parts[r->part].p, e->parts[r->part].n, 0) < 0)
                break;
        if (r->part < e->nparts || end) {
            list_del(r), r->done = 1;
            if (r->part < e->nparts || ex_body_end(r->ex) < 0)
                ex_body_abort(r->ex);
        }
    }
    for (reader_t *r = end ? e->readers : NULL, *next; r; r = next) {
        next = r->next;
        cf_reader_start(r, e, "gatling; fwd=miss; collapsed", now);
    }
}

/* Every reader of e loses it: those that have a head see it cut, the
   others go to the backend themselves. */
static void readers_cut(rs_entry_t *e)
{
    for (reader_t *r = e->readers, *next; r; r = next) {
        next = r->next;
        if (r->head_sent) {
            list_del(r), r->done = 1;
            ex_body_abort(r->ex);
        } else {
            reader_redispatch(r, 1);
        }
    }
}

static size_t r_input(exchange_t *ex, const char *p, size_t n, int last)
{
    (void)ex, (void)p, (void)last;
    return n; /* a cached request has no body */
}

static void r_drained(exchange_t *ex)
{
    reader_t *r = ex->pctx;
    cfetch_t *f = r->f;
    if (f && f->mode == F_PASS && f->owner == r && f->ex.producer)
        f->ex.producer->drained(&f->ex);
}

static void fetch_finish(cfetch_t *f);

static void r_end(exchange_t *ex)
{
    reader_t *r = ex->pctx;
    cfetch_t *f = r->f;
    if (f && f->owner == r && f->mode == F_PASS) { /* nobody else wants it */
        f->mode = F_DROP;
        fetch_finish(f);
    }
    reader_free(r);
}

static const ex_producer_t reader_producer = {r_input, r_drained, r_end, NULL};

reader_t *cf_reader_new(cache_t *c, exchange_t *ex)
{
    reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ex = ex;
    r->c = c;
    ex->producer = &reader_producer;
    ex->pctx = r;
    return r;
}

/* ---- fetches ---- */

/* f's request: GET of ex's target with its fields less ce_fetch_drops, plus
   the validators of stale.  0, or -1 (ENOMEM). */
static int fetch_request(cfetch_t *f, const exchange_t *ex, const rs_entry_t *stale)
{
    const http_request_t *o = ex->req;
    char lm[32] = "";
    if (stale && stale->mtime >= 0) {
        hbuf_t b = hb_init(lm, sizeof lm);
        hb_date(&b, stale->mtime);
        hb_str(&b);
    }
    size_t need = o->target.n + 64 + strlen(lm) + (stale && stale->etag ? strlen(stale->etag) : 0);
    for (size_t i = 0; i < o->nheaders; i++)
        need += o->headers[i].name.n + o->headers[i].value.n;
    if (!(f->buf = malloc(need)))
        return -1;
    char *p = f->buf;
    memcpy(p, o->target.p, o->target.n);
    f->req.method = (http_str_t){"GET", 3};
    f->req.target = (http_str_t){p, o->target.n};
    f->req.line = f->req.target;
    f->req.version = 11;
    p += o->target.n;
    for (size_t i = 0; i < o->nheaders && f->req.nheaders < HTTP_MAX_HEADERS - 3; i++) {
        const http_header_t *h = &o->headers[i];
        if (ce_fetch_drops(&h->name))
            continue;
        http_header_t *d = &f->req.headers[f->req.nheaders++];
        memcpy(p, h->name.p, h->name.n), d->name = (http_str_t){p, h->name.n}, p += h->name.n;
        memcpy(p, h->value.p, h->value.n), d->value = (http_str_t){p, h->value.n};
        p += h->value.n;
    }
    f->req.headers[f->req.nheaders++] = /* who Surrogate-Control may speak to */
        (http_header_t){{"Surrogate-Capability", 20}, {"gatling=\"Surrogate/1.0\"", 23}};
    if (stale && stale->etag)
        f->req.headers[f->req.nheaders++] =
            (http_header_t){{"If-None-Match", 13}, {stale->etag, strlen(stale->etag)}};
    if (*lm) {
        memcpy(p, lm, strlen(lm));
        f->req.headers[f->req.nheaders++] =
            (http_header_t){{"If-Modified-Since", 17}, {p, strlen(lm)}};
    }
    return 0;
}

/* Run f's request through the handler that takes it.  0, or -1: none
   answered (the caller fails the fetch). */
static int fetch_route(cfetch_t *f)
{
    exchange_t *ex = &f->ex;
    int r = router_produce(ex);
    if (ex->job) { /* a password check: not for a fetch, which has no credentials */
        ex_job_t *xj = ex->job;
        ex->job = NULL;
        xj->job.cancelled = 1;
        xj->finish(xj, NULL);
        free(xj);
        r = -1;
    }
    return r == 0 ? 0 : -1;
}

static void fetch_fail(cfetch_t *f, int status);

/* A fetch for ex's request, filling e (held), revalidating stale (or NULL):
   owner (or NULL: a background refresh) waits for it. */
cfetch_t *cf_fetch_start(cache_t *c, const exchange_t *ex, rs_entry_t *e, rs_entry_t *stale,
                         const cache_conf_t *k, reader_t *owner)
{
    cfetch_t *f = calloc(1, sizeof *f);
    if (!f || fetch_request(f, ex, stale) < 0) {
        free(f);
        return NULL;
    }
    exchange_t *fx = &f->ex;
    size_t plen =
        ex->peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    memcpy(&f->peer, ex->peer, plen);
    fx->req = &f->req;
    fx->secure = ex->secure;
    fx->local_port = ex->local_port;
    fx->peer = (struct sockaddr *)&f->peer;
    fx->site = c->site;
    fx->codec = &fetch_codec;
    fx->conn = f;
    cslot(fx)->n = CS_PASS;
    f->c = c;
    f->e = e, rs_hold(e), e->fetch = f;
    if ((f->stale = stale))
        rs_hold(stale), stale->fetch = f;
    f->began_ms = gio_now(c->site->loop);
    f->request_time = now_s(c);
    f->ttl = cache_conf_ttl(k, ex->path[0] ? ex->path : "/");
    f->grace = k->grace;
    f->errors = k->errors;
    f->lock_ms = k->lock * 1000;
    if ((f->owner = owner))
        owner->owner = 1, owner->f = f, cf_list_add(&f->waiters, owner);
    f->next = c->fetches;
    if (c->fetches)
        c->fetches->prev = f;
    c->fetches = f;
    if (!ticking(c))
        arm(c, TICK_MS);
    c->site->stats.cache_fetches++;
    if (fetch_route(f) < 0 && f->mode == F_HEAD && !f->finished)
        fetch_fail(f, 502);
    return f;
}

/* The fetch's exchange ends on the next tick: never from inside its
   handler's call. */
static void fetch_finish(cfetch_t *f)
{
    if (f->finished)
        return;
    f->finished = 1;
    if (f->e && f->e->fetch == f)
        f->e->fetch = NULL;
    if (f->stale && f->stale->fetch == f)
        f->stale->fetch = NULL;
    arm(f->c, 0);
}

void cf_fetch_free(cfetch_t *f)
{
    cache_t *c = f->c;
    ex_end(&f->ex);
    *(f->prev ? &f->prev->next : &c->fetches) = f->next;
    if (f->next)
        f->next->prev = f->prev;
    for (reader_t *r = f->waiters, *next; r; r = next) { /* none by now; to be sure */
        next = r->next;
        reader_redispatch(r, 1);
    }
    if (f->owner)
        f->owner->f = NULL;
    if (f->e) {
        if (f->e->state == RS_FILLING)
            rs_unlink(&c->store, f->e);
        rs_release(&c->store, f->e);
    }
    if (f->stale)
        rs_release(&c->store, f->stale);
    free(f->buf);
    free(f);
}

/* The waiters get the stale response (stale-if-error, or a 304 made it
   fresh again): each from the complete entry. */
static void waiters_serve(cfetch_t *f, rs_entry_t *e, const char *cs)
{
    int64_t now = now_ms(f->c);
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        r->f = NULL;
        cf_reader_start(r, e, cs, now);
    }
    f->waiters = NULL;
    f->owner = NULL;
}

/* Is stale there and may it answer for a failed fetch? */
static int stale_if_error(cfetch_t *f)
{
    rs_entry_t *s = f->stale;
    /* stale-if-error's window, else grace: RFC 9111 4.2.4 lets a cache cut
       off from its origin answer stale, unless must-revalidate (ce_stale_within) */
    int64_t win = s ? (s->sie > 0 ? s->sie : f->grace) : 0;
    return s && s->state == RS_READY && ce_stale_within(s, now_ms(f->c), win);
}

/* The backend failed before a head (502, 504, a handler's error page). */
static void fetch_fail(cfetch_t *f, int status)
{
    if (stale_if_error(f)) {
        f->c->site->stats.cache_stale_errors++;
        waiters_serve(f, f->stale, "gatling; hit; detail=stale-if-error");
    } else {
        if (f->stale && f->stale->must_revalidate && status >= 500) /* RFC 9111 5.2.2.2 */
            status = 504;
        for (reader_t *r = f->waiters, *next; r; r = next) {
            next = r->next;
            r->f = NULL;
            reader_error(r, status, &f->ex);
        }
        f->waiters = NULL;
        f->owner = NULL;
    }
    f->mode = F_DROP;
    fetch_finish(f);
}

/* ---- the fetch's codec: its response comes here ---- */

/* What HTTP and the vhost allow to be stored of it, with its lifetime. */
static int storable(cfetch_t *f, int status, uint64_t len, const resp_facts_t *rf, int64_t *life)
{
    int err = status >= 400;
    int64_t ttl = err ? f->errors : f->ttl;
    if (!ce_shareable(rf, status) || status == 304 || (err && status != 404 && status != 410) ||
        (err && !f->errors) || (len != EX_LEN_STREAM && len > f->c->store.max_object))
        return 0;
    /* no-cache with a validator: stored, and revalidated (collapsed) at every use */
    if (!cc_storable(status, &rf->cc, rf->has_expires, rf->has_lm, 0, ttl) &&
        !(rf->cc.no_cache && (rf->etag || rf->has_lm) && cc_status_heuristic(status)))
        return 0;
    *life = cc_lifetime(&rf->cc, status, rf->date, rf->has_expires ? rf->expires : CC_NONE,
                        rf->has_lm ? rf->mtime : CC_NONE, now_s(f->c), ttl);
    if (err && *life > f->errors)
        *life = f->errors;
    return *life > 0 || rf->etag || rf->has_lm; /* else it could never be used */
}

/* The entry's times and rules from the response. */
static void entry_times(cfetch_t *f, rs_entry_t *e, const resp_facts_t *rf, int64_t life)
{
    int64_t now = now_s(f->c);
    e->stored_ms = now_ms(f->c);
    int64_t delay = (e->stored_ms - f->began_ms) / 1000; /* the fetch took, in whole seconds */
    e->request_time = now - delay;
    e->response_time = now;
    e->initial_age = cc_initial_age(rf->age, rf->date, e->request_time, now);
    e->lifetime = life;
    e->micro = rf->cc.max_age == CC_NONE && rf->cc.s_maxage == CC_NONE && !rf->has_expires;
    e->swr = rf->cc.stale_while_revalidate > 0 ? rf->cc.stale_while_revalidate
             : e->micro                        ? f->grace
                                               : 0;
    e->sie = rf->cc.stale_if_error > 0 ? rf->cc.stale_if_error : 0;
    e->must_revalidate = rf->cc.must_revalidate || rf->cc.no_cache;
}

/* A 304 to a revalidation: the stored response is fresh again, its fields
   updated from the 304's (RFC 9111 4.3.4). */
static void freshen(cfetch_t *f, rs_entry_t *s, const exchange_t *ex, const char *ctype)
{
    resp_facts_t rf;
    ce_facts(ex, &rf, now_s(f->c));
    int explicit = rf.cc.max_age != CC_NONE || rf.cc.s_maxage != CC_NONE || rf.has_expires;
    ce_head_update(f->c, s, ex, ctype);
    /* the stored response's rules, with what the 304 said of them */
    resp_facts_t now;
    exchange_t view = {.nfields = 0, .resp_date = ex->resp_date};
    const char *p = s->head;
    for (unsigned i = 0; i < s->nfields && view.nfields < EX_FIELDS_MAX; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        view.fields[view.nfields++] = (ex_field_t){name, value};
    }
    ce_facts(&view, &now, now_s(f->c));
    now.age = rf.age;
    if (now.has_lm)
        s->mtime = now.mtime;
    int64_t life =
        cc_lifetime(&now.cc, s->status, now.date, now.has_expires ? now.expires : CC_NONE,
                    now.has_lm ? now.mtime : CC_NONE, now_s(f->c), f->ttl);
    if (!explicit && s->micro && f->ttl > 0)
        life = f->ttl;
    entry_times(f, s, &now, life);
    ce_entry_date(s, now.date != CC_NONE ? now.date : s->response_time);
    f->c->site->stats.cache_revalidated++;
}

static void to_pass(cfetch_t *f, int status, const char *ctype, uint64_t len, time_t mtime,
                    int mark);

static void fetch_stored(cfetch_t *f, int status, const char *ctype, uint64_t len,
                         const resp_facts_t *rf, int64_t life)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    if (ce_vary_store(c, e, rf->vary ? rf->vary : "", &f->req) < 0 ||
        ce_store_head(c, e, &f->ex, rf, ctype) < 0) {
        to_pass(f, status, ctype, len, -1, 1);
        return;
    }
    e->status = status;
    e->mtime = rf->mtime;
    e->len = len;
    entry_times(f, e, rf, life);
    ce_entry_date(e, rf->date != CC_NONE ? rf->date : e->response_time);
    f->mode = F_STORE;
    int64_t now = now_ms(c);
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        if (r != f->owner)
            r->f = NULL;
        if (!ce_vary_match(e, r->ex->req)) {
            reader_redispatch(r, 0);
            continue;
        }
        if (r->owner) { /* for its access log line: the backend that answered it */
            ex_log_note(r->ex->log_upstream, f->ex.log_upstream);
            r->ex->upstream_us = f->ex.upstream_us;
        }
        cf_reader_start(r, e,
                        r->owner ? "gatling; fwd=miss; stored" : "gatling; fwd=miss; collapsed", now);
    }
    f->waiters = NULL;
}

/* The owner's preconditions (its fetch sent none of them: ce_fetch_drops)
   against the 200 passed to it, as a hit's are (ce_serve): 304, 412, or 0
   to send it.  Not without a date to compare (Last-Modified, else Date). */
static int pass_preconditions(const cfetch_t *f, const exchange_t *ox, int status)
{
    resp_facts_t rf;
    ce_facts(&f->ex, &rf, now_s(f->c));
    time_t lm = rf.has_lm ? rf.mtime : rf.date != CC_NONE ? (time_t)rf.date : -1;
    if (status != 200 || lm < 0)
        return 0;
    return cond_preconditions(ox->req, rf.etag ? rf.etag : "\"\x7f\"", lm,
                              gio_wallclock(f->c->site->loop));
}

/* The response may not be stored: the owner gets it, the other waiters go
   to the backend themselves.  mark: it may not be shared at all (Set-Cookie,
   private, ...): the key is "pass" for a while, so that the next requests
   do not queue behind each other; a 4xx (maybe provoked by one request's
   fields) leaves no mark. */
static void to_pass(cfetch_t *f, int status, const char *ctype, uint64_t len, time_t mtime,
                    int mark)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    readers_cut(e); /* none unless the head was stored */
    e->fetch = NULL;
    if (mark) {
        e->state = RS_PASS;
        e->pass_until = now_s(c) + CACHE_PASS_SECS;
    } else {
        rs_unlink(&c->store, e); /* f still holds it */
    }
    c->site->stats.cache_passes++;
    reader_t *o = f->owner;
    for (reader_t *r = f->waiters, *next; r; r = next) {
        next = r->next;
        if (r != o)
            reader_redispatch(r, 1);
    }
    if (!o) {
        f->mode = F_DROP;
        fetch_finish(f);
        return;
    }
    list_del(o);
    f->mode = F_PASS;
    exchange_t *ox = o->ex;
    ox->nfields = 0;
    for (unsigned i = 0; i < f->ex.nfields; i++)
        if (strcasecmp(f->ex.fields[i].name, "Surrogate-Control"))
            ex_field(ox, f->ex.fields[i].name, f->ex.fields[i].value);
    ex_field(ox, "Cache-Status", "gatling; fwd=miss; detail=pass");
    ex_log_note(ox->log_cache, "gatling; fwd=miss; detail=pass");
    int pre = pass_preconditions(f, ox, status), h;
    if (pre == 412)
        h = ex_error(ox, 412, NULL, NULL) < 0 ? -1 : 1;
    else if (pre == 304) /* complete: the body is not wanted */
        h = ex_head(ox, 304, NULL, 0, -1) < 0 || ex_body_end(ox) < 0 ? -1 : 1;
    else
        h = ex_head(ox, status, ctype, len, mtime);
    o->head_sent = 1;
    if (h) {
        o->done = 1;
        f->mode = F_DROP;
        fetch_finish(f);
    }
}

static int fx_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode != F_HEAD)
        return -1;
    ex->status = (uint16_t)status;
    if (status < 200) /* 1xx: a tunnel (no Upgrade is sent) or nothing */
        return -1;
    if (f->stale && status == 304) {
        freshen(f, f->stale, ex, ctype);
        waiters_serve(f, f->stale, "gatling; fwd=stale; fwd-status=304");
        f->mode = F_DROP;
        fetch_finish(f);
        return 0;
    }
    if (status >= 500 && stale_if_error(f)) {
        fetch_fail(f, status);
        return -1;
    }
    resp_facts_t rf;
    ce_facts(ex, &rf, now_s(f->c));
    if (rf.mtime < 0 && mtime >= 0)
        rf.mtime = mtime, rf.has_lm = 1;
    int64_t life = 0;
    if (storable(f, status, len, &rf, &life)) {
        fetch_stored(f, status, ctype, len, &rf, life);
    } else if (status >= 500 && ce_shareable(&rf, status)) {
        f->transient = 1; /* a failing backend's answer: one for all who wait */
        fetch_stored(f, status, ctype, len, &rf, 0);
    } else {
        to_pass(f, status, ctype, len, mtime, status < 400 || !ce_shareable(&rf, status));
    }
    if (f->mode == F_STORE && f->stale && !f->transient) /* a new response replaces the old */
        rs_unlink(&f->c->store, f->stale);
    return f->mode == F_DROP ? -1 : 0;
}

static int fx_error(exchange_t *ex, int status)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_HEAD)
        fetch_fail(f, status);
    else if (f->mode == F_PASS && f->owner)
        reader_error(f->owner, status, ex), f->mode = F_DROP, fetch_finish(f);
    return 0;
}

/* Over the per-object cap while storing: the owner (if it streams) goes on
   without the cache, the other readers are cut, the key passes. */
static void store_overflow(cfetch_t *f)
{
    cache_t *c = f->c;
    rs_entry_t *e = f->e;
    reader_t *o = f->owner && f->owner->list == (reader_t **)&e->readers && f->owner->head_sent &&
                          f->owner->part == e->nparts
                      ? f->owner
                      : NULL;
    if (o)
        list_del(o);
    readers_cut(e);
    e->state = RS_PASS;
    e->pass_until = now_s(c) + CACHE_PASS_SECS;
    e->fetch = NULL;
    c->site->stats.cache_passes++;
    if (o) {
        o->f = f;
        f->mode = F_PASS;
    } else {
        f->mode = F_DROP;
        fetch_finish(f);
    }
}

static int fx_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        return ex_body_buf(f->owner->ex, p, n, flags);
    if (f->mode != F_STORE || !n) {
        if (flags & EX_FREE)
            free((void *)p);
        return f->mode == F_DROP ? -1 : 0;
    }
    char *q = (char *)p;
    if (!(flags & EX_FREE) && (q = malloc(n)))
        memcpy(q, p, n);
    if (!q || rs_append(&f->c->store, f->e, q, n) < 0) { /* q is still ours */
        store_overflow(f);
        if (f->mode == F_PASS) {
            if (!q && (q = malloc(n)))
                memcpy(q, p, n);
            return q ? ex_body_buf(f->owner->ex, q, n, EX_FREE) : -1;
        }
        free(q);
        return -1;
    }
    readers_feed(f->c, f->e, 0);
    return 0;
}

static int fx_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    (void)fd, (void)off, (void)len;
    fx_error(ex, 502); /* no handler in front of the cache sends files */
    return -1;
}

/* The response is complete: the entry serves hits from now on. */
static void entry_ready(cache_t *c, rs_entry_t *e)
{
    e->state = RS_READY;
    unsigned n = 0;
    for (rs_entry_t *o = rs_first(&c->store, e->hash, e->key, e->klen), *next; o; o = next) {
        next = rs_next(o);
        if (o == e)
            continue;
        int same = o->state == RS_READY && o->varylen == e->varylen &&
                   (!o->varylen || !memcmp(o->vary, e->vary, o->varylen));
        if (same || o->state == RS_PASS || (o->state == RS_READY && ++n >= CACHE_VARIANTS))
            rs_unlink(&c->store, o);
    }
}

static int fx_body_end(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner) {
        f->owner->done = 1;
        ex_body_end(f->owner->ex);
    } else if (f->mode == F_STORE && f->transient) {
        rs_unlink(&f->c->store, f->e); /* its readers hold it to the end */
        readers_feed(f->c, f->e, 1);
    } else if (f->mode == F_STORE) {
        entry_ready(f->c, f->e);
        f->c->site->stats.cache_stored++;
        readers_feed(f->c, f->e, 1);
    }
    f->mode = F_DROP;
    fetch_finish(f);
    return 0;
}

static void fx_body_abort(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        ex_body_abort(f->owner->ex);
    else if (f->mode == F_STORE) {
        rs_unlink(&f->c->store, f->e);
        readers_cut(f->e);
    } else if (f->mode == F_HEAD)
        fetch_fail(f, 502);
    f->mode = F_DROP;
    fetch_finish(f);
}

/* Storing: the entry takes what comes (bounded by the object cap); passing
   to the owner: its client's pace. */
static uint64_t fx_queued(const exchange_t *ex)
{
    const cfetch_t *f = (const cfetch_t *)ex;
    if (f->mode == F_PASS && f->owner)
        return ex_queued(f->owner->ex);
    return f->mode == F_DROP ? UINT64_MAX : 0;
}

static void fx_input_ready(exchange_t *ex)
{
    (void)ex;
}

/* A CGI's local redirect: the fetch is routed again at once, when a backend
   or CGI answers the new path; else (a file, a listing) every waiter asks
   itself, past the cache, and the URL is "pass". */
static void fx_redispatch(exchange_t *ex)
{
    cfetch_t *f = (cfetch_t *)ex;
    if (!router_produced(ex->site, ex, HANDLER_STORE)) {
        rs_entry_t *e = f->e;
        e->state = RS_PASS;
        e->pass_until = now_s(f->c) + CACHE_PASS_SECS;
        e->fetch = NULL;
        for (reader_t *r = f->waiters, *next; r; r = next) {
            next = r->next;
            reader_redispatch(r, 1);
        }
        f->mode = F_DROP;
        fetch_finish(f);
        return;
    }
    if (fetch_route(f) < 0 && f->mode == F_HEAD && !f->finished)
        fetch_fail(f, 502);
}

static const ex_codec_t fetch_codec = {
    .head = fx_head,
    .error = fx_error,
    .body_buf = fx_body_buf,
    .body_file = fx_body_file,
    .body_end = fx_body_end,
    .body_abort = fx_body_abort,
    .queued = fx_queued,
    .input_ready = fx_input_ready,
    .redispatch = fx_redispatch,
};

/* ---- the clock: finished fetches, lock timeouts, idle entries ---- */

void cf_tick(gio_loop_t *l, void *arg)
{
    cache_t *c = arg;
    int64_t now = gio_now(l);
    for (cfetch_t *f = c->fetches, *next; f; f = next) {
        next = f->next;
        if (f->finished) {
            cf_fetch_free(f);
            continue;
        }
        if (f->waiters && now - f->began_ms >= f->lock_ms) { /* the lock times out */
            for (reader_t *r = f->waiters, *rn; r; r = rn) {
                rn = r->next;
                if (r == f->owner)
                    continue;
                c->site->stats.cache_lock_timeouts++;
                reader_redispatch(r, 1);
            }
        }
    }
    rs_sweep(&c->store, now);
    if (c->fetches)
        arm(c, TICK_MS);
    else if (c->store.entries)
        arm(c, 1000);
}
