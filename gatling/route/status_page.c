/* /server-status's parts: see status_int.h. */
#include "status_int.h"
#include "router.h"
#include "site/acme_chal.h"
#include "site/cluster.h"
#include "tls/tls.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void status_escaped(hbuf_t *b, const char *s, int json)
{
    for (; *s; s++) {
        const char *e;
        if (json)
            e = *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : NULL;
        else
            e = *s == '<' ? "&lt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;" : NULL;
        if (e)
            hb_puts(b, e);
        else if ((unsigned char)*s >= 0x20)
            hb_put(b, s, 1);
    }
}

#define LATELY 60 /* seconds: failures, refusals, 5xx "lately" */

/* A backend's state cell: marked when it is out, or failed lately. */
static void backend_state(hbuf_t *b, const char *state, int up, uint64_t failed)
{
    if (!up) {
        hb_puts(b, "<b class=\"bad\">");
        hb_puts(b, state);
        hb_puts(b, "</b>");
    } else if (failed) {
        hb_puts(b, "<b class=\"warn\">");
        hb_puts(b, state);
        hb_puts(b, ", failing</b>");
    } else {
        hb_puts(b, state);
    }
}

void status_backends(hbuf_t *b, const site_t *s, const status_ring_t *ring, int64_t now,
                     int json)
{
#define BACKEND_COL(kind, metric, help, key, label, ckey, clabel) {ckey, clabel, BACKEND_##kind},
    static const struct {
        const char *key, *label;
        int kind;
    } col[] = {STATS_BACKEND_COUNTERS(BACKEND_COL)};
#undef BACKEND_COL
    const char *pool, *addr, *state;
    unsigned out;
    int first = 1;
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        int r = router_backend(s, i, &pool, &addr, &state, &out);
        if (!r)
            continue;
        hb_puts(b, json ? (first ? ",\"backends\":[{\"slot\":" : ",{\"slot\":")
                        : (first ? "<h2>Backends</h2>\n<table class=\"be\">\n<tr><th>pool</th>"
                                   "<th>backend</th><th>state</th><th>outstanding</th>"
                                 : "<tr><td>"));
        for (size_t k = 0; first && !json && k < sizeof col / sizeof col[0]; k++)
            if (col[k].key)
                hb_puts(b, "<th>"), hb_puts(b, col[k].label), hb_puts(b, "</th>");
        if (first && !json)
            hb_puts(b, "</tr>\n<tr><td>");
        first = 0;
        if (json) {
            hb_num(b, (uint64_t)i);
            hb_puts(b, ",\"pool\":\"");
        }
        status_escaped(b, pool, json);
        hb_puts(b, json ? "\",\"backend\":\"" : "</td><td>");
        status_escaped(b, addr, json);
        hb_puts(b, json ? "\",\"state\":\"" : "</td><td>");
        if (json)
            hb_puts(b, state);
        else
            backend_state(b, state, r == 2, ring ? ring_be_failures(ring, i, now, LATELY) : 0);
        hb_puts(b, json ? "\",\"outstanding\":" : "</td><td>");
        hb_num(b, out);
        for (size_t k = 0; k < sizeof col / sizeof col[0]; k++) {
            if (!col[k].key)
                continue;
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

void status_cluster_locks(hbuf_t *b, const site_t *s, int json)
{
    int n = s->proc->cluster ? cluster_acme_count(s->proc->cluster) : 0;
    char name[CLUSTER_ACME_NAME_MAX];
    for (int i = 0; i < n; i++) {
        cluster_acme_name(s->proc->cluster, i, name);
        hb_puts(b, json ? (i ? ",{\"name\":\"" : ",\"cluster_acme_locks\":[{\"name\":\"")
                        : (i ? "<tr><td>"
                             : "<h2>Cluster: ACME locks</h2>\n<table>\n<tr><th>name</th>"
                               "<th>held here</th></tr>\n<tr><td>"));
        status_escaped(b, name, json);
        int held = cluster_acme_held(s->proc->cluster, i);
        hb_puts(b, json ? (held ? "\",\"held\":1}" : "\",\"held\":0}")
                        : (held ? "</td><td>yes</td></tr>\n" : "</td><td>no</td></tr>\n"));
    }
    if (n)
        hb_puts(b, json ? "]" : "</table>\n");
}

void status_ondemand_names(hbuf_t *b, const site_t *s, int json)
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

/* One worker's line of the per-worker table: its slot, pid and numbers. */
static void worker_line(hbuf_t *b, int i, long pid, const stats_snap_t *w, int json)
{
    static const char *const key[] = {"worker", "pid", "connections", "requests", "bytes",
                                      "responses_4xx", "responses_5xx", "timeouts"};
    const status_counters_t *c = &w->c;
    uint64_t v[] = {(uint64_t)i, (uint64_t)(pid > 0 ? pid : 0), w->g.conns, c->requests,
                    c->bytes, c->responses_4xx, c->responses_5xx,
                    c->timeout_head + c->timeout_body + c->timeout_drain +
                        c->timeout_handshake + c->proxy_timeout};
    hb_puts(b, json ? (i ? ",{" : "{") : "<tr>");
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        if (json) {
            hb_puts(b, k ? ",\"" : "\"");
            hb_puts(b, key[k]);
            hb_puts(b, "\":");
        } else {
            hb_puts(b, "<td>");
        }
        hb_num(b, v[k]);
        if (!json)
            hb_puts(b, "</td>");
    }
    hb_puts(b, json ? "}" : "</tr>\n");
}

/* Under -W, each worker's own numbers as last published (this one's just
   now, by status.c's summed() before the page is made), so that an
   unbalanced worker shows: a table on the page, "per_worker" in ?json.
   Without -W, no table and an empty list. */
static void per_worker(hbuf_t *b, const site_t *s, int json)
{
    stats_shm_t *t = s->proc->stats_shm;
    int nw = stats_shm_workers(t);
    stats_snap_t *w = nw ? malloc(sizeof *w) : NULL; /* ~10 KiB: not on the loop's stack */
    if (!w) {
        hb_puts(b, json ? ",\"per_worker\":[]" : "");
        return;
    }
    hb_puts(b, json ? ",\"per_worker\":["
                    : "<h2>Workers</h2>\n<table id=\"workers\">\n<tr><th>worker</th>"
                      "<th>pid</th><th>open connections</th><th>requests</th><th>bytes sent</th>"
                      "<th>4xx</th><th>5xx</th><th>timeouts</th></tr>\n");
    for (int i = 0; i < nw && i < STATUS_PROCS_MAX; i++) {
        if (stats_shm_worker(t, i, w) < 0)
            break;
        worker_line(b, i, i == s->proc->worker ? (long)getpid() : stats_shm_pid(t, i), w, json);
    }
    hb_puts(b, json ? "]" : "</table>\n");
    free(w);
}

void status_processes(hbuf_t *b, const site_t *s, int json)
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
    per_worker(b, s, json);
}

