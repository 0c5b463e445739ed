/*
 * httpbench — connect and request latency under many idle connections
 * (see man/httpbench.1, bench/README, bench/lg/README).
 *
 * main() parses options, probes the target with one request (with -c 1 that
 * request is the throughput measurement), then runs the worker: in this
 * process, or in -P processes that take turns opening their share of the
 * connections (so the numbers always count every connection held by all of
 * them) and hold them until the parent is done.
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "httpbench_run.h"

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gio.h"
#include "lg_http.h"

#define MAX_CONNS 10000000
#define MAX_PROCS 256
#define FD_RESERVE 16

static const char usage_text[] =
    "usage: httpbench [options] URL\n"
    "Open -c connections and hold them idle; every -i connections, time -s requests.\n"
    "Prints 'clat US' per idle connection and 'sample CONNECT_US REQUEST_US' per sample;\n"
    "with -c 1, 'tput KB/S' per megabyte of the response body.  URL: http[s]://HOST[:PORT]/PATH\n"
    "(https: each connection is TCP connect + TLS handshake, timed apart: 'clat' is the\n"
    "connect, the handshake has its own histogram in the summary)\n"
    "  -c N      connections to open and hold (default 1000); 1: throughput mode\n"
    "  -i N      take a sample every N connections (default 10)\n"
    "  -s N      requests per sample (default 5)\n"
    "  -k        a sample's requests share one keep-alive connection\n"
    "  -n N      at most N sample requests in all\n"
    "  -d SEC    hard cap on the whole run (default 300)\n"
    "  -w SEC    hold the connections SEC seconds after the last one opened (default 0)\n"
    "  -t SEC    timeout for each connect and each request (default 10)\n"
    "  -b ADDRS  bind connections to these local addresses, round robin:\n"
    "            a,b,c or a range 127.0.0.2-127.0.0.9 (or 127.0.0.2-9)\n"
    "  -P N      spread the connections over N processes (default 1)\n"
    "  -J        JSON lines instead of the classic text lines\n"
    "  -z        https: resume the last session on each new connection (--resume)\n"
    "  -q        no progress line\n"
    "  -V        print version and IO backend\n"
    "  -h        this help\n";

static void parse_opts(hb_cfg_t *cfg, int *quiet, const char **url, int argc, char **argv)
{
    const char *srcs = NULL;
    char err[512];
    int ch;
    cfg->conns = 1000;
    cfg->interval = 10;
    cfg->sample = 5;
    cfg->procs = 1;
    cfg->timeout = 10;
    cfg->duration = 300;
    static const struct option lo[] = {{"resume", no_argument, NULL, 'z'}, {NULL, 0, NULL, 0}};
    while ((ch = getopt_long(argc, argv, "c:i:s:kn:d:w:t:b:P:JzqVh", lo, NULL)) != -1) {
        switch (ch) {
        case 'c': cfg->conns = lg_num_opt(optarg, 1, MAX_CONNS, "-c"); break;
        case 'i': cfg->interval = (unsigned)lg_num_opt(optarg, 1, MAX_CONNS, "-i"); break;
        case 's': cfg->sample = (unsigned)lg_num_opt(optarg, 1, 1000000, "-s"); break;
        case 'k': cfg->keepalive = 1; break;
        case 'n': cfg->nreqs = lg_num_opt(optarg, 1, UINT64_MAX / 4, "-n"); break;
        case 'd': cfg->duration = lg_secs_opt(optarg, "-d", 0); break;
        case 'w': cfg->hold = lg_secs_opt(optarg, "-w", 1); break;
        case 't': cfg->timeout = lg_secs_opt(optarg, "-t", 0); break;
        case 'b': srcs = optarg; break;
        case 'P': cfg->procs = (unsigned)lg_num_opt(optarg, 1, MAX_PROCS, "-P"); break;
        case 'J': cfg->json = 1; break;
        case 'z': cfg->resume = 1; break;
        case 'q': *quiet = 1; break;
        case 'V': printf("httpbench (gatling) io backend %s\n", gio_backend_name()); exit(0);
        case 'h': fputs(usage_text, stdout); exit(0);
        default: lg_usage_exit(NULL, NULL);
        }
    }
    if (optind >= argc)
        lg_usage_exit("no URL given", NULL);
    *url = argv[optind++];
    if (optind < argc)
        lg_usage_exit("unexpected argument", argv[optind]);
    if (cfg->procs > cfg->conns)
        lg_usage_exit("-P is more than -c: every process needs a connection", NULL);
    if (lg_url_parse(*url, &cfg->url, err, sizeof err) < 0)
        lg_usage_exit(err, NULL);
    if (cfg->url.ftp)
        lg_usage_exit("httpbench measures HTTP: ftp:// URLs are for bench", *url);
    if (cfg->resume && !cfg->url.tls)
        lg_usage_exit("--resume is for https:// URLs", NULL);
    if (srcs) {
        cfg->srcs = lg_srcs_parse(srcs, cfg->url.addr.ss.ss_family, &cfg->nsrcs, err, sizeof err);
        if (!cfg->srcs)
            lg_usage_exit(err, NULL);
    }
}

static void check_limits(const hb_cfg_t *cfg)
{
    long nofile = lg_nofile_raise();
    uint64_t per = (cfg->conns + cfg->procs - 1) / cfg->procs;
    if ((long long)per + FD_RESERVE > nofile) {
        fprintf(
            stderr,
            "httpbench: -c %llu over %u process(es) is %llu connections per process, but a "
            "process may open only %ld descriptors here: use -P %llu or more\n",
            (unsigned long long)cfg->conns, cfg->procs, (unsigned long long)per, nofile,
            (unsigned long long)((cfg->conns + nofile - FD_RESERVE - 1) / (nofile - FD_RESERVE)));
        exit(LG_EXIT_USAGE);
    }
    uint64_t ports = (uint64_t)lg_ephemeral_ports() * (cfg->nsrcs ? cfg->nsrcs : 1);
    if (cfg->conns + 1 > ports) {
        fprintf(stderr,
                "httpbench: -c %llu needs more local ports than %llu: give more source "
                "addresses with -b (e.g. -b 127.0.0.2-127.0.0.9)\n",
                (unsigned long long)cfg->conns, (unsigned long long)ports);
        exit(LG_EXIT_USAGE);
    }
}

/* ---- -P: workers that take turns ---- */

