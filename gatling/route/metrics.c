/* /metrics: see metrics.h. */
#include "metrics.h"
#include "router.h"
#include "status.h"
#include "cache.h"
#include "http/hbuf.h"
#include "http/response.h"
#include "site/acme_chal.h"
#include "site/cluster.h"
#include "site/dict.h"
#include "site/encoding.h"
#include "tls/tls.h"

#include <stdlib.h>
#include <string.h>

/* The page is about 15 KiB without -P rules; each rule's backend adds its
   label, escaped (at most twice as long), on BACKEND_KINDS lines (see
   metrics_serve).  What does not fit is a 500, never a page cut short. */
#define METRICS_PAGE_MAX (48 * 1024)

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const proto_names[STATS_PROTOS] = {"http1", "h2", "ftp", "h3"};

/* One sample without labels, with its family's HELP. */
typedef struct metric {
    const char *name, *help;
    uint64_t v;
} metric_t;

/* One sample of a family with one label: its value and the sample's. */
typedef struct lv {
    const char *label;
    uint64_t v;
} lv_t;

/* The "# HELP" and "# TYPE" lines of a family. */
static void head(hbuf_t *b, const char *name, const char *type, const char *help)
{
    hb_puts(b, "# HELP ");
    hb_puts(b, name);
    hb_puts(b, " ");
    hb_puts(b, help);
    hb_puts(b, "\n# TYPE ");
    hb_puts(b, name);
    hb_puts(b, " ");
    hb_puts(b, type);
    hb_puts(b, "\n");
}

/* sep ('{' or ',') and key="v[0..n)", escaped as the format says: backslash,
   double quote and newline. */
static void label(hbuf_t *b, char sep, const char *key, const char *v, size_t n)
{
    hb_put(b, &sep, 1);
    hb_puts(b, key);
    hb_puts(b, "=\"");
    for (size_t i = 0; i < n; i++) {
        const char *e = v[i] == '\\' ? "\\\\" : v[i] == '"' ? "\\\"" : v[i] == '\n' ? "\\n" : NULL;
        if (e)
            hb_puts(b, e);
        else
            hb_put(b, v + i, 1);
    }
    hb_puts(b, "\"");
}

/* The end of a sample: "}" if labels are open, the value, the newline. */
static void value(hbuf_t *b, int labels, uint64_t v)
{
    hb_puts(b, labels ? "} " : " ");
    hb_num(b, v);
    hb_puts(b, "\n");
}

/* us microseconds as seconds, without trailing zeros: "0.0005", "2.5", "10". */
static void seconds(hbuf_t *b, uint64_t us)
{
    hb_num(b, us / 1000000);
    uint64_t f = us % 1000000;
    if (!f)
        return;
    char d[7] = {'.'};
    size_t n = 6;
    for (size_t i = 6; i >= 1; i--, f /= 10)
        d[i] = (char)('0' + f % 10);
    while (d[n] == '0')
        n--;
    hb_put(b, d, n + 1);
}

/* A histogram bucket's upper bound, ',le="..."', bucket k of stats_bounds_us
   (the last: +Inf). */
static void bucket_le(hbuf_t *b, int k)
{
    hb_puts(b, ",le=\"");
    if (k < STATS_BOUNDS)
        seconds(b, stats_bounds_us[k]);
    else
        hb_puts(b, "+Inf");
    hb_puts(b, "\"");
}

/* Families of one sample each, all of type type. */
static void scalars(hbuf_t *b, const char *type, const metric_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        head(b, m[i].name, type, m[i].help);
        hb_puts(b, m[i].name);
        value(b, 0, m[i].v);
    }
}

/* A family of n samples told apart by label key. */
static void family(hbuf_t *b, const char *name, const char *type, const char *help, const char *key,
                   const lv_t *lv, size_t n)
{
    head(b, name, type, help);
    for (size_t i = 0; i < n; i++) {
        hb_puts(b, name);
        label(b, '{', key, lv[i].label, strlen(lv[i].label));
        value(b, 1, lv[i].v);
    }
}

/* What the server is: its version, its start, its workers. */
static void general(hbuf_t *b, const site_t *s, const stats_snap_t *t)
{
    head(b, "gatling_info", "gauge", "The version and the IO backend (the value is 1)");
    hb_puts(b, "gatling_info");
    label(b, '{', "version", GATLING_VERSION, strlen(GATLING_VERSION));
    label(b, ',', "io", gio_backend_name(), strlen(gio_backend_name()));
    value(b, 1, 1);
    const metric_t g[] = {
        {"gatling_start_time_seconds",
         "When the server started (with -W the oldest worker), "
         "seconds since the Epoch",
         (uint64_t)t->c.started},
        {"gatling_workers", "Worker processes (-W; 1 without)", (uint64_t)s->cfg->workers},
    };
    scalars(b, "gauge", g, N(g));
}

