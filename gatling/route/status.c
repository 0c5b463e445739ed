/* /server-status: see status.h. */
#define _GNU_SOURCE /* memmem */
#include "status.h"
#include "cache.h"
#include "handlers/proxy.h"
#include "http/hbuf.h"
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

/* One row of the page: its JSON key, its HTML label, its value. */
typedef struct row {
    const char *key, *label;
    uint64_t v;
} row_t;

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
    const row_t d[] = {
        {"backend_connects", "proxy: backend connections opened", be[BACKEND_CONNECTS]},
        {"backend_reuses", "proxy: requests on a pooled backend connection", be[BACKEND_REUSES]},
        {"backend_502", "proxy: backend failed: 502 or response cut short", be[BACKEND_502]},
        {"backend_504", "proxy: backend silent past -Q: 504", be[BACKEND_504]},
        {"backend_tunnel_idle", "proxy: WebSocket tunnels closed idle (-Q secs,tunnel)",
         be[BACKEND_TUNNEL_IDLE]},
        {"backend_unsized", "proxy: bodies without a length refused: 413 (1 MiB), 503 (64 MiB)",
         be[BACKEND_UNSIZED]},
        {"backend_requests", "proxy: requests sent to backends (each attempt)",
         be[BACKEND_REQUESTS]},
        {"backend_retries", "proxy: requests sent to another backend after a failure",
         be[BACKEND_RETRIES]},
        {"backend_downs", "proxy: backends taken out (failures in the window, checks)",
         be[BACKEND_DOWNS]},
    };
    return put_rows(r, n, cap, d, sizeof d / sizeof d[0]);
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
    char *text = s->proc->acme_chal ? malloc(ACME_STATUS_MAX) : NULL;
    acme_status_t *st = text ? malloc(sizeof *st) : NULL;
    if (st && acme_chal_status(s->proc->acme_chal, text, ACME_STATUS_MAX) > 0 &&
        acme_chal_status_parse(text, st) == 0) {
        const row_t d[] = {
            {"acme_orders", "ACME: orders made", st->orders},
            {"acme_failures", "ACME: attempts failed", st->failures},
            {"acme_ondemand_names", "ACME on demand: names got", st->od_names},
            {"acme_ondemand_asks", "ACME on demand: asks taken", st->od_asks},
            {"acme_ondemand_allowed", "ACME on demand: allowed by the ask URL", st->od_allowed},
            {"acme_ondemand_refused", "ACME on demand: refused by the ask URL", st->od_refused},
            {"acme_ondemand_limited", "ACME on demand: refused by a rate limit", st->od_limited},
            {"acme_ondemand_invalid", "ACME on demand: refused, no host name", st->od_invalid},
        };
        size_t nd = acme_chal_ondemand(s->proc->acme_chal) ? sizeof d / sizeof d[0] : 2;
        n = put_rows(r, n, cap, d, nd);
    }
    free(st);
    free(text);
    uint64_t gen = 0;
    int64_t synced = s->proc->cluster ? cluster_synced(s->proc->cluster, &gen) : 0;
    const row_t c[] = {
        {"cluster_last_sync", "--cluster: etcd last answered at (unix time)", (uint64_t)synced},
        {"cluster_ticket_generation", "--cluster: the ticket keys' generation", gen},
    };
    return s->proc->cluster ? put_rows(r, n, cap, c, 2) : n;
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
        int r = proxy_backend(s, i, &pool, &addr, &state, &out);
        snap->g.be_up[i] = r == 2;
        snap->g.be_outstanding[i] = r ? out : 0;
    }
}

/* The rows, in the order shown (at most cap); the same list makes both
   forms: the uptime, counters.h's rows that have a key here, the backends'
   sums, the certificates, --acme's and --cluster's numbers. */
static size_t rows(const site_t *s, row_t *r, size_t cap, int64_t now)
{
    stats_snap_t snap;
    status_snapshot(s, &snap);
    size_t n = 0;
    if (n < cap)
        r[n++] = (row_t){"uptime", "uptime (s)", (uint64_t)(now - s->stats.started)};
    for (size_t i = 0; i < stats_nrows && n < cap; i++)
        if (stats_rows[i].skey)
            r[n++] = (row_t){stats_rows[i].skey, stats_rows[i].slabel,
                             stats_value(&snap, &stats_rows[i])};
    n = backend_rows(&snap.c, r, n, cap);
    return cert_rows(s, r, n, cap);
}

/* s[0..) for JSON (a string's inside) or HTML (text). */
static void escaped(hbuf_t *b, const char *s, int json)
{
    for (; *s; s++) {
        const char *e = json ? (*s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : NULL)
                             : (*s == '<' ? "&lt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;" : NULL);
        if (e)
            hb_puts(b, e);
        else if ((unsigned char)*s >= 0x20)
            hb_put(b, s, 1);
    }
}