/* One warning into w[*n] (if there is room). */
static void warn(status_warn_t *w, int *n, int max, int bad, const char *means, const char *fmt,
                 ...) __attribute__((format(printf, 6, 7)));
static void warn(status_warn_t *w, int *n, int max, int bad, const char *means, const char *fmt,
                 ...)
{
    if (*n >= max)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w[*n].what, sizeof w[*n].what, fmt, ap); /* a long address is cut short */
    va_end(ap);
    w[*n].bad = bad;
    w[*n].means = means;
    (*n)++;
}

/* The backends that are out, or failed lately. */
static void backend_warnings(const site_t *s, const status_ring_t *ring, int64_t now,
                             status_warn_t *w, int *n, int max)
{
    const char *pool, *addr, *state;
    unsigned out;
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        int r = router_backend(s, i, &pool, &addr, &state, &out);
        uint64_t failed = ring && r ? ring_be_failures(ring, i, now, LATELY) : 0;
        if (r == 1)
            warn(w, n, max, 1,
                 "taken out after failures in a row (--pool fails=, window=, down=) or "
                 "failed checks (check=); its pool's other backends take its requests, "
                 "a pool with none answers 502 or 503",
                 "backend %s %s is %s", pool, addr, state);
        else if (failed)
            warn(w, n, max, 0,
                 "502 (refused, reset, malformed) or 504 (silent past -Q); a few more "
                 "in the window take it out (--pool fails=)",
                 "backend %s %s failed %llu requests in the last minute", pool, addr,
                 (unsigned long long)failed);
    }
}