/* counters.h's rows that have a family here, in its order: a family's
   HELP and TYPE before its first row. */
static void table(hbuf_t *b, const stats_snap_t *t)
{
    static const char *const type[] = {
        [STATS_COUNTER] = "counter", [STATS_GAUGE] = "gauge", [STATS_MS] = "counter"};
    const char *fam = NULL;
    for (size_t i = 0; i < stats_nrows; i++) {
        const stats_row_t *r = &stats_rows[i];
        if (!r->metric || !stats_shown(t, r))
            continue;
        if (!fam || strcmp(fam, r->metric))
            head(b, r->metric, type[r->type], r->help);
        fam = r->metric;
        hb_puts(b, r->metric);
        if (r->lkey)
            label(b, '{', r->lkey, r->lval, strlen(r->lval));
        if (r->type != STATS_MS) {
            value(b, r->lkey != NULL, stats_value(t, r));
            continue;
        }
        hb_puts(b, r->lkey ? "} " : " ");
        seconds(b, stats_value(t, r) * 1000);
        hb_puts(b, "\n");
    }
}

/* Requests and bytes per protocol, gRPC's outcomes. */
static void per_protocol(hbuf_t *b, const status_counters_t *c)
{
    lv_t req[STATS_PROTOS], bytes[STATS_PROTOS];
    for (int p = 0; p < STATS_PROTOS; p++) {
        req[p] = (lv_t){proto_names[p], c->proto_requests[p]};
        bytes[p] = (lv_t){proto_names[p], c->proto_bytes[p]};
    }
    family(b, "gatling_requests_total", "counter",
           "Requests answered (FTP: transfers ended), by protocol", "protocol", req, N(req));
    family(b, "gatling_transferred_bytes_total", "counter",
           "Bytes of responses sent (FTP: of transfers, either way), by protocol", "protocol",
           bytes, N(bytes));
    lv_t grpc[17];
    for (int k = 0; k < 17; k++)
        grpc[k] = (lv_t){resp_grpc_code(k), c->grpc[k]};
    family(b, "gatling_grpc_responses_total", "counter",
           "gRPC calls proxied, by the grpc-status they ended with (the backend's, "
           "gatling's: UNAVAILABLE, DEADLINE_EXCEEDED, or the client's: CANCELLED, "
           "DEADLINE_EXCEEDED)", "code", grpc, N(grpc));
}

/* The request duration histogram, per protocol: cumulative buckets. */
static void histograms(hbuf_t *b, const status_counters_t *c)
{
    static const char name[] = "gatling_request_duration_seconds";
    head(b, name, "histogram",
         "Request durations, from the loop round the head began in to the response's end "
         "(FTP: a transfer's, from its command), by protocol");
    for (int p = 0; p < STATS_PROTOS; p++) {
        uint64_t n = 0;
        for (int k = 0; k <= STATS_BOUNDS; k++) {
            n += c->duration[p][k];
            hb_puts(b, "gatling_request_duration_seconds_bucket");
            label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
            bucket_le(b, k);
            value(b, 1, n);
        }
        hb_puts(b, "gatling_request_duration_seconds_sum");
        label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
        hb_puts(b, "} ");
        seconds(b, c->duration_us[p]);
        hb_puts(b, "\ngatling_request_duration_seconds_count");
        label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
        value(b, 1, n);
    }
}

/* A backend's labels: its pool and its address as written. */
static void be_label(hbuf_t *b, const char *pool, const char *addr)
{
    label(b, '{', "pool", pool, strlen(pool));
    label(b, ',', "backend", addr, strlen(addr));
}

/* Per backend (of -P rules and --pools), by this loop's slots: with -W the
   workers' counts of a slot are summed (each worker reads the same rules and
   lists in the same order, so a slot is the same backend in each). */