/* The backends of -P rules and --pools: a JSON array, or an HTML table. */
static void backend_list(hbuf_t *b, const site_t *s, int json)
{
    static const struct {
        const char *key;
        int kind;
    } col[] = {{"requests", BACKEND_REQUESTS}, {"failures", BACKEND_502},
               {"timeouts", BACKEND_504},       {"retries", BACKEND_RETRIES},
               {"downs", BACKEND_DOWNS},        {"checks_failed", BACKEND_CHECKS_FAILED}};
    const char *pool, *addr, *state;
    unsigned out;
    int first = 1;
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        if (!proxy_backend(s, i, &pool, &addr, &state, &out))
            continue;
        hb_puts(b, json ? (first ? ",\"backends\":[{\"pool\":\"" : ",{\"pool\":\"")
                        : (first ? "<h2>Backends</h2>\n<table>\n<tr><th>pool</th><th>backend</th>"
                                   "<th>state</th><th>outstanding</th><th>requests</th>"
                                   "<th>failures</th><th>timeouts</th><th>retries</th>"
                                   "<th>downs</th><th>checks failed</th></tr>\n<tr><td>"
                                 : "<tr><td>"));
        first = 0;
        escaped(b, pool, json);
        hb_puts(b, json ? "\",\"backend\":\"" : "</td><td>");
        escaped(b, addr, json);
        hb_puts(b, json ? "\",\"state\":\"" : "</td><td>");
        hb_puts(b, state);
        hb_puts(b, json ? "\",\"outstanding\":" : "</td><td>");
        hb_num(b, out);
        for (size_t k = 0; k < sizeof col / sizeof col[0]; k++) {
            if (json)
                hb_puts(b, ",\""), hb_puts(b, col[k].key), hb_puts(b, "\":");
            else
                hb_puts(b, "</td><td>");
            hb_num(b, s->stats.backend[i][col[k].kind]);
        }
        hb_puts(b, json ? "}" : "</td></tr>\n");
    }
    if (!first)
        hb_puts(b, json ? "]" : "</table>\n");
}

/* --cluster: each name the ACME client wants, and whether this node holds
   its lock (the client orders it): a JSON array, or an HTML table. */
static void cluster_locks(hbuf_t *b, const site_t *s, int json)
{
    int n = s->proc->cluster ? cluster_acme_count(s->proc->cluster) : 0;
    char name[CLUSTER_ACME_NAME_MAX];
    for (int i = 0; i < n; i++) {
        cluster_acme_name(s->proc->cluster, i, name);
        hb_puts(b, json ? (i ? ",{\"name\":\"" : ",\"cluster_acme_locks\":[{\"name\":\"")
                        : (i ? "<tr><td>"
                             : "<h2>Cluster: ACME locks</h2>\n<table>\n<tr><th>name</th>"
                               "<th>held here</th></tr>\n<tr><td>"));
        escaped(b, name, json);
        int held = cluster_acme_held(s->proc->cluster, i);
        hb_puts(b, json ? (held ? "\",\"held\":1}" : "\",\"held\":0}")
                        : (held ? "</td><td>yes</td></tr>\n" : "</td><td>no</td></tr>\n"));
    }
    if (n)
        hb_puts(b, json ? "]" : "</table>\n");
}

/* --acme-on-demand: the names got so (the client's status file): a JSON
   array, or an HTML list. */
static void ondemand_names(hbuf_t *b, const site_t *s, int json)
{
    char *text = acme_chal_ondemand(s->proc->acme_chal) ? malloc(ACME_STATUS_MAX) : NULL;
    acme_status_t *st = text ? malloc(sizeof *st) : NULL;
    int k = 0;
    if (st && acme_chal_status(s->proc->acme_chal, text, ACME_STATUS_MAX) > 0 &&
        acme_chal_status_parse(text, st) == 0)
        for (int i = 0; i < st->n; i++) {
            if (!st->names[i].ondemand)
                continue;
            hb_puts(b, json ? (k++ ? ",\"" : ",\"acme_ondemand\":[\"")
                            : (k++ ? "<li>" : "<h2>ACME: names got on demand</h2>\n<ul>\n<li>"));
            hb_puts(b, st->names[i].name); /* a host name: nothing to escape */
            hb_puts(b, json ? "\"" : "</li>\n");
        }
    if (k)
        hb_puts(b, json ? "]" : "</ul>\n");
    free(st);
    free(text);
}

#define STATUS_PROCS_MAX 64 /* -W's workers listed, at most (worker.c's cap) */

/* The process tree as this process knows it (gatling.8, PROCESSES): itself,
   -W's supervisor and workers, its CGI spawner, the ACME keeper, the
   cluster's side process; 0 for one that is not there. */
