/*
 * bench — HTTP throughput load generator (see man/bench.1, bench/README, bench/lg/README).
 *
 * main() parses options into a bench_cfg_t, checks that the descriptors and
 * ports the run needs exist, runs the workers (in this process, or -P
 * forked ones that report through shared memory), merges their results and
 * prints one report (bench_report.c).
 */
#ifndef _GNU_SOURCE /* the GNUmakefile passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include "bench_common.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_h3.h"
#include "bench_report.h"
#include "bench_run.h"
#include "bench_surge.h"
#include "gio.h"
#include "lg_ftp.h"
#include "lg_http.h"

#define MAX_CONNS 1000000
#define MAX_PROCS 256
#define FD_RESERVE 16 /* stdio, the loop's own descriptor, a margin */
#define FTP_MAX_SETUP 16 /* ftp://: connects and logins at a time per process (bench_run.c) */

static const char usage_text[] =
    "usage: bench [options] URL\n"
    "       bench [options] -f FILE [URL]\n"
    "HTTP/1.1, HTTP/2, HTTP/3 and FTP throughput load generator.\n"
    "URL: http[s]://HOST[:PORT]/PATH or ftp://HOST[:PORT]/PATH (anonymous, EPSV, RETR)\n"
    "  -c N          concurrent connections (default 10)\n"
    "  -n N          stop after N requests (connections with --connect-only)\n"
    "  -d SEC        run for SEC seconds (default 10 unless -n is given)\n"
    "  -T SEC        hard cap on the whole run (default: -d + 2 * -t + 5, or 600)\n"
    "  -t SEC        timeout for each connect and each response (default 10)\n"
    "  -k            keep-alive: many requests per connection (ftp: downloads per\n"
    "                control connection)\n"
    "  -r N          with -k: close each connection after N requests (default: never)\n"
    "  -p N          with -k: pipeline N HTTP/1.1 requests per connection (default 1)\n"
    "  -R RATE       open loop: RATE requests/s in all, each timed from when it was\n"
    "                due, not when a connection was free to send it (wrk2's fix\n"
    "                for coordinated omission); -c connections carry them\n"
    "  --h2          HTTP/2: ALPN h2 on https://, prior knowledge (h2c) on http://\n"
    "  --streams N   with --h2 -k or --h3: N streams in flight per connection (default 1)\n"
    "  --h3          HTTP/3 over QUIC (https:// URLs; keep-alive implied; built where\n"
    "                libngtcp2 0.12, libnghttp3 0.8 and GnuTLS are)\n"
    "  -C FILE       --h3, --surge: verify the server's certificate against the CA(s) in FILE\n"
    "  --insecure    --h3: do not verify the server's certificate\n"
    "  --idle N      with --h3: hold N connections open (handshake, no request) for -d\n"
    "  -f FILE       cycle through the URLs in FILE (one per line, same host and port)\n"
    "  -H 'N: V'     add a request header (repeatable)\n"
    "  -m METHOD     GET (default) or HEAD\n"
    "  -b ADDRS      bind connections to these local addresses, round robin:\n"
    "                a,b,c or a range 127.0.0.2-127.0.0.9 (or 127.0.0.2-9)\n"
    "  -P N          spread the connections over N processes (default 1)\n"
    "  --connect-only  only connect and close: measure the connect/accept rate\n"
    "                (https: connect and handshake: full handshakes per second)\n"
    "  --resume      https: resume the last session (tickets or session IDs) on\n"
    "                every new connection instead of a full handshake each\n"
    "  --surge RATE  a surge of RATE visitors/s (open loop, HTTP/2): each a new\n"
    "                connection loading URL (the page) and then --assets at once\n"
    "  --assets FILE with --surge: the page's assets (paths or URLs, one per line)\n"
    "  --returning SHARE  with --surge on https://: the share of visitors (0..1,\n"
    "                or a percentage: 50%) that resume a TLS session\n"
    "  --early-data  with --returning: a returning visitor whose session allows it\n"
    "                sends the page's request as TLS 1.3 early data (0-RTT)\n"
    "  -J, --json    print the report as one JSON object\n"
    "  -q            no progress line\n"
    "  -V            print version and IO backend\n"
    "  -h            this help\n";