/* The names the i-th certificate serves into h[0..cap), comma separated:
   the first three and how many more.  Its file's name (which SNI finds
   too, tls.c) only if the certificate names nothing else. */
static void cert_hosts(const site_t *s, int i, const char *file, char *h, size_t cap)
{
    const char *name;
    size_t len = 0;
    int shown = 0, more = 0;
    h[0] = 0;
    for (int k = 0; tls_store_name(s->proc->tls, i, k, &name); k++) {
        if (!strcmp(name, file))
            continue;
        if (shown == 3 || len >= cap) {
            more++;
            continue;
        }
        int r = snprintf(h + len, cap - len, "%s%s", shown++ ? ", " : "", name);
        len += r > 0 ? (size_t)r : 0; /* past cap: cut short there, the rest counted */
    }
    if (more && len < cap)
        snprintf(h + len, cap - len, " and %d more", more);
    if (!shown)
        snprintf(h, cap, "%s", file);
}

/* The certificates expired or near their end: fewer than 30 days left,
   or a quarter of its lifetime when that is less (a short-lived
   certificate, which --acme renews at a third or a half: marked once its
   renewal is late).  Each by the hosts it serves and its file. */
static void cert_warnings(const site_t *s, int64_t now, status_warn_t *w, int *n, int max)
{
    const char *file;
    char hosts[100];
    int64_t t;
    for (int i = 0; tls_store_expiry(s->proc->tls, i, &file, &t); i++) {
        int64_t from = tls_store_issued(s->proc->tls, i);
        int64_t life = from > 0 && from < t ? t - from : 0;
        int64_t window = life && life / 4 < 30 * 86400 ? life / 4 : 30 * 86400;
        if (t <= 0 || t - now > window)
            continue;
        cert_hosts(s, i, file, hosts, sizeof hosts);
        if (t <= now)
            warn(w, n, max, 1,
                 "clients refuse the handshake: renew it (-C's file, reloaded on change; "
                 "--acme renews by itself and failed: see its log)",
                 "certificate for %s (%s) expired %lld days ago", hosts, file,
                 (long long)((now - t) / 86400));
        else
            warn(w, n, max, 0,
                 "fewer than 30 days left (or a quarter of its lifetime, if shorter): --acme "
                 "renews earlier (a third before its end; a half, for 10 days or less), so "
                 "its renewal is failing (see its log); a -C certificate from elsewhere "
                 "needs renewing",
                 "certificate for %s (%s) expires in %.1f days", hosts, file,
                 (double)(t - now) / 86400);
    }
}

int status_warnings(const site_t *s, const status_ring_t *ring, const stats_snap_t *snap,
                    int64_t now, status_warn_t *w, int max)
{
    int n = 0, secs;
    backend_warnings(s, ring, now, w, &n, max);
    cert_warnings(s, now, w, &n, max);
    if (s->cert_reload_err[0])
        warn(w, &n, max, 1, "a renewed certificate is not served until a reload succeeds (-C's "
                            "files are read again every minute and on SIGUSR1; the ones in use "
                            "stay): make them readable by -u's user (Permission denied: e.g. "
                            "group of that user and mode 0640, the directories searchable) and "
                            "whole PEM",
             "certificates cannot be reloaded: %s", s->cert_reload_err);
    if (snap->g.draining)
        warn(w, &n, max, 1, "health checks fail (-k), the listeners close, the last requests "
                            "finish within -g's grace",
             "draining: this server is stopping or being replaced");
    if (!ring)
        return n;
    uint64_t busy = ring_sum(ring, RING_BUSY, now, LATELY, &secs);
    uint64_t refused = ring_sum(ring, RING_REFUSED, now, LATELY, &secs);
    uint64_t floods = ring_sum(ring, RING_FLOODS, now, 300, &secs);
    uint64_t to = ring_sum(ring, RING_TIMEOUTS, now, LATELY, &secs);
    uint64_t to2 = ring_sum(ring, RING_TIMEOUTS, now, 2 * LATELY, &secs) - to;
    uint64_t e5 = ring_sum(ring, RING_5XX, now, LATELY, &secs);
    if (busy)
        warn(w, &n, max, 1, "the worker threads' queue is full: more threads (-j) or less "
                            "work (compression, password checks)",
             "job pool full: %llu requests answered 503 in the last minute",
             (unsigned long long)busy);
    if (refused)
        warn(w, &n, max, 1, "over the connection cap (-N), the per-address cap (-K), out of "
                            "descriptors (ulimit -n), or an address that flooded",
             "%llu connections refused in the last minute", (unsigned long long)refused);
    if (floods)
        warn(w, &n, max, 0, "clients sent frames too fast (HTTP/2, HTTP/3) and were cut off; "
                            "their addresses start with less for a while (--flood-memory)",
             "%llu floods ended in the last 5 minutes", (unsigned long long)floods);
    if (to > 10 && to > 2 * to2)
        warn(w, &n, max, 0, "clients too slow to send a head (-s) or body, or to read (-B), "
                            "or TLS handshakes left unfinished: a slowloris, or a bad network",
             "timeouts rising: %llu in the last minute, %llu the minute before",
             (unsigned long long)to, (unsigned long long)to2);
    if (e5)
        warn(w, &n, max, 0, "server errors: backends failing (502, 504), the job pool full "
                            "(503), CGI without a head (502); see the error log",
             "%llu requests answered 5xx in the last minute", (unsigned long long)e5);
    return n;
}

