/* bench's report: see bench_report.h. */
#include "bench_report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gio.h"
#include "lg_ftp.h"
#include "lg_http.h"

/* ---- reporting ---- */

static const double quant[] = {0.5, 0.9, 0.99, 0.999};
static const char *const qname[] = {"p50", "p90", "p99", "p99_9"};

/* ---- --surge: visitors, page loads, handshakes, errors by class ---- */

/* The classes of a failed visitor (man/bench.1), each a set of LG_E_* kinds. */
static const struct {
    const char *name;
    int kinds[8];
} surge_class[] = {
    {"connect", {LG_E_REFUSED, LG_E_CONNECT, -1}},
    {"handshake", {LG_E_TLS, LG_E_NOH2, -1}},
    {"h2", {LG_E_PARSE, LG_E_RST, LG_E_GOAWAY, LG_E_EOF, LG_E_SHORT, LG_E_RESET, LG_E_IO, -1}},
    {"status", {LG_E_STATUS, -1}},
    {"timeout", {LG_E_CTIMEOUT, LG_E_TIMEOUT, -1}},
    {"abort", {LG_E_ABORT, -1}},
};
#define SURGE_CLASSES (sizeof surge_class / sizeof surge_class[0])

/* Errors in all; --surge: failed visitors, and the arrivals that never started. */
uint64_t bench_err_total(const bench_stats_t *s)
{
    return lg_err_sum(s->err) + s->unstarted;
}

static void text_hist(const char *label, const lg_hist_t *h)
{
    printf("%-10s us: ", label);
    for (int i = 0; i < 4; i++)
        printf("%s %llu  ", i == 3 ? "p99.9" : qname[i],
               (unsigned long long)lg_hist_quantile(h, quant[i]));
    printf("max %llu  mean %.1f  (n=%llu)\n", (unsigned long long)h->max, lg_hist_mean(h),
           (unsigned long long)h->count);
}

static void json_hist(const char *key, const lg_hist_t *h)
{
    printf("\"%s\":{", key);
    for (int i = 0; i < 4; i++)
        printf("\"%s\":%llu,", qname[i], (unsigned long long)lg_hist_quantile(h, quant[i]));
    lg_hist_json(stdout, "hist", h); /* raw buckets: for merging reports of several hosts */
    printf(",");
    printf("\"min\":%llu,\"max\":%llu,\"mean\":%.1f,\"stdev\":%.1f,\"count\":%llu}",
           (unsigned long long)(h->count ? h->min : 0), (unsigned long long)h->max, lg_hist_mean(h),
           lg_hist_stdev(h), (unsigned long long)h->count);
}

/* ,"status":{...}: the responses by status class. */
static void json_status(const bench_stats_t *s)
{
    printf(",\"status\":{\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu,\"other\":%llu}",
           (unsigned long long)s->status[2], (unsigned long long)s->status[3],
           (unsigned long long)s->status[4], (unsigned long long)s->status[5],
           (unsigned long long)(s->status[0] + s->status[1]));
}

/* "errors":{...} by kind, errors_total, fatal and the exit status: the end of the JSON line. */
static void json_errors_end(const bench_stats_t *s, const char *fatal, int rc)
{
    printf("\"errors\":{");
    for (int k = 0; k < LG_E_NUM; k++)
        printf("%s\"%s\":%llu", k ? "," : "", lg_err_name[k], (unsigned long long)s->err[k]);
    printf("},\"errors_total\":%llu,\"fatal\":", (unsigned long long)bench_err_total(s));
    if (fatal)
        printf("\"%s\"", fatal); /* our own fixed texts and strerror(): nothing to escape */
    else
        printf("null");
    printf(",\"exit\":%d}\n", rc);
}

const char *bench_fatal_text(const bench_cfg_t *cfg, const bench_stats_t *s, char *buf,
                             size_t len)
{
    switch (s->fatal) {
    case BENCH_UNREACHABLE:
        snprintf(buf, len, "target unreachable: connect failed (%s)",
                 s->fatal_errno ? strerror(s->fatal_errno) : "no connection succeeded");
        return buf;
    case BENCH_NOT_HTTP:
        return cfg->url.ftp ? "not an FTP server: no reply parsed, only garbage"
                            : "not an HTTP server: no response parsed, only garbage";
    case BENCH_FTP_LOGIN:
        snprintf(buf, len, "FTP login as anonymous refused (reply %d): no anonymous downloads here",
                 s->fatal_errno);
        return buf;
    case BENCH_NOT_TLS:
        if (cfg->h3)
            return "no QUIC handshake succeeded: no HTTP/3 on the UDP port, a certificate "
                   "that -C does not verify (or not for the URL's host), or no common cipher";
        return "no TLS handshake succeeded: not an HTTPS server, or no common "
                               "protocol or cipher";
    case BENCH_NOT_H2:
        return cfg->url.tls ? "not an HTTP/2 server: it did not pick h2 by ALPN"
                            : "not an HTTP/2 server: it answered the HTTP/2 preface with HTTP/1.x";
    case BENCH_SYSERR: snprintf(buf, len, "system error: %s", strerror(s->fatal_errno)); return buf;
    }
    if (s->requests && !s->responses)
        return "no request got a complete response";
    return NULL;
}

