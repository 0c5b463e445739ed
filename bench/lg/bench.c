/*
 * bench — HTTP throughput load generator (see man/bench.1, bench/README, bench/lg/README).
 *
 * main() parses options into a bench_cfg_t, checks that the descriptors and
 * ports the run needs exist, runs the workers (in this process, or -P
 * forked ones that report through shared memory), merges their results and
 * prints one report.
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
    "  -C FILE       --h3: verify the server's certificate against the CA(s) in FILE\n"
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
        if (cfg->idle || o->insecure || cfg->cafile)
            lg_usage_exit("--idle, -C and --insecure are for --h3", NULL);
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

/* ---- reporting ---- */

/* Errors in all; --surge: failed visitors, and the arrivals that never started. */
static uint64_t err_total(const bench_stats_t *s)
{
    return lg_err_sum(s->err) + s->unstarted;
}

static const double quant[] = {0.5, 0.9, 0.99, 0.999};
static const char *const qname[] = {"p50", "p90", "p99", "p99_9"};

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
    printf("},\"errors_total\":%llu,\"fatal\":", (unsigned long long)err_total(s));
    if (fatal)
        printf("\"%s\"", fatal); /* our own fixed texts and strerror(): nothing to escape */
    else
        printf("null");
    printf(",\"exit\":%d}\n", rc);
}

static const char *fatal_text(const bench_cfg_t *cfg, const bench_stats_t *s, char *buf, size_t len)
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

static void report_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs)
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
    printf("errors     %llu:", (unsigned long long)err_total(s));
    for (int k = 0; k < LG_E_NUM; k++)
        printf(" %s %llu", lg_err_name[k], (unsigned long long)s->err[k]);
    printf("\n");
}

static void report_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
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
    printf("\"open_loop_rate\":%.0f,", cfg->rate);
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

static uint64_t surge_class_count(const bench_stats_t *s, size_t c)
{
    uint64_t n = 0;
    for (int i = 0; surge_class[c].kinds[i] >= 0; i++)
        n += s->err[surge_class[c].kinds[i]];
    return n;
}

static void report_surge_text(const bench_cfg_t *cfg, const bench_stats_t *s, double secs)
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
    }
    printf("errors     %llu:", (unsigned long long)err_total(s));
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

static void report_surge_json(const bench_cfg_t *cfg, const bench_stats_t *s, double secs,
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
           "\"resumed_per_s\":%.1f,",
           (unsigned long long)s->hs.count, (unsigned long long)(s->hs.count - s->resumed),
           (unsigned long long)s->resumed, (unsigned long long)s->returning,
           (unsigned long long)s->offered, (double)s->hs.count / secs,
           (double)(s->hs.count - s->resumed) / secs, (double)s->resumed / secs);
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
    const char *fatal = fatal_text(cfg, total, buf, sizeof buf);
    if (cfg->connect_only && !fatal && !total->connects)
        fatal = "no connection succeeded";
    if (died && !fatal)
        fatal = "a worker process died";
    int rc = fatal ? LG_EXIT_FATAL : err_total(total) ? LG_EXIT_ERRORS : LG_EXIT_OK;
    if (fatal)
        fprintf(stderr, "bench: %s: %s\n", cfg->url.host, fatal);
    if (cfg->surge && cfg->json)
        report_surge_json(cfg, total, secs, fatal, rc);
    else if (cfg->surge)
        report_surge_text(cfg, total, secs);
    else if (cfg->json)
        report_json(cfg, total, secs, fatal, rc);
    else
        report_text(cfg, total, secs);
    free(total);
    opts_free(&o);
    return rc;
}
