/* /server-status: see status.h. */
#define _GNU_SOURCE /* memmem */
#include "status.h"
#include "router.h"
#include "status_int.h"
#include "status_ring.h"
#include "handlers/hstate.h"
#include "cache.h"
#include "http/hbuf.h"
#include "http/owfat.h"
#include "site/acme_chal.h"
#include "site/cluster.h"
#include "site/dict.h"
#include "site/nets.h"
#include "site/site.h"
#include "site/encoding.h"
#include "tls/tls.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int status_allowed(const exchange_t *ex)
{
    const config_t *cfg = ex->site->cfg;
    return net_is_loopback(ex->peer) || net_contains(cfg->status_from, cfg->nstatus_from, ex->peer);
}

#define STATUS_PAGE_MAX 16384 /* the page is about 6 KiB ... */
#define STATUS_BACKEND_MAX 640 /* ... and each backend's row at most this, escaped */

/* d[0..nd) after r[0..n) (at most cap in all): the new n. */
static size_t put_rows(row_t *r, size_t n, size_t cap, const row_t *d, size_t nd)
{
    for (size_t i = 0; i < nd && n < cap; i++)
        r[n++] = d[i];
    return n;
}

/* The backends' counts (handlers/proxy.c), summed, after r[0..n): the new n. */
static size_t backend_rows(const status_counters_t *st, row_t *r, size_t n, size_t cap)
{
    uint64_t be[BACKEND_KINDS] = {0};
    for (int i = 0; i < CONFIG_BACKENDS; i++)
        for (int k = 0; k < BACKEND_KINDS; k++)
            be[k] += st->backend[i][k];
#define BACKEND_ROW(kind, metric, help, key, label, ckey, clabel) {key, label, be[BACKEND_##kind]},
    const row_t all[] = {STATS_BACKEND_COUNTERS(BACKEND_ROW)};
#undef BACKEND_ROW
    row_t d[BACKEND_KINDS];
    size_t k = 0;
    for (size_t i = 0; i < BACKEND_KINDS; i++)
        if (all[i].key) /* a row of the page's */
            d[k++] = all[i];
    return put_rows(r, n, cap, d, k);
}

/* The certificates' first expiry, and --acme's client numbers (its status
   file: none when it is missing or malformed), after r[0..n): the new n. */
static size_t cert_rows(const site_t *s, row_t *r, size_t n, size_t cap)
{
    const char *name;
    int64_t t, first = 0;
    for (int i = 0; tls_store_expiry(s->proc->tls, i, &name, &t); i++)
        if (t > 0 && (!first || t < first))
            first = t;
    if (first && n < cap)
        r[n++] = (row_t){"tls_certificate_expiry_first",
                         "HTTPS: the first certificate to expire, expires at (unix time)",
                         (uint64_t)first};
    uint64_t gen = 0;
    int64_t synced = s->proc->cluster ? cluster_synced(s->proc->cluster, &gen) : 0;
    const row_t c[] = {
        {"cluster_last_sync", "--cluster: etcd last answered at (unix time)", (uint64_t)synced},
        {"cluster_ticket_generation", "--cluster: the ticket keys' generation", gen},
    };
    return s->proc->cluster ? put_rows(r, n, cap, c, 2) : n;
}

acme_status_t *status_acme(const site_t *s)
{
    char *text = s->proc->acme_chal ? malloc(ACME_STATUS_MAX) : NULL;
    acme_status_t *st = text ? malloc(sizeof *st) : NULL;
    if (st && (acme_chal_status(s->proc->acme_chal, text, ACME_STATUS_MAX) <= 0 ||
               acme_chal_status_parse(text, st) < 0))
        free(st), st = NULL;
    free(text);
    return st;
}

void status_side(const site_t *s, const acme_status_t *st, stats_snap_t *snap)
{
    memset(&snap->side, 0, sizeof snap->side);
    if (st) {
        snap->side.acme_orders = st->orders;
        snap->side.acme_failures = st->failures;
        snap->side.od_names = st->od_names;
        snap->side.od_asks = st->od_asks;
        snap->side.od_allowed = st->od_allowed;
        snap->side.od_refused = st->od_refused;
        snap->side.od_limited = st->od_limited;
        snap->side.od_invalid = st->od_invalid;
        snap->side.has = acme_chal_ondemand(s->proc->acme_chal) ? STATS_SIDE_ONDEMAND
                                                                : STATS_SIDE_ACME;
    }
}