static const char *protocol_text(const bench_cfg_t *cfg)
{
    if (cfg->url.ftp)
        return "ftp (anonymous, EPSV or PASV, RETR; a request is a download)";
    if (cfg->h3)
        return cfg->cafile ? "h3 (QUIC, ALPN h3, certificate verified)"
                           : "h3 (QUIC, ALPN h3, --insecure)";
    if (!cfg->h2)
        return "http/1.1";
    return cfg->url.tls ? "h2 (TLS, ALPN)" : "h2 (h2c, prior knowledge)";
}

void bench_report_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs)
{
    char a[128];
    printf("target     %s (%s), io %s, %u process%s\n", cfg->url.host,
           lg_addr_str(&cfg->url.addr, a, sizeof a), gio_backend_name(), cfg->procs,
           cfg->procs == 1 ? "" : "es");
    double drain = (double)(s->end_ns - s->start_ns) / 1e9 - secs;
    if (cfg->connect_only) {
        printf("mode       connect only, %u connections at a time, %.2f s\n", cfg->conns, secs);
        printf("connects   %llu made, %llu attempts, %.1f connects/s\n",
               (unsigned long long)s->connects, (unsigned long long)s->attempts,
               (double)s->win_connects / secs);
    } else {
        char per[32] = "unlimited";
        if (!cfg->keepalive || cfg->per_conn)
            snprintf(per, sizeof per, "%u", cfg->keepalive ? cfg->per_conn : 1);
        printf("mode       %s, %u connections, pipeline %u, requests/connection %s, %.2f s\n",
               cfg->idle        ? "idle (handshake, no request)"
               : cfg->keepalive ? "keep-alive"
                                : "one request per connection",
               cfg->conns,
               cfg->keepalive ? cfg->depth : 1, per, secs);
        if (cfg->url.ftp)
            printf("protocol   %s\n", protocol_text(cfg));
        else
            printf("protocol   %s, %u stream%s per connection\n", protocol_text(cfg), cfg->streams,
                   cfg->streams == 1 ? "" : "s");
        printf("requests   %llu sent, %llu answered, %llu lost; %llu connections",
               (unsigned long long)s->requests, (unsigned long long)s->responses,
               (unsigned long long)s->lost, (unsigned long long)s->connects);
        if (cfg->keepalive)
            printf(" (opened in %.2f s before the requests began)", (double)s->ramp_ns / 1e9);
        if (s->retried)
            printf("; %llu sent again after a GOAWAY refused them", (unsigned long long)s->retried);
        printf("\n");
        if (cfg->rate > 0)
            printf("open loop  %.0f/s: %llu due before -d's end were never sent (no free %s)\n",
                   cfg->rate, (unsigned long long)s->unsent,
                   cfg->h2 || cfg->h3 ? "stream slot" : "connection");
        printf("rate       %.1f req/s, %.2f MB/s read, %.0f body bytes/response",
               (double)s->win_responses / secs, (double)s->win_bytes / secs / 1e6,
               s->responses ? (double)s->body / (double)s->responses : 0.0);
        if (drain >= 0.0005)
            printf(" (then %.3f s to drain)", drain);
        printf("\n");
        text_hist("latency", &s->lat);
        printf("status     2xx %llu  3xx %llu  4xx %llu  5xx %llu  other %llu\n",
               (unsigned long long)s->status[2], (unsigned long long)s->status[3],
               (unsigned long long)s->status[4], (unsigned long long)s->status[5],
               (unsigned long long)(s->status[0] + s->status[1]));
    }
    text_hist("connect", &s->conn);
    if (cfg->url.ftp)
        text_hist("login", &s->hs);
    if (cfg->url.tls) {
        text_hist("handshake", &s->hs);
        printf("tls        %llu handshakes, %llu resumed (%s)\n",
               (unsigned long long)s->hs.count, (unsigned long long)s->resumed,
               cfg->resume ? "--resume" : "every one full");
    }
    printf("errors     %llu:", (unsigned long long)bench_err_total(s));
    for (int k = 0; k < LG_E_NUM; k++)
        printf(" %s %llu", lg_err_name[k], (unsigned long long)s->err[k]);
    printf("\n");
}