typedef struct opts {
    bench_cfg_t cfg;
    const char *url;
    const char *file;
    const char *assets; /* --surge: the page's assets */
    const char *method;
    const char *srcs;
    char *extra; /* -H lines, "Name: value\r\n" each */
    size_t extralen;
    int quiet;
    int insecure; /* --insecure */
    int have_d, have_t, have_T, have_c;
} opts_t;

static void add_header(opts_t *o, const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h || strpbrk(h, "\r\n"))
        lg_usage_exit("-H wants 'Name: value' on one line", h);
    size_t l = strlen(h);
    char *n = realloc(o->extra, o->extralen + l + 3);
    if (!n)
        lg_usage_exit("out of memory", NULL);
    memcpy(n + o->extralen, h, l);
    memcpy(n + o->extralen + l, "\r\n", 3);
    o->extra = n;
    o->extralen += l + 2;
}

/* --returning: a share 0..1, or a percentage 0%..100%. */
static double share_opt(const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end != arg && *end == '%' && !end[1])
        v /= 100, end++;
    if (errno || end == arg || *end || !(v >= 0 && v <= 1))
        lg_usage_exit("--returning wants a share from 0 to 1 (or 0% to 100%)", arg);
    return v;
}

/* The long options (their short letters are internal where the option has none). */
static const struct option long_opts[] = {
    {"connect-only", no_argument, NULL, 'O'},
    {"h3", no_argument, NULL, '3'},
    {"insecure", no_argument, NULL, 'K'},
    {"idle", required_argument, NULL, 'I'},
    {"json", no_argument, NULL, 'J'},
    {"resume", no_argument, NULL, 'Z'},
    {"h2", no_argument, NULL, '2'},
    {"streams", required_argument, NULL, 'S'},
    {"surge", required_argument, NULL, 'U'},
    {"assets", required_argument, NULL, 'A'},
    {"returning", required_argument, NULL, 'G'},
    {"early-data", no_argument, NULL, 'Y'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

/* --idle N: N connections (instead of -c) that send no request. */
static void idle_opt(opts_t *o, const char *arg)
{
    o->cfg.idle = 1;
    o->cfg.conns = (unsigned)lg_num_opt(arg, 1, MAX_CONNS, "--idle");
    o->have_c = 1;
}

static void parse_opts(opts_t *o, int argc, char **argv)
{
    bench_cfg_t *cfg = &o->cfg;
    uint64_t v;
    int ch;
    cfg->conns = 10;
    cfg->procs = 1;
    cfg->depth = 1;
    cfg->timeout = 10;
    cfg->max_connecting = 1024;
    o->method = "GET";
    while ((ch = getopt_long(argc, argv, "c:n:d:T:t:kr:p:f:H:m:b:P:R:C:JqVh", long_opts,
                             NULL)) != -1) {
        switch (ch) {
        case 'c':
            cfg->conns = (unsigned)lg_num_opt(optarg, 1, MAX_CONNS, "-c");
            o->have_c = 1;
            break;
        case 'n':
            if (lg_parse_u64(optarg, UINT64_MAX / 2, &v) < 0 || !v)
                lg_usage_exit("-n wants a positive count", optarg);
            cfg->nreqs = v;
            break;
        case 'd':
            cfg->duration = lg_secs_opt(optarg, "-d", 1);
            o->have_d = 1;
            break;
        case 'T':
            cfg->hardcap = lg_secs_opt(optarg, "-T", 1);
            o->have_T = 1;
            break;
        case 't':
            cfg->timeout = lg_secs_opt(optarg, "-t", 1);
            o->have_t = 1;
            break;
        case 'k': cfg->keepalive = 1; break;
        case 'r': cfg->per_conn = (unsigned)lg_num_opt(optarg, 1, 1u << 31, "-r"); break;
        case 'p': cfg->depth = (unsigned)lg_num_opt(optarg, 1, BENCH_MAX_DEPTH, "-p"); break;
        case 'R': cfg->rate = (double)lg_num_opt(optarg, 1, 10000000, "-R"); break;
        case 'f': o->file = optarg; break;
        case 'H': add_header(o, optarg); break;
        case 'm': o->method = optarg; break;
        case 'b': o->srcs = optarg; break;
        case 'P': cfg->procs = (unsigned)lg_num_opt(optarg, 1, MAX_PROCS, "-P"); break;
        case 'O': cfg->connect_only = 1; break;
        case '3': cfg->h3 = 1; break;
        case 'C': cfg->cafile = optarg; break;
        case 'K': o->insecure = 1; break;
        case 'I': idle_opt(o, optarg); break;
        case 'Z': cfg->resume = 1; break;
        case '2': cfg->h2 = 1; break;
        case 'S':
            cfg->streams = (unsigned)lg_num_opt(optarg, 1, LG_H2_MAX_STREAMS, "--streams");
            break;
        case 'U': cfg->surge = (double)lg_num_opt(optarg, 1, 10000000, "--surge"); break;
        case 'A': o->assets = optarg; break;
        case 'G': cfg->returning = share_opt(optarg); break;
        case 'Y': cfg->early = 1; break;
        case 'J': cfg->json = 1; break;
        case 'q': o->quiet = 1; break;
        case 'V': printf("bench (gatling) io backend %s\n", gio_backend_name()); exit(0);
        case 'h': fputs(usage_text, stdout); exit(0);
        default: lg_usage_exit(NULL, NULL);
        }
    }
    if (optind < argc)
        o->url = argv[optind++];
    if (optind < argc)
        lg_usage_exit("unexpected argument", argv[optind]);
}

/* What HTTP/2 changes: --streams instead of -p; the rest as with HTTP/1.1. */
static void check_h2_opts(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    if (!cfg->h2) {
        if (cfg->streams)
            lg_usage_exit("--streams is for --h2 (HTTP/1.1 pipelines with -p)", NULL);
        cfg->streams = 1;
        return;
    }
    if (cfg->depth > 1)
        lg_usage_exit("-p is HTTP/1.1 pipelining: with --h2, --streams N keeps N requests in "
                      "flight per connection",
                      NULL);
    if (!cfg->streams)
        cfg->streams = 1;
    if (cfg->streams > 1 && !cfg->keepalive)
        lg_usage_exit("--streams needs -k (without -k every connection carries one request)", NULL);
}

/* --h3: QUIC connections, each keep-alive with --streams requests in flight; and the
   certificate is verified (-C) unless --insecure says not to. */
static void check_h3_opts(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    if (!cfg->h3) {
        if (cfg->idle || o->insecure || (cfg->cafile && !cfg->surge))
            lg_usage_exit("--idle, -C and --insecure are for --h3 (-C for --surge too)", NULL);
        return;
    }
#ifndef HAVE_H3
    lg_usage_exit("--h3: this bench was built without HTTP/3 (libngtcp2-dev 0.12, "
                  "libngtcp2-crypto-gnutls-dev, libnghttp3-dev 0.8, libgnutls28-dev)",
                  NULL);
#endif
    if (cfg->h2 || cfg->surge || cfg->depth > 1 || cfg->per_conn || cfg->connect_only ||
        cfg->resume || o->srcs || (cfg->idle && cfg->rate))
        lg_usage_exit("--h3: keep-alive QUIC connections with --streams requests each: --h2, "
                      "--surge, -p, -r, --connect-only, --resume and -b do not apply (nor -R to "
                      "--idle)",
                      NULL);
    if (!cfg->cafile == !o->insecure)
        lg_usage_exit("--h3 wants either -C CA_FILE (verify the server's certificate) or "
                      "--insecure (do not)",
                      NULL);
    cfg->keepalive = 1;
    if (!cfg->streams)
        cfg->streams = 1;
}

/* --surge: HTTP/2 page loads on new connections; what does not apply to them. */
static void check_surge_opts(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    if (!cfg->surge) {
        if (o->assets || cfg->returning > 0)
            lg_usage_exit("--assets and --returning are for --surge", NULL);
        return;
    }
    if (cfg->keepalive || cfg->depth > 1 || cfg->per_conn || cfg->rate || cfg->nreqs ||
        cfg->connect_only || cfg->resume || o->file || strcmp(o->method, "GET"))
        lg_usage_exit("--surge: each visitor is a new connection loading the page and its "
                      "assets: -k, -p, -r, -R, -n, -f, -m, --connect-only and --resume do not "
                      "apply (--returning sets the share of resumed visitors)",
                      NULL);
    cfg->h2 = 1; /* a browser's page load over HTTP/2 */
    if (!cfg->streams)
        cfg->streams = LG_H2_MAX_STREAMS; /* every asset at once, as far as the server lets */
}

/* Options that do not go together, and the defaults that depend on others. */
static void check_opts(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    check_surge_opts(o);
    check_h3_opts(o);
    if (!cfg->surge && !cfg->h3)
        check_h2_opts(o);
    if (!o->url && !o->file)
        lg_usage_exit("no URL given", NULL);
    if (strcmp(o->method, "GET") && strcmp(o->method, "HEAD"))
        lg_usage_exit("-m: only GET and HEAD", o->method);
    cfg->head = !strcmp(o->method, "HEAD");
    if (cfg->duration == 0 && o->have_d)
        lg_usage_exit("-d must be more than 0", NULL);
    if (cfg->timeout <= 0)
        lg_usage_exit("-t must be more than 0", NULL);
    if (o->have_T && cfg->hardcap <= 0)
        lg_usage_exit("-T must be more than 0", NULL);
    if (!cfg->keepalive && (cfg->depth > 1 || cfg->per_conn))
        lg_usage_exit("-p and -r need -k (without -k every connection carries one request)", NULL);
    if (cfg->connect_only && (cfg->keepalive || o->file || o->extra || cfg->head))
        lg_usage_exit("--connect-only sends no request: -k, -p, -r, -f, -H, -m do not apply", NULL);
    if (cfg->rate && (cfg->depth > 1 || cfg->connect_only))
        lg_usage_exit("-R: one request in flight per connection (with --h2: --streams), no "
                      "--connect-only",
                      NULL);
    if (cfg->procs > cfg->conns)
        lg_usage_exit("-P is more than -c: every process needs a connection", NULL);
    if (!cfg->nreqs && !o->have_d)
        cfg->duration = 10;
    if (!o->have_T)
        cfg->hardcap = cfg->duration > 0 ? cfg->duration + 2 * cfg->timeout + 5 : 600;
    if (cfg->surge && cfg->hardcap <= cfg->duration)
        lg_usage_exit("--surge: -T must be more than -d (the last visitors need time to load)",
                      NULL);
}

/* One request in both forms (keep-alive, and last on its connection); ftp: its RETR, twice. */
static int make_req(opts_t *o, const lg_url_t *u, bench_req_t *q)
{
    size_t cap = strlen(u->path) + strlen(u->host) + o->extralen + 128;
    memset(q, 0, sizeof *q);
    q->ka = malloc(cap);
    q->close = malloc(cap);
    if (!q->ka || !q->close)
        return -1;
    if (u->ftp) {
        q->kalen = q->closelen = lg_ftp_retr_format(q->ka, cap, u->path);
        memcpy(q->close, q->ka, q->kalen + 1);
        return q->kalen ? 0 : -1;
    }
    q->kalen = lg_req_format(q->ka, cap, o->method, u->host, u->path, 1, o->extra);
    q->closelen = lg_req_format(q->close, cap, o->method, u->host, u->path, 0, o->extra);
    if (o->cfg.h2 && !(q->h2 = lg_h2_req_new(o->method, u->tls, u->host, u->path, o->extra)))
        return -1;
    return q->kalen && q->closelen ? 0 : -1;
}

static int same_addr(const lg_addr_t *a, const lg_addr_t *b)
{
    return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

/* -f: every non-empty, non-# line is a URL (or a path on the target). */
static void load_urls(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    FILE *f = fopen(o->file, "r");
    if (!f) {
        fprintf(stderr, "bench: open %s: %s\n", o->file, strerror(errno));
        exit(LG_EXIT_USAGE);
    }
    char line[8192], err[512];
    unsigned lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char *s = line + strspn(line, " \t");
        if (!*s || *s == '#')
            continue;
        lg_url_t u;
        char full[8600];
        if (*s == '/') {
            if (!o->url) {
                fprintf(stderr, "bench: %s:%u: a path needs a URL argument\n", o->file, lineno);
                exit(LG_EXIT_USAGE);
            }
            snprintf(full, sizeof full, "%s://%s%s",
                     cfg->url.tls   ? "https"
                     : cfg->url.ftp ? "ftp"
                                    : "http",
                     cfg->url.host, s);
            s = full;
        }
        if (lg_url_parse(s, &u, err, sizeof err) < 0) {
            fprintf(stderr, "bench: %s:%u: %s\n", o->file, lineno, err);
            exit(LG_EXIT_USAGE);
        }
        if (!cfg->url.path) { /* no URL argument: the first line is the target */
            cfg->url = u;
            cfg->url.path = strdup(u.path);
        } else if (!same_addr(&u.addr, &cfg->url.addr) || u.tls != cfg->url.tls ||
                   u.ftp != cfg->url.ftp) {
            fprintf(stderr, "bench: %s:%u: %s is not on the target %s\n", o->file, lineno, s,
                    cfg->url.host);
            exit(LG_EXIT_USAGE);
        }
        bench_req_t *nr = realloc(cfg->req, (cfg->nreq + 1) * sizeof *nr);
        if (!nr || make_req(o, &u, &nr[cfg->nreq]) < 0) {
            fprintf(stderr, "bench: %s:%u: request too large%s\n", o->file, lineno,
                    u.ftp ? ", or no file named" : "");
            exit(LG_EXIT_USAGE);
        }
        cfg->req = nr;
        cfg->nreq++;
        lg_url_free(&u);
    }
    fclose(f);
    if (!cfg->nreq) {
        fprintf(stderr, "bench: %s: no URL in it\n", o->file);
        exit(LG_EXIT_USAGE);
    }
}

/* What ftp:// does not do: one download at a time per control connection, GET only. */
static void check_ftp_opts(opts_t *o)
{
    const bench_cfg_t *cfg = &o->cfg;
    if (cfg->h2 || cfg->depth > 1 || cfg->rate || cfg->connect_only || cfg->head || o->extra)
        lg_usage_exit("ftp:// downloads one file at a time per control connection: --h2, -p, "
                      "-R, --connect-only, -m HEAD and -H do not apply",
                      NULL);
}

/* --surge: req[0] is the page (the URL), the --assets lines follow. */
static void setup_surge(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    if (!o->url)
        lg_usage_exit("--surge needs the page's URL", NULL);
    if (cfg->url.ftp)
        lg_usage_exit("--surge is HTTP/2: an http:// or https:// URL", o->url);
    cfg->req = calloc(1, sizeof *cfg->req);
    cfg->nreq = 1;
    if (!cfg->req || make_req(o, &cfg->url, cfg->req) < 0)
        lg_usage_exit("request too large", NULL);
    if (o->assets) {
        o->file = o->assets;
        load_urls(o);
        o->file = NULL;
    }
    if (cfg->nreq > 1u + 65536)
        lg_usage_exit("--assets: at most 65536 assets", o->assets);
}

static void setup(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    char err[512];
    if (o->url && lg_url_parse(o->url, &cfg->url, err, sizeof err) < 0)
        lg_usage_exit(err, NULL);
    if (cfg->surge)
        setup_surge(o);
    else if (o->file) {
        load_urls(o);
    } else {
        cfg->req = calloc(1, sizeof *cfg->req);
        cfg->nreq = 1;
        if (!cfg->req || make_req(o, &cfg->url, cfg->req) < 0)
            lg_usage_exit(cfg->url.ftp ? "an ftp:// URL must name a file" : "request too large",
                          cfg->url.ftp ? o->url : NULL);
    }
    if (cfg->resume && !cfg->url.tls)
        lg_usage_exit("--resume is for https:// URLs", NULL);
    if (cfg->early && !(cfg->returning > 0))
        lg_usage_exit("--early-data is for --surge with --returning (a resumed session carries "
                      "it)", NULL);
    if (cfg->surge && cfg->cafile && !cfg->url.tls)
        lg_usage_exit("-C is for https:// URLs (the server's certificate to verify)", o->url);
    if (cfg->surge && cfg->url.tls && !cfg->cafile)
        fprintf(stderr, "bench: --surge: the server's certificate is not verified "
                        "(-C CA_FILE verifies it)\n");
    if (cfg->returning > 0 && !cfg->url.tls)
        lg_usage_exit("--returning is for https:// URLs (h2c has no TLS session to resume)", NULL);
    if (cfg->surge && !o->have_c) { /* as many visitors at once as descriptors allow */
        long nofile = lg_nofile_raise();
        cfg->conns = (unsigned)(nofile > 2 * FD_RESERVE ? nofile - FD_RESERVE : FD_RESERVE) *
                     cfg->procs;
        unsigned long ports = (unsigned long)lg_ephemeral_ports() * (cfg->nsrcs ? cfg->nsrcs : 1);
        if (cfg->conns > ports)
            cfg->conns = (unsigned)ports;
    }
    if (cfg->url.ftp) {
        check_ftp_opts(o);
        cfg->max_connecting = FTP_MAX_SETUP;
    }
    if (cfg->h3 && (!cfg->url.tls || cfg->url.ftp))
        lg_usage_exit("--h3 is for https:// URLs (QUIC's port is the HTTPS port's number)",
                      o->url);
    if (cfg->h2 && cfg->connect_only && !cfg->url.tls)
        lg_usage_exit("--connect-only --h2 is for https:// URLs (the TLS handshake with ALPN h2); "
                      "h2c has no handshake: use --connect-only alone",
                      NULL);
    if (o->srcs) {
        cfg->srcs =
            lg_srcs_parse(o->srcs, cfg->url.addr.ss.ss_family, &cfg->nsrcs, err, sizeof err);
        if (!cfg->srcs)
            lg_usage_exit(err, NULL);
    }
    /* descriptors: read the limit, never assume it */
    long nofile = lg_nofile_raise();
    unsigned per = (cfg->conns + cfg->procs - 1) / cfg->procs;
    if ((long)per + FD_RESERVE > nofile) {
        unsigned need =
            (unsigned)((cfg->conns + (nofile - FD_RESERVE) - 1) / (nofile - FD_RESERVE));
        fprintf(stderr,
                "bench: -c %u over %u process(es) is %u connections per process, but a "
                "process may open only %ld descriptors here: use -P %u or more\n",
                cfg->conns, cfg->procs, per, nofile, need);
        exit(LG_EXIT_USAGE);
    }
    /* ports: one source address reaches one destination from ~28k ports */
    unsigned long ports = (unsigned long)lg_ephemeral_ports() * (cfg->nsrcs ? cfg->nsrcs : 1);
    if (cfg->conns > ports) {
        fprintf(stderr,
                "bench: -c %u needs more local ports than %lu: give more source "
                "addresses with -b (e.g. -b 127.0.0.2-127.0.0.9)\n",
                cfg->conns, ports);
        exit(LG_EXIT_USAGE);
    }
    cfg->progress = lg_progress_on(o->quiet) && cfg->procs == 1;
}

static void opts_free(opts_t *o)
{
    bench_cfg_t *cfg = &o->cfg;
    for (size_t i = 0; i < cfg->nreq; i++)
        free(cfg->req[i].ka), free(cfg->req[i].close), lg_h2_req_free(cfg->req[i].h2);
    free(cfg->req);
    free(cfg->srcs);
    free(o->extra);
    lg_url_free(&cfg->url);
}

/* ---- running ---- */

/* Worker `index`'s loop: the surge's, HTTP/3's, or bench_run()'s (HTTP/1.1, HTTP/2, FTP). */
static int run_worker(const bench_cfg_t *cfg, unsigned index, bench_stats_t *all)
{
    if (cfg->surge > 0)
        return bench_surge(cfg, index, all);
#ifdef HAVE_H3
    if (cfg->h3)
        return bench_h3(cfg, index, all);
#endif
    return bench_run(cfg, index, all);
}

typedef struct spawn_ctx {
    const bench_cfg_t *cfg;
    bench_stats_t *st;
} spawn_ctx_t;

static int child_main(int i, void *arg)
{
    spawn_ctx_t *x = arg;
    run_worker(x->cfg, (unsigned)i, x->st);
    return 0;
}

static uint64_t rd(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void parent_progress(const bench_cfg_t *cfg, const bench_stats_t *st, int64_t t0,
                            int64_t *last_ns, uint64_t *last)
{
    int64_t now = lg_now_ns();
    uint64_t cur = 0, errs = 0;
    long open = 0;
    for (unsigned i = 0; i < cfg->procs; i++) {
        cur += rd(cfg->connect_only ? &st[i].connects : &st[i].responses);
        for (int k = 0; k < LG_E_NUM; k++)
            errs += rd(&st[i].err[k]);
        open += __atomic_load_n(&st[i].open, __ATOMIC_RELAXED);
    }
    lg_progress("bench: %5.1fs  %10.0f %s/s  %8ld open  %llu errors  (%u processes)",
                (double)(now - t0) / 1e9, (double)(cur - *last) * 1e9 / (double)(now - *last_ns),
                cfg->connect_only ? "conn" : "req", open, (unsigned long long)errs, cfg->procs);
    *last_ns = now;
    *last = cur;
}

/* Fork the workers, watch them, merge.  Returns 0, or -1 if a worker died. */
static int run_procs(const bench_cfg_t *cfg, bench_stats_t *total, int quiet)
{
    size_t len = cfg->procs * sizeof(bench_stats_t);
    bench_stats_t *st = lg_shared(len);
    pid_t *pids = calloc(cfg->procs, sizeof *pids);
    int *status = calloc(cfg->procs, sizeof *status);
    if (!st || !pids || !status) {
        perror("bench: mmap");
        exit(LG_EXIT_FATAL);
    }
    for (unsigned i = 0; i < cfg->procs; i++)
        bench_stats_init(&st[i]);
    spawn_ctx_t x = {cfg, st};
    if (lg_spawn((int)cfg->procs, child_main, &x, pids) < 0) {
        perror("bench: fork");
        exit(LG_EXIT_FATAL);
    }
    int show = lg_progress_on(quiet), seen = 0;
    int64_t t0 = lg_now_ns(), last_ns = t0;
    int64_t kill_at = t0 + (int64_t)((cfg->hardcap + 5) * 1e9);
    uint64_t last = 0;
    while (lg_reap(pids, status, (int)cfg->procs) > 0) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        if (lg_signals != seen) { /* the workers ignore SIGINT: pass the stop on */
            seen = lg_signals;
            lg_kill_all(pids, (int)cfg->procs, SIGTERM);
        }
        if (lg_now_ns() > kill_at) /* a worker that ignores its own hard cap */
            lg_kill_all(pids, (int)cfg->procs, SIGKILL);
        if (show && lg_now_ns() - last_ns >= 1000000000)
            parent_progress(cfg, st, t0, &last_ns, &last);
    }
    if (show)
        lg_progress_clear();
    int bad = 0;
    for (unsigned i = 0; i < cfg->procs; i++) {
        if (!WIFEXITED(status[i]) || !st[i].finished) {
            fprintf(stderr, "bench: worker %u died (%s %d): its counts are partial\n", i,
                    WIFSIGNALED(status[i]) ? "signal" : "exit",
                    WIFSIGNALED(status[i]) ? WTERMSIG(status[i]) : WEXITSTATUS(status[i]));
            bad = 1;
        }
        bench_stats_merge(total, &st[i]);
    }
    munmap(st, len);
    free(pids);
    free(status);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    memset(&o, 0, sizeof o);
    lg_usage_set("bench", usage_text);
    parse_opts(&o, argc, argv);
    check_opts(&o);
    setup(&o);
    bench_cfg_t *cfg = &o.cfg;
    lg_signals_install();

    bench_stats_t *total = malloc(sizeof *total);
    if (!total) {
        perror("bench: malloc");
        return LG_EXIT_FATAL;
    }
    bench_stats_init(total);
    int died = 0;
    if (cfg->procs == 1)
        run_worker(cfg, 0, total);
    else
        died = run_procs(cfg, total, o.quiet) < 0;

    /* the measured window: up to -d (or a stop), the drain after it excluded */
    double secs = total->win_ns > 0 ? (double)total->win_ns / 1e9 : 1e-9;
    char buf[256];
    const char *fatal = bench_fatal_text(cfg, total, buf, sizeof buf);
    if (cfg->connect_only && !fatal && !total->connects)
        fatal = "no connection succeeded";
    if (died && !fatal)
        fatal = "a worker process died";
    int rc = fatal ? LG_EXIT_FATAL : bench_err_total(total) ? LG_EXIT_ERRORS : LG_EXIT_OK;
    if (fatal)
        fprintf(stderr, "bench: %s: %s\n", cfg->url.host, fatal);
    if (cfg->surge && cfg->json)
        bench_report_surge_json(cfg, total, secs, fatal, rc);
    else if (cfg->surge)
        bench_report_surge_text(cfg, total, secs);
    else if (cfg->json)
        bench_report_json(cfg, total, secs, fatal, rc);
    else
        bench_report_text(cfg, total, secs);
    free(total);
    opts_free(&o);
    return rc;
}