void status_snapshot(const site_t *s, stats_snap_t *snap)
{
    memset(snap, 0, sizeof *snap);
    snap->c = s->stats;
    enc_gz_counters_t gz = s->gzcache ? enc_gzip_counters(s->gzcache) : (enc_gz_counters_t){0};
    snap->more.gz_skipped_busy = gz.skipped_busy;
    snap->more.gz_paced = gz.paced;
    snap->more.gz_paced_ms = gz.paced_ms;
    if (s->dict) {
        const dict_counters_t *dc = dict_counters(s->dict);
        snap->more.dict_hits = dc->hits;
        snap->more.dict_saved = dc->bytes_saved;
        snap->more.dict_unknown = dc->unknown + dc->stale;
        snap->more.dict_made = dc->made;
    }
    fcache_mem_t m = fcache_mem(s->fcache);
    snap->more.mem_full = m.skipped;
    snap->g.mem_files = m.files;
    snap->g.mem_bytes = m.held;
    cache_mem(s, &snap->g.cache_bytes, &snap->g.cache_entries, &snap->more.cache_evictions);
    snap->g.conns = s->nconns;
    snap->g.tls_conns = s->ntls;
    snap->g.draining = s->draining != 0;
    const char *pool, *addr, *state;
    unsigned out;
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        int r = router_backend(s, i, &pool, &addr, &state, &out);
        snap->g.be_up[i] = r == 2;
        snap->g.be_outstanding[i] = r ? out : 0;
    }
}

/* The numbers the graphs and warnings read: this loop's, or with -W every
   worker's summed as /metrics sums them (ours published fresh first). */
static void summed(site_t *s, stats_snap_t *t)
{
    stats_snap_t own;
    status_snapshot(s, &own);
    *t = own;
    if (s->proc->stats_shm) {
        stats_shm_publish(s->proc->stats_shm, s->proc->worker, &own);
        s->stats_published = gio_now(s->loop);
        stats_shm_total(s->proc->stats_shm, s->proc->worker, &own, t);
    }
}

/* Worker who's numbers: this worker's fresh, another's as it last published
   them (-W). */
static void one_worker(site_t *s, int who, stats_snap_t *snap)
{
    if (!s->proc->stats_shm || who == s->proc->worker ||
        stats_shm_worker(s->proc->stats_shm, who, snap) < 0)
        status_snapshot(s, snap);
}

/* The rows, in the order shown (at most cap); the same list makes both
   forms: the uptime, counters.h's rows that have a key here, the backends'
   sums, the certificates, --acme's and --cluster's numbers.  The counters
   are the whole server's as /metrics sums them (summed, who < 0); who >= 0:
   that worker's alone, after a "worker" row with its slot (?json&worker,
   ?json&worker=N under -W). */
static size_t rows(site_t *s, row_t *r, size_t cap, int64_t now, int who)
{
    int own = who >= 0;
    stats_snap_t snap;
    if (own)
        one_worker(s, who, &snap);
    else if (!s->proc->stats_shm)
        status_snapshot(s, &snap);
    else
        summed(s, &snap);
    acme_status_t *as = status_acme(s);
    status_side(s, as, &snap);
    free(as);
    size_t n = 0;
    if (own && n < cap)
        r[n++] = (row_t){"worker", "worker", (uint64_t)who};
    if (n < cap)
        r[n++] = (row_t){"uptime", "uptime (s)", (uint64_t)(now - s->stats.started)};
    for (size_t i = 0; i < stats_nrows && n < cap; i++)
        if (stats_rows[i].skey && stats_shown(&snap, &stats_rows[i]))
            r[n++] = (row_t){stats_rows[i].skey, stats_rows[i].slabel,
                             stats_value(&snap, &stats_rows[i])};
    n = backend_rows(&snap.c, r, n, cap);
    return cert_rows(s, r, n, cap);
}

/* The loop's samples (HSTATE_STATUS), taken once a second with -S. */
typedef struct status_loop {
    site_t *site;
    status_ring_t *ring;
    gio_timer_t tick;
} status_loop_t;