void bench_report_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
                       const char *fatal, int rc)
{
    char a[128];
    printf("{\"tool\":\"bench\",\"target\":\"%s\",\"io\":\"%s\",\"processes\":%u,"
           "\"connections\":%u,\"mode\":\"%s\",\"pipeline\":%u,\"seconds\":%.6f,",
           lg_addr_str(&cfg->url.addr, a, sizeof a), gio_backend_name(), cfg->procs, cfg->conns,
           cfg->connect_only ? "connect-only"
           : cfg->keepalive  ? "keep-alive"
                             : "close",
           cfg->keepalive ? cfg->depth : 1, secs);
    printf("\"open_loop_rate\":%.0f,\"unsent\":%llu,", cfg->rate, (unsigned long long)s->unsent);
    printf("\"idle\":%s,", cfg->idle ? "true" : "false");
    printf("\"protocol\":\"%s\",\"streams\":%u,\"retried\":%llu,",
           cfg->url.ftp ? "ftp"
           : cfg->h3    ? "h3"
           : cfg->h2    ? "h2"
                        : "http/1.1",
           cfg->streams, (unsigned long long)s->retried);
    printf("\"requests\":%llu,\"responses\":%llu,\"lost\":%llu,\"attempts\":%llu,"
           "\"connects\":%llu,\"bytes\":%llu,\"body_bytes\":%llu,",
           (unsigned long long)s->requests, (unsigned long long)s->responses,
           (unsigned long long)s->lost, (unsigned long long)s->attempts,
           (unsigned long long)s->connects, (unsigned long long)s->bytes,
           (unsigned long long)s->body);
    printf("\"ramp_seconds\":%.6f,\"drain_seconds\":%.6f,", (double)s->ramp_ns / 1e9,
           (double)(s->end_ns - s->start_ns) / 1e9 - secs);
    printf("\"requests_per_s\":%.1f,\"bytes_per_s\":%.1f,\"connects_per_s\":%.1f,",
           (double)s->win_responses / secs, (double)s->win_bytes / secs,
           (double)s->win_connects / secs);
    json_hist("latency_us", &s->lat);
    printf(",");
    json_hist("connect_us", &s->conn);
    if (cfg->url.ftp) {
        printf(",");
        json_hist("login_us", &s->hs);
    }
    if (cfg->url.tls) {
        printf(",\"tls\":true,\"resume\":%s,\"resumed\":%llu,", cfg->resume ? "true" : "false",
               (unsigned long long)s->resumed);
        json_hist("handshake_us", &s->hs);
    }
    json_status(s);
    printf(",");
    json_errors_end(s, fatal, rc);
}

static uint64_t surge_class_count(const bench_stats_t *s, size_t c)
{
    uint64_t n = 0;
    for (int i = 0; surge_class[c].kinds[i] >= 0; i++)
        n += s->err[surge_class[c].kinds[i]];
    return n;
}