static void processes(hbuf_t *b, const site_t *s, int json)
{
    const proc_t *p = s->proc;
    const char *const key[] = {"self", "supervisor", "cgi_spawner", "acme_keeper", "cluster"};
    const char *const label[] = {"this process", "-W supervisor", "CGI spawner",
                                 "ACME keeper", "cluster side process"};
    long pid[] = {(long)getpid(), p->stats_shm ? (long)getppid() : 0, p->spawn_pid,
                  p->acme_pid, p->cluster_pid};
    long w[STATUS_PROCS_MAX];
    int nw = stats_shm_pids(p->stats_shm, w, STATUS_PROCS_MAX);
    hb_puts(b, json ? ",\"processes\":{" : "<h2>Processes</h2>\n<table>\n");
    for (size_t i = 0; i < sizeof pid / sizeof pid[0]; i++) {
        hb_puts(b, json ? (i ? ",\"" : "\"") : "<tr><th>");
        hb_puts(b, json ? key[i] : label[i]);
        hb_puts(b, json ? "\":" : "</th><td>");
        hb_num(b, (uint64_t)(pid[i] > 0 ? pid[i] : 0));
        if (!json)
            hb_puts(b, "</td></tr>\n");
    }
    hb_puts(b, json ? ",\"workers\":[" : "<tr><th>-W workers</th><td>");
    for (int i = 0; i < nw; i++) {
        if (i)
            hb_puts(b, json ? "," : " ");
        hb_num(b, (uint64_t)w[i]);
    }
    hb_puts(b, json ? "]}" : "</td></tr>\n</table>\n");
}

int status_serve(exchange_t *ex, int json)
{
    site_t *s = ex->site;
    int64_t now = gio_wallclock(s->loop);
    stats_roll(&s->stats, now);
    row_t r[176];
    size_t n = rows(s, r, sizeof r / sizeof r[0], now);
    int nlocks = s->proc->cluster ? cluster_acme_count(s->proc->cluster) : 0;
    size_t cap = STATUS_PAGE_MAX + CONFIG_BACKENDS * STATUS_BACKEND_MAX +
                 STATUS_PROCS_MAX * 12 + 512 +
                 (size_t)nlocks * (6 * CLUSTER_ACME_NAME_MAX + 64) + /* &quot; for a '"' */
                 (acme_chal_ondemand(s->proc->acme_chal) ? ACME_STATUS_NAMES * 270 + 64 : 0);
    char *body = malloc(cap), pid[24];
    if (!body)
        return -1;
    hbuf_t b = hb_init(body, cap);
    hbuf_t pb = hb_init(pid, sizeof pid);
    hb_num(&pb, (uint64_t)getpid());
    hb_str(&pb);
    if (json) {
        hb_puts(&b, "{\"version\":\"" GATLING_VERSION "\",\"backend\":\"");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "\",\"pid\":");
        hb_puts(&b, pid);
        for (size_t i = 0; i < n; i++) {
            hb_puts(&b, ",\"");
            hb_puts(&b, r[i].key);
            hb_puts(&b, "\":");
            hb_num(&b, r[i].v);
        }
        backend_list(&b, s, 1);
        cluster_locks(&b, s, 1);
        ondemand_names(&b, s, 1);
        processes(&b, s, 1);
        hb_puts(&b, "}\n");
    } else {
        hb_puts(&b,
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<title>gatling status</title></head>\n<body><h1>gatling " GATLING_VERSION " (");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "), pid ");
        hb_puts(&b, pid);
        hb_puts(&b, "</h1>\n<table>\n");
        for (size_t i = 0; i < n; i++) {
            hb_puts(&b, "<tr><th>");
            hb_puts(&b, r[i].label);
            hb_puts(&b, "</th><td>");
            hb_num(&b, r[i].v);
            hb_puts(&b, "</td></tr>\n");
        }
        hb_puts(&b, "</table>\n");
        backend_list(&b, s, 0);
        cluster_locks(&b, s, 0);
        ondemand_names(&b, s, 0);
        processes(&b, s, 0);
        hb_puts(&b, "</body></html>\n");
    }
    if (b.over) {
        free(body);
        return ex_error(ex, 500, NULL, NULL);
    }
    ex_field(ex, "Cache-Control", "no-store");
    return ex_page(ex, json ? "application/json" : "text/html; charset=utf-8", body, hb_len(&b));
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

const handler_t status_health_handler = {"-k health", NULL, health_serve, NULL, NULL, health_on,
                                         NULL, NULL, 0};

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

static int page_serve(exchange_t *ex)
{
    path_t p;
    if (!status_page_asked(ex, "/server-status", &p))
        return HANDLER_NOT_MINE;
    if (!status_allowed(ex))
        return ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 0;
    return status_serve(ex, p.query && p.query_len == 4 && !memcmp(p.query, "json", 4));
}

const handler_t status_handler = {"-S /server-status", page_asked, page_serve, NULL, NULL,
                                  status_page_on, NULL, NULL, 0};