#define STATUS_TICK_MS 1000

/* A second has passed: a sample, and the next second's timer. */
static void on_tick(gio_loop_t *l, void *arg)
{
    status_loop_t *st = arg;
    stats_snap_t *snap = malloc(sizeof *snap); /* ~10 KiB: not on the loop's stack */
    if (snap) {
        summed(st->site, snap);
        ring_add(st->ring, gio_wallclock(l), snap);
        free(snap);
    }
    int64_t next = st->tick.when + STATUS_TICK_MS, now = gio_now(l);
    gio_timer_set(l, &st->tick, next > now ? next : now + STATUS_TICK_MS, on_tick, st);
}

static int status_init(site_t *s)
{
    if (!s->cfg->status_page)
        return 0;
    status_loop_t *st = calloc(1, sizeof *st);
    stats_snap_t *snap = st ? malloc(sizeof *snap) : NULL;
    if (snap) {
        summed(s, snap);
        st->ring = ring_new(snap);
    }
    free(snap);
    if (!st || !st->ring) {
        free(st);
        fprintf(stderr, "gatling: -S: no memory for the status page's samples\n");
        return -1;
    }
    st->site = s;
    hstate_set(s, HSTATE_STATUS, st);
    gio_timer_set(s->loop, &st->tick, gio_now(s->loop) + STATUS_TICK_MS, on_tick, st);
    return 0;
}

static void status_free(site_t *s)
{
    status_loop_t *st = hstate(s, HSTATE_STATUS);
    if (!st)
        return;
    gio_timer_stop(s->loop, &st->tick);
    ring_free(st->ring);
    free(st);
    hstate_set(s, HSTATE_STATUS, NULL);
}

/* The backend slots with a series: those there, below RING_BACKENDS. */
static int series_slots(const site_t *s, int *used)
{
    const char *pool, *addr, *state;
    unsigned out;
    int n = 0;
    for (int i = 0; i < RING_BACKENDS; i++)
        if (router_backend(s, i, &pool, &addr, &state, &out))
            used[n++] = i;
    return n;
}

/* The JSON form's additions: the rates over the last STATUS_WINDOW
   seconds (sums, and the seconds they cover), the warnings, the series. */
static void json_more(hbuf_t *b, const status_ring_t *ring, const int *used, int nused,
                      int64_t now, int64_t since, const status_warn_t *w, int nw)
{
    int secs = 1;
    hb_puts(b, ",\"window\":{");
    for (int k = 0; k < RING_COUNTS; k++) {
        hb_puts(b, "\"");
        hb_puts(b, ring_key[k]);
        hb_puts(b, "\":");
        hb_num(b, ring_sum(ring, k, now, STATUS_WINDOW, &secs));
        hb_puts(b, ",");
    }
    hb_puts(b, "\"seconds\":");
    hb_num(b, (uint64_t)secs);
    hb_puts(b, "}");
    status_warn_list(b, w, nw, 1);
    hb_puts(b, ",\"series\":");
    ring_json(b, ring, 0, since, used, nused);
    hb_puts(b, ",\"series_10s\":");
    ring_json(b, ring, 1, since, used, nused);
}

/* The page (json: 1, since: the series' samples after that second; who:
   -1 the server's counters, else worker who's alone). */