static void backends(hbuf_t *b, const site_t *s, const stats_snap_t *t)
{
#define BACKEND_METRIC(kind, metric, help, key, label, ckey, clabel) [BACKEND_##kind] = {metric, help},
    static const metric_t f[BACKEND_KINDS] = {STATS_BACKEND_COUNTERS(BACKEND_METRIC)};
#undef BACKEND_METRIC
    const char *pool[CONFIG_BACKENDS], *addr[CONFIG_BACKENDS], *state;
    unsigned out;
    int have[CONFIG_BACKENDS], any = 0;
    for (int i = 0; i < CONFIG_BACKENDS; i++)
        any |= have[i] = router_backend(s, i, &pool[i], &addr[i], &state, &out) != 0;
    if (!any)
        return;
    for (int k = 0; k < BACKEND_KINDS; k++) {
        head(b, f[k].name, "counter", f[k].help);
        for (int i = 0; i < CONFIG_BACKENDS; i++)
            if (have[i]) {
                hb_puts(b, f[k].name);
                be_label(b, pool[i], addr[i]);
                value(b, 1, t->c.backend[i][k]);
            }
    }
    static const metric_t g[2] = {
        {"gatling_backend_up", "1: the backend takes requests (with -W: the workers that "
                               "hold it up); 0: down or draining", 0},
        {"gatling_backend_outstanding", "Requests at the backend now", 0}};
    for (int k = 0; k < 2; k++) {
        head(b, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < CONFIG_BACKENDS; i++)
            if (have[i]) {
                hb_puts(b, g[k].name);
                be_label(b, pool[i], addr[i]);
                value(b, 1, k ? t->g.be_outstanding[i] : t->g.be_up[i]);
            }
    }
    head(b, "gatling_backend_request_duration_seconds", "histogram",
         "Backend requests, from sending to the answer's end");
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        uint64_t n = 0;
        for (int k = 0; have[i] && k <= STATS_BOUNDS; k++) {
            n += t->c.be_duration[i][k];
            hb_puts(b, "gatling_backend_request_duration_seconds_bucket");
            be_label(b, pool[i], addr[i]);
            bucket_le(b, k);
            value(b, 1, n);
        }
        if (!have[i])
            continue;
        hb_puts(b, "gatling_backend_request_duration_seconds_sum");
        be_label(b, pool[i], addr[i]);
        hb_puts(b, "} ");
        seconds(b, t->c.be_duration_us[i]);
        hb_puts(b, "\ngatling_backend_request_duration_seconds_count");
        be_label(b, pool[i], addr[i]);
        value(b, 1, n);
    }
}

/* Publish this loop's numbers into its slot now. */
static void publish(site_t *s)
{
    stats_snap_t snap;
    status_snapshot(s, &snap);
    stats_shm_publish(s->proc->stats_shm, s->proc->worker, &snap);
    s->stats_published = gio_now(s->loop);
}

/* The owed publish is due (or metrics_serve published meanwhile: later). */
static void on_publish(gio_loop_t *l, void *arg)
{
    site_t *s = arg;
    int64_t due = s->stats_published + METRICS_PUBLISH_MS;
    if (gio_now(l) < due)
        gio_timer_set(l, &s->stats_timer, due, on_publish, s);
    else
        publish(s);
}

void metrics_owe(site_t *s)
{
    if (s->proc->stats_shm && !gio_timer_armed(&s->stats_timer))
        gio_timer_set(s->loop, &s->stats_timer, s->stats_published + METRICS_PUBLISH_MS,
                      on_publish, s);
}

/* Each loaded certificate's expiry (read at load, tls/tls.c). */
static void certificates(hbuf_t *b, const site_t *s)
{
    const char *name;
    int64_t t;
    if (!tls_store_expiry(s->proc->tls, 0, &name, &t))
        return;
    head(b, "gatling_tls_certificate_expiry_seconds", "gauge",
         "When each certificate loaded expires (unix time, its notAfter)");
    for (int i = 0; tls_store_expiry(s->proc->tls, i, &name, &t); i++) {
        hb_puts(b, "gatling_tls_certificate_expiry_seconds");
        label(b, '{', "name", name, strlen(name));
        value(b, 1, t > 0 ? (uint64_t)t : 0);
    }
}

/* --acme: who issued each name's certificate (its issuer's CN), as an info
   family: 1 for each name that has one. */
static void acme_issuers(hbuf_t *b, const acme_status_t *st)
{
    head(b, "gatling_acme_certificate_issuer", "gauge",
         "The issuer (CN) of each ACME certificate in use: 1 per name");
    for (int i = 0; i < st->n; i++)
        if (st->names[i].issuer[0]) {
            hb_puts(b, "gatling_acme_certificate_issuer");
            label(b, '{', "name", st->names[i].name, strlen(st->names[i].name));
            label(b, ',', "issuer", st->names[i].issuer, strlen(st->names[i].issuer));
            value(b, 1, 1);
        }
}

/* --acme-on-demand: which names it got (1 each; its counters are rows of
   counters.h). */
static void acme_ondemand(hbuf_t *b, const acme_status_t *st)
{
    head(b, "gatling_acme_ondemand_name", "gauge", "A name got on demand (1)");
    for (int i = 0; i < st->n; i++)
        if (st->names[i].ondemand) {
            hb_puts(b, "gatling_acme_ondemand_name");
            label(b, '{', "name", st->names[i].name, strlen(st->names[i].name));
            value(b, 1, 1);
        }
}

/* --acme: the client's numbers per name from its status file
   (site/acme_chal.h; its counters are rows of counters.h, status_side's);
   none when the file is missing or not all of it reads as it should. */