void bench_report_surge_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs)
{
    char a[128];
    uint64_t full = s->hs.count - s->resumed;
    printf("target     %s (%s), io %s, %u process%s\n", cfg->url.host,
           lg_addr_str(&cfg->url.addr, a, sizeof a), gio_backend_name(), cfg->procs,
           cfg->procs == 1 ? "" : "es");
    printf("surge      %.0f visitors/s for %.2f s, each a new %s connection: the page and %zu "
           "assets (up to %u at once); at most %u visitors at a time, -t %.3g s\n",
           cfg->surge, secs, cfg->url.tls ? "TLS (ALPN h2)" : "h2c", cfg->nreq - 1,
           cfg->streams, cfg->conns, cfg->timeout);
    printf("visitors   %llu arrived, %llu pages loaded, %llu failed, %llu unstarted (every "
           "slot busy); %llu started late (> 1 ms), latest by %.1f ms\n",
           (unsigned long long)s->visitors, (unsigned long long)s->pages,
           (unsigned long long)lg_err_sum(s->err), (unsigned long long)s->unstarted,
           (unsigned long long)s->late, (double)s->late_max_ns / 1e6);
    text_hist("page load", &s->lat);
    printf("requests   %llu sent, %llu answered, %llu lost; %.2f MB/s read\n",
           (unsigned long long)s->requests, (unsigned long long)s->responses,
           (unsigned long long)s->lost, (double)s->bytes / secs / 1e6);
    printf("status     2xx %llu  3xx %llu  4xx %llu  5xx %llu  other %llu\n",
           (unsigned long long)s->status[2], (unsigned long long)s->status[3],
           (unsigned long long)s->status[4], (unsigned long long)s->status[5],
           (unsigned long long)(s->status[0] + s->status[1]));
    text_hist("connect", &s->conn);
    if (cfg->url.tls) {
        text_hist("handshake", &s->hs);
        printf("tls        %.1f handshakes/s: %llu full, %llu resumed; %llu visitors returning, "
               "%llu of them offered a session\n",
               (double)s->hs.count / secs, (unsigned long long)full,
               (unsigned long long)s->resumed, (unsigned long long)s->returning,
               (unsigned long long)s->offered);
        if (cfg->early)
            printf("early data %llu sent, %llu accepted\n", (unsigned long long)s->early_sent,
                   (unsigned long long)s->early_accepted);
    }
    printf("errors     %llu:", (unsigned long long)bench_err_total(s));
    for (size_t c = 0; c < SURGE_CLASSES; c++)
        printf(" %s %llu", surge_class[c].name, (unsigned long long)surge_class_count(s, c));
    printf(" unstarted %llu  (", (unsigned long long)s->unstarted);
    for (int k = 0, first = 1; k < LG_E_NUM; k++)
        if (s->err[k]) {
            printf("%s%s %llu", first ? "" : " ", lg_err_name[k], (unsigned long long)s->err[k]);
            first = 0;
        }
    printf(")\n");
}

void bench_report_surge_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
                             const char *fatal, int rc)
{
    char a[128];
    printf("{\"tool\":\"bench\",\"mode\":\"surge\",\"target\":\"%s\",\"io\":\"%s\","
           "\"processes\":%u,\"protocol\":\"h2\",\"tls\":%s,\"rate\":%.0f,\"seconds\":%.6f,"
           "\"assets\":%zu,\"streams\":%u,\"max_visitors\":%u,\"timeout_s\":%g,"
           "\"returning_share\":%g,",
           lg_addr_str(&cfg->url.addr, a, sizeof a), gio_backend_name(), cfg->procs,
           cfg->url.tls ? "true" : "false", cfg->surge, secs, cfg->nreq - 1, cfg->streams,
           cfg->conns, cfg->timeout, cfg->returning);
    printf("\"visitors\":%llu,\"pages\":%llu,\"failed\":%llu,\"unstarted\":%llu,"
           "\"late\":%llu,\"late_max_ms\":%.3f,\"visitors_per_s\":%.1f,\"pages_per_s\":%.1f,",
           (unsigned long long)s->visitors, (unsigned long long)s->pages,
           (unsigned long long)lg_err_sum(s->err), (unsigned long long)s->unstarted,
           (unsigned long long)s->late, (double)s->late_max_ns / 1e6,
           (double)s->visitors / secs, (double)s->pages / secs);
    printf("\"requests\":%llu,\"responses\":%llu,\"lost\":%llu,\"connects\":%llu,"
           "\"bytes\":%llu,\"body_bytes\":%llu,",
           (unsigned long long)s->requests, (unsigned long long)s->responses,
           (unsigned long long)s->lost, (unsigned long long)s->connects,
           (unsigned long long)s->bytes, (unsigned long long)s->body);
    printf("\"handshakes\":%llu,\"full\":%llu,\"resumed\":%llu,\"returning\":%llu,"
           "\"offered\":%llu,\"handshakes_per_s\":%.1f,\"full_per_s\":%.1f,"
           "\"resumed_per_s\":%.1f,\"early_sent\":%llu,\"early_accepted\":%llu,",
           (unsigned long long)s->hs.count, (unsigned long long)(s->hs.count - s->resumed),
           (unsigned long long)s->resumed, (unsigned long long)s->returning,
           (unsigned long long)s->offered, (double)s->hs.count / secs,
           (double)(s->hs.count - s->resumed) / secs, (double)s->resumed / secs,
           (unsigned long long)s->early_sent, (unsigned long long)s->early_accepted);
    json_hist("page_us", &s->lat);
    printf(",");
    json_hist("connect_us", &s->conn);
    printf(",");
    json_hist("handshake_us", &s->hs);
    json_status(s);
    printf(",\"error_classes\":{");
    for (size_t c = 0; c < SURGE_CLASSES; c++)
        printf("\"%s\":%llu,", surge_class[c].name, (unsigned long long)surge_class_count(s, c));
    printf("\"unstarted\":%llu},", (unsigned long long)s->unstarted);
    json_errors_end(s, fatal, rc);
}