static int serve(exchange_t *ex, int json, int64_t since, int who)
{
    site_t *s = ex->site;
    const status_loop_t *st = hstate(s, HSTATE_STATUS);
    const status_ring_t *ring = st ? st->ring : NULL; /* none before the loop's init */
    int64_t now = gio_wallclock(s->loop);
    stats_roll(&s->stats, now);
    row_t r[180];
    size_t n = rows(s, r, sizeof r / sizeof r[0], now, who);
    int used[RING_BACKENDS], nused = series_slots(s, used);
    status_warn_t *w = malloc(STATUS_WARNS * sizeof *w);
    stats_snap_t *snap = w ? malloc(sizeof *snap) : NULL;
    int nw = 0;
    if (snap) {
        summed(s, snap);
        nw = status_warnings(s, ring, snap, now, w, STATUS_WARNS);
    }
    int nlocks = s->proc->cluster ? cluster_acme_count(s->proc->cluster) : 0;
    size_t cap = STATUS_PAGE_MAX + CONFIG_BACKENDS * STATUS_BACKEND_MAX +
                 STATUS_PROCS_MAX * (12 + STATUS_WORKER_LINE_MAX) + 512 + STATUS_WARNS * 1400 +
                 (size_t)nlocks * (6 * CLUSTER_ACME_NAME_MAX + 64) + /* &quot; for a '"' */
                 (acme_chal_ondemand(s->proc->acme_chal) ? ACME_STATUS_NAMES * 270 + 64 : 0) +
                 (json ? 2 * ring_json_max(nused) : 0);
    char *body = snap ? malloc(cap) : NULL, pid[24];
    if (!body) {
        free(snap);
        free(w);
        return -1;
    }
    hbuf_t b = hb_init(body, cap);
    hbuf_t pb = hb_init(pid, sizeof pid);
    hb_num(&pb, (uint64_t)getpid());
    hb_str(&pb);
    if (json) {
        hb_puts(&b, "{\"version\":\"" GATLING_VERSION "\",\"backend\":\"");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "\",\"pid\":");
        hb_puts(&b, pid);
        hb_puts(&b, ",\"now\":");
        hb_num(&b, (uint64_t)now);
        for (size_t i = 0; i < n; i++) {
            hb_puts(&b, ",\"");
            hb_puts(&b, r[i].key);
            hb_puts(&b, "\":");
            hb_num(&b, r[i].v);
        }
        status_backends(&b, s, ring, now, 1);
        status_cluster_locks(&b, s, 1);
        status_ondemand_names(&b, s, 1);
        status_processes(&b, s, 1);
        json_more(&b, ring, used, nused, now, since, w, nw);
        hb_puts(&b, "}\n");
    } else {
        hb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width\">"
                    "<title>gatling status</title>"
                    "<link rel=\"stylesheet\" href=\"?css\">"
                    "<script src=\"?js\" defer></script></head>\n"
                    "<body><h1>gatling " GATLING_VERSION " (");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "), pid ");
        hb_puts(&b, pid);
        hb_puts(&b, "</h1>\n<div id=\"live\">\n");
        status_warn_list(&b, w, nw, 0);
        status_sections(&b, s, ring, now, snap->g.conns, r, n);
        status_processes(&b, s, 0);
        hb_puts(&b, "</div>\n</body></html>\n");
    }
    free(snap);
    free(w);
    if (b.over) {
        free(body);
        return ex_error(ex, 500, NULL, NULL);
    }
    ex_field(ex, "Cache-Control", "no-store");
    if (!json)
        ex_field(ex, "Content-Security-Policy", STATUS_CSP);
    return ex_page(ex, json ? "application/json" : "text/html; charset=utf-8", body, hb_len(&b));
}

int status_serve(exchange_t *ex, int json)
{
    return serve(ex, json, 0, -1);
}

/* ?js or ?css: the page's script or style sheet, as built in. */
static int asset(exchange_t *ex, int js)
{
    const char *p = js ? status_js : status_css;
    size_t n = strlen(p);
    ex_field(ex, "Cache-Control", "no-cache");
    ex_field(ex, "Content-Security-Policy", STATUS_CSP);
    int r = ex_head(ex, 200, js ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8",
                    n, -1);
    if (r < 0)
        return -1;
    if (r == EX_REPLACED)
        return 0;
    return ex_body_buf(ex, p, n, 0) < 0 ? -1 : 0;
}

int status_health(exchange_t *ex)
{
    site_t *s = ex->site;
    const char *path = s->cfg->health;
    const http_request_t *req = ex->req;
    if (!path)
        return 0;
    size_t n = strlen(path), m = req->method.n;
    const char *t = req->target.p;
    if (req->target.n < n || memcmp(t, path, n) || (req->target.n > n && t[n] != '?'))
        return 0;
    if (!((m == 3 && !memcmp(req->method.p, "GET", 3)) ||
          (m == 4 && !memcmp(req->method.p, "HEAD", 4))))
        return 0;
    static const char ok[] = "ok\n", draining[] = "draining\n";
    int up = !s->draining;
    if (up)
        s->stats.health_ok++;
    else
        s->stats.health_failed++;
    ex_field(ex, "Cache-Control", "no-store");
    if (!up)
        ex_field(ex, "Retry-After", "5");
    const char *body = up ? ok : draining;
    size_t len = up ? sizeof ok - 1 : sizeof draining - 1;
    int r = ex_head(ex, up ? 200 : 503, "text/plain", len, -1);
    if (r < 0)
        return -1;
    if (r == EX_REPLACED)
        return 1;
    return ex_body_buf(ex, body, len, 0) < 0 ? -1 : 1;
}