void status_warn_list(hbuf_t *b, const status_warn_t *w, int n, int json)
{
    hb_puts(b, json ? ",\"warnings\":[" : "<ul id=\"warnings\">\n");
    for (int i = 0; i < n; i++) {
        if (json) {
            hb_puts(b, i ? ",{\"level\":\"" : "{\"level\":\"");
            hb_puts(b, w[i].bad ? "bad" : "warn");
            hb_puts(b, "\",\"what\":\"");
            status_escaped(b, w[i].what, 1);
            hb_puts(b, "\",\"means\":\"");
            status_escaped(b, w[i].means, 1);
            hb_puts(b, "\"}");
        } else {
            hb_puts(b, w[i].bad ? "<li class=\"bad\"><b>" : "<li class=\"warn\"><b>");
            status_escaped(b, w[i].what, 0);
            hb_puts(b, "</b><br>");
            status_escaped(b, w[i].means, 0);
            hb_puts(b, "</li>\n");
        }
    }
    if (!json && !n)
        hb_puts(b, "<li class=\"ok\">nothing wrong that this page can see</li>\n");
    hb_puts(b, json ? "]" : "</ul>\n");
}

/* The sections, in the order shown, and the keys each takes: the first
   section one of whose prefixes begins a row's key (none: the first). */
static const struct section {
    const char *id, *title, *prefixes;
} sections[] = {
    {"traffic", "Traffic", "uptime requests bytes responses_ memory_ head_overflows max_requests"},
    {"conns", "Connections and refusals",
     "connections refused_ rate_limited busy timeout_ idle_closed flood_ proxy_ health_ draining "
     "auth_"},
    {"tls", "TLS and ACME certificates", "https_connections tls_ acme_ cluster_"},
    {"h2h3", "HTTP/2 and HTTP/3", "h2_ h3_"},
    {"cache", "Cache", "cache_"},
    {"compress", "Compression", "gzip_ compress dict"},
    {"backends", "Backends and pools", "backend_"},
    {"cgi", "CGI", "cgi_"},
    {"ftp", "FTP", "ftp_"},
};
#define NSECTIONS (sizeof sections / sizeof sections[0])

/* The section key belongs in. */
static size_t section_of(const char *key)
{
    for (size_t i = 0; i < NSECTIONS; i++)
        for (const char *p = sections[i].prefixes; *p;) {
            size_t n = strcspn(p, " ");
            if (!strncmp(key, p, n))
                return i;
            p += n + (p[n] == ' ');
        }
    return 0;
}

static void row(hbuf_t *b, const row_t *r)
{
    hb_puts(b, "<tr><th>");
    hb_puts(b, r->label);
    hb_puts(b, "</th><td>");
    hb_num(b, r->v);
    hb_puts(b, "</td></tr>\n");
}