static void acme(hbuf_t *b, const site_t *s, const acme_status_t *st)
{
    if (st) {
        if (acme_chal_ondemand(s->proc->acme_chal))
            acme_ondemand(b, st);
        const char *fam[2] = {"gatling_acme_next_renewal_seconds", "gatling_acme_name_failures"};
        const char *help[2] = {"When the ACME client next renews each name (unix time; 0: none)",
                               "ACME failures for each name since its last success"};
        for (int k = 0; k < 2; k++) {
            head(b, fam[k], "gauge", help[k]);
            for (int i = 0; i < st->n; i++) {
                hb_puts(b, fam[k]);
                label(b, '{', "name", st->names[i].name, strlen(st->names[i].name));
                value(b, 1, k ? st->names[i].fails : (uint64_t)st->names[i].next);
            }
        }
        acme_issuers(b, st);
    }
}

/* --cluster: what the side process last had from etcd (site/cluster.h). */
static void cluster(hbuf_t *b, const site_t *s)
{
    uint64_t gen;
    if (!s->proc->cluster)
        return;
    int64_t synced = cluster_synced(s->proc->cluster, &gen);
    const metric_t m[] = {
        {"gatling_cluster_last_sync_seconds",
         "When the cluster's side process last had an answer from etcd (unix time; 0: never)",
         synced > 0 ? (uint64_t)synced : 0},
        {"gatling_cluster_ticket_generation",
         "The generation of the cluster's ticket keys in use (0: none yet, our own)", gen},
    };
    scalars(b, "gauge", m, N(m));
    int n = cluster_acme_count(s->proc->cluster);
    if (!n)
        return;
    head(b, "gatling_cluster_acme_lock", "gauge",
         "1 while this node holds the cluster's ACME lock for the name (its client orders it)");
    char name[CLUSTER_ACME_NAME_MAX];
    for (int i = 0; i < n; i++) {
        size_t len = cluster_acme_name(s->proc->cluster, i, name);
        hb_puts(b, "gatling_cluster_acme_lock");
        label(b, '{', "name", name, len);
        value(b, 1, (uint64_t)cluster_acme_held(s->proc->cluster, i));
    }
}

int metrics_serve(exchange_t *ex)
{
    site_t *s = ex->site;
    const proc_t *p = s->proc;
    stats_snap_t own, t;
    stats_roll(&s->stats, gio_wallclock(s->loop));
    status_snapshot(s, &own);
    t = own;
    if (p->stats_shm) { /* -W: ours fresh, the others' as published */
        stats_shm_publish(p->stats_shm, p->worker, &own);
        s->stats_published = gio_now(s->loop);
        stats_shm_total(p->stats_shm, p->worker, &own, &t);
    }
    acme_status_t *as = status_acme(s); /* the ACME client's file, read once */
    status_side(s, as, &t);
    size_t cap = METRICS_PAGE_MAX;
    const char *pool, *addr, *state;
    unsigned out;
    for (int i = 0; i < CONFIG_BACKENDS; i++) /* each backend's labels, escaped, on its lines */
        if (router_backend(s, i, &pool, &addr, &state, &out))
            cap += (BACKEND_KINDS + 2 + STATS_BOUNDS + 3) * (2 * (strlen(pool) + strlen(addr)) + 128);
    const char *name;
    int64_t exp;
    for (int i = 0; tls_store_expiry(p->tls, i, &name, &exp); i++)
        cap += 2 * strlen(name) + 96; /* its line, the name escaped */
    if (p->acme_chal) /* two lines per name (at most 253 bytes, no escapes) */
        cap += 2048 + ACME_STATUS_NAMES * 3 * (253 + 64); /* and --acme-on-demand's */
    if (p->cluster) /* a lock line per name, the name escaped */
        cap += 1024 + CLUSTER_ACME_NAMES * (2 * CLUSTER_ACME_NAME_MAX + 64);
    char *page = malloc(cap);
    if (!page) {
        free(as);
        return -1;
    }
    hbuf_t b = hb_init(page, cap);
    general(&b, s, &t);
    table(&b, &t);
    per_protocol(&b, &t.c);
    histograms(&b, &t.c);
    backends(&b, s, &t);
    certificates(&b, s);
    acme(&b, s, as);
    free(as);
    cluster(&b, s);
    if (b.over) {
        free(page);
        return ex_error(ex, 500, NULL, NULL);
    }
    ex_field(ex, "Cache-Control", "no-store");
    return ex_page(ex, "text/plain; version=0.0.4; charset=utf-8", page, hb_len(&b));
}

static int metrics_asked(exchange_t *ex)
{
    path_t p;
    return status_page_asked(ex, "/metrics", &p);
}

static int metrics_route(exchange_t *ex)
{
    if (!status_allowed(ex))
        return ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 0;
    return metrics_serve(ex);
}

const handler_t metrics_handler = {
    .name = "-S /metrics", .phase = HANDLER_PAGE, .match = metrics_asked, .serve = metrics_route,
    .on = status_page_on,
};