static int health_on(const site_t *s)
{
    return s->cfg->health != NULL;
}

static int health_serve(exchange_t *ex)
{
    int r = status_health(ex);
    return r ? (r < 0 ? -1 : 0) : HANDLER_NOT_MINE;
}

const handler_t status_health_handler = {
    .name = "-k health", .phase = HANDLER_CHECK, .serve = health_serve, .on = health_on,
};

int status_page_on(const struct site *s)
{
    return s->cfg->status_page;
}

int status_page_asked(exchange_t *ex, const char *page, path_t *p)
{
    const http_request_t *req = ex->req;
    const http_str_t *t = &req->target;
    if (!ex->site->cfg->status_page ||
        !(http_method_is(req, "GET") || http_method_is(req, "HEAD")))
        return 0;
    /* the decoded path can be page only if the target holds its name or an escape */
    if (!memmem(t->p, t->n, page + 1, strlen(page + 1)) && !memchr(t->p, '%', t->n))
        return 0;
    return path_from_target(t->p, t->n, ex->path, EX_PATH_CAP, p) == 0 && !strcmp(p->path, page);
}

int status_stays_plain(exchange_t *ex)
{
    path_t p;
    return ex->site->cfg->status_page &&
           (status_page_asked(ex, "/server-status", &p) || status_page_asked(ex, "/metrics", &p)) &&
           status_allowed(ex);
}

static int page_asked(exchange_t *ex)
{
    path_t p;
    return status_page_asked(ex, "/server-status", &p);
}

/* This process's worker slot (0 without -W). */
static int s_worker(const site_t *s)
{
    return s->proc->stats_shm ? s->proc->worker : 0;
}

static int page_serve(exchange_t *ex)
{
    path_t p;
    if (!status_page_asked(ex, "/server-status", &p))
        return HANDLER_NOT_MINE;
    if (!status_allowed(ex))
        return ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 0;
    const char *q = p.query;
    size_t qn = q ? p.query_len : 0;
    if (qn == 2 && !memcmp(q, "js", 2))
        return asset(ex, 1);
    if (qn == 3 && !memcmp(q, "css", 3))
        return asset(ex, 0);
    int self = s_worker(ex->site);
    if (qn == 4 && !memcmp(q, "json", 4))
        return serve(ex, 1, 0, -1);
    if (qn == 11 && !memcmp(q, "json&worker", 11)) /* this worker's counters alone */
        return serve(ex, 1, 0, self);
    /* json&worker=N: worker N's (0 .. -W less 1), as it last published them */
    unsigned long long v = 0;
    size_t k = qn > 12 && !memcmp(q, "json&worker=", 12) ? scan_ulonglong(q + 12, &v) : 0;
    if (k && k == qn - 12) {
        int nw = stats_shm_workers(ex->site->proc->stats_shm);
        if (v >= (unsigned long long)(nw ? nw : 1))
            return ex_error(ex, 404, NULL, NULL) < 0 ? -1 : 0;
        return serve(ex, 1, 0, (int)v);
    }
    /* json&since=T: the series' samples after second T only (the page's refresh) */
    k = qn > 11 && !memcmp(q, "json&since=", 11) ? scan_ulonglong(q + 11, &v) : 0;
    if (k && k == qn - 11 && v < INT64_MAX)
        return serve(ex, 1, (int64_t)v, -1);
    return serve(ex, 0, 0, -1);
}

const handler_t status_handler = {
    .name = "-S /server-status", .phase = HANDLER_PAGE, .match = page_asked, .serve = page_serve,
    .init = status_init, .free = status_free, .on = status_page_on, .plain = status_stays_plain,
};