typedef struct procs {
    const hb_cfg_t *cfg;
    hb_stats_t *st;
    int (*go)[2], (*done)[2];
} procs_t;

static int child_main(int i, void *arg)
{
    procs_t *x = arg;
    unsigned n = x->cfg->procs;
    for (unsigned j = 0; j < n; j++) { /* keep only our own ends: EOF must reach us */
        close(x->go[j][1]);
        close(x->done[j][0]);
        if (j != (unsigned)i)
            close(x->go[j][0]), close(x->done[j][1]);
    }
    uint64_t first = x->cfg->conns * (uint64_t)i / n, last = x->cfg->conns * (uint64_t)(i + 1) / n;
    hb_run(x->cfg, first, last, x->go[i][0], x->done[i][1], &x->st[i]);
    return 0;
}

/* Wait for worker i's "all open" byte; 1, or 0 if it ended (or we were stopped). */
static int wait_done(procs_t *x, unsigned i, pid_t *pids, int64_t cap_at)
{
    struct pollfd p = {x->done[i][0], POLLIN, 0};
    for (;;) {
        if (lg_signals || lg_now_ns() >= cap_at) {
            lg_kill_all(pids, (int)x->cfg->procs, SIGTERM);
            return 0;
        }
        int r = poll(&p, 1, 100);
        if (r > 0) {
            char c;
            return read(x->done[i][0], &c, 1) == 1;
        }
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

static void hold(double secs, int64_t cap_at)
{
    int64_t until = lg_now_ns() + (int64_t)(secs * 1e9);
    if (until > cap_at)
        until = cap_at;
    while (!lg_signals && lg_now_ns() < until) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
}

static int run_procs(const hb_cfg_t *cfg, hb_stats_t *total)
{
    unsigned n = cfg->procs;
    size_t len = n * sizeof(hb_stats_t);
    procs_t x = {cfg, lg_shared(len), calloc(n, sizeof *x.go), calloc(n, sizeof *x.done)};
    pid_t *pids = calloc(n, sizeof *pids);
    int *status = calloc(n, sizeof *status);
    if (!x.st || !x.go || !x.done || !pids || !status) {
        perror("httpbench: memory");
        exit(LG_EXIT_FATAL);
    }
    for (unsigned i = 0; i < n; i++) {
        hb_stats_init(&x.st[i]);
        if (pipe(x.go[i]) < 0 || pipe(x.done[i]) < 0) {
            perror("httpbench: pipe");
            exit(LG_EXIT_FATAL);
        }
    }
    if (lg_spawn((int)n, child_main, &x, pids) < 0) {
        perror("httpbench: fork");
        exit(LG_EXIT_FATAL);
    }
    for (unsigned i = 0; i < n; i++)
        close(x.go[i][0]), close(x.done[i][1]);
    int64_t cap_at = lg_now_ns() + (int64_t)(cfg->duration * 1e9);
    unsigned i;
    for (i = 0; i < n; i++) {
        char c = 1;
        if (write(x.go[i][1], &c, 1) != 1 || !wait_done(&x, i, pids, cap_at))
            break;
    }
    if (i == n)
        hold(cfg->hold, cap_at);
    for (unsigned j = 0; j < n; j++)
        close(x.go[j][1]), close(x.done[j][0]); /* EOF: the workers close up and exit */
    while (lg_reap(pids, status, (int)n) > 0) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        if (lg_now_ns() > cap_at + 10000000000LL)
            lg_kill_all(pids, (int)n, SIGKILL);
    }
    int bad = 0;
    for (unsigned j = 0; j < n; j++) {
        if (!WIFEXITED(status[j]) || !x.st[j].finished) {
            fprintf(stderr, "httpbench: worker %u died: its counts are partial\n", j);
            bad = 1;
        }
        hb_stats_merge(total, &x.st[j]);
    }
    munmap(x.st, len);
    free(x.go);
    free(x.done);
    free(pids);
    free(status);
    return bad ? -1 : 0;
}

/* ---- report ---- */

static uint64_t err_total(const hb_stats_t *s)
{
    return lg_err_sum(s->err);
}

static const char *fatal_text(const hb_stats_t *s, char *buf, size_t len)
{
    switch (s->fatal) {
    case HB_UNREACHABLE:
        snprintf(buf, len, "target unreachable or broken: %s",
                 s->fatal_errno ? strerror(s->fatal_errno) : "connection closed");
        return buf;
    case HB_NOT_HTTP: return "not an HTTP server: the response did not parse";
    case HB_GAVE_UP:
        snprintf(buf, len, "gave up after 100 connects in a row failed (%s)",
                 s->fatal_errno ? strerror(s->fatal_errno) : "see the error counts");
        return buf;
    case HB_SYSERR: snprintf(buf, len, "system error: %s", strerror(s->fatal_errno)); return buf;
    }
    return NULL;
}

static void json_hist(const char *key, const lg_hist_t *h)
{
    printf(",\"%s\":{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p99_9\":%llu,\"max\":%llu,"
           "\"mean\":%.1f,\"count\":%llu,",
           key, (unsigned long long)lg_hist_quantile(h, 0.5),
           (unsigned long long)lg_hist_quantile(h, 0.9),
           (unsigned long long)lg_hist_quantile(h, 0.99),
           (unsigned long long)lg_hist_quantile(h, 0.999), (unsigned long long)h->max,
           lg_hist_mean(h), (unsigned long long)h->count);
    lg_hist_json(stdout, "hist", h); /* raw buckets: for merging reports of several hosts */
    printf("}");
}

static void text_hist(const char *label, const lg_hist_t *h)
{
    fprintf(stderr,
            "httpbench: %-8s us: p50 %llu  p90 %llu  p99 %llu  p99.9 %llu  max %llu"
            "  (n=%llu)\n",
            label, (unsigned long long)lg_hist_quantile(h, 0.5),
            (unsigned long long)lg_hist_quantile(h, 0.9),
            (unsigned long long)lg_hist_quantile(h, 0.99),
            (unsigned long long)lg_hist_quantile(h, 0.999), (unsigned long long)h->max,
            (unsigned long long)h->count);
}

/* Text: a summary on stderr, so that stdout stays the classic plottable lines. */
static void summary(const hb_cfg_t *cfg, const hb_stats_t *s, const char *fatal, int rc)
{
    double secs = (double)(s->end_ns - s->start_ns) / 1e9;
    if (cfg->json) {
        printf("{\"type\":\"summary\",\"io\":\"%s\",\"processes\":%u,\"seconds\":%.6f,"
               "\"connections\":%llu,\"opened\":%llu,\"dropped\":%llu,\"samples\":%llu,"
               "\"requests\":%llu,\"responses\":%llu,\"body_bytes\":%llu,\"timed_out\":%s",
               gio_backend_name(), cfg->procs, secs, (unsigned long long)cfg->conns,
               (unsigned long long)s->opened, (unsigned long long)s->dropped,
               (unsigned long long)s->samples, (unsigned long long)s->requests,
               (unsigned long long)s->responses, (unsigned long long)s->bytes,
               s->timed_out ? "true" : "false");
        json_hist("clat_us", &s->clat);
        json_hist("sample_connect_us", &s->sconn);
        json_hist("request_us", &s->rlat);
        if (cfg->url.tls) {
            printf(",\"tls\":true,\"resumed\":%llu", (unsigned long long)s->resumed);
            json_hist("handshake_us", &s->hs);
        }
        printf(",\"errors\":{");
        for (int k = 0; k < LG_E_NUM; k++)
            printf("%s\"%s\":%llu", k ? "," : "", lg_err_name[k], (unsigned long long)s->err[k]);
        printf("},\"errors_total\":%llu,\"fatal\":", (unsigned long long)err_total(s));
        printf(fatal ? "\"%s\"" : "null", fatal);
        printf(",\"exit\":%d}\n", rc);
        return;
    }
    if (cfg->conns == 1) {
        fprintf(stderr, "httpbench: %llu body bytes in %.3f s: %.2f MB/s\n",
                (unsigned long long)s->bytes, secs, secs > 0 ? (double)s->bytes / secs / 1e6 : 0);
    } else {
        fprintf(stderr,
                "httpbench: %llu of %llu connections opened, %llu dropped by the server; "
                "%llu samples, %llu requests, %llu answered; %.2f s%s\n",
                (unsigned long long)s->opened, (unsigned long long)cfg->conns,
                (unsigned long long)s->dropped, (unsigned long long)s->samples,
                (unsigned long long)s->requests, (unsigned long long)s->responses, secs,
                s->timed_out ? " (stopped by -d)" : "");
        text_hist("clat", &s->clat);
        text_hist("request", &s->rlat);
    }
    if (cfg->url.tls) {
        text_hist("handshake", &s->hs);
        fprintf(stderr, "httpbench: %llu TLS handshakes, %llu resumed\n",
                (unsigned long long)s->hs.count, (unsigned long long)s->resumed);
    }
    fprintf(stderr, "httpbench: errors %llu:", (unsigned long long)err_total(s));
    for (int k = 0; k < LG_E_NUM; k++)
        fprintf(stderr, " %s %llu", lg_err_name[k], (unsigned long long)s->err[k]);
    fprintf(stderr, "\n");
}

/* Report, free everything, and return the exit code. */
static int finish(hb_cfg_t *cfg, hb_stats_t *s, hb_stats_t *other, int died)
{
    char buf[256];
    const char *fatal = fatal_text(s, buf, sizeof buf);
    if (!fatal && died)
        fatal = "a worker process died";
    int rc = fatal ? LG_EXIT_FATAL : (err_total(s) || s->dropped) ? LG_EXIT_ERRORS : LG_EXIT_OK;
    fflush(stdout);
    if (fatal)
        fprintf(stderr, "httpbench: %s: %s\n", cfg->url.host, fatal);
    summary(cfg, s, fatal, rc);
    free(s);
    free(other);
    free(cfg->req);
    free(cfg->srcs);
    lg_url_free(&cfg->url);
    return rc;
}

int main(int argc, char **argv)
{
    hb_cfg_t cfg;
    const char *url;
    int quiet = 0;
    memset(&cfg, 0, sizeof cfg);
    lg_usage_set("httpbench", usage_text);
    parse_opts(&cfg, &quiet, &url, argc, argv);
    check_limits(&cfg);
    size_t cap = strlen(cfg.url.path) + strlen(cfg.url.host) + 128;
    cfg.req = malloc(cap);
    if (!cfg.req || !(cfg.reqlen = lg_req_format(cfg.req, cap, "GET", cfg.url.host, cfg.url.path,
                                                 cfg.keepalive, NULL)))
        lg_usage_exit("request too large", NULL);
    cfg.progress = lg_progress_on(quiet);
    lg_signals_install();

    char a[128];
    lg_addr_t noport = cfg.url.addr;
    if (noport.ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&noport.ss)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&noport.ss)->sin_port = 0;
    lg_addr_str(&cfg.url.addr, a, sizeof a);
    if (cfg.json)
        printf("{\"type\":\"start\",\"target\":\"%s\",\"io\":\"%s\",\"connections\":%llu,"
               "\"interval\":%u,\"sample\":%u,\"keepalive\":%s}\n",
               a, gio_backend_name(), (unsigned long long)cfg.conns, cfg.interval, cfg.sample,
               cfg.keepalive ? "true" : "false");
    else /* the original's first line: the address without the port, then the port */
        printf("connecting to %s port %u\n", lg_addr_str(&noport, a, sizeof a), cfg.url.port);
    fflush(stdout);

    hb_stats_t *total = malloc(sizeof *total), *probe = malloc(sizeof *probe);
    if (!total || !probe) {
        perror("httpbench: malloc");
        return LG_EXIT_FATAL;
    }
    hb_stats_init(total);
    hb_stats_init(probe);
    /* one request first: an unreachable or non-HTTP target fails here, at once */
    if (hb_fetch(&cfg, cfg.conns != 1, probe) != HB_OK || cfg.conns == 1)
        return finish(&cfg, probe, total, 0);
    int died = 0;
    if (cfg.procs == 1)
        hb_run(&cfg, 0, cfg.conns, -1, -1, total);
    else
        died = run_procs(&cfg, total) < 0;
    return finish(&cfg, total, probe, died);
}