/* Section i's rows of r[0..n): those not 0, then the zeros folded away. */
static void section(hbuf_t *b, size_t i, const row_t *r, size_t n)
{
    size_t nz = 0, z = 0;
    for (size_t k = 0; k < n; k++)
        if (section_of(r[k].key) == i)
            r[k].v ? nz++ : z++;
    hb_puts(b, nz ? "<section id=\"s-" : "<section class=\"quiet\" id=\"s-");
    hb_puts(b, sections[i].id);
    hb_puts(b, "\"><h2>");
    hb_puts(b, sections[i].title);
    hb_puts(b, "</h2>\n");
    if (nz) {
        hb_puts(b, "<table>\n");
        for (size_t k = 0; k < n; k++)
            if (section_of(r[k].key) == i && r[k].v)
                row(b, &r[k]);
        hb_puts(b, "</table>\n");
    }
    if (z) {
        hb_puts(b, "<details id=\"z-");
        hb_puts(b, sections[i].id);
        hb_puts(b, "\"><summary>");
        hb_num(b, z);
        hb_puts(b, z == 1 ? " row at 0</summary>\n<table>\n" : " rows at 0</summary>\n<table>\n");
        for (size_t k = 0; k < n; k++)
            if (section_of(r[k].key) == i && !r[k].v)
                row(b, &r[k]);
        hb_puts(b, "</table></details>\n");
    }
}

/* v per second over secs, one decimal. */
static void rate(hbuf_t *b, uint64_t v, int secs)
{
    uint64_t t = v * 10 / (uint64_t)(secs > 0 ? secs : 1);
    hb_num(b, t / 10);
    if (t < 1000) {
        hb_puts(b, ".");
        hb_num(b, t % 10);
    }
}

/* The rates at the top: the last STATUS_WINDOW seconds' samples. */
static void rates(hbuf_t *b, const status_ring_t *ring, int64_t now, uint64_t conns)
{
    static const struct {
        const char *id, *what;
        int k[4];
    } top[] = {{"req", "requests/s", {RING_REQ_HTTP1, RING_REQ_H2, RING_REQ_H3, RING_REQ_FTP}},
               {"bytes", "bytes/s", {RING_BYTES, -1, -1, -1}},
               {"err", "4xx+5xx/s", {RING_4XX, RING_5XX, -1, -1}},
               {"refused", "refused+timed out/s", {RING_REFUSED, RING_TIMEOUTS, -1, -1}},
               {"hits", "cache hits/s", {RING_HITS, -1, -1, -1}},
               {"misses", "cache misses/s", {RING_MISSES, -1, -1, -1}}};
    hb_puts(b, "<div id=\"rates\"><span class=\"rate\"><b id=\"r-conns\">");
    hb_num(b, conns);
    hb_puts(b, "</b> open connections</span>\n");
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        uint64_t v = 0;
        int secs = 1;
        for (int j = 0; ring && j < 4 && top[i].k[j] >= 0; j++)
            v += ring_sum(ring, top[i].k[j], now, STATUS_WINDOW, &secs);
        hb_puts(b, "<span class=\"rate\"><b id=\"r-");
        hb_puts(b, top[i].id);
        hb_puts(b, "\">");
        rate(b, v, secs);
        hb_puts(b, "</b> ");
        hb_puts(b, top[i].what);
        hb_puts(b, "</span>\n");
    }
    hb_puts(b, "<span class=\"note\">over the last 10 s</span></div>\n");
}

void status_sections(hbuf_t *b, const site_t *s, const status_ring_t *ring, int64_t now,
                     uint64_t conns, const row_t *r, size_t n)
{
    rates(b, ring, now, conns);
    hb_puts(b, "<div id=\"graphs\"><noscript>The graphs need JavaScript "
               "(/server-status?js, from this server).</noscript></div>\n");
    for (size_t i = 0; i < NSECTIONS; i++) {
        section(b, i, r, n);
        if (!strcmp(sections[i].id, "backends"))
            status_backends(b, s, ring, now, 0);
        if (!strcmp(sections[i].id, "tls"))
            status_cluster_locks(b, s, 0), status_ondemand_names(b, s, 0);
        hb_puts(b, "</section>\n");
    }
}
